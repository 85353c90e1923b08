//! Sort specifications, as `_find`'s `sort` and a JSON index's `fields` write them:
//! `["a", {"b.c": "desc"}]`. CouchDB sorts only by walking an index in order, so every field
//! goes one direction (`mango_sort.erl`).

use serde_json::{json, Value};

use crate::error::{MangoError, MangoResult};
use crate::selector::{parse_field, quoted_term};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Asc,
    Desc,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Asc => "asc",
            Direction::Desc => "desc",
        }
    }
}

/// One field: its name as written (`"a.b"`), its parsed path, its direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortField {
    pub name: String,
    pub path: Vec<String>,
    pub direction: Direction,
}

/// A list of fields, all in one direction (possibly empty: no sort).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sort {
    pub fields: Vec<SortField>,
}

impl Sort {
    pub fn parse(value: &Value) -> MangoResult<Sort> {
        let Value::Array(items) = value else {
            return Err(MangoError::bad_request(
                "invalid_sort_json",
                format!(
                    "Sort must be an array of sort specs, not: {}",
                    quoted_term(value)
                ),
            ));
        };
        let fields = items
            .iter()
            .map(sort_field)
            .collect::<MangoResult<Vec<_>>>()?;
        if let Some(first) = fields.first() {
            if fields
                .iter()
                .any(|field| field.direction != first.direction)
            {
                return Err(MangoError::bad_request(
                    "unsupported_mixed_sort",
                    "Sorts currently only support a single direction for all fields.",
                ));
            }
        }
        Ok(Sort { fields })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The direction of the whole sort; ascending when there is none.
    pub fn direction(&self) -> Direction {
        self.fields
            .first()
            .map_or(Direction::Asc, |field| field.direction)
    }

    pub fn names(&self) -> Vec<&str> {
        self.fields
            .iter()
            .map(|field| field.name.as_str())
            .collect()
    }

    /// `[{"a": "asc"}, ...]`, the form indexes are listed in.
    pub fn to_json_list(&self) -> Value {
        Value::Array(
            self.fields
                .iter()
                .map(|field| json!({ field.name.clone(): field.direction.as_str() }))
                .collect(),
        )
    }

    /// `{"a": "asc", ...}`, the form stored in an index's `map` and shown in `_explain`'s
    /// `opts`.
    pub fn to_json_object(&self) -> Value {
        Value::Object(
            self.fields
                .iter()
                .map(|field| (field.name.clone(), json!(field.direction.as_str())))
                .collect(),
        )
    }
}

fn sort_field(value: &Value) -> MangoResult<SortField> {
    let invalid = || {
        MangoError::bad_request(
            "invalid_sort_field",
            format!("Invalid sort field: {}", quoted_term(value)),
        )
    };
    let (name, direction) = match value {
        Value::String(name) => (name.as_str(), Direction::Asc),
        Value::Object(members) if members.len() == 1 => match members.iter().next() {
            Some((name, Value::String(direction))) if direction == "asc" => {
                (name.as_str(), Direction::Asc)
            }
            Some((name, Value::String(direction))) if direction == "desc" => {
                (name.as_str(), Direction::Desc)
            }
            _ => return Err(invalid()),
        },
        _ => return Err(invalid()),
    };
    if name.is_empty() {
        return Err(invalid());
    }
    Ok(SortField {
        name: name.to_string(),
        path: parse_field(name)?,
        direction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_parse_as_couchdb_accepts_them() {
        let sort = Sort::parse(&json!(["a", {"b.c": "asc"}])).expect("valid");
        assert_eq!(sort.names(), ["a", "b.c"]);
        assert_eq!(sort.fields[1].path, ["b", "c"]);
        assert_eq!(sort.direction(), Direction::Asc);
        assert_eq!(sort.to_json_object(), json!({"a": "asc", "b.c": "asc"}));
        assert_eq!(sort.to_json_list(), json!([{"a": "asc"}, {"b.c": "asc"}]));
        let desc = Sort::parse(&json!([{"a": "desc"}])).expect("valid");
        assert_eq!(desc.direction(), Direction::Desc);
        assert!(Sort::parse(&json!([])).expect("valid").is_empty());
    }

    #[test]
    fn bad_sorts_are_refused_with_couchdb_error_names() {
        let cases = [
            (json!("a"), "invalid_sort_json"),
            (json!({"a": "asc"}), "invalid_sort_json"),
            (json!([""]), "invalid_sort_field"),
            (json!([2]), "invalid_sort_field"),
            (json!([{"a": "up"}]), "invalid_sort_field"),
            (json!([{"a": "asc", "b": "asc"}]), "invalid_sort_field"),
            (json!(["a", {"b": "desc"}]), "unsupported_mixed_sort"),
            (json!(["a..b"]), "invalid_field_name"),
        ];
        for (sort, error) in cases {
            let got = Sort::parse(&sort).expect_err("invalid");
            assert_eq!(got.error(), error, "{sort}");
            assert_eq!(got.status(), 400);
        }
    }
}
