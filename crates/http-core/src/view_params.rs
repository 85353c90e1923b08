//! View query parameters (`/{db}/_design/{ddoc}/_view/{view}`), from a query string or a JSON
//! body, checked the way CouchDB 3.x's `couch_mrview_http` and `couch_mrview_util` check them,
//! with the same `query_parse_error` reasons. Pure functions: fuzzed by `fuzz/view_params`.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// `update=`: whether a query waits for the index (CouchDB 3's `update` and legacy `stale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// Bring the index up to date with the database as the query arrived (default).
    Wait,
    /// Answer from the index as it is.
    No,
    /// Answer from the index as it is and start an update.
    Lazy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ViewParams {
    pub key: Option<Value>,
    pub keys: Option<Vec<Value>>,
    pub start_key: Option<Value>,
    pub end_key: Option<Value>,
    pub start_key_doc_id: Option<String>,
    pub end_key_doc_id: Option<String>,
    pub inclusive_end: bool,
    pub descending: bool,
    pub limit: Option<u64>,
    pub skip: u64,
    pub group: Option<bool>,
    pub group_level: Option<u64>,
    pub reduce: Option<bool>,
    pub include_docs: bool,
    pub conflicts: bool,
    /// `attachments=true`: included documents carry their attachments' data inline.
    pub attachments: bool,
    /// `att_encoding_info=true`: included documents' stubs say how bodies are stored.
    pub att_encoding_info: bool,
    pub update: UpdateMode,
    pub stable: bool,
    pub update_seq: bool,
    pub sorted: bool,
    /// A partition query (`/db/_partition/{p}/_design/...` or `?partition=p`).
    pub partition: Option<String>,
}

impl Default for ViewParams {
    fn default() -> Self {
        ViewParams {
            key: None,
            keys: None,
            start_key: None,
            end_key: None,
            start_key_doc_id: None,
            end_key_doc_id: None,
            inclusive_end: true,
            descending: false,
            limit: None,
            skip: 0,
            group: None,
            group_level: None,
            reduce: None,
            include_docs: false,
            conflicts: false,
            attachments: false,
            att_encoding_info: false,
            update: UpdateMode::Wait,
            stable: false,
            update_seq: false,
            sorted: true,
            partition: None,
        }
    }
}

/// A parameter as it arrived: query-string text or a JSON body member.
#[derive(Clone, Copy)]
enum Raw<'a> {
    Text(&'a str),
    Json(&'a Value),
}

impl Raw<'_> {
    fn shown(&self) -> String {
        match self {
            Raw::Text(text) => (*text).to_string(),
            Raw::Json(Value::String(text)) => text.clone(),
            Raw::Json(value) => value.to_string(),
        }
    }

    fn json(&self, name: &str) -> ApiResult<Value> {
        match self {
            Raw::Json(value) => Ok((*value).clone()),
            Raw::Text(text) => serde_json::from_str(text).map_err(|_| {
                ApiError::QueryParse(format!("Invalid JSON value for `{name}`: {text}"))
            }),
        }
    }

    fn boolean(&self) -> ApiResult<bool> {
        match self {
            Raw::Json(Value::Bool(value)) => Ok(*value),
            Raw::Text(text) => crate::request::parse_view_bool(text),
            Raw::Json(Value::String(text)) => crate::request::parse_view_bool(text),
            Raw::Json(other) => Err(ApiError::QueryParse(format!(
                "Invalid boolean parameter: {other}"
            ))),
        }
    }

    fn positive_integer(&self) -> ApiResult<u64> {
        let parsed = match self {
            Raw::Json(Value::Number(number)) => number.as_u64(),
            _ => self.shown().parse::<u64>().ok(),
        };
        parsed.ok_or_else(|| {
            ApiError::QueryParse(format!(
                "Invalid value for positive integer: \"{}\"",
                self.shown()
            ))
        })
    }

    fn string(&self) -> String {
        self.shown()
    }
}

impl ViewParams {
    /// From a query string's pairs (later duplicates win, as CouchDB's proplists do not: the
    /// first wins there; clients do not repeat view parameters).
    pub fn from_query(pairs: &[(String, String)]) -> ApiResult<ViewParams> {
        let mut params = ViewParams::default();
        for (name, value) in pairs {
            params.set(name, Raw::Text(value))?;
        }
        Ok(params)
    }

    /// Adds a JSON body's members (POST): the same names, values as JSON.
    pub fn merge_json(&mut self, body: &Map<String, Value>) -> ApiResult<()> {
        for (name, value) in body {
            if name == "queries" {
                continue;
            }
            self.set(name, Raw::Json(value))?;
        }
        Ok(())
    }

