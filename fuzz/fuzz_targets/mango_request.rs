#![no_main]
//! `_find` / `_explain` and `_index` request bodies: parsing, storing an index into a design
//! document and reading it back, planning over a few indexes, rendering `_explain`, decoding
//! bookmarks and extracting index keys never panic, and a stored index reads back as itself.
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use settee_mango::bookmark::Bookmark;
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, remove_from_ddoc, AddOutcome};
use settee_mango::{explain, plan, FindRequest, Index, NewIndex, Purpose, Query};

fn indexes() -> Vec<Index> {
    let mut out = vec![Index::all_docs()];
    for body in [
        json!({"index": {"fields": ["a"]}, "ddoc": "d", "name": "a"}),
        json!({"index": {"fields": ["a", "b.c"]}, "ddoc": "d", "name": "ab"}),
        json!({"index": {"fields": ["_id", "b"], "partial_filter_selector": {"a": {"$gt": 1}}}}),
    ] {
        if let Ok(index) = NewIndex::parse(&body) {
            if let Ok(AddOutcome::Updated(ddoc)) = add_to_ddoc(None, &index) {
                out.extend(indexes_in_ddoc(&index.ddoc, &ddoc, false));
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    if let Ok(index) = NewIndex::parse(&value) {
        if let Ok(AddOutcome::Updated(body)) = add_to_ddoc(None, &index) {
            // Read back as a database that is not partitioned reads it; a partitioned one
            // must read it without panicking too.
            let _ = indexes_in_ddoc(&index.ddoc, &body, true);
            let listed = indexes_in_ddoc(&index.ddoc, &body, false);
            assert_eq!(listed.len(), 1, "a stored index reads back");
            assert_eq!(listed[0].name, index.name);
            let _ = listed[0].key_of(&value);
            let _ = remove_from_ddoc(&body, &index.name);
        }
    }
    if let Ok(request) = FindRequest::parse(&value) {
        let indexes = indexes();
        for purpose in [Purpose::Find, Purpose::Explain] {
            if let Ok(plan) = plan(&Query::of(&request), &indexes, purpose) {
                let _ = explain("db", &request, &plan);
                if let Some(index) = &plan.index {
                    let _ = index.key_of(&value);
                }
            }
        }
        let _ = request.selector.matches(&value);
        if let Some(bookmark) = &request.bookmark {
            let _ = Bookmark::decode(bookmark);
        }
    }
    if let Some(text) = value.as_str() {
        let _ = Bookmark::decode(text);
    }
});
