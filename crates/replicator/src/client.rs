//! One CouchDB-compatible database over HTTP: the calls replication makes, each retried with
//! exponential backoff when the failure may be transient.
//!
//! Transport is hyper's pooled client (`hyper-util` legacy `Client`): hyper is already the
//! project's HTTP library (the server side uses it), it keeps idle keep-alive connections per
//! host, and it has no TLS of its own, so `https://` peers are refused with a clear error
//! rather than half-supported.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::endpoint::{RemoteDb, USER_AGENT};
use crate::error::ReplicatorError;

/// Largest response body read (a `_bulk_get` of a batch with attachments can be large).
pub const RESPONSE_BYTES_MAX: usize = 512 << 20;
/// First wait before a retry; doubled each time (CouchDB's replicator starts at 250 ms).
const RETRY_WAIT_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between two retries.
const RETRY_WAIT_MAX: Duration = Duration::from_secs(10);

/// Characters left as they are in a document id path segment.
const ID_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A client shared by every job of a node: one connection pool.
pub fn new_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// Supplies a fresh credentials header for each request (local endpoints get a session
/// cookie for the user the replication runs as).
pub type HeaderSource = Arc<dyn Fn() -> Option<(String, String)> + Send + Sync>;

/// One database of a peer.
#[derive(Clone)]
pub struct Peer {
    client: HttpClient,
    /// The database URL, ending with `/`.
    base: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    dynamic: Option<HeaderSource>,
    timeout: Duration,
    retries: u32,
    /// `http_connections`: requests in flight to this peer at once.
    connections: Arc<Semaphore>,
}

/// A response: status, its `Content-Type` and the whole body.
pub struct Answer {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl Peer {
    pub fn new(
        client: HttpClient,
        remote: &RemoteDb,
        dynamic: Option<HeaderSource>,
        timeout: Duration,
        retries: u32,
        connections: usize,
    ) -> Result<Peer, ReplicatorError> {
        if remote.scheme != "http" {
            return Err(ReplicatorError::BadRequest(format!(
                "{}: only http:// endpoints are supported",
                remote.url
            )));
        }
        let mut headers = Vec::new();
        let mut push = |name: &str, value: &str| -> Result<(), ReplicatorError> {
            let bad = || ReplicatorError::BadRequest(format!("invalid header {name}"));
            headers.push((
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
                HeaderValue::from_str(value).map_err(|_| bad())?,
            ));
            Ok(())
        };
        push("User-Agent", USER_AGENT)?;
        for (name, value) in &remote.headers {
            push(name, value)?;
        }
        if let Some(authorization) = remote.authorization() {
            push("Authorization", &authorization)?;
        }
        Ok(Peer {
            client,
            base: remote.url.clone(),
            headers,
            dynamic,
            timeout,
            retries,
            connections: Arc::new(Semaphore::new(connections.max(1))),
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// `_local/x`, `_design/x` or a plain id as a path segment.
    pub fn doc_path(id: &str) -> String {
        for prefix in ["_local/", "_design/"] {
            if let Some(rest) = id.strip_prefix(prefix) {
                return format!("{prefix}{}", utf8_percent_encode(rest, ID_SAFE));
            }
        }
        utf8_percent_encode(id, ID_SAFE).to_string()
    }

    pub fn encode_query(value: &str) -> String {
        utf8_percent_encode(value, ID_SAFE).to_string()
    }

    /// One request with retries; `timeout` overrides the connection timeout (long polls).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        accept: &str,
        timeout: Option<Duration>,
    ) -> Result<Answer, ReplicatorError> {
        let body = body.map(|body| (body, "application/json".to_string()));
        self.send_typed(method, path, body, accept, timeout).await
    }

    /// [`Peer::send`] with a body of any type: (bytes, `Content-Type`).
    pub async fn send_typed(
        &self,
        method: Method,
        path: &str,
        body: Option<(Bytes, String)>,
        accept: &str,
        timeout: Option<Duration>,
    ) -> Result<Answer, ReplicatorError> {
        let url = format!("{}{}", self.base, path);
        let mut wait = RETRY_WAIT_FIRST;
        let mut attempt = 0;
        loop {
            let result = self
                .send_once(&method, &url, body.clone(), accept, timeout)
                .await;
            let transient = match &result {
                Ok(answer) => {
                    let status = answer.status.as_u16();
                    status >= 500 || status == 429 || status == 408
                }
                Err(error) => error.is_transient(),
            };
            if !transient || attempt >= self.retries {
                return result;
            }
            attempt += 1;
            tracing::debug!(%url, attempt, "retrying replication request");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_WAIT_MAX);
        }
    }

    async fn send_once(
        &self,
        method: &Method,
        url: &str,
        body: Option<(Bytes, String)>,
        accept: &str,
        timeout: Option<Duration>,
    ) -> Result<Answer, ReplicatorError> {
        let transport = |reason: String| ReplicatorError::Transport {
            url: url.to_string(),
            reason,
        };
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(url)
            .header("Accept", accept);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        if let Some((name, value)) = self.dynamic.as_ref().and_then(|source| source()) {
            builder = builder.header(name, value);
        }
        let body = match body {
            Some((bytes, content_type)) => {
                builder = builder.header("Content-Type", content_type);
                bytes
            }
            None => Bytes::new(),
        };
        let request = builder
            .body(Full::new(body))
            .map_err(|error| transport(error.to_string()))?;
        let _permit = self
            .connections
            .acquire()
            .await
            .map_err(|_| transport("client closed".into()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|error| transport(error.to_string()))?;
            let status = response.status();
            let content_type = response
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string);
            let body = Limited::new(response.into_body(), RESPONSE_BYTES_MAX)
                .collect()
                .await
                .map_err(|error| transport(error.to_string()))?
                .to_bytes();
            Ok(Answer {
                status,
                content_type,
                body,
            })
        };
        match tokio::time::timeout(timeout.unwrap_or(self.timeout), exchange).await {
            Ok(result) => result,
            Err(_) => Err(transport("request timed out".into())),
        }
    }

