//! Mango indexes: the special `_all_docs` index every database has, and JSON indexes, which
//! live in design documents with `"language": "query"` exactly as CouchDB 3.x stores them, so
//! they replicate and are listed by `_design_docs` like any design document:
//!
//! ```json
//! {"_id": "_design/by-age", "language": "query",
//!  "views": {"age-idx": {"map": {"fields": {"age": "asc"}, "partial_filter_selector": {}},
//!                        "reduce": "_count",
//!                        "options": {"def": {"fields": ["age"]}}}}}
//! ```
//!
//! `map` holds the validated definition (fields as an object, the partial filter selector
//! normalised), `options.def` the definition as the client sent it. Reading and editing that
//! JSON is pure; the HTTP door loads and saves the design documents.

use std::fmt::Write;

use serde_json::{json, Map, Value};
use sha1::{Digest, Sha1};

use crate::error::{MangoError, MangoResult};
use crate::request::design_id;
use crate::selector::{lookup, quoted_term, Lookup, Selector};
use crate::sort::Sort;

/// The name of the special index.
pub const ALL_DOCS: &str = "_all_docs";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// `_all_docs`: one row per document, keyed by `_id`.
    Special,
    /// A JSON index: one row per document that has every field, keyed by their values.
    Json,
}

/// One index a query can use.
#[derive(Debug, Clone)]
pub struct Index {
    /// The design document id (`_design/...`); `None` for `_all_docs`.
    pub ddoc: Option<String>,
    pub name: String,
    pub kind: IndexKind,
    /// The indexed fields (columns), in key order, with their direction.
    pub fields: Sort,
    /// Only documents matching this are indexed; `None` when there is no filter.
    pub partial_filter: Option<Selector>,
    /// A partitioned index (of a partitioned database): only partition queries use it, and
    /// its rows are keyed by partition first.
    pub partitioned: bool,
}

impl Index {
    pub fn all_docs() -> Index {
        Index {
            ddoc: None,
            name: ALL_DOCS.to_string(),
            kind: IndexKind::Special,
            fields: Sort::parse(&json!(["_id"])).unwrap_or_default(),
            partial_filter: None,
            partitioned: false,
        }
    }

    /// The column names.
    pub fn columns(&self) -> Vec<&str> {
        self.fields.names()
    }

    /// The index as `GET /{db}/_index` and `_explain` list it.
    pub fn to_json(&self) -> Value {
        let mut def = Map::new();
        def.insert("fields".into(), self.fields.to_json_list());
        if let Some(partial) = &self.partial_filter {
            def.insert("partial_filter_selector".into(), partial.to_json());
        }
        match self.kind {
            IndexKind::Special => json!({
                "ddoc": null, "name": self.name, "type": "special", "def": def,
            }),
            IndexKind::Json => json!({
                "ddoc": self.ddoc, "name": self.name, "type": "json",
                "partitioned": self.partitioned,
                "def": def,
            }),
        }
    }

    /// The key this index holds for `doc` (the whole document as JSON, `_id` included), or
    /// `None` when the document is not in it: a JSON index leaves out design documents,
    /// documents missing one of its fields and documents its partial filter refuses
    /// (`mango_native_proc:get_index_entries`).
    pub fn key_of(&self, doc: &Value) -> Option<Vec<Value>> {
        let id = doc.get("_id").and_then(Value::as_str)?;
        match self.kind {
            IndexKind::Special => Some(vec![json!(id)]),
            IndexKind::Json => {
                if id.starts_with("_design/") {
                    return None;
                }
                if let Some(filter) = &self.partial_filter {
                    if !filter.matches(doc) {
                        return None;
                    }
                }
                self.fields
                    .fields
                    .iter()
                    .map(|field| match lookup(doc, &field.path) {
                        Lookup::Found(value) => Some(value.clone()),
                        Lookup::Missing | Lookup::BadPath => None,
                    })
                    .collect()
            }
        }
    }