    fn set(&mut self, name: &str, raw: Raw<'_>) -> ApiResult<()> {
        match name {
            "key" => self.key = Some(raw.json(name)?),
            "keys" => match (raw.json(name)?, &raw) {
                (Value::Array(keys), _) => self.keys = Some(keys),
                // CouchDB's two reasons: the body's member, the query string's parameter.
                (_, Raw::Json(_)) => {
                    return Err(ApiError::BadRequest(
                        "`keys` member must be an array.".into(),
                    ))
                }
                (_, Raw::Text(_)) => {
                    return Err(ApiError::QueryParse(
                        "`keys` must be an array of strings.".into(),
                    ))
                }
            },
            "startkey" | "start_key" => self.start_key = Some(raw.json(name)?),
            "endkey" | "end_key" => self.end_key = Some(raw.json(name)?),
            "startkey_docid" | "start_key_doc_id" => self.start_key_doc_id = Some(raw.string()),
            "endkey_docid" | "end_key_doc_id" => self.end_key_doc_id = Some(raw.string()),
            "inclusive_end" => self.inclusive_end = raw.boolean()?,
            "descending" => self.descending = raw.boolean()?,
            "limit" => self.limit = Some(raw.positive_integer()?),
            "skip" => self.skip = raw.positive_integer()?,
            "group" => self.group = Some(raw.boolean()?),
            "group_level" => {
                let text = raw.shown();
                // CouchDB accepts group_level=exact as group=true.
                if text == "exact" {
                    self.group = Some(true);
                } else {
                    self.group_level = Some(raw.positive_integer()?);
                }
            }
            "reduce" => self.reduce = Some(raw.boolean()?),
            "include_docs" => self.include_docs = raw.boolean()?,
            "conflicts" => self.conflicts = raw.boolean()?,
            "attachments" => self.attachments = raw.boolean()?,
            "att_encoding_info" => self.att_encoding_info = raw.boolean()?,
            "update_seq" => self.update_seq = raw.boolean()?,
            "sorted" => self.sorted = raw.boolean()?,
            "stable" => self.stable = raw.boolean()?,
            "partition" => self.partition = Some(raw.string()),
            "update" => {
                self.update = match raw.shown().as_str() {
                    "true" => UpdateMode::Wait,
                    "false" => UpdateMode::No,
                    "lazy" => UpdateMode::Lazy,
                    other => {
                        return Err(ApiError::QueryParse(format!(
                            "Invalid value for `update`: \"{other}\""
                        )))
                    }
                }
            }
            "stale" => match raw.shown().as_str() {
                "ok" => {
                    self.update = UpdateMode::No;
                    self.stable = true;
                }
                "update_after" => {
                    self.update = UpdateMode::Lazy;
                    self.stable = true;
                }
                other => {
                    return Err(ApiError::QueryParse(format!(
                        "Invalid value for `stale`: \"{other}\""
                    )))
                }
            },
            // Unknown names are ignored, as CouchDB keeps them as "extra" arguments.
            _ => {}
        }
        Ok(())
    }

