//! Before the load: (re)create the database and preload the documents the GET phase reads.

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};

use super::connection::Connection;
use super::target::Target;
use crate::docs::{doc_body, doc_id};

/// Documents per `_bulk_docs` request while preloading.
pub(crate) const BULK_BATCH_DOCS: usize = 1000;

/// A single connection for the few setup requests, which need their response bodies.
pub(crate) struct SetupClient<'a> {
    target: &'a Target,
    connection: Connection,
}

impl<'a> SetupClient<'a> {
    pub(crate) async fn open(target: &'a Target) -> anyhow::Result<Self> {
        let connection = Connection::open(&target.address).await?;
        Ok(Self { target, connection })
    }

    async fn request(
        &mut self,
        method: Method,
        path: String,
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let description = format!("{method} {path}");
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = Target::uri(path)?;
        *request.headers_mut() = self.target.headers.clone();
        if self.connection.is_closed() {
            self.connection = Connection::open(&self.target.address).await?;
        }
        let mut response = Vec::new();
        let status = self
            .connection
            .exchange(request, Some(&mut response))
            .await
            .with_context(|| description.clone())?;
        Ok((status, response))
    }

    /// Deletes the database (a 404 is fine) and creates it empty, with `params` (a query
    /// string, may be empty) on the creating request.
    pub(crate) async fn recreate_db(&mut self, params: &str) -> anyhow::Result<()> {
        let path = self.target.db_path.clone();
        let (status, body) = self
            .request(Method::DELETE, path.clone(), Bytes::new())
            .await?;
        if !status.is_success() && status != StatusCode::NOT_FOUND {
            bail!("DELETE {path}: {status} {}", String::from_utf8_lossy(&body));
        }
        let create = if params.is_empty() {
            path
        } else {
            format!("{path}?{params}")
        };
        let (status, body) = self
            .request(Method::PUT, create.clone(), Bytes::new())
            .await?;
        if !status.is_success() {
            bail!("PUT {create}: {status} {}", String::from_utf8_lossy(&body));
        }
        Ok(())
    }

    /// Writes documents `doc-00000000` .. `doc-{docs-1}` with `_bulk_docs`, failing if any single
    /// document was rejected.
    pub(crate) async fn preload(
        &mut self,
        docs: usize,
        doc_size_bytes: usize,
    ) -> anyhow::Result<()> {
        let body = doc_body(doc_size_bytes);
        // Every document is `{"_id":"doc-NNNNNNNN",` followed by the body without its `{`.
        let fields = &body[1..];
        let path = format!("{}/_bulk_docs", self.target.db_path);
        for start in (0..docs).step_by(BULK_BATCH_DOCS) {
            let end = (start + BULK_BATCH_DOCS).min(docs);
            let mut batch = Vec::with_capacity((end - start) * (body.len() + 24) + 16);
            batch.extend_from_slice(br#"{"docs":["#);
            for index in start..end {
                if index > start {
                    batch.push(b',');
                }
                batch.extend_from_slice(format!(r#"{{"_id":"{}","#, doc_id(index)).as_bytes());
                batch.extend_from_slice(fields);
            }
            batch.extend_from_slice(b"]}");

            let (status, response) = self
                .request(Method::POST, path.clone(), Bytes::from(batch))
                .await?;
            if !status.is_success() {
                bail!(
                    "POST {path}: {status} {}",
                    String::from_utf8_lossy(&response)
                );
            }
            check_bulk_results(&response).with_context(|| format!("POST {path}"))?;
        }
        Ok(())
    }
}

/// `_bulk_docs` answers 201 even when some documents failed; each failure is an element with an
/// `error` member.
fn check_bulk_results(response: &[u8]) -> anyhow::Result<()> {
    let results: serde_json::Value =
        serde_json::from_slice(response).context("response is not JSON")?;
    let Some(results) = results.as_array() else {
        bail!("response is not a JSON array: {results}");
    };
    if let Some(failed) = results.iter().find(|result| result.get("error").is_some()) {
        bail!("a document was rejected: {failed}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_results_report_rejections() {
        assert!(check_bulk_results(br#"[{"ok":true,"id":"a","rev":"1-x"}]"#).is_ok());
        assert!(check_bulk_results(br#"[{"id":"a","error":"conflict"}]"#).is_err());
        assert!(check_bulk_results(br#"{"ok":true}"#).is_err());
    }
}
