//! Response building: JSON bodies, streaming bodies, and CouchDB's usual headers.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::error::ApiError;

pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;
pub type HttpResponse = Response<Body>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A streamed body's chunk is sent once it holds this many bytes, whatever its row count: a
/// response of large documents then holds at most a channel's worth of such chunks (and one
/// document) while the client is slow to read, since hyper stops polling the body while the
/// socket is full (issue 18 point 3).
pub const STREAM_CHUNK_BYTES_MAX: usize = 256 << 10;

/// A body fed by a channel: every message is one chunk on the wire.
pub fn channel_body(receiver: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let chunk = receiver.recv().await?;
        Some((Ok(hyper::body::Frame::data(chunk)), receiver))
    });
    StreamBody::new(stream).boxed_unsync()
}

pub fn json_bytes(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    let mut body = body;
    body.push(b'\n');
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("must-revalidate"));
    response
}

pub fn json(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
}

pub fn ok_true(status: StatusCode) -> HttpResponse {
    json_bytes(status, b"{\"ok\":true}".to_vec())
}

pub fn error(error: &ApiError) -> HttpResponse {
    let mut response = json(error.status(), &error.body());
    if matches!(error, ApiError::Unauthorized(_)) {
        // CouchDB only sends a Basic challenge when asked to; browsers would pop up a dialog.
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Cookie"),
        );
    }
    response
}

pub fn with_header(
    mut response: HttpResponse,
    name: impl hyper::header::IntoHeaderName,
    value: &str,
) -> HttpResponse {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

/// Whether an `If-None-Match` header names the entity tag `tag` (`"..."`): CouchDB compares
/// each tag of the list, a weak one (`W/"..."`) as its strong form; `*` and unquoted values
/// match nothing.
pub fn if_none_match(header: Option<&str>, tag: &str) -> bool {
    header.is_some_and(|header| {
        header
            .split(',')
            .map(|candidate| candidate.trim())
            .any(|candidate| candidate.strip_prefix("W/").unwrap_or(candidate) == tag)
    })
}

/// `304 Not Modified` with the entity tag and an empty body, as CouchDB answers it (no
/// `Content-Type`).
pub fn not_modified(tag: &str) -> HttpResponse {
    // CouchDB also sends `Content-Length: 0` (clients check it). hyper drops a 304's
    // Content-Length header when the body says it has ended before the head is written, so
    // the body here is an empty stream, which only says so when polled; hyper then writes the
    // header as set and sends no body bytes (a 304 has none).
    let empty = futures_util::stream::empty::<Result<hyper::body::Frame<Bytes>, std::io::Error>>();
    let mut response = Response::new(StreamBody::new(empty).boxed_unsync());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let response = with_header(response, "content-length", "0");
    with_header(response, "etag", tag)
}

/// `"<rev>"`: CouchDB's ETag for a document.
pub fn etag(rev: &str) -> String {
    format!("\"{rev}\"")
}

/// [`etag`] of a revision, formatted once.
pub fn rev_etag(rev: &settee_engine::RevId) -> String {
    format!("\"{rev}\"")
}

/// Escapes a string as a JSON string literal.
pub fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}
