//! The body of `POST /{db}/_find` and `/_explain`, checked member by member in the order and
//! with the errors of CouchDB's `mango_opts:validate_find/1`: a bad value is reported before an
//! unknown member, and every default is CouchDB's.

use serde_json::{json, Map, Value};

use crate::error::{MangoError, MangoResult};
use crate::fields::Fields;
use crate::selector::{quoted_term, Selector};
use crate::sort::Sort;

/// CouchDB's `[mango] default_limit`.
pub const LIMIT_DEFAULT: u64 = 25;

/// `use_index`: a design document, optionally with an index name in it. The design document is
/// kept as written (with or without `_design/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UseIndex {
    pub ddoc: Option<String>,
    pub name: Option<String>,
}

impl UseIndex {
    pub fn is_empty(&self) -> bool {
        self.ddoc.is_none()
    }

    /// The design document id, `_design/` prefixed.
    pub fn ddoc_id(&self) -> Option<String> {
        self.ddoc.as_deref().map(design_id)
    }

    fn to_json(&self) -> Value {
        match (&self.ddoc, &self.name) {
            (Some(ddoc), Some(name)) => json!([ddoc, name]),
            (Some(ddoc), None) => json!([ddoc]),
            _ => json!([]),
        }
    }
}

/// `_design/` + `name`, unless `name` already starts with it.
pub fn design_id(name: &str) -> String {
    if name.starts_with("_design/") {
        name.to_string()
    } else {
        format!("_design/{name}")
    }
}

/// A validated `_find` request.
#[derive(Debug, Clone)]
pub struct FindRequest {
    pub selector: Selector,
    pub use_index: UseIndex,
    /// The opaque bookmark a previous response returned, if any.
    pub bookmark: Option<String>,
    pub limit: u64,
    pub skip: u64,
    pub sort: Sort,
    pub fields: Fields,
    /// Read quorum: 1 reads documents with the index rows; more reads them one by one, which
    /// `execution_stats` reports as quorum reads, as CouchDB does.
    pub r: u64,
    pub conflicts: bool,
    /// `stale: "ok"`: the same as `stable: true, update: false`.
    pub stale: bool,
    pub update: bool,
    pub stable: bool,
    pub execution_stats: bool,
    pub allow_fallback: bool,
    /// A partition query (`/db/_partition/{p}/_find`): only that partition's documents, through
    /// `_all_docs` or a partitioned index. Set by the door, never read from the body.
    pub partition: Option<String>,
}

