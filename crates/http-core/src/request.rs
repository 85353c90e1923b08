//! The parsed request every handler receives: decoded path segments, query parameters, headers,
//! the authenticated user, and the body, read on demand within a size limit.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::Method;

use crate::auth::UserCtx;
use crate::error::{ApiError, ApiResult};

pub struct Req {
    pub method: Method,
    /// Percent-decoded path segments (`/db/_design%2Fx` gives `["db", "_design/x"]`).
    pub path: Vec<String>,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    /// The request target as the client sent it (CouchDB's `raw_path`).
    pub uri: hyper::Uri,
    pub body: Option<RequestBody>,
    pub user: UserCtx,
    /// The client's address (failed logins are counted by it).
    pub peer: Option<std::net::IpAddr>,
    /// Longest wait between two reads of the body (`HttpConfig::body_timeout`).
    pub body_timeout: Option<std::time::Duration>,
    /// The node's runtime settings (`_config`) as they were when the request arrived: read
    /// once per request, so one request never sees two versions.
    pub settings: std::sync::Arc<settee_node_config::Settings>,
    /// Another node forwarded this request (its user already authenticated there): it is
    /// answered here, never forwarded again.
    pub forwarded: bool,
    /// The vbuckets a whole-bucket request answers for, when another node scattered it here
    /// (true at each vbucket this node answers for; `None`: all of them).
    pub vbuckets: Option<std::sync::Arc<[bool]>>,
    /// The design document a scattered view query runs, as the front node read it (its JSON):
    /// used in place of this node's copy, which it may not hold.
    pub design: Option<std::sync::Arc<[u8]>>,
    /// How many `_rewrite`s made this request from the one the client sent (0: none);
    /// checked against `[chttpd] rewrite_limit`.
    pub rewrites: u32,
}

/// A request's body: as it arrives from the client, or already read whole (a forwarded
/// request's, or one the front node read to route it and then served itself).
pub enum RequestBody {
    Streamed(Incoming),
    Whole(Bytes),
}

