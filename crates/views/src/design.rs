//! Design documents as view definitions: structural validation with CouchDB's reasons, the
//! parsed [`Design`] (views in name order, reduce kinds, `lib`, options), its index-group
//! signature, and the JS [`ProgramSpec`] it compiles to.

use md5_digest::md5;
use serde_json::{Map, Value};
use settee_js::ProgramSpec;

use crate::error::ViewError;

/// How a view reduces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReduceKind {
    Count,
    Sum,
    Stats,
    ApproxCountDistinct,
    /// `_top_N`: the N greatest distinct values, greatest first (CouchDB 3.5).
    Top(usize),
    /// `_bottom_N`: the N least distinct values, least first.
    Bottom(usize),
    /// `_first`: the value of the group's least (key, doc id) row.
    First,
    /// `_last`: the value of the group's greatest (key, doc id) row.
    Last,
    /// A JavaScript reduce function's source.
    JavaScript(String),
}

impl ReduceKind {
    fn parse(source: &str) -> Result<ReduceKind, ViewError> {
        // CouchDB accepts any suffix after a built-in's name ("_sum\n" and the like).
        let trimmed = source.trim();
        Ok(if trimmed.starts_with("_count") {
            ReduceKind::Count
        } else if trimmed.starts_with("_sum") {
            ReduceKind::Sum
        } else if trimmed.starts_with("_stats") {
            ReduceKind::Stats
        } else if trimmed.starts_with("_approx_count_distinct") {
            ReduceKind::ApproxCountDistinct
        } else if let Some(rank) = trimmed.strip_prefix("_top_") {
            ReduceKind::Top(parse_rank(rank)?)
        } else if let Some(rank) = trimmed.strip_prefix("_bottom_") {
            ReduceKind::Bottom(parse_rank(rank)?)
        } else if trimmed.starts_with("_first") {
            ReduceKind::First
        } else if trimmed.starts_with("_last") {
            ReduceKind::Last
        } else if trimmed.starts_with('_') {
            return Err(ViewError::InvalidDesign(format!(
                "`{trimmed}` is not a supported reduce function."
            )));
        } else {
            ReduceKind::JavaScript(source.to_string())
        })
    }
}

/// The largest N of `_top_N` / `_bottom_N` (CouchDB's `MAX_RANK`).
pub const MAX_RANK: usize = 100;