    /// CouchDB's order for listing: `_all_docs` first, then by design document and name.
    pub fn sort_key(&self) -> (Option<&str>, &str) {
        (self.ddoc.as_deref(), self.name.as_str())
    }
}

/// The JSON indexes of one design document; none unless its language is `query`. A view whose
/// definition does not read back is skipped, as CouchDB skips it. In a partitioned database
/// (`db_partitioned`) they are partitioned unless the design document's
/// `options.partitioned` is false.
pub fn indexes_in_ddoc(id: &str, body: &Value, db_partitioned: bool) -> Vec<Index> {
    if body.get("language").and_then(Value::as_str) != Some("query") {
        return Vec::new();
    }
    let partitioned =
        db_partitioned && body.pointer("/options/partitioned") != Some(&Value::Bool(false));
    let Some(Value::Object(views)) = body.get("views") else {
        return Vec::new();
    };
    views
        .iter()
        .filter_map(|(name, view)| {
            let map = view.get("map")?;
            let Value::Object(fields) = map.get("fields")? else {
                return None;
            };
            let list: Vec<Value> = fields
                .iter()
                .map(|(field, direction)| json!({ field.clone(): direction }))
                .collect();
            let fields = Sort::parse(&Value::Array(list)).ok()?;
            let partial_filter = match map.get("partial_filter_selector") {
                None => None,
                Some(Value::Object(members)) if members.is_empty() => None,
                Some(selector) => Some(Selector::parse(selector).ok()?),
            };
            Some(Index {
                ddoc: Some(id.to_string()),
                name: name.clone(),
                kind: IndexKind::Json,
                fields,
                partial_filter,
                partitioned,
            })
        })
        .collect()
}

/// A validated `POST /{db}/_index` body.
#[derive(Debug, Clone)]
pub struct NewIndex {
    /// The design document id (`_design/...`).
    pub ddoc: String,
    pub name: String,
    pub fields: Sort,
    /// Normalised; `{}` when there is none.
    pub partial_filter_selector: Value,
    /// The `index` member as sent, kept in the view's `options.def`.
    raw_def: Value,
    /// `partitioned` as sent: the design document's `options.partitioned` when given.
    pub partitioned: Option<bool>,
}

impl NewIndex {
    pub fn parse(body: &Value) -> MangoResult<NewIndex> {
        let Value::Object(members) = body else {
            return Err(MangoError::bad_request(
                "bad_request",
                "Request body must be a JSON object",
            ));
        };
        let mut rest = members.clone();
        let raw_def = rest.remove("index");
        let index_type = match rest.remove("type") {
            None => "json".to_string(),
            Some(Value::String(text)) => text,
            Some(other) => return Err(invalid_string(&other)),
        };
        let name = non_empty_string(rest.remove("name"))?;
        let ddoc = non_empty_string(rest.remove("ddoc"))?;
        match rest.remove("w") {
            None => {}
            Some(w) if w.as_u64().is_some_and(|w| w > 0) => {}
            Some(other) => {
                return Err(MangoError::bad_request(
                    "invalid_pos_integer",
                    format!(
                        "{} is not an integer greater than zero",
                        quoted_term(&other)
                    ),
                ))
            }
        }
        let partitioned = match rest.remove("partitioned") {
            None => None,
            Some(Value::Bool(partitioned)) => Some(partitioned),
            Some(other) => {
                return Err(MangoError::bad_request(
                    "invalid_partitioned_value",
                    format!("Invalid partitioned value: {}", quoted_term(&other)),
                ))
            }
        };
        if let Some(key) = rest.keys().next() {
            return Err(invalid_key(key));
        }
        let Some(raw_def) = raw_def else {
            return Err(MangoError::bad_request(
                "missing_required_key",
                "Missing required key: index",
            ));
        };
        match index_type.as_str() {
            "json" => {}
            "text" | "nouveau" => {
                return Err(MangoError::bad_request(
                    "invalid_index",
                    format!("Index type {index_type} is not supported by settee"),
                ))
            }
            _ => {
                return Err(MangoError::bad_request(
                    "invalid_index",
                    format!("Invalid type for index: {index_type}"),
                ))
            }
        }
        let (fields, partial_filter_selector) = parse_def(&raw_def)?;
        let name = match name {
            Some(name) => name,
            None => generated_name(&fields, &partial_filter_selector),
        };
        let ddoc = design_id(&ddoc.unwrap_or_else(|| name.clone()));
        if ddoc == "_design/" {
            return Err(MangoError::bad_request(
                "illegal_docid",
                "Illegal document id `_design/`",
            ));
        }
        Ok(NewIndex {
            ddoc,
            name,
            fields,
            partial_filter_selector,
            raw_def,
            partitioned,
        })
    }

