//! A rewrite function's answer (`rewrites` as a JavaScript function), checked as CouchDB's
//! query server checks it, and what it asks for: another request, or a response given at
//! once.
//!
//! ```text
//! "foo.txt"                                    -> GET /db/_design/app/foo.txt
//! {path: "_show/welcome", query: {name: "x"}}  -> /db/_design/app/_show/welcome?name=x
//! {path, method, headers, body}                -> that request (its body replaced)
//! {code: 451, headers, body}                   -> answered at once
//! ```
//!
//! The function that answers a string is read as `{path: string}` (settee-js does that, as
//! CouchDB's query server); without `query` the request's own query string is kept.

use serde_json::{Map, Value};

use crate::path::{self, quote_plus};
use crate::{RewriteError, RewriteRequest, TARGET_BYTES_MAX};

/// The status codes a function may answer with (CouchDB's check).
const RESPONSE_CODES: std::ops::Range<u64> = 200..600;

/// What a rewrite function asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// Dispatch a new request.
    Dispatch {
        /// The method to use; `None` keeps the request's.
        method: Option<String>,
        /// The request target (`/path?query`, encoded).
        target: String,
        /// Headers to set on the request (replacing those of the same name).
        headers: Vec<(String, String)>,
        /// The body to send instead of the request's.
        body: Option<String>,
    },
    /// Answer at once.
    Respond {
        code: u16,
        headers: Vec<(String, String)>,
        /// The body to answer with; `None` answers the request's own body, as CouchDB.
        body: Option<String>,
    },
}

fn bad(reason: &str) -> RewriteError {
    RewriteError::BadAnswer(reason.to_string())
}

/// An object whose every value is a string (`headers`, `query`), as pairs.
fn string_pairs(value: &Value, reason: &str) -> Result<Vec<(String, String)>, RewriteError> {
    let Value::Object(object) = value else {
        return Err(bad(reason));
    };
    object
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), text.clone())),
            other => Err(RewriteError::BadAnswer(format!(
                "object key/value must be strings {}={other}",
                Value::String(name.clone())
            ))),
        })
        .collect()
}