    /// A JSON request that must succeed (2xx); other statuses become [`ReplicatorError::Http`].
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ReplicatorError> {
        let bytes = body.map(|body| Bytes::from(body.to_string()));
        let answer = self
            .send(method, path, bytes, "application/json", None)
            .await?;
        self.expect_ok(answer, path)
    }

    pub fn expect_ok(&self, answer: Answer, path: &str) -> Result<Value, ReplicatorError> {
        if answer.status.is_success() {
            return serde_json::from_slice(&answer.body).map_err(|error| {
                ReplicatorError::Protocol {
                    url: format!("{}{path}", self.base),
                    reason: format!("invalid JSON: {error}"),
                }
            });
        }
        Err(self.http_error(&answer, path))
    }

    pub fn http_error(&self, answer: &Answer, path: &str) -> ReplicatorError {
        let body = answer.json();
        let text = |name: &str| {
            body.get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        ReplicatorError::Http {
            url: format!("{}{path}", self.base),
            status: answer.status.as_u16(),
            error: text("error"),
            reason: text("reason"),
        }
    }

    /// `GET /db`: `None` when the database does not exist.
    pub async fn db_info(&self) -> Result<Option<Value>, ReplicatorError> {
        let answer = self
            .send(Method::GET, "", None, "application/json", None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        self.expect_ok(answer, "").map(Some)
    }

    /// `PUT /db` (with `create_target_params` such as `q` as the query string).
    pub async fn create_db(
        &self,
        params: &serde_json::Map<String, Value>,
    ) -> Result<(), ReplicatorError> {
        let query: Vec<String> = params
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                format!("{}={}", Self::encode_query(key), Self::encode_query(&value))
            })
            .collect();
        let path = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        let answer = self
            .send(Method::PUT, &path, None, "application/json", None)
            .await?;
        // 412: someone else created it meanwhile, which is what we wanted.
        if answer.status.is_success() || answer.status == StatusCode::PRECONDITION_FAILED {
            return Ok(());
        }
        Err(self.http_error(&answer, &path))
    }

    /// A document as JSON, `None` when missing.
    pub async fn get_doc(&self, id: &str) -> Result<Option<Value>, ReplicatorError> {
        let path = Self::doc_path(id);
        let answer = self
            .send(Method::GET, &path, None, "application/json", None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        self.expect_ok(answer, &path).map(Some)
    }

    /// `PUT` of a document (checkpoints): the new `_rev`, or `Ok(None)` on a conflict.
    pub async fn put_doc(&self, id: &str, body: &Value) -> Result<Option<String>, ReplicatorError> {
        let path = Self::doc_path(id);
        let answer = self
            .send(
                Method::PUT,
                &path,
                Some(Bytes::from(body.to_string())),
                "application/json",
                None,
            )
            .await?;
        if answer.status == StatusCode::CONFLICT {
            return Ok(None);
        }
        let value = self.expect_ok(answer, &path)?;
        Ok(value.get("rev").and_then(Value::as_str).map(str::to_string))
    }

    /// `POST /db/_ensure_full_commit`: the database's `instance_start_time`.
    pub async fn ensure_full_commit(&self) -> Result<String, ReplicatorError> {
        let value = self
            .json(Method::POST, "_ensure_full_commit", Some(&json!({})))
            .await?;
        Ok(value
            .get("instance_start_time")
            .map(|time| match time {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| "0".to_string()))
    }

    /// `POST /db/_revs_diff`.
    pub async fn revs_diff(&self, request: &Value) -> Result<Value, ReplicatorError> {
        self.json(Method::POST, "_revs_diff", Some(request)).await
    }
}