    /// The view entry stored under `views.{name}`.
    pub fn view_json(&self) -> Value {
        json!({
            "map": {
                "fields": self.fields.to_json_object(),
                "partial_filter_selector": self.partial_filter_selector,
            },
            "reduce": "_count",
            "options": {"def": self.raw_def},
        })
    }
}

/// The definition: `fields` (required) and `partial_filter_selector`, nothing else.
fn parse_def(def: &Value) -> MangoResult<(Sort, Value)> {
    let Value::Object(members) = def else {
        return Err(MangoError::bad_request(
            "invalid_index",
            format!("JSON indexes must be an object, not: {}", quoted_term(def)),
        ));
    };
    let mut rest = members.clone();
    let fields = match rest.remove("fields") {
        None => {
            return Err(MangoError::bad_request(
                "missing_required_key",
                "Missing required key: fields",
            ))
        }
        Some(fields) => Sort::parse(&fields)?,
    };
    let partial = match rest.remove("partial_filter_selector") {
        None => json!({}),
        Some(selector @ Value::Object(_)) => Selector::parse(&selector)?.to_json(),
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
    if let Some(key) = rest.keys().next() {
        return Err(invalid_key(key));
    }
    Ok((fields, partial))
}

/// A name that is the same for the same definition, so creating it twice finds it exists
/// (CouchDB hashes the Erlang term of the definition; settee hashes its JSON).
fn generated_name(fields: &Sort, partial: &Value) -> String {
    let canonical = json!({"fields": fields.to_json_list(), "partial": partial, "type": "json"});
    let digest = Sha1::digest(canonical.to_string().as_bytes());
    digest.iter().fold(String::new(), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

fn non_empty_string(value: Option<Value>) -> MangoResult<Option<String>> {
    match value {
        None => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Err(MangoError::bad_request(
            "invalid_empty_string",
            "Index name or ddoc cannot be empty string",
        )),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(invalid_string(&other)),
    }
}

fn invalid_string(value: &Value) -> MangoError {
    MangoError::bad_request(
        "invalid_string",
        format!("Invalid string: {}", quoted_term(value)),
    )
}

fn invalid_key(key: &str) -> MangoError {
    MangoError::bad_request(
        "invalid_key",
        format!("Invalid key {key} for this request."),
    )
}

/// What adding an index to a design document came to.
#[derive(Debug, Clone, PartialEq)]
pub enum AddOutcome {
    /// The design document already has this index, unchanged.
    Exists,
    /// The new body to save.
    Updated(Value),
}

/// Adds (or replaces, by name) `index` in a design document body (without `_id`/`_rev`);
/// `None` for a design document that does not exist or is deleted.
pub fn add_to_ddoc(current: Option<&Value>, index: &NewIndex) -> MangoResult<AddOutcome> {
    let mut body = match current {
        None => json!({"language": "query"}),
        Some(body) => {
            check_language(body)?;
            body.clone()
        }
    };
    let Value::Object(members) = &mut body else {
        return Err(invalid_language(None));
    };
    let views = members
        .entry("views")
        .or_insert_with(|| Value::Object(Map::new()));
    if !views.is_object() {
        *views = Value::Object(Map::new());
    }
    let Value::Object(views) = views else {
        return Ok(AddOutcome::Exists);
    };
    let view = index.view_json();
    if views.get(&index.name) == Some(&view) {
        return Ok(AddOutcome::Exists);
    }
    views.insert(index.name.clone(), view);
    if let Some(partitioned) = index.partitioned {
        let options = members
            .entry("options")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(options) = options {
            options.insert("partitioned".into(), Value::Bool(partitioned));
        }
    }
    Ok(AddOutcome::Updated(body))
}

/// Removes the index `name` from a design document body. `Ok(None)`: nothing else is left in
/// it, so the design document itself is to be deleted.
pub fn remove_from_ddoc(body: &Value, name: &str) -> MangoResult<Option<Value>> {
    check_language(body)?;
    let not_found = || MangoError::NotFound {
        error: "invalid_index",
        reason: format!("JSON index {name} not found in this design doc."),
    };
    let mut body = body.clone();
    let Some(Value::Object(members)) = Some(&mut body) else {
        return Err(not_found());
    };
    let Some(Value::Object(views)) = members.get_mut("views") else {
        return Err(not_found());
    };
    if views.remove(name).is_none() {
        return Err(not_found());
    }
    if views.is_empty() {
        members.remove("views");
    }
    if members.len() == 1 && members.contains_key("language") {
        return Ok(None);
    }
    Ok(Some(body))
}

fn check_language(body: &Value) -> MangoResult<()> {
    match body.get("language") {
        Some(Value::String(language)) if language == "query" => Ok(()),
        other => Err(invalid_language(other)),
    }
}

/// CouchDB prints the `{<<"language">>, Value}` tuple it found, or `false` for none.
fn invalid_language(found: Option<&Value>) -> MangoError {
    let term = match found {
        None => "false".to_string(),
        Some(value) => format!(
            "{{{},{}}}",
            quoted_term(&json!("language")),
            quoted_term(value)
        ),
    };
    MangoError::bad_request(
        "invalid_ddoc_lang",
        format!("Existing design doc has an invalid language: {term}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_index(body: Value) -> NewIndex {
        NewIndex::parse(&body).expect("valid")
    }

    #[test]
    fn a_new_index_is_stored_as_couchdb_stores_it() {
        let index = new_index(json!({
            "index": {"fields": ["age", {"name.last": "asc"}],
                      "partial_filter_selector": {"kind": "person"}},
            "ddoc": "people", "name": "by-age",
        }));
        assert_eq!(index.ddoc, "_design/people");
        let AddOutcome::Updated(body) = add_to_ddoc(None, &index).expect("ok") else {
            panic!("a new design document is created");
        };
        assert_eq!(
            body,
            json!({"language": "query", "views": {"by-age": {
                "map": {"fields": {"age": "asc", "name.last": "asc"},
                        "partial_filter_selector": {"kind": {"$eq": "person"}}},
                "reduce": "_count",
                "options": {"def": {"fields": ["age", {"name.last": "asc"}],
                                    "partial_filter_selector": {"kind": "person"}}}}}})
        );
        assert_eq!(
            add_to_ddoc(Some(&body), &index).expect("ok"),
            AddOutcome::Exists
        );
        let listed = indexes_in_ddoc("_design/people", &body, false);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0].to_json(),
            json!({"ddoc": "_design/people", "name": "by-age", "type": "json",
                   "partitioned": false,
                   "def": {"fields": [{"age": "asc"}, {"name.last": "asc"}],
                           "partial_filter_selector": {"kind": {"$eq": "person"}}}})
        );
    }

    #[test]
    fn generated_names_depend_only_on_the_definition() {
        let a = new_index(json!({"index": {"fields": ["a"]}}));
        let b = new_index(json!({"index": {"fields": ["a"]}, "type": "json"}));
        let c = new_index(json!({"index": {"fields": ["b"]}}));
        assert_eq!(a.name, b.name);
        assert_ne!(a.name, c.name);
        assert_eq!(a.name.len(), 40);
        assert_eq!(a.ddoc, format!("_design/{}", a.name));
    }

    #[test]
    fn bad_index_requests_are_refused() {
        let cases = [
            (json!({"index": {"fields": "bing"}}), "invalid_sort_json"),
            (json!({"index": {"fields": [""]}}), "invalid_sort_field"),
            (
                json!({"index": {"fields": [{"a": "asc", "b": "desc"}]}}),
                "invalid_sort_field",
            ),
            (
                json!({"index": {"fields": ["a", {"b": "desc"}]}}),
                "unsupported_mixed_sort",
            ),
            (json!({"index": ["a"]}), "invalid_index"),
            (json!({"index": {}}), "missing_required_key"),
            (json!({"index": {"fields": ["a"], "x": 1}}), "invalid_key"),
            (
                json!({"index": {"fields": ["a"], "partial_filter_selector": 1}}),
                "invalid_selector_json",
            ),
            (json!({"fields": ["a"]}), "invalid_key"),
            (json!({}), "missing_required_key"),
            (
                json!({"index": {"fields": ["a"]}, "type": "geo"}),
                "invalid_index",
            ),
            (
                json!({"index": {"fields": ["a"]}, "type": 1.5}),
                "invalid_string",
            ),
            (
                json!({"index": {"fields": ["a"]}, "name": ""}),
                "invalid_empty_string",
            ),
            (
                json!({"index": {"fields": ["a"]}, "name": true}),
                "invalid_string",
            ),
            (
                json!({"index": {"fields": ["a"]}, "ddoc": "_design/"}),
                "illegal_docid",
            ),
            (
                json!({"index": {"fields": ["a"]}, "ddoc": {"a": 1}}),
                "invalid_string",
            ),
            (
                json!({"index": {"fields": ["a"]}, "w": 0}),
                "invalid_pos_integer",
            ),
        ];
        for (body, error) in cases {
            let got = NewIndex::parse(&body).expect_err("invalid");
            assert_eq!(got.error(), error, "{body}");
            assert_eq!(got.status(), 400, "{body}");
        }
    }

    #[test]
    fn removing_the_last_index_deletes_the_design_document() {
        let a = new_index(json!({"index": {"fields": ["a"]}, "ddoc": "d", "name": "a"}));
        let b = new_index(json!({"index": {"fields": ["b"]}, "ddoc": "d", "name": "b"}));
        let AddOutcome::Updated(one) = add_to_ddoc(None, &a).expect("ok") else {
            panic!("created")
        };
        let AddOutcome::Updated(two) = add_to_ddoc(Some(&one), &b).expect("ok") else {
            panic!("added")
        };
        assert_eq!(indexes_in_ddoc("_design/d", &two, false).len(), 2);
        let left = remove_from_ddoc(&two, "a").expect("ok").expect("b is left");
        assert_eq!(left, one_index_named(&b));
        assert_eq!(remove_from_ddoc(&left, "b").expect("ok"), None);
        assert_eq!(
            remove_from_ddoc(&left, "zz").expect_err("missing").status(),
            404
        );
    }

    fn one_index_named(index: &NewIndex) -> Value {
        json!({"language": "query", "views": {index.name.clone(): index.view_json()}})
    }

    #[test]
    fn other_languages_are_not_mango_design_documents() {
        let js = json!({"language": "javascript", "views": {"v": {"map": "function(d){}"}}});
        assert!(indexes_in_ddoc("_design/js", &js, false).is_empty());
        let index = new_index(json!({"index": {"fields": ["a"]}}));
        let error = add_to_ddoc(Some(&js), &index).expect_err("refused");
        assert_eq!(error.error(), "invalid_ddoc_lang");
        assert_eq!(
            error.reason(),
            "Existing design doc has an invalid language: \
             {<<108,97,110,103,117,97,103,101>>,<<106,97,118,97,115,99,114,105,112,116>>}"
        );
        let none = json!({"views": {}});
        assert!(add_to_ddoc(Some(&none), &index)
            .expect_err("refused")
            .reason()
            .ends_with(": false"));
    }
}