/// Checks every member CouchDB checks, in the answer's order: the first wrong one fails.
fn check(answer: &Map<String, Value>) -> Result<(), RewriteError> {
    for (name, value) in answer {
        match name.as_str() {
            "method" if !value.is_string() => return Err(bad("bad method")),
            "path" if !value.is_string() => return Err(bad("bad path")),
            "body" if !value.is_string() => return Err(bad("bad body")),
            "headers" => {
                string_pairs(value, "bad headers")?;
            }
            "query" => {
                string_pairs(value, "bad query")?;
            }
            "code"
                if !value
                    .as_u64()
                    .is_some_and(|code| RESPONSE_CODES.contains(&code)) =>
            {
                return Err(bad("bad code"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// What `answer` (the function's object) asks for `request`.
pub fn read(answer: &Value, request: &RewriteRequest<'_>) -> Result<Rewrite, RewriteError> {
    let Value::Object(answer) = answer else {
        return Err(bad("bad rewrite"));
    };
    check(answer)?;
    let text = |name: &str| answer.get(name).and_then(Value::as_str).map(String::from);
    let headers = match answer.get("headers") {
        Some(headers) => string_pairs(headers, "bad headers")?,
        None => Vec::new(),
    };
    if let Some(code) = answer.get("code").and_then(Value::as_u64) {
        return Ok(Rewrite::Respond {
            code: u16::try_from(code).map_err(|_| bad("bad code"))?,
            headers,
            body: text("body"),
        });
    }
    let Some(path) = text("path") else {
        return Err(bad("Rewrite result must produce a new path."));
    };
    let query = match answer.get("query") {
        Some(query) => string_pairs(query, "bad query")?,
        None => request.query.to_vec(),
    };
    Ok(Rewrite::Dispatch {
        method: text("method"),
        target: target(request, &path, &query)?,
        headers,
        body: text("body"),
    })
}

/// `path` (which may carry its own `?query`) resolved against the design document, then
/// `query` encoded after it.
fn target(
    request: &RewriteRequest<'_>,
    path: &str,
    query: &[(String, String)],
) -> Result<String, RewriteError> {
    if path.len() > TARGET_BYTES_MAX {
        return Err(RewriteError::TooLong);
    }
    let (path, inline_query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let mut target = path::resolve(
        &path::prefix(request.db, request.ddoc),
        &path::as_target_path(path),
    )?;
    let mut separator = '?';
    if let Some(inline) = inline_query.filter(|query| !query.is_empty()) {
        target.push('?');
        target.push_str(&path::as_target_path(inline));
        separator = '&';
    }
    for (name, value) in query {
        target.push(separator);
        separator = '&';
        quote_plus(name, &mut target);
        target.push('=');
        quote_plus(value, &mut target);
        if target.len() > TARGET_BYTES_MAX {
            return Err(RewriteError::TooLong);
        }
    }
    if target.len() > TARGET_BYTES_MAX {
        return Err(RewriteError::TooLong);
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_for(answer: Value, query: &[(&str, &str)]) -> Result<Rewrite, RewriteError> {
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read(
            &answer,
            &RewriteRequest {
                method: "GET",
                db: "db/x",
                ddoc: "app",
                rest: &[],
                query: &query,
            },
        )
    }

    fn dispatched(answer: Value, query: &[(&str, &str)]) -> String {
        match read_for(answer, query) {
            Ok(Rewrite::Dispatch { target, .. }) => target,
            other => panic!("not a dispatch: {other:?}"),
        }
    }

    #[test]
    fn paths_and_queries() {
        assert_eq!(
            dispatched(json!({"path": "foo.txt"}), &[("a", "1")]),
            "/db%2Fx/_design/app/foo.txt?a=1"
        );
        assert_eq!(
            dispatched(
                json!({"path": "_show/w", "query": {"name": "a b"}}),
                &[("a", "1")]
            ),
            "/db%2Fx/_design/app/_show/w?name=a+b"
        );
        assert_eq!(
            dispatched(
                json!({"path": "_list/f/v", "query": {"key": "[\"test\",{}]"}}),
                &[]
            ),
            "/db%2Fx/_design/app/_list/f/v?key=%5B%22test%22%2C%7B%7D%5D"
        );
        assert_eq!(
            dispatched(json!({"path": "../../../_uuids"}), &[]),
            "/_uuids"
        );
        assert_eq!(
            dispatched(json!({"path": "../../_changes?since=0"}), &[("x", "y")]),
            "/db%2Fx/_changes?since=0&x=y"
        );
        assert_eq!(
            read_for(json!({"path": "../../../../x"}), &[]),
            Err(RewriteError::AboveRoot)
        );
    }

    #[test]
    fn whole_requests_and_early_responses() {
        assert_eq!(
            read_for(
                json!({"path": "a", "method": "POST", "headers": {"Content-Type": "application/json"},
                       "body": "{}"}),
                &[]
            ),
            Ok(Rewrite::Dispatch {
                method: Some("POST".into()),
                target: "/db%2Fx/_design/app/a".into(),
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: Some("{}".into()),
            })
        );
        assert_eq!(
            read_for(
                json!({"code": 451, "headers": {"x-foo": "bar"}, "body": "no"}),
                &[]
            ),
            Ok(Rewrite::Respond {
                code: 451,
                headers: vec![("x-foo".into(), "bar".into())],
                body: Some("no".into()),
            })
        );
    }

    #[test]
    fn answers_couchdb_refuses() {
        let reason = |answer: Value| match read_for(answer, &[]) {
            Err(RewriteError::BadAnswer(reason)) => reason,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(reason(json!(5)), "bad rewrite");
        assert_eq!(reason(json!({"path": 1})), "bad path");
        assert_eq!(reason(json!({"path": "a", "method": []})), "bad method");
        assert_eq!(reason(json!({"path": "a", "body": {}})), "bad body");
        assert_eq!(reason(json!({"path": "a", "headers": "x"})), "bad headers");
        assert_eq!(reason(json!({"path": "a", "query": []})), "bad query");
        assert_eq!(
            reason(json!({"path": "a", "query": {"limit": 1}})),
            "object key/value must be strings \"limit\"=1"
        );
        assert_eq!(reason(json!({"code": 199})), "bad code");
        assert_eq!(reason(json!({"code": 600})), "bad code");
        assert_eq!(reason(json!({"code": 2.5})), "bad code");
        assert_eq!(
            reason(json!({"method": "GET"})),
            "Rewrite result must produce a new path."
        );
    }
}