impl Req {
    /// The database name as the client wrote it (decoded): what `Location` headers name, as
    /// CouchDB's do, without asking the engine for a collection's door name.
    pub fn db_segment(&self) -> &str {
        self.path.first().map_or("", String::as_str)
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn has_param(&self, name: &str) -> bool {
        self.param(name).is_some()
    }

    /// A boolean of a view-like query (`_all_docs`, views, `_all_dbs`), read as CouchDB's
    /// view parameters read it: `true` or `false` in any case; anything else is 400.
    pub fn bool_param(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.param(name) {
            None => Ok(default),
            Some(text) => parse_view_bool(text),
        }
    }

    /// A document or feed option (`revs`, `conflicts`, `attachments`, `latest`,
    /// `new_edits`, `_changes`' `include_docs`...), read as CouchDB reads them: exactly `true`
    /// or `false` changes it, any other value (`True`, `1`, empty) is ignored.
    pub fn flag(&self, name: &str, default: bool) -> bool {
        match self.param(name) {
            Some("true") => true,
            Some("false") => false,
            _ => default,
        }
    }

    /// The write quorum `w` a document write asks for: the query parameter, else the
    /// `_bulk_docs` body's. A `w` that is not an integer is ignored (CouchDB fails with a 500
    /// `badarg`). What it means is settee-http's `write_quorum`.
    pub fn write_quorum(&self, body_w: Option<&serde_json::Value>) -> Option<i64> {
        let query = self
            .param("w")
            .and_then(|text| text.trim().parse::<i64>().ok());
        let body = body_w.and_then(|value| match value {
            serde_json::Value::Number(number) => number.as_i64(),
            serde_json::Value::String(text) => text.trim().parse().ok(),
            _ => None,
        });
        query.or(body)
    }

    pub fn u64_param(&self, name: &str) -> ApiResult<Option<u64>> {
        match self.param(name) {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                ApiError::QueryParse(format!("Invalid value for integer: \"{text}\""))
            }),
        }
    }

    /// A JSON-encoded parameter (`key`, `startkey`, `keys`, `open_revs`...).
    pub fn json_param(&self, name: &str) -> ApiResult<Option<serde_json::Value>> {
        match self.param(name) {
            None => Ok(None),
            Some(text) => serde_json::from_str(text)
                .map(Some)
                .map_err(|_| ApiError::BadRequest(format!("invalid JSON in parameter {name}"))),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Reads the whole body, refusing more than `limit` bytes with 413. A body sent with
    /// `Content-Encoding: gzip` is decoded, and the decoded body obeys the same limit
    /// ([`settee_http_wire::encoding`]); another encoding is 415.
    pub async fn body_bytes(&mut self, limit: usize) -> ApiResult<Bytes> {
        let limit = self.body_limit(limit);
        let encoding = self
            .headers
            .get(hyper::header::CONTENT_ENCODING)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let encoding = settee_http_wire::encoding::body_encoding(encoding.as_deref())?;
        let sent = self.sent_body_bytes(limit).await?;
        Ok(settee_http_wire::encoding::decode_body(
            encoding, sent, limit,
        )?)
    }

    /// The body's bytes as they arrived (`Content-Encoding` not decoded), at most `limit` of
    /// them.
    pub async fn sent_body_bytes(&mut self, limit: usize) -> ApiResult<Bytes> {
        let limit = self.body_limit(limit);
        let body = match self.body.take() {
            None => return Ok(Bytes::new()),
            Some(RequestBody::Whole(bytes)) if bytes.len() > limit => {
                return Err(ApiError::RequestTooLarge)
            }
            Some(RequestBody::Whole(bytes)) => return Ok(bytes),
            Some(RequestBody::Streamed(body)) => body,
        };
        if let Some(length) = self
            .header("content-length")
            .and_then(|text| text.parse::<usize>().ok())
        {
            if length > limit {
                return Err(ApiError::RequestTooLarge);
            }
        }
        let mut body = Limited::new(body, limit);
        let mut collected = bytes::BytesMut::new();
        loop {
            // A body that stalls (a Content-Length longer than what is sent, a chunked
            // body that never ends) is given up after the body timeout.
            let frame = match self.body_timeout.filter(|timeout| !timeout.is_zero()) {
                Some(timeout) => tokio::time::timeout(timeout, body.frame())
                    .await
                    .map_err(|_| ApiError::RequestTimeout)?,
                None => body.frame().await,
            };
            match frame {
                None => return Ok(collected.freeze()),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        collected.extend_from_slice(&data);
                    }
                }
                Some(Err(error)) => {
                    return Err(if error.is::<http_body_util::LengthLimitError>() {
                        ApiError::RequestTooLarge
                    } else {
                        ApiError::BadRequest(format!("could not read body: {error}"))
                    });
                }
            }
        }
    }

    /// Reads and parses a JSON body (depth-limited).
    pub async fn json_body(
        &mut self,
        limit: usize,
        max_depth: usize,
    ) -> ApiResult<serde_json::Value> {
        let bytes = self.body_bytes(limit).await?;
        parse_json(&bytes, max_depth)
    }

    /// [`Req::json_body`] with the server's configured request size and depth limits.
    pub async fn json_body_within(
        &mut self,
        config: &crate::HttpConfig,
    ) -> ApiResult<serde_json::Value> {
        self.json_body(config.max_request_size_bytes, config.max_json_depth)
            .await
    }

    /// `limit`, lowered to `[chttpd] max_http_request_size` when that is set smaller: a
    /// `_config` write bounds the next request's body at once.
    pub fn body_limit(&self, limit: usize) -> usize {
        self.settings
            .max_http_request_size
            .map_or(limit, |runtime| runtime.min(limit))
    }

    pub fn require_json_content_type(&self) -> ApiResult<()> {
        match self.header("content-type") {
            Some(value) if value.starts_with("application/json") => Ok(()),
            _ => Err(ApiError::BadContentType("application/json")),
        }
    }
}

/// Reads and drops what is left of a request body its handler did not read (a request refused
/// before its body mattered), so the connection goes on to the next request as CouchDB's does:
/// hyper closes a connection whose request body was left unread. A body declared or found
/// longer than `limit`, or one that stalls past `timeout`, is left, and the connection closes.
pub async fn discard_body(
    body: Incoming,
    declared_length: Option<u64>,
    limit: usize,
    timeout: Option<std::time::Duration>,
) {
    use hyper::body::Body as _;
    if body.is_end_stream() || declared_length.is_some_and(|length| length > limit as u64) {
        return;
    }
    let mut body = Limited::new(body, limit);
    loop {
        let frame = match timeout.filter(|timeout| !timeout.is_zero()) {
            Some(timeout) => match tokio::time::timeout(timeout, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => return,
            },
            None => body.frame().await,
        };
        match frame {
            Some(Ok(_)) => {}
            None | Some(Err(_)) => return,
        }
    }
}