/// N of `_top_N` / `_bottom_N`, with CouchDB's reasons.
fn parse_rank(text: &str) -> Result<usize, ViewError> {
    match text.parse::<i64>() {
        Ok(rank) if (1..=MAX_RANK as i64).contains(&rank) => Ok(rank as usize),
        Ok(_) => Err(ViewError::InvalidDesign(format!(
            "rank value must be between 1 and {MAX_RANK}"
        ))),
        Err(_) => Err(ViewError::InvalidDesign("invalid rank reducer".into())),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDefinition {
    pub name: String,
    pub map: String,
    pub reduce: Option<ReduceKind>,
    /// `options.collation: "raw"`: keys in Erlang term order (views.md, "Raw collation").
    pub raw_collation: bool,
}

/// The view part of a design document.
#[derive(Debug, Clone)]
pub struct Design {
    /// `_design/...`
    pub id: String,
    pub language: String,
    /// In name order; a view's index in this list is its view number in the group.
    pub views: Vec<ViewDefinition>,
    /// `views.lib`, what `require` may load from map functions.
    pub lib: Value,
    /// `options.include_design`: map design documents too.
    pub include_design: bool,
    /// `options.partitioned`: absent means the database's kind (partitions.md).
    pub partitioned: Option<bool>,
    /// `options.local_seq`: map functions see the document's `_local_seq`.
    pub local_seq: bool,
    pub signature: [u8; 16],
}

impl Design {
    /// Parses a design document body (with or without `_id`/`_rev`). `Ok(None)` for design
    /// documents without JavaScript views (none, or another language such as Mango's `query`).
    pub fn parse(id: &str, body: &Value) -> Result<Option<Design>, ViewError> {
        validate_fields(body)?;
        let language = body
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("javascript")
            .to_string();
        let Some(Value::Object(views)) = body.get("views") else {
            return Ok(None);
        };
        if language != "javascript" {
            return Ok(None);
        }
        let mut definitions = Vec::new();
        for (name, view) in views {
            if name == "lib" {
                continue;
            }
            let map = view
                .get("map")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ViewError::InvalidDesign(format!("View `{name}` must contain map function"))
                })?
                .to_string();
            let reduce = match view.get("reduce").and_then(Value::as_str) {
                Some(source) => Some(ReduceKind::parse(source)?),
                None => None,
            };
            let raw_collation = view
                .get("options")
                .and_then(|options| options.get("collation"))
                .and_then(Value::as_str)
                == Some("raw");
            definitions.push(ViewDefinition {
                name: name.clone(),
                map,
                reduce,
                raw_collation,
            });
        }
        if definitions.is_empty() {
            return Ok(None);
        }
        definitions.sort_by(|a, b| a.name.cmp(&b.name));
        let lib = views.get("lib").cloned().unwrap_or(Value::Null);
        let options = body.get("options").cloned().unwrap_or(Value::Null);
        let include_design = options
            .get("include_design")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let partitioned = options.get("partitioned").and_then(Value::as_bool);
        let local_seq = options
            .get("local_seq")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let signature = signature(&language, &definitions, &lib, &options);
        Ok(Some(Design {
            id: id.to_string(),
            language,
            views: definitions,
            lib,
            include_design,
            partitioned,
            local_seq,
            signature,
        }))
    }

    /// Whether the views are partitioned in a database that is (`db_partitioned`) or is not:
    /// in a partitioned database unless `options.partitioned` is false; never in another.
    pub fn partitioned_in(&self, db_partitioned: bool) -> bool {
        db_partitioned && self.partitioned != Some(false)
    }

    pub fn view_index(&self, name: &str) -> Option<usize> {
        self.views.iter().position(|view| view.name == name)
    }

    /// Per view, in view order: whether its keys use raw collation.
    pub fn raw_collation(&self) -> Vec<bool> {
        self.views.iter().map(|view| view.raw_collation).collect()
    }

    pub fn view_names(&self) -> Vec<String> {
        self.views.iter().map(|view| view.name.clone()).collect()
    }

    /// The JavaScript program of this design document's views.
    pub fn program_spec(&self) -> ProgramSpec {
        let mut lib_root = Map::new();
        if !self.lib.is_null() {
            lib_root.insert("views".into(), serde_json::json!({"lib": self.lib}));
        }
        ProgramSpec {
            names: self.view_names(),
            maps: self.views.iter().map(|view| view.map.clone()).collect(),
            reduces: self
                .views
                .iter()
                .map(|view| match &view.reduce {
                    Some(ReduceKind::JavaScript(source)) => Some(source.clone()),
                    _ => None,
                })
                .collect(),
            filters: Default::default(),
            lib: Value::Object(lib_root),
            validate: None,
        }
    }
}

/// What determines a group's rows: an edit that keeps all of it keeps the index.
fn signature(language: &str, views: &[ViewDefinition], lib: &Value, options: &Value) -> [u8; 16] {
    let views: Vec<Value> = views
        .iter()
        .map(|view| {
            let reduce = match &view.reduce {
                None => Value::Null,
                Some(ReduceKind::JavaScript(source)) => Value::String(source.clone()),
                Some(other) => Value::String(format!("{other:?}")),
            };
            if view.raw_collation {
                serde_json::json!([view.name, view.map, reduce, "raw"])
            } else {
                serde_json::json!([view.name, view.map, reduce])
            }
        })
        .collect();
    let canonical = serde_json::json!({
        "language": language, "views": views, "lib": lib, "options": options,
    });
    md5(canonical.to_string().as_bytes())
}

/// CouchDB's structural checks of a design document (`couch_mrview:validate_ddoc_fields`).
pub fn validate_fields(body: &Value) -> Result<(), ViewError> {
    let bad = |path: &str, types: &str| {
        Err(ViewError::InvalidDesign(format!(
            "`{path}` field must have {types} type"
        )))
    };
    let Value::Object(members) = body else {
        return Ok(());
    };
    let map_type_object = members.get("language").and_then(Value::as_str) == Some("query");
    for (name, kind) in [
        ("filters", "object"),
        ("lists", "object"),
        ("shows", "object"),
        ("updates", "object"),
        ("options", "object"),
        ("views", "object"),
    ] {
        if let Some(value) = members.get(name) {
            if !value.is_object() {
                return bad(name, kind);
            }
        }
    }
    for (name, kind) in [("language", "string"), ("validate_doc_update", "string")] {
        if let Some(value) = members.get(name) {
            if !value.is_string() {
                return bad(name, kind);
            }
        }
    }
    if let Some(Value::Object(options)) = members.get("options") {
        if options
            .get("partitioned")
            .is_some_and(|value| !value.is_boolean())
        {
            return bad("options.partitioned", "boolean");
        }
    }
    if let Some(value) = members.get("rewrites") {
        if !value.is_string() && !value.is_array() {
            return bad("rewrites", "string or array");
        }
    }
    for name in ["filters", "lists", "shows", "updates"] {
        if let Some(Value::Object(functions)) = members.get(name) {
            for (key, value) in functions {
                if !value.is_object() && !value.is_string() {
                    return bad(&format!("{name}.{key}"), "object or string");
                }
            }
        }
    }
    if let Some(Value::Object(views)) = members.get("views") {
        for (name, view) in views {
            if name == "lib" {
                if !view.is_object() {
                    return bad("views.lib", "object");
                }
                continue;
            }
            let Value::Object(view) = view else {
                return bad(&format!("views.{name}"), "object");
            };
            if let Some(map) = view.get("map") {
                let ok = if map_type_object {
                    map.is_object()
                } else {
                    map.is_string()
                };
                if !ok {
                    return bad(
                        &format!("views.{name}.map"),
                        if map_type_object { "object" } else { "string" },
                    );
                }
            }
            if let Some(reduce) = view.get("reduce") {
                if !reduce.is_string() {
                    return bad(&format!("views.{name}.reduce"), "string");
                }
            }
        }
    }
    Ok(())
}

