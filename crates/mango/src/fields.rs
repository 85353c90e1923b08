//! `_find`'s `fields`: which parts of each matching document to return (`mango_fields.erl`).
//! An empty list returns whole documents; otherwise only the named paths, nested objects
//! rebuilt around them, and `_id`/`_rev` only when asked for.

use serde_json::{Map, Value};

use crate::error::{MangoError, MangoResult};
use crate::selector::{lookup, parse_field, quoted_term, Lookup};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Fields {
    /// Whole documents.
    #[default]
    All,
    /// These fields, by name as written and parsed path, in request order.
    Only(Vec<(String, Vec<String>)>),
}

impl Fields {
    pub fn parse(value: &Value) -> MangoResult<Fields> {
        let Value::Array(items) = value else {
            return Err(MangoError::bad_request(
                "invalid_fields",
                format!(
                    "Fields must be an array of strings, not: {}",
                    quoted_term(value)
                ),
            ));
        };
        if items.is_empty() {
            return Ok(Fields::All);
        }
        items
            .iter()
            .map(|item| match item {
                Value::String(name) => Ok((name.clone(), parse_field(name)?)),
                _ => Err(MangoError::bad_request(
                    "invalid_field",
                    format!("Invalid JSON for field spec: {}", quoted_term(item)),
                )),
            })
            .collect::<MangoResult<Vec<_>>>()
            .map(Fields::Only)
    }

    /// The field names as `_explain` lists them (`[]` for whole documents).
    pub fn names(&self) -> Vec<&str> {
        match self {
            Fields::All => Vec::new(),
            Fields::Only(fields) => fields.iter().map(|(name, _)| name.as_str()).collect(),
        }
    }

    /// The projected document. Paths that are missing, or run into a scalar, are left out.
    pub fn extract(&self, doc: Value) -> Value {
        let Fields::Only(fields) = self else {
            return doc;
        };
        let mut out = Value::Object(Map::new());
        for (_, path) in fields {
            if let Lookup::Found(value) = lookup(&doc, path) {
                set_field(&mut out, path, value.clone());
            }
        }
        out
    }
}

/// Sets `path` in `target`, creating (or replacing non-object values with) objects on the way.
pub(crate) fn set_field(target: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *target = value;
        return;
    };
    let mut current = target;
    for name in parents {
        if !current.is_object() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(members) = current else {
            return;
        };
        current = members
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !current.is_object() {
        *current = Value::Object(Map::new());
    }
    if let Value::Object(members) = current {
        members.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn projections_keep_only_the_named_paths() {
        let doc = json!({"_id": "x", "_rev": "1-a", "a": 1, "b": {"c": 2, "d": 3}, "e": [5, 6]});
        let fields = Fields::parse(&json!(["_id", "b.c", "missing", "a.z", "e.1"])).expect("ok");
        assert_eq!(
            fields.extract(doc.clone()),
            json!({"_id": "x", "b": {"c": 2}, "e": {"1": 6}})
        );
        assert_eq!(
            Fields::parse(&json!([])).expect("ok").extract(doc.clone()),
            doc
        );
        assert_eq!(fields.names(), ["_id", "b.c", "missing", "a.z", "e.1"]);
    }

    #[test]
    fn bad_fields_are_refused() {
        assert_eq!(
            Fields::parse(&json!("a")).expect_err("bad").error(),
            "invalid_fields"
        );
        assert_eq!(
            Fields::parse(&json!([1])).expect_err("bad").error(),
            "invalid_field"
        );
        assert_eq!(
            Fields::parse(&json!(["a..b"])).expect_err("bad").error(),
            "invalid_field_name"
        );
    }
}
