//! Random JSON values, document bodies and selectors shared by the property tests.
#![allow(dead_code)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, AddOutcome};
use settee_mango::{Index, NewIndex};

pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(|n| json!(n)),
        prop_oneof![Just(1.5), Just(-0.5), Just(2.0)].prop_map(|f| json!(f)),
        prop_oneof![
            Just(""),
            Just("a"),
            Just("A"),
            Just("ab"),
            Just("b"),
            Just("é"),
            Just("m"),
            Just("z")
        ]
        .prop_map(|s| json!(s)),
    ]
}

pub fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => scalar(),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        1 => scalar().prop_map(|x| json!({"x": x})),
    ]
}

pub const FIELDS: [&str; 7] = ["a", "a", "b", "c", "n.x", "_id", "_id"];

pub fn doc() -> impl Strategy<Value = Map<String, Value>> {
    (
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
    )
        .prop_map(|(a, b, c, nx)| {
            let mut doc = Map::new();
            for (name, v) in [("a", a), ("b", b), ("c", c)] {
                if let Some(v) = v {
                    doc.insert(name.into(), v);
                }
            }
            if let Some(x) = nx {
                doc.insert("n".into(), json!({ "x": x }));
            }
            doc
        })
}

pub fn id_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => prop_oneof![Just("d1"), Just("d3"), Just("e"), Just("D2"), Just("d")]
            .prop_map(|s| json!(s)),
        1 => scalar(),
    ]
}

pub fn condition(field: &'static str) -> BoxedStrategy<Value> {
    let v = if field == "_id" {
        id_value().boxed()
    } else {
        value().boxed()
    };
    let values = prop::collection::vec(v.clone(), 0..4);
    prop_oneof![
        v.clone().prop_map(|v| v),
        v.clone().prop_map(|v| json!({"$eq": v})),
        v.clone().prop_map(|v| json!({"$ne": v})),
        v.clone().prop_map(|v| json!({"$gt": v})),
        v.clone().prop_map(|v| json!({"$gte": v})),
        v.clone().prop_map(|v| json!({"$lt": v})),
        v.clone().prop_map(|v| json!({"$lte": v})),
        values.clone().prop_map(|vs| json!({"$in": vs})),
        values.prop_map(|vs| json!({"$nin": vs})),
        any::<bool>().prop_map(|b| json!({"$exists": b})),
        prop_oneof![
            Just("null"),
            Just("boolean"),
            Just("number"),
            Just("string"),
            Just("array"),
            Just("object")
        ]
        .prop_map(|t| json!({"$type": t})),
        prop_oneof![Just(""), Just("a"), Just("d"), Just("é")]
            .prop_map(|p| json!({"$beginsWith": p})),
        (0u64..3).prop_map(|n| json!({"$size": n})),
        v.clone().prop_map(|v| json!({"$elemMatch": {"$eq": v}})),
        v.clone().prop_map(|v| json!({"$not": {"$gt": v}})),
        (v.clone(), v).prop_map(|(x, y)| json!({"$gt": x, "$lte": y})),
    ]
    .boxed()
}

pub fn leaf() -> BoxedStrategy<Value> {
    prop::sample::select(FIELDS.to_vec())
        .prop_flat_map(|field| condition(field).prop_map(move |cond| json!({ field: cond })))
        .boxed()
}

pub fn selector() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|xs| json!({"$and": xs})),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|xs| json!({"$or": xs})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|xs| json!({"$nor": xs})),
            inner.clone().prop_map(|x| json!({"$not": x})),
            (inner.clone(), inner).prop_map(|(x, y)| {
                // Two members: an implicit $and (when the names differ).
                let mut object = x.as_object().cloned().unwrap_or_default();
                for (k, v) in y.as_object().cloned().unwrap_or_default() {
                    object.entry(k).or_insert(v);
                }
                Value::Object(object)
            }),
        ]
    })
}

/// `_all_docs` and the JSON indexes among `defs` (`POST /_index` bodies) that `chosen` turns
/// on, added to their design documents as `POST /{db}/_index` would add them.
pub fn indexes_from(defs: &[&str], chosen: &[bool]) -> Vec<Index> {
    let mut ddocs: Map<String, Value> = Map::new();
    for (def, _) in defs.iter().zip(chosen).filter(|(_, on)| **on) {
        let index = NewIndex::parse(&serde_json::from_str(def).expect("json")).expect("valid");
        if let AddOutcome::Updated(body) =
            add_to_ddoc(ddocs.get(&index.ddoc), &index).expect("adds")
        {
            ddocs.insert(index.ddoc.clone(), body);
        }
    }
    let mut out = vec![Index::all_docs()];
    for (id, body) in &ddocs {
        out.extend(indexes_in_ddoc(id, body, false));
    }
    out
}
