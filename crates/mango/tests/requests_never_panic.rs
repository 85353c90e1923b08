//! The `mango_request` fuzz target's body on stable Rust: arbitrary JSON, its object keys drawn
//! from Mango's vocabulary so that it often gets deep, goes as `_find`, `_explain` and `_index`
//! bodies through parsing, storing, planning, `_explain` and key extraction without panicking,
//! and a stored index reads back as itself.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use settee_mango::bookmark::Bookmark;
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, remove_from_ddoc, AddOutcome};
use settee_mango::{explain, plan, FindRequest, Index, NewIndex, Purpose, Query};

const KEYS: &[&str] = &[
    "selector",
    "use_index",
    "bookmark",
    "limit",
    "skip",
    "sort",
    "fields",
    "r",
    "conflicts",
    "stale",
    "update",
    "stable",
    "execution_stats",
    "allow_fallback",
    "index",
    "ddoc",
    "name",
    "type",
    "partial_filter_selector",
    "a",
    "b",
    "b.c",
    "_id",
    "$eq",
    "$ne",
    "$gt",
    "$lte",
    "$in",
    "$nin",
    "$or",
    "$and",
    "$not",
    "$nor",
    "$elemMatch",
    "$regex",
    "$size",
    "$mod",
    "$type",
    "$exists",
    "$all",
    "$allMatch",
    "$keyMapMatch",
    "$beginsWith",
    "$text",
    "asc",
    "desc",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..30).prop_map(|n| json!(n)),
        Just(json!(1.5)),
        prop::sample::select(KEYS.to_vec()).prop_map(|s| json!(s)),
        "[a-c.$_\\\\]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..5).prop_map(
                |members| {
                    Value::Object(
                        members
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect::<Map<_, _>>(),
                    )
                }
            ),
        ]
    })
}

fn indexes() -> Vec<Index> {
    let mut out = vec![Index::all_docs()];
    for body in [
        json!({"index": {"fields": ["a"]}, "ddoc": "d", "name": "a"}),
        json!({"index": {"fields": ["a", "b.c"]}, "ddoc": "d", "name": "ab"}),
        json!({"index": {"fields": ["_id", "b"], "partial_filter_selector": {"a": {"$gt": 1}}}}),
    ] {
        let index = NewIndex::parse(&body).expect("valid");
        if let Ok(AddOutcome::Updated(ddoc)) = add_to_ddoc(None, &index) {
            out.extend(indexes_in_ddoc(&index.ddoc, &ddoc, false));
        }
    }
    out
}

fn exercise(value: &Value) {
    if let Ok(index) = NewIndex::parse(value) {
        if let Ok(AddOutcome::Updated(body)) = add_to_ddoc(None, &index) {
            let listed = indexes_in_ddoc(&index.ddoc, &body, false);
            assert_eq!(listed.len(), 1, "a stored index reads back: {body}");
            assert_eq!(listed[0].name, index.name);
            let _ = listed[0].key_of(value);
            let _ = remove_from_ddoc(&body, &index.name);
        }
    }
    if let Ok(request) = FindRequest::parse(value) {
        let indexes = indexes();
        for purpose in [Purpose::Find, Purpose::Explain] {
            if let Ok(plan) = plan(&Query::of(&request), &indexes, purpose) {
                let _ = explain("db", &request, &plan);
                if let Some(index) = &plan.index {
                    let _ = index.key_of(value);
                }
            }
        }
        let _ = request.selector.matches(value);
        if let Some(bookmark) = &request.bookmark {
            let _ = Bookmark::decode(bookmark);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn find_and_index_bodies_never_panic(value in json_value()) {
        exercise(&value);
        exercise(&json!({"selector": value.clone()}));
        exercise(&json!({"index": {"fields": value.clone()}}));
        exercise(&json!({"index": {"fields": ["a"], "partial_filter_selector": value}}));
    }
}