/// `true`/`false` in any case, as CouchDB parses a view query's booleans; its error names an
/// empty value as Erlang prints an empty string (`[]`).
pub fn parse_view_bool(text: &str) -> ApiResult<bool> {
    if text.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if text.eq_ignore_ascii_case("false") {
        Ok(false)
    } else if text.is_empty() {
        Err(ApiError::QueryParse("Invalid boolean parameter: []".into()))
    } else {
        Err(ApiError::QueryParse(format!(
            "Invalid boolean parameter: \"{text}\""
        )))
    }
}

/// Parses JSON from the network: depth checked first (serde's recursion is bounded too, but our
/// limit is a configured value with a clear error), then syntax.
pub fn parse_json(bytes: &[u8], max_depth: usize) -> ApiResult<serde_json::Value> {
    check_json_limits(bytes, max_depth)?;
    serde_json::from_slice(bytes).map_err(|_| ApiError::invalid_json())
}

/// Rejects JSON no reader could use, without parsing it: nested deeper than `max_depth`, a
/// number no double can represent (`1e999`), a lone UTF-16 surrogate escape (`"\udc00"`), a
/// member named `$serde_json::private::RawValue` however escaped (serde_json's private
/// marker). serde's raw-value and skipping parsers accept the last three, a full parse does
/// not, so such a body would be stored and then fail every later reader. The engine checks every stored
/// document the same way ([`settee_engine::limits::check_json`]); the door checks first so a
/// request fails before any work, with CouchDB's 400.
pub fn check_json_limits(bytes: &[u8], max_depth: usize) -> ApiResult<()> {
    settee_engine::limits::check_json(bytes, max_depth)
        .map_err(|error| ApiError::over_limit(&error, ""))
}

/// Splits a raw path into percent-decoded segments. A segment whose bytes are not UTF-8
/// (`/db/%FF%FE`) is refused, as CouchDB refuses such ids and names, rather than stored with
/// replacement characters: the error says which segment. With `plus_to_space` (CouchDB's
/// `[chttpd] decode_plus_to_space`, on by default) a raw `+` is a space, as in a form; `%2B`
/// is always `+`.
pub fn split_path(path: &str, plus_to_space: bool) -> Result<Vec<String>, NonUtf8Segment> {
    let mut segments = Vec::new();
    let mut invalid = None;
    for segment in path.split('/').filter(|segment| !segment.is_empty()) {
        let spaced;
        let segment = if plus_to_space && segment.contains('+') {
            spaced = segment.replace('+', "%20");
            spaced.as_str()
        } else {
            segment
        };
        let decoded = percent_encoding::percent_decode_str(segment);
        match decoded.clone().decode_utf8() {
            Ok(text) => segments.push(text.into_owned()),
            Err(_) => {
                invalid.get_or_insert(segments.len());
                segments.push(decoded.decode_utf8_lossy().into_owned());
            }
        }
    }
    match invalid {
        None => Ok(segments),
        Some(index) => Err(NonUtf8Segment { index, segments }),
    }
}

/// A path with a segment that does not decode to UTF-8.
#[derive(Debug)]
pub struct NonUtf8Segment {
    /// Which segment (0: the database name).
    pub index: usize,
    /// Every segment, the invalid ones with replacement characters (for messages only).
    pub segments: Vec<String>,
}

impl NonUtf8Segment {
    /// CouchDB's refusal for what the segment names: a database, a document id (plain,
    /// `_design/` or `_local/`) or an attachment.
    pub fn error(&self) -> ApiError {
        let segment = |index: usize| self.segments.get(index).map(String::as_str);
        let reserved = matches!(segment(1), Some("_design" | "_local"));
        match self.index {
            0 => crate::names::validate_db_name(&self.segments[0])
                .err()
                .unwrap_or_else(|| ApiError::BadRequest("Invalid database name".into())),
            1 => ApiError::IllegalDocId("Document id must be valid UTF-8".into()),
            2 if reserved => ApiError::IllegalDocId("Document id must be valid UTF-8".into()),
            index
                if !segment(1).is_some_and(|id| id.starts_with('_'))
                    || (segment(1) == Some("_design")
                        && index >= 3
                        && !is_design_path(segment(3))) =>
            {
                ApiError::BadRequest("Attachment name is not UTF-8 encoded".into())
            }
            index => ApiError::BadRequest(format!("Path segment {} is not valid UTF-8", index + 1)),
        }
    }
}