impl FindRequest {
    pub fn parse(body: &Value) -> MangoResult<FindRequest> {
        let Value::Object(members) = body else {
            return Err(MangoError::bad_request(
                "bad_request",
                "Request body must be a JSON object",
            ));
        };
        let mut rest = members.clone();
        let mut take = |name: &str| rest.remove(name);
        let selector = match take("selector") {
            None => {
                return Err(MangoError::bad_request(
                    "missing_required_key",
                    "Missing required key: selector",
                ))
            }
            Some(value @ Value::Object(_)) => Selector::parse(&value)?,
            Some(other) => {
                return Err(MangoError::bad_request(
                    "invalid_selector_json",
                    format!(
                        "Selector must be a JSON object, not: {}",
                        quoted_term(&other)
                    ),
                ))
            }
        };
        let use_index = match take("use_index") {
            None => UseIndex::default(),
            Some(value) => parse_use_index(&value)?,
        };
        let bookmark = match take("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.is_empty() => None,
            Some(Value::String(text)) => Some(text),
            Some(other) => {
                return Err(MangoError::bad_request(
                    "invalid_bookmark",
                    format!("Invalid bookmark value: {other}"),
                ))
            }
        };
        let limit = take("limit").map_or(Ok(LIMIT_DEFAULT), |v| non_negative(&v))?;
        let skip = take("skip").map_or(Ok(0), |v| non_negative(&v))?;
        let sort = take("sort").map_or(Ok(Sort::default()), |v| Sort::parse(&v))?;
        let fields = take("fields").map_or(Ok(Fields::All), |v| Fields::parse(&v))?;
        match take("partition") {
            None => {}
            Some(Value::String(partition)) if partition.is_empty() => {}
            Some(_) => {
                return Err(MangoError::bad_request(
                    "bad_request",
                    "`partition` parameter is not supported on this db",
                ))
            }
        }
        let r = take("r").map_or(Ok(1), |v| positive(&v))?;
        let conflicts = take("conflicts").map_or(Ok(false), |v| boolean(&v))?;
        let stale = match take("stale") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::String(text)) if text == "false" => false,
            Some(Value::String(text)) if text == "ok" => true,
            Some(other) => {
                return Err(MangoError::bad_request(
                    "invalid_ok_or_false_value",
                    format!("Invalid value for stale: {}", quoted_term(&other)),
                ))
            }
        };
        let update = take("update").map_or(Ok(true), |v| boolean(&v))?;
        let stable = take("stable").map_or(Ok(false), |v| boolean(&v))?;
        let execution_stats = take("execution_stats").map_or(Ok(false), |v| boolean(&v))?;
        let allow_fallback = take("allow_fallback").map_or(Ok(true), |v| boolean(&v))?;
        if let Some(key) = rest.keys().next() {
            return Err(MangoError::bad_request(
                "invalid_key",
                format!("Invalid key {key} for this request."),
            ));
        }
        Ok(FindRequest {
            selector,
            use_index,
            bookmark,
            limit,
            skip,
            sort,
            fields,
            r,
            conflicts,
            stale,
            update: update && !stale,
            stable: stable || stale,
            execution_stats,
            allow_fallback,
            partition: None,
        })
    }

    /// The validated options as `_explain` shows them under `opts`.
    pub fn opts_json(&self) -> Value {
        let mut opts = Map::new();
        opts.insert("use_index".into(), self.use_index.to_json());
        opts.insert(
            "bookmark".into(),
            json!(self.bookmark.as_deref().unwrap_or("nil")),
        );
        opts.insert("limit".into(), json!(self.limit));
        opts.insert("skip".into(), json!(self.skip));
        opts.insert("sort".into(), self.sort.to_json_object());
        opts.insert("fields".into(), json!(self.fields.names()));
        opts.insert("partition".into(), json!(""));
        opts.insert("r".into(), json!(self.r));
        opts.insert("conflicts".into(), json!(self.conflicts));
        opts.insert(
            "stale".into(),
            if self.stale {
                json!("ok")
            } else {
                json!(false)
            },
        );
        opts.insert("update".into(), json!(self.update));
        opts.insert("stable".into(), json!(self.stable));
        opts.insert("execution_stats".into(), json!(self.execution_stats));
        opts.insert("allow_fallback".into(), json!(self.allow_fallback));
        Value::Object(opts)
    }
}

fn parse_use_index(value: &Value) -> MangoResult<UseIndex> {
    let invalid = || {
        MangoError::bad_request(
            "invalid_index_name",
            format!("Invalid index name: {}", quoted_term(value)),
        )
    };
    let named = |ddoc: &str, name: Option<&str>| UseIndex {
        ddoc: Some(ddoc.to_string()),
        name: name.map(str::to_string),
    };
    match value {
        Value::Null => Ok(UseIndex::default()),
        Value::String(text) => {
            let parts: Vec<&str> = text.split('/').collect();
            match parts.as_slice() {
                ["_design", ddoc] => Ok(named(ddoc, None)),
                [ddoc] => Ok(named(ddoc, None)),
                ["_design", ddoc, name] => Ok(named(ddoc, Some(name))),
                [ddoc, name] => Ok(named(ddoc, Some(name))),
                _ => Err(invalid()),
            }
        }
        Value::Array(items) => match items.as_slice() {
            [] => Ok(UseIndex::default()),
            [Value::String(ddoc)] => Ok(named(ddoc, None)),
            [Value::String(ddoc), Value::String(name)] => Ok(named(ddoc, Some(name))),
            _ => Err(invalid()),
        },
        _ => Err(invalid()),
    }
}

fn non_negative(value: &Value) -> MangoResult<u64> {
    value.as_u64().ok_or_else(|| {
        MangoError::bad_request(
            "invalid_non_neg_integer",
            format!(
                "{} is not an integer greater than or equal to zero",
                quoted_term(value)
            ),
        )
    })
}