/// MD5, through the engine's helper (the engine already links an MD5 implementation).
mod md5_digest {
    pub fn md5(data: &[u8]) -> [u8; 16] {
        settee_engine::md5_of(data)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_views_in_name_order_with_reduce_kinds() {
        let design = Design::parse(
            "_design/d",
            &json!({"views": {
                "b": {"map": "function (doc) {}", "reduce": "_sum"},
                "a": {"map": "function (doc) {}", "reduce": "function (k, v) { return 1; }"},
                "lib": {"x": "exports.y = 1;"},
                "c": {"map": "function (doc) {}", "reduce": "_count"}
            }}),
        )
        .expect("valid")
        .expect("has views");
        assert_eq!(design.view_names(), ["a", "b", "c"]);
        assert_eq!(design.views[1].reduce, Some(ReduceKind::Sum));
        assert!(matches!(
            design.views[0].reduce,
            Some(ReduceKind::JavaScript(_))
        ));
        assert_eq!(design.lib, json!({"x": "exports.y = 1;"}));
    }

    #[test]
    fn signature_ignores_other_members_but_not_view_sources() {
        let a = json!({"views": {"v": {"map": "function (doc) { emit(1); }"}}});
        let mut b = a.clone();
        b["shows"] = json!({"s": "function () {}"});
        let mut c = a.clone();
        c["views"]["v"]["map"] = json!("function (doc) { emit(2); }");
        let sig = |body: &Value| {
            Design::parse("_design/d", body)
                .expect("ok")
                .expect("views")
                .signature
        };
        assert_eq!(sig(&a), sig(&b));
        assert_ne!(sig(&a), sig(&c));
    }

    #[test]
    fn invalid_design_documents_get_couchdb_reasons() {
        let reason = |body: Value| match Design::parse("_design/d", &body) {
            Err(ViewError::InvalidDesign(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(json!({"views": []})),
            "`views` field must have object type"
        );
        assert_eq!(
            reason(json!({"views": {"v": 1}})),
            "`views.v` field must have object type"
        );
        assert_eq!(
            reason(json!({"views": {"v": {"map": 1}}})),
            "`views.v.map` field must have string type"
        );
        assert_eq!(
            reason(json!({"views": {"v": {"reduce": "_sum"}}})),
            "View `v` must contain map function"
        );
        assert_eq!(
            reason(json!({"views": {"v": {"map": "function (doc) {}", "reduce": "_median"}}})),
            "`_median` is not a supported reduce function."
        );
        let with_reduce =
            |reduce: &str| json!({"views": {"v": {"map": "function (doc) {}", "reduce": reduce}}});
        assert_eq!(reason(with_reduce("_top_Foo")), "invalid rank reducer");
        assert_eq!(reason(with_reduce("_bottom_")), "invalid rank reducer");
        assert_eq!(
            reason(with_reduce("_top_0")),
            "rank value must be between 1 and 100"
        );
        assert_eq!(
            reason(with_reduce("_bottom_101")),
            "rank value must be between 1 and 100"
        );
        let design = Design::parse("_design/d", &with_reduce("_top_100"))
            .expect("valid")
            .expect("views");
        assert_eq!(design.views[0].reduce, Some(ReduceKind::Top(100)));
        assert!(Design::parse(
            "_design/d",
            &json!({"language": "query", "views": {"v": {"map": {"fields": {}}}}})
        )
        .expect("query ddocs are valid")
        .is_none());
    }
}
