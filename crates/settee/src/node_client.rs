//! A node's HTTP API as the command-line tools reach it (`settee backup`, `settee cluster`):
//! a URL whose credentials become Basic authorisation, requests with an optional body, and
//! JSON answers checked against the expected status.

use anyhow::{bail, Context};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The node's URL without credentials, and its Basic authorisation header.
pub struct NodeClient {
    pub base: String,
    pub authorization: Option<String>,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl NodeClient {
    /// `url` is `http://[user:password@]host:port[/path]`; `flag` names it in errors.
    pub fn parse(url: &str, flag: &str) -> anyhow::Result<NodeClient> {
        let url = url.trim_end_matches('/');
        let Some((scheme, rest)) = url.split_once("://") else {
            bail!("{flag} must be a URL such as http://admin:secret@127.0.0.1:5984");
        };
        if scheme != "http" {
            bail!("{flag}: only http:// is supported");
        }
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (authorization, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(userinfo)
                )),
                host,
            ),
            None => (None, authority),
        };
        let path = if path.is_empty() {
            String::new()
        } else {
            format!("/{path}")
        };
        Ok(NodeClient {
            base: format!("http://{host}{path}"),
            authorization,
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    /// `method path`, with a form body when given.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        form: Option<String>,
    ) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base));
        if let Some(authorization) = &self.authorization {
            request = request.header(hyper::header::AUTHORIZATION, authorization);
        }
        if form.is_some() {
            request = request.header(
                hyper::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        }
        let body = Full::new(Bytes::from(form.unwrap_or_default()));
        let request = request.body(body).context("building a request")?;
        self.client
            .request(request)
            .await
            .with_context(|| format!("{method} {path}"))
    }

    /// The answer's body, which must come with `expect`.
    pub async fn body(
        &self,
        method: Method,
        path: &str,
        form: Option<String>,
        expect: StatusCode,
    ) -> anyhow::Result<Bytes> {
        let response = self.request(method.clone(), path, form).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        if status != expect {
            bail!(
                "{method} {path}: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(body)
    }

    /// The answer's JSON, which must come with `expect`.
    pub async fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        expect: StatusCode,
    ) -> anyhow::Result<T> {
        let body = self.body(method.clone(), path, None, expect).await?;
        serde_json::from_slice(&body).with_context(|| format!("{method} {path}: the answer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_url_become_basic_authorisation() {
        let node = NodeClient::parse("http://admin:secret@127.0.0.1:5984/", "--node").unwrap();
        assert_eq!(node.base, "http://127.0.0.1:5984");
        assert_eq!(
            node.authorization.as_deref(),
            Some("Basic YWRtaW46c2VjcmV0")
        );
        assert!(NodeClient::parse("https://h", "--node").is_err());
        assert!(NodeClient::parse("127.0.0.1:5984", "--node").is_err());
    }
}
