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
    pub body: Option<Incoming>,
    pub user: UserCtx,
    /// The client's address (failed logins are counted by it).
    pub peer: Option<std::net::IpAddr>,
}

impl Req {
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

    pub fn bool_param(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.param(name) {
            None => Ok(default),
            Some("true") | Some("") => Ok(true),
            Some("false") => Ok(false),
            Some(other) => Err(ApiError::QueryParse(format!(
                "Invalid boolean parameter: \"{other}\""
            ))),
        }
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

    /// Reads the whole body, refusing more than `limit` bytes with 413.
    pub async fn body_bytes(&mut self, limit: usize) -> ApiResult<Bytes> {
        let Some(body) = self.body.take() else {
            return Ok(Bytes::new());
        };
        if let Some(length) = self
            .header("content-length")
            .and_then(|text| text.parse::<usize>().ok())
        {
            if length > limit {
                return Err(ApiError::RequestTooLarge);
            }
        }
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(error) => {
                if error.is::<http_body_util::LengthLimitError>() {
                    Err(ApiError::RequestTooLarge)
                } else {
                    Err(ApiError::BadRequest(format!(
                        "could not read body: {error}"
                    )))
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

    pub fn require_json_content_type(&self) -> ApiResult<()> {
        match self.header("content-type") {
            Some(value) if value.starts_with("application/json") => Ok(()),
            _ => Err(ApiError::BadContentType("application/json")),
        }
    }
}

/// Parses JSON from the network: depth checked first (serde's recursion is bounded too, but our
/// limit is a configured value with a clear error), then syntax.
pub fn parse_json(bytes: &[u8], max_depth: usize) -> ApiResult<serde_json::Value> {
    check_json_limits(bytes, max_depth)?;
    serde_json::from_slice(bytes).map_err(|_| ApiError::invalid_json())
}

const RAW_VALUE_TOKEN: &[u8] = b"$serde_json::private::RawValue";

/// Rejects JSON nested deeper than `max_depth`, or holding a number no double can represent
/// (e.g. `1e999`: serde's raw-value and skipping parsers accept it, a full parse does not, so
/// such a body would be stored and then fail every later reader), without parsing it.
pub fn check_json_limits(bytes: &[u8], max_depth: usize) -> ApiResult<()> {
    // serde_json treats this one name as its raw-value marker: a body using it would be
    // re-emitted as something that is not JSON (found by the couch_doc fuzz target).
    if memchr::memmem::find(bytes, RAW_VALUE_TOKEN).is_some() {
        return Err(ApiError::BadRequest(
            "the member name \"$serde_json::private::RawValue\" is reserved".to_string(),
        ));
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        at += 1;
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max_depth {
                    return Err(ApiError::BadRequest(format!(
                        "JSON nesting deeper than {max_depth} levels"
                    )));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = at - 1;
                while at < bytes.len()
                    && matches!(bytes[at], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    at += 1;
                }
                let finite = std::str::from_utf8(&bytes[start..at])
                    .ok()
                    .and_then(|token| token.parse::<f64>().ok())
                    .is_none_or(f64::is_finite);
                if !finite {
                    return Err(ApiError::BadRequest("JSON number out of range".to_string()));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Splits a raw path into percent-decoded segments.
pub fn split_path(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|segment| !segment.is_empty())
        .map(|segment| {
            percent_encoding::percent_decode_str(segment)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect()
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
        assert!(check_json_limits(br#"{"a":123456789012345678901234567890}"#, 4).is_ok());
        assert!(check_json_limits(br#"{"$serde_json::private::RawValue":{" ":0}}"#, 4).is_err());
    }

    #[test]
    fn paths_decode_segments() {
        assert_eq!(split_path("/db/_design%2Fx"), vec!["db", "_design/x"]);
        assert_eq!(split_path("/"), Vec::<String>::new());
    }
}