    /// How to answer, once the view is known: checks the combinations CouchDB refuses.
    /// `raw_collation`: the view orders keys in Erlang term order (`options.collation`).
    pub fn plan(&self, view_has_reduce: bool, raw_collation: bool) -> ApiResult<QueryKind> {
        if self.keys.is_some()
            && (self.key.is_some() || self.start_key.is_some() || self.end_key.is_some())
        {
            return Err(ApiError::QueryParse(
                "`keys` is incompatible with `key`, `start_key` and `end_key`".into(),
            ));
        }
        if self.key.is_some() && (self.start_key.is_some() || self.end_key.is_some()) {
            return Err(ApiError::QueryParse(
                "`key` is incompatible with `start_key` and `end_key`".into(),
            ));
        }
        if self.reduce == Some(true) && !view_has_reduce {
            return Err(ApiError::QueryParse(
                "Reduce is invalid for map-only views.".into(),
            ));
        }
        let reduce = view_has_reduce && self.reduce != Some(false);
        let grouping_asked = self.group == Some(true) || self.group_level.is_some();
        if !reduce && grouping_asked {
            return Err(ApiError::QueryParse(
                "Invalid use of grouping on a map view.".into(),
            ));
        }
        if let (Some(start), Some(end)) = (&self.start_key, &self.end_key) {
            let order = if raw_collation {
                settee_collate::TermOrder::Erlang.compare(start, end)
            } else {
                settee_collate::collate(start, end)
            };
            let reversed = if self.descending {
                order.is_lt()
            } else {
                order.is_gt()
            };
            if reversed {
                return Err(ApiError::QueryParse(format!(
                    "No rows can match your key range, reverse your start_key and end_key or set descending={}",
                    !self.descending
                )));
            }
        }
        if !reduce {
            return Ok(QueryKind::Map);
        }
        if self.include_docs {
            return Err(ApiError::QueryParse(
                "`include_docs` is invalid for reduce".into(),
            ));
        }
        let grouping = match (self.group, self.group_level) {
            (Some(false), Some(_)) => {
                return Err(ApiError::QueryParse(
                    "Can't specify group=false and group_level.".into(),
                ))
            }
            (_, Some(level)) => settee_views::Grouping::Level(level as usize),
            (Some(true), None) => settee_views::Grouping::Exact,
            _ => settee_views::Grouping::All,
        };
        if self.keys.is_some() && grouping == settee_views::Grouping::All {
            return Err(ApiError::QueryParse(
                "Multi-key fetches for reduce views must use `group=true`".into(),
            ));
        }
        Ok(QueryKind::Reduce(grouping))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    Map,
    Reduce(settee_views::Grouping),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn query(text: &str) -> ApiResult<ViewParams> {
        ViewParams::from_query(&crate::request::parse_query(Some(text)))
    }

    #[test]
    fn parses_query_strings_like_couchdb() {
        let params = query("startkey=%5B%22a%22%5D&endkey=%22z%22&limit=5&skip=2&descending=true&group_level=2&update=lazy&inclusive_end=false&startkey_docid=d1").expect("valid");
        assert_eq!(params.start_key, Some(json!(["a"])));
        assert_eq!(params.end_key, Some(json!("z")));
        assert_eq!((params.limit, params.skip), (Some(5), 2));
        assert!(params.descending && !params.inclusive_end);
        assert_eq!(params.group_level, Some(2));
        assert_eq!(params.update, UpdateMode::Lazy);
        assert_eq!(params.start_key_doc_id.as_deref(), Some("d1"));
        assert_eq!(query("stale=ok").expect("valid").update, UpdateMode::No);
    }

    #[test]
    fn bad_values_are_query_parse_errors() {
        let reason = |text: &str| match query(text) {
            Err(ApiError::QueryParse(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason("limit=-1"),
            "Invalid value for positive integer: \"-1\""
        );
        assert_eq!(
            reason("descending=maybe"),
            "Invalid boolean parameter: \"maybe\""
        );
        assert_eq!(reason("key=%7Bnope"), "Invalid JSON value for `key`: {nope");
        assert_eq!(reason("keys=1"), "`keys` must be an array of strings.");
        assert_eq!(
            reason("update=sometimes"),
            "Invalid value for `update`: \"sometimes\""
        );
    }

    #[test]
    fn plans_refuse_what_couchdb_refuses() {
        let plan = |text: &str, reduce: bool| query(text).expect("parses").plan(reduce, false);
        let reason = |text: &str, reduce: bool| match plan(text, reduce) {
            Err(ApiError::QueryParse(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(plan("", false).expect("ok"), QueryKind::Map);
        assert_eq!(plan("reduce=false", true).expect("ok"), QueryKind::Map);
        assert_eq!(
            plan("group=true", true).expect("ok"),
            QueryKind::Reduce(settee_views::Grouping::Exact)
        );
        assert_eq!(
            reason("reduce=true", false),
            "Reduce is invalid for map-only views."
        );
        assert_eq!(
            reason("group=true", false),
            "Invalid use of grouping on a map view."
        );
        assert_eq!(
            reason("include_docs=true", true),
            "`include_docs` is invalid for reduce"
        );
        assert_eq!(
            reason("keys=%5B1%5D", true),
            "Multi-key fetches for reduce views must use `group=true`"
        );
        assert_eq!(
            reason("key=1&keys=%5B1%5D", false),
            "`keys` is incompatible with `key`, `start_key` and `end_key`"
        );
        assert_eq!(
            reason("startkey=2&endkey=1", false),
            "No rows can match your key range, reverse your start_key and end_key or set descending=true"
        );
        assert_eq!(
            plan("startkey=2&endkey=1&descending=true", false).expect("ok"),
            QueryKind::Map
        );
    }

    #[test]
    fn json_bodies_use_json_values() {
        let mut params = ViewParams::default();
        let body = json!({"keys": ["a", 1], "include_docs": true, "limit": 3, "group": "true"});
        params
            .merge_json(body.as_object().expect("object"))
            .expect("valid");
        assert_eq!(params.keys, Some(vec![json!("a"), json!(1)]));
        assert!(params.include_docs);
        assert_eq!(params.limit, Some(3));
        assert_eq!(params.group, Some(true));
    }
}
