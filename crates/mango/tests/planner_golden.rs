//! Golden plans: every case in `testdata/plans/cases.json` (indexes as `_index` bodies and a
//! `_find` body) is planned, and the plan's summary — or the error — must equal the one recorded
//! in `testdata/plans/plans.json`. Run with `SETTEE_BLESS=1` to rewrite the golden file after
//! a deliberate change, then review its diff.

use std::path::PathBuf;

use serde_json::{json, Map, Value};
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, AddOutcome};
use settee_mango::{plan, FindRequest, Index, NewIndex, Purpose, Query};

fn testdata(name: &str) -> PathBuf {
    // Where cargo runs the test from now: a build reused from a checkout at another path would
    // otherwise look in that checkout (the compile-time value).
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("testdata/plans")
        .join(name)
}

/// The indexes as the database would list them: `_all_docs`, then each `_index` body stored
/// into its design document and read back.
fn indexes(definitions: &[Value]) -> Vec<Index> {
    let mut ddocs: Map<String, Value> = Map::new();
    for definition in definitions {
        let index = NewIndex::parse(definition).expect("case index is valid");
        let current = ddocs.get(&index.ddoc);
        if let AddOutcome::Updated(body) = add_to_ddoc(current, &index).expect("adds") {
            ddocs.insert(index.ddoc.clone(), body);
        }
    }
    let mut out = vec![Index::all_docs()];
    for (id, body) in &ddocs {
        out.extend(indexes_in_ddoc(id, body, false));
    }
    out
}

fn outcome(case: &Value) -> Value {
    let request = FindRequest::parse(&case["request"]).expect("case request is valid");
    let definitions = case["indexes"].as_array().cloned().unwrap_or_default();
    match plan(&Query::of(&request), &indexes(&definitions), Purpose::Find) {
        Ok(plan) => {
            let mut summary = plan.summary();
            if let Some(warning) = plan.use_index_warning {
                summary["warning"] = json!(warning);
            }
            summary
        }
        Err(error) => json!({"error": error.error(), "reason": error.reason()}),
    }
}

#[test]
fn plans_match_the_golden_file() {
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(testdata("cases.json")).expect("cases.json"))
            .expect("cases are JSON");
    let mut got = Map::new();
    for case in &cases {
        let name = case["name"].as_str().expect("case has a name").to_string();
        assert!(!got.contains_key(&name), "duplicate case name {name}");
        got.insert(name, outcome(case));
    }
    let got = Value::Object(got);
    let golden_path = testdata("plans.json");
    if std::env::var_os("SETTEE_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&got).expect("serialises") + "\n";
        std::fs::write(&golden_path, text).expect("writes the golden file");
        return;
    }
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(&golden_path).expect("plans.json (SETTEE_BLESS=1 writes it)"),
    )
    .expect("golden file is JSON");
    let (Value::Object(got), Value::Object(golden)) = (&got, &golden) else {
        panic!("both are objects");
    };
    let mut differences = Vec::new();
    for (name, plan) in got {
        match golden.get(name) {
            Some(expected) if expected == plan => {}
            Some(expected) => {
                differences.push(format!("{name}:\n  expected {expected}\n  got      {plan}"))
            }
            None => differences.push(format!("{name}: not in the golden file")),
        }
    }
    for name in golden.keys().filter(|name| !got.contains_key(*name)) {
        differences.push(format!("{name}: in the golden file but not a case"));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
