//! A normalised selector written back as JSON, the way CouchDB's `mango_util:join_keys` shows it
//! in `_explain` and stores it as an index's `partial_filter_selector`: every condition explicit
//! (`{"a": 1}` reads `{"a": {"$eq": 1}}`), several conditions under `$and`, nested field names
//! joined with dots, negations pushed down to the conditions.

use serde_json::{json, Map, Number, Value};

use crate::selector::{Cond, JsonType, Node, Selector};

impl Selector {
    /// The normalised selector as JSON; `{}` for the empty selector. Parsing the result gives
    /// a selector that matches the same documents.
    pub fn to_json(&self) -> Value {
        match self.root() {
            None => Value::Object(Map::new()),
            Some(root) => node_json(root),
        }
    }
}

pub(crate) fn node_json(node: &Node) -> Value {
    match node {
        Node::And(children) => json!({ "$and": nodes_json(children) }),
        Node::Or(children) => json!({ "$or": nodes_json(children) }),
        Node::Nor(children) => json!({ "$nor": nodes_json(children) }),
        Node::Not(inner) => json!({ "$not": node_json(inner) }),
        Node::Text(arg) => json!({ "$default": arg }),
        Node::Field { path, cond } if path.is_empty() => cond_json(cond),
        Node::Field { path, cond } => {
            let mut object = Map::new();
            object.insert(join_field(path), cond_json(cond));
            Value::Object(object)
        }
    }
}

fn nodes_json(nodes: &[Node]) -> Vec<Value> {
    nodes.iter().map(node_json).collect()
}

/// Joins path segments with dots, escaping dots inside a segment so that the name parses back
/// to the same path (CouchDB joins without escaping).
pub(crate) fn join_field(path: &[String]) -> String {
    path.iter()
        .map(|segment| segment.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join(".")
}

fn integer_json(n: i128) -> Value {
    // Divisors and remainders came from JSON integers, so one of the two conversions holds.
    i64::try_from(n)
        .map(Number::from)
        .or_else(|_| u64::try_from(n).map(Number::from))
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

fn type_name(json_type: JsonType) -> &'static str {
    match json_type {
        JsonType::Null => "null",
        JsonType::Boolean => "boolean",
        JsonType::Number => "number",
        JsonType::String => "string",
        JsonType::Array => "array",
        JsonType::Object => "object",
    }
}

pub(crate) fn cond_json(cond: &Cond) -> Value {
    match cond {
        Cond::Eq(arg) => json!({ "$eq": arg }),
        Cond::Ne(arg) => json!({ "$ne": arg }),
        Cond::Lt(arg) => json!({ "$lt": arg }),
        Cond::Lte(arg) => json!({ "$lte": arg }),
        Cond::Gt(arg) => json!({ "$gt": arg }),
        Cond::Gte(arg) => json!({ "$gte": arg }),
        Cond::In(args) => json!({ "$in": args }),
        Cond::Nin(args) => json!({ "$nin": args }),
        Cond::Exists(exists) => json!({ "$exists": exists }),
        Cond::Type(json_type) => json!({ "$type": type_name(*json_type) }),
        Cond::Mod { divisor, remainder } => {
            json!({ "$mod": [integer_json(*divisor), integer_json(*remainder)] })
        }
        Cond::Regex(regex) => json!({ "$regex": regex.as_str() }),
        Cond::BeginsWith(prefix) => json!({ "$beginsWith": prefix }),
        Cond::Size(size) => json!({ "$size": size }),
        Cond::All(args) => json!({ "$all": args }),
        Cond::ElemMatch(node) => json!({ "$elemMatch": node_json(node) }),
        Cond::AllMatch(node) => json!({ "$allMatch": node_json(node) }),
        Cond::KeyMapMatch(node) => json!({ "$keyMapMatch": node_json(node) }),
        Cond::Not(inner) => json!({ "$not": cond_json(inner) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(selector: Value) -> Value {
        Selector::parse(&selector).expect("valid").to_json()
    }

    #[test]
    fn conditions_become_explicit() {
        assert_eq!(normal(json!({})), json!({}));
        assert_eq!(normal(json!({"a": 1})), json!({"a": {"$eq": 1}}));
        assert_eq!(
            normal(json!({"a": 1, "b": {"c": {"$gt": 2}}})),
            json!({"$and": [{"a": {"$eq": 1}}, {"b.c": {"$gt": 2}}]})
        );
        assert_eq!(
            normal(json!({"$not": {"a": {"$lt": 1}}})),
            json!({"a": {"$gte": 1}})
        );
        assert_eq!(
            normal(json!({"a": {"$not": {"$regex": "^x"}}})),
            json!({"a": {"$not": {"$regex": "^x"}}})
        );
        assert_eq!(
            normal(json!({"a": {"$elemMatch": {"$eq": 1}}})),
            json!({"a": {"$elemMatch": {"$eq": 1}}})
        );
        assert_eq!(
            normal(json!({"a\\.b": {"$mod": [3, -1]}})),
            json!({"a\\.b": {"$mod": [3, -1]}})
        );
    }

    #[test]
    fn the_json_form_parses_back_to_the_same_form() {
        for selector in [
            json!({"a": 1, "b": {"$in": [1, 2]}, "c.d": {"$exists": false}}),
            json!({"$or": [{"a": {"$type": "string"}}, {"$nor": [{"b": 1}, {"c": 2}]}]}),
            json!({"x": {"$allMatch": {"y": {"$size": 2}}}, "k": {"$keyMapMatch": {"$eq": "p"}}}),
            json!({"a.b\\.c": {"$all": [1]}, "$text": "x"}),
        ] {
            let once = normal(selector);
            assert_eq!(normal(once.clone()), once);
        }
    }
}