/// Whether the segment after `/{db}/_design/{name}/` names a design function, not an
/// attachment.
fn is_design_path(segment: Option<&str>) -> bool {
    segment.is_some_and(|segment| segment.starts_with('_'))
}

pub fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    query
        .map(|query| {
            form_urlencoded::parse(query.as_bytes())
                .map(|(key, value)| (key.into_owned(), value.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_limit_ignores_brackets_in_strings() {
        assert!(check_json_limits(br#"{"a":"[[[[[[[[[["}"#, 2).is_ok());
        assert!(check_json_limits(br#"{"a":[[1]]}"#, 2).is_err());
        assert!(check_json_limits(br#"{"a":"\"[[[["}"#, 1).is_ok());
        // Numbers a double cannot hold are refused; big but finite ones and numbers in
        // strings are fine.
        assert!(check_json_limits(br#"{"a":1e999}"#, 4).is_err());
        assert!(check_json_limits(br#"{"a":[-1E+400]}"#, 4).is_err());
        assert!(check_json_limits(br#"{"a":1e308,"b":-0.5e-400,"c":"1e999"}"#, 4).is_ok());
        // A lone surrogate escape anywhere, a nested member name included (found by the
        // couch_doc fuzz target: parse_doc keeps nested values raw, so only a reader failed).
        assert!(check_json_limits(br#"{"a":{"\udddd":1}}"#, 4).is_err());
        assert!(check_json_limits(br#"{"a":"x\ud800"}"#, 4).is_err());
        assert!(check_json_limits(br#"{"a":"\ud83d\ude00"}"#, 4).is_ok());
        assert!(check_json_limits(br#"{"a":123456789012345678901234567890}"#, 4).is_ok());
        assert!(check_json_limits(br#"{"$serde_json::private::RawValue":{" ":0}}"#, 4).is_err());
    }

    #[test]
    fn paths_decode_segments() {
        assert_eq!(
            split_path("/db/_design%2Fx", false).expect("utf-8"),
            vec!["db", "_design/x"]
        );
        assert_eq!(split_path("/", false).expect("utf-8"), Vec::<String>::new());
        assert_eq!(
            split_path("/db/caf%C3%A9", false).expect("utf-8"),
            vec!["db", "caf\u{e9}"]
        );
        // CouchDB's decode_plus_to_space: on, a raw + is a space; %2B is + either way.
        assert_eq!(
            split_path("/a+b/c+d%2Be", true).expect("utf-8"),
            vec!["a b", "c d+e"]
        );
        assert_eq!(
            split_path("/a+b/c+d%2Be", false).expect("utf-8"),
            vec!["a+b", "c+d+e"]
        );
    }

    #[test]
    fn non_utf8_segments_are_refused_as_what_they_name() {
        let refusal = |path: &str| {
            let error = split_path(path, false).expect_err(path).error();
            (
                error.status().as_u16(),
                error.code().to_string(),
                error.to_string(),
            )
        };
        let bad_id = (
            400,
            "illegal_docid".to_string(),
            "Document id must be valid UTF-8".to_string(),
        );
        assert_eq!(refusal("/db/%FF%FE"), bad_id);
        assert_eq!(refusal("/db/_design/%FF"), bad_id);
        assert_eq!(refusal("/db/_local/a%C3"), bad_id);
        let bad_attachment = (
            400,
            "bad_request".to_string(),
            "Attachment name is not UTF-8 encoded".to_string(),
        );
        assert_eq!(refusal("/db/doc/%FF"), bad_attachment);
        assert_eq!(refusal("/db/_design/app/img/%FF"), bad_attachment);
        assert_eq!(refusal("/%FF").1, "illegal_database_name");
        assert_eq!(refusal("/db/_design/app/_view/%FF").1, "bad_request");
    }
}