fn positive(value: &Value) -> MangoResult<u64> {
    value.as_u64().filter(|&n| n > 0).ok_or_else(|| {
        MangoError::bad_request(
            "invalid_pos_integer",
            format!("{} is not an integer greater than zero", quoted_term(value)),
        )
    })
}

fn boolean(value: &Value) -> MangoResult<bool> {
    value.as_bool().ok_or_else(|| {
        MangoError::bad_request(
            "invalid_boolean",
            format!("Invalid boolean value: {}", quoted_term(value)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_couchdbs() {
        let request = FindRequest::parse(&json!({"selector": {}})).expect("valid");
        assert_eq!(request.limit, 25);
        assert_eq!(request.skip, 0);
        assert!(request.update && !request.stable && !request.conflicts);
        assert!(request.allow_fallback && !request.execution_stats);
        assert_eq!(request.r, 1);
        assert!(request.use_index.is_empty() && request.bookmark.is_none());
        assert_eq!(
            request.opts_json(),
            json!({"use_index": [], "bookmark": "nil", "limit": 25, "skip": 0, "sort": {},
                "fields": [], "partition": "", "r": 1, "conflicts": false, "stale": false,
                "update": true, "stable": false, "execution_stats": false,
                "allow_fallback": true})
        );
    }

    #[test]
    fn use_index_forms() {
        let parse = |value: Value| {
            FindRequest::parse(&json!({"selector": {}, "use_index": value}))
                .map(|request| request.use_index)
        };
        let both = UseIndex {
            ddoc: Some("d".into()),
            name: Some("i".into()),
        };
        assert_eq!(parse(json!("d/i")).expect("ok"), both);
        assert_eq!(parse(json!("_design/d/i")).expect("ok"), both);
        assert_eq!(parse(json!(["d", "i"])).expect("ok"), both);
        assert_eq!(
            parse(json!("_design/d")).expect("ok").ddoc_id().as_deref(),
            Some("_design/d")
        );
        assert!(parse(json!(null)).expect("ok").is_empty());
        for bad in [
            json!("a/b/c/d"),
            json!(5),
            json!([1]),
            json!(["a", "b", "c"]),
        ] {
            assert_eq!(parse(bad).expect_err("bad").error(), "invalid_index_name");
        }
    }

    #[test]
    fn bad_members_get_couchdbs_errors() {
        let cases = [
            (json!([]), "bad_request"),
            (json!({}), "missing_required_key"),
            (json!({"selector": []}), "invalid_selector_json"),
            (json!({"selector": {"a": {"$bad": 1}}}), "invalid_operator"),
            (
                json!({"selector": {}, "limit": -1}),
                "invalid_non_neg_integer",
            ),
            (
                json!({"selector": {}, "skip": 1.5}),
                "invalid_non_neg_integer",
            ),
            (json!({"selector": {}, "r": 0}), "invalid_pos_integer"),
            (
                json!({"selector": {}, "conflicts": "yes"}),
                "invalid_boolean",
            ),
            (json!({"selector": {}, "bookmark": 1}), "invalid_bookmark"),
            (json!({"selector": {}, "sort": {}}), "invalid_sort_json"),
            (json!({"selector": {}, "fields": "a"}), "invalid_fields"),
            (
                json!({"selector": {}, "stale": "no"}),
                "invalid_ok_or_false_value",
            ),
            (json!({"selector": {}, "partition": "p"}), "bad_request"),
            (json!({"selector": {}, "bogus": 1}), "invalid_key"),
            // A bad value is reported before an unknown member.
            (
                json!({"selector": {}, "bogus": 1, "limit": "x"}),
                "invalid_non_neg_integer",
            ),
        ];
        for (body, error) in cases {
            let got = FindRequest::parse(&body).expect_err("invalid");
            assert_eq!(got.error(), error, "{body}");
        }
    }

    #[test]
    fn stale_ok_means_stable_without_update() {
        let request = FindRequest::parse(&json!({"selector": {}, "stale": "ok"})).expect("ok");
        assert!(request.stable && !request.update);
    }
}
