//! The planner against the matcher, on random documents, selectors and index sets, without I/O:
//! for every document the chosen index holds, the selector matches exactly when the document's
//! key lies in one of the plan's ranges and the document passes the residual selector; every
//! document the selector matches is in the index when the index was chosen as usable; and the
//! ranges are sorted and disjoint.

mod common;

use common::{doc, selector};
use proptest::prelude::*;
use serde_json::{json, Value};
use settee_mango::planner::Ranges;
use settee_mango::ranges::{compare_keys, KeyPart};
use settee_mango::{plan, FindRequest, Index, IndexKind, Purpose, Query};

const INDEX_DEFS: [&str; 7] = [
    r#"{"index": {"fields": ["a"]}, "ddoc": "d", "name": "a"}"#,
    r#"{"index": {"fields": ["a", "b"]}, "ddoc": "d", "name": "ab"}"#,
    r#"{"index": {"fields": ["b"]}, "ddoc": "e", "name": "b"}"#,
    r#"{"index": {"fields": ["n.x", "c"]}, "ddoc": "e", "name": "nxc"}"#,
    r#"{"index": {"fields": ["c", "_id"]}, "ddoc": "f", "name": "cid"}"#,
    r#"{"index": {"fields": [{"b": "desc"}, {"a": "desc"}]}, "ddoc": "f", "name": "ba"}"#,
    r#"{"index": {"fields": ["a"], "partial_filter_selector": {"c": {"$exists": true}}}, "ddoc": "p", "name": "pa"}"#,
];

fn indexes(chosen: &[bool]) -> Vec<Index> {
    common::indexes_from(&INDEX_DEFS, chosen)
}

fn in_ranges(ranges: &Ranges, key: &[Value]) -> bool {
    match ranges {
        Ranges::Ids(ranges) => {
            let id = key[0].as_str().unwrap_or_default();
            ranges.iter().any(|range| range.contains(id))
        }
        Ranges::Keys(ranges) => ranges.iter().any(|range| range.contains(key)),
    }
}

fn disjoint(ranges: &Ranges) -> bool {
    match ranges {
        Ranges::Ids(_) => true,
        Ranges::Keys(ranges) => ranges.windows(2).all(|pair| {
            let start: Vec<KeyPart> = pair[1].start.iter().cloned().map(KeyPart::Value).collect();
            compare_keys(&pair[0].end, &start).is_lt()
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6000))]

    #[test]
    fn ranges_and_residual_decide_exactly_what_the_selector_matches(
        selector in selector(),
        bodies in prop::collection::vec(doc(), 1..12),
        chosen in prop::collection::vec(any::<bool>(), INDEX_DEFS.len()),
        use_partial in any::<bool>(),
    ) {
        let ids = ["d1", "d3", "e", "D2", "d", "d10", "_design/x", "f", "g", "h", "i", "j"];
        let docs: Vec<Value> = bodies
            .into_iter()
            .zip(ids)
            .map(|(mut body, id)| {
                body.insert("_id".into(), json!(id));
                Value::Object(body)
            })
            .collect();
        let mut body = json!({"selector": selector});
        if use_partial {
            body["use_index"] = json!("p/pa");
        }
        let Ok(request) = FindRequest::parse(&body) else {
            // Selectors the generator gets wrong (`$size` on a negative...) are not the point.
            return Ok(());
        };
        let indexes = indexes(&chosen);
        let plan = plan(&Query::of(&request), &indexes, Purpose::Find).expect("no sort: plans");
        let index = plan.index.clone().expect("an index");
        prop_assert!(disjoint(&plan.ranges), "ranges overlap: {:?}", plan.ranges);
        let named_partial = index.partial_filter.is_some();
        for doc in &docs {
            let matches = request.selector.matches(doc);
            let is_design = doc["_id"].as_str().is_some_and(|id| id.starts_with("_design/"));
            let Some(key) = index.key_of(doc) else {
                // Not in the index: a usable JSON index must not be missing a match (design
                // documents aside, which `_find` never returns).
                prop_assert!(
                    !matches || named_partial || is_design || index.kind == IndexKind::Special,
                    "{} matches {} but is not in {}", doc, request.selector.to_json(), index.name
                );
                continue;
            };
            let found = in_ranges(&plan.ranges, &key) && plan.residual.matches(doc);
            prop_assert_eq!(
                found, matches,
                "doc {} key {:?} selector {} plan {}", doc, key,
                request.selector.to_json(), plan.summary()
            );
        }
    }
}

#[test]
fn unions_past_the_limit_become_their_hull() {
    let values: Vec<i64> = (0..1500).collect();
    let small: Vec<i64> = (0..50).collect();
    let indexes = indexes(&[true, true, false, false, false, false, false]);
    for selector in [
        json!({"a": {"$in": values}}),
        json!({"a": {"$in": small}, "b": {"$in": small}}),
    ] {
        let request = FindRequest::parse(&json!({"selector": selector})).expect("valid");
        let plan = plan(&Query::of(&request), &indexes, Purpose::Find).expect("plans");
        assert!(plan.hulled, "{} ranges", plan.ranges.len());
        assert!(plan.ranges.len() <= settee_mango::ranges::RANGES_MAX);
        assert!(!plan.residual.is_empty(), "a hull decides nothing exactly");
        for a in [0, 49, 1499] {
            let doc = json!({"_id": "x", "a": a, "b": 7});
            let key = plan
                .index
                .as_ref()
                .and_then(|i| i.key_of(&doc))
                .expect("indexed");
            assert!(in_ranges(&plan.ranges, &key), "{a} must stay in range");
        }
    }
    // Under the limit, each value keeps its own range.
    let request = FindRequest::parse(&json!({"selector": {"a": {"$in": small}}})).expect("ok");
    let plan = plan(&Query::of(&request), &indexes, Purpose::Find).expect("plans");
    assert!(!plan.hulled);
    assert_eq!(plan.ranges.len(), 51, "50 values and the arrays");
}
