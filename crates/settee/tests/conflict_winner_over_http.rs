//! Conflict winner determinism through the HTTP door: the same replicated histories sent to
//! `_bulk_docs` with `new_edits=false` in two different orders (one request, or one request per
//! history) leave two documents with the same leaves, histories, winner, `_conflicts` and
//! `_deleted_conflicts`, as a replica receiving them from different peers would.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use serde_json::{json, Value};
use support::{Client, Server};

fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut client = Client::connect(addr).expect("connect");
    let body = body.map(|body| body.to_string());
    let response = client
        .request(method, path, body.as_deref().map(str::as_bytes))
        .expect("request");
    (response.status, response.json())
}

/// A random revision forest: node i has an optional parent among the earlier nodes; each
/// node's history as `_revisions`, and a deleted flag that depends on the revision only.
fn histories() -> impl Strategy<Value = Vec<(Value, bool)>> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<bool>(), "[0-9a-f]{4}"),
        1..10,
    )
    .prop_map(|nodes| {
        let nodes: Vec<(Option<usize>, String)> = nodes
            .into_iter()
            .enumerate()
            .map(|(index, (pick, root, hash))| {
                (
                    (index > 0 && !root).then(|| pick.index(index)),
                    format!("{hash}{index:02}"),
                )
            })
            .collect();
        (0..nodes.len())
            .map(|start| {
                let mut ids = Vec::new();
                let mut current = Some(start);
                while let Some(index) = current {
                    ids.push(nodes[index].1.clone());
                    current = nodes[index].0;
                }
                let deleted = nodes[start].1.starts_with(['0', '1', '2']);
                (json!({"start": ids.len(), "ids": ids}), deleted)
            })
            .collect()
    })
}

fn doc(id: &str, revisions: &Value, deleted: bool) -> Value {
    let rev = format!(
        "{}-{}",
        revisions["start"],
        revisions["ids"][0].as_str().unwrap_or("")
    );
    let mut doc = json!({"_id": id, "_rev": rev, "_revisions": revisions, "body": rev});
    if deleted {
        doc["_deleted"] = json!(true);
    }
    doc
}

fn state(addr: &str, id: &str) -> (Value, Value) {
    let (_, mut leaves) = call(
        addr,
        "GET",
        &format!("/db/{id}?open_revs=all&revs=true"),
        None,
    );
    if let Some(list) = leaves.as_array_mut() {
        for leaf in list.iter_mut() {
            if let Some(doc) = leaf["ok"].as_object_mut() {
                doc.remove("_id");
            }
        }
        list.sort_by_key(|leaf| leaf["ok"]["_rev"].as_str().unwrap_or("").to_string());
    }
    let (status, mut winner) = call(
        addr,
        "GET",
        &format!("/db/{id}?conflicts=true&deleted_conflicts=true"),
        None,
    );
    if status == 200 {
        if let Some(doc) = winner.as_object_mut() {
            doc.remove("_id");
        }
    }
    (leaves, winner)
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

#[test]
fn any_arrival_order_over_bulk_docs_picks_the_same_winner() {
    let dir = tempfile::tempdir().expect("dir");
    let server = Server::start(dir.path());
    assert_eq!(call(&server.addr, "PUT", "/db", None).0, 201);
    let addr = server.addr.clone();
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    proptest!(config, |(histories in histories(), seed in any::<u64>(), batched in any::<bool>())| {
        let case = NEXT.fetch_add(1, Ordering::Relaxed);
        let (first, second) = (format!("first{case}"), format!("second{case}"));
        let mut shuffled = histories.clone();
        let mut state_seed = seed;
        for index in (1..shuffled.len()).rev() {
            state_seed = state_seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(index, (state_seed >> 33) as usize % (index + 1));
        }
        for (id, list) in [(&first, &histories), (&second, &shuffled)] {
            let docs: Vec<Value> = list.iter().map(|(revisions, deleted)| doc(id, revisions, *deleted)).collect();
            if batched {
                let (status, rows) = call(&addr, "POST", "/db/_bulk_docs", Some(json!({"docs": docs, "new_edits": false})));
                prop_assert_eq!(status, 201, "{}", rows);
            } else {
                for one in docs {
                    let (status, rows) = call(&addr, "POST", "/db/_bulk_docs", Some(json!({"docs": [one], "new_edits": false})));
                    prop_assert_eq!(status, 201, "{}", rows);
                }
            }
        }
        prop_assert_eq!(state(&addr, &first), state(&addr, &second));
    });
    server.stop();
}
