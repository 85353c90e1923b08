//! Properties of rewriting over generated rules and requests: nothing panics, every target is
//! a resolved path the router can parse, and with `secure_rewrites` a rule never leaves its
//! database.

use proptest::prelude::*;
use serde_json::{json, Value};
use settee_rewrite::{answer, RewriteError, RewriteRequest, Rules};

/// Segments rules and requests are made of: the special ones (`..`, `.`, `*`, `:name`) often.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("*".to_string()),
        Just(":a".to_string()),
        Just(":b".to_string()),
        Just("a".to_string()),
        Just("_show".to_string()),
        "[a-z%/?&= .é]{0,6}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 0..6).prop_map(|segments| segments.join("/"))
}

fn query_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(":a")),
        Just(json!("*")),
        Just(json!([":a", ":b", 1])),
        Just(json!({"c": 1})),
        Just(json!(3)),
        "[a-z:*]{0,4}".prop_map(Value::String),
    ]
}

fn rule() -> impl Strategy<Value = Value> {
    (
        prop::option::of(path()),
        prop::option::of(path()),
        prop::option::of(prop_oneof![Just("GET"), Just("PUT"), Just("*")]),
        prop::collection::vec(
            (
                prop_oneof![Just("key"), Just("a"), Just("name")],
                query_value(),
            ),
            0..3,
        ),
        prop::option::of(prop_oneof![Just("int"), Just("bool")]),
    )
        .prop_map(|(from, to, method, query, format)| {
            let mut rule = serde_json::Map::new();
            if let Some(from) = from {
                rule.insert("from".into(), json!(from));
            }
            if let Some(to) = to {
                rule.insert("to".into(), json!(to));
            }
            if let Some(method) = method {
                rule.insert("method".into(), json!(method));
            }
            let query: serde_json::Map<String, Value> = query
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect();
            rule.insert("query".into(), Value::Object(query));
            if let Some(format) = format {
                rule.insert("formats".into(), json!({"a": format}));
            }
            Value::Object(rule)
        })
}

fn request_parts() -> impl Strategy<Value = (Vec<String>, Vec<(String, String)>)> {
    (
        prop::collection::vec(segment(), 0..5),
        prop::collection::vec(
            (
                prop_oneof![Just("a"), Just("key"), Just("b")],
                prop_oneof![Just("1"), Just("\"x\""), Just("true"), Just("nope")],
            ),
            0..3,
        ),
    )
        .prop_map(|(rest, query)| {
            let rest = rest.into_iter().filter(|s| !s.is_empty()).collect();
            let query = query
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (rest, query)
        })
}

/// A target the router splits into segments with no `.` or `..` left, under `/`.
fn assert_resolved(target: &str) {
    assert!(target.starts_with('/'), "{target}");
    let path = target.split('?').next().unwrap_or_default();
    for segment in path.split('/').skip(1) {
        assert!(segment != "." && segment != "..", "{target}");
    }
    assert!(
        target
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'#'),
        "{target}"
    );
}

const DB: &str = "db/x";
const DB_ENCODED: &str = "/db%2Fx";

proptest! {
    #[test]
    fn rules_never_panic_and_secure_ones_stay_in_their_database(
        rules in prop::collection::vec(rule(), 0..4),
        (rest, query) in request_parts(),
        secure in any::<bool>(),
    ) {
        let request = RewriteRequest { method: "GET", db: DB, ddoc: "app", rest: &rest, query: &query };
        let Ok(parsed) = Rules::parse(&rules, secure) else { return Ok(()) };
        match parsed.rewrite(&request) {
            Ok(target) => {
                assert_resolved(&target);
                if secure {
                    prop_assert!(
                        target == DB_ENCODED
                            || target.starts_with(&format!("{DB_ENCODED}/"))
                            || target.starts_with(&format!("{DB_ENCODED}?")),
                        "{}", target
                    );
                }
            }
            Err(RewriteError::AboveRoot) => prop_assert!(!secure),
            Err(_) => {}
        }
    }

    #[test]
    fn function_answers_never_panic(
        path in prop::option::of(path()),
        code in prop::option::of(0u64..700),
        query in prop::option::of(prop::collection::vec(("[a-z]{1,3}", "[a-z \"/]{0,3}"), 0..3)),
        (rest, request_query) in request_parts(),
    ) {
        let mut object = serde_json::Map::new();
        if let Some(path) = path {
            object.insert("path".into(), json!(path));
        }
        if let Some(code) = code {
            object.insert("code".into(), json!(code));
        }
        if let Some(query) = query {
            let query: serde_json::Map<String, Value> =
                query.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            object.insert("query".into(), Value::Object(query));
        }
        let request = RewriteRequest { method: "GET", db: DB, ddoc: "app", rest: &rest, query: &request_query };
        if let Ok(answer::Rewrite::Dispatch { target, .. }) = answer::read(&Value::Object(object), &request) {
            assert_resolved(&target);
        }
    }
}
