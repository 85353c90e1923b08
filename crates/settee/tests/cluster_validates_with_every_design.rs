//! `validate_doc_update` holds on every node of a cluster (docs/format/cluster-map.md,
//! `DesignsChanged`), between three real `settee serve` processes and a bucket without
//! replicas, so the design document lives on one node only: once its PUT is answered, a write
//! refused by its function is refused whichever node holds the document's vbucket and
//! whichever node the client asked; an allowed write is stored; a new revision of the design
//! document, and its deletion, take effect on every node the same way.

mod support;

use serde_json::{json, Value};
use support::{http_json, start_three_nodes, until, Server};

const SECRET: &str = "the secret of the validation test";

fn put(server: &Server, path: &str, body: &Value) -> (u16, Value) {
    http_json(server, "PUT", path, Some(&body.to_string()))
}

/// Writes 24 new documents through each node (so every node is the active of some) and
/// returns the statuses seen.
fn statuses(nodes: &[Server], round: &str, body: &Value) -> Vec<u16> {
    let mut seen = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        for doc in 0..8 {
            let (code, answer) = put(node, &format!("/guarded/{round}-{index}-{doc}"), body);
            if code == 403 {
                assert_eq!(answer["error"], "forbidden", "{answer}");
                assert_eq!(answer["reason"], "no ok", "{answer}");
            }
            seen.push(code);
        }
    }
    seen
}

const GUARD: &str = "function(newDoc, oldDoc, userCtx) { \
    if (!newDoc._deleted && newDoc.ok !== true) { throw({forbidden: 'no ok'}); } }";

#[test]
fn a_validation_function_saved_through_one_node_holds_on_every_node() {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let nodes = start_three_nodes([dirs[0].path(), dirs[1].path(), dirs[2].path()], SECRET);
    let (code, body) = http_json(&nodes[0], "PUT", "/guarded?n=1&q=16", None);
    assert_eq!(code, 201, "{body}");
    until("every node has the bucket", || {
        nodes
            .iter()
            .all(|node| http_json(node, "GET", "/guarded", None).0 == 200)
            .then_some(())
    });

    let (code, saved) = put(
        &nodes[1],
        "/guarded/_design/guard",
        &json!({"validate_doc_update": GUARD}),
    );
    assert_eq!(code, 201, "{saved}");
    let refused = statuses(&nodes, "without", &json!({"ok": false}));
    assert!(refused.iter().all(|code| *code == 403), "{refused:?}");
    let allowed = statuses(&nodes, "with", &json!({"ok": true}));
    assert!(allowed.iter().all(|code| *code == 201), "{allowed:?}");

    // A new revision that allows everything: allowed everywhere once it is answered.
    let rev = saved["rev"].as_str().expect("rev");
    let open = json!({"_rev": rev, "validate_doc_update": "function() {}"});
    let (code, opened) = put(&nodes[2], "/guarded/_design/guard", &open);
    assert_eq!(code, 201, "{opened}");
    let after = statuses(&nodes, "opened", &json!({"ok": false}));
    assert!(after.iter().all(|code| *code == 201), "{after:?}");

    // The guard again, then deleted: nothing refused after the deletion.
    let rev = opened["rev"].as_str().expect("rev");
    let guard = json!({"_rev": rev, "validate_doc_update": GUARD});
    let (code, guarded) = put(&nodes[0], "/guarded/_design/guard", &guard);
    assert_eq!(code, 201, "{guarded}");
    let again = statuses(&nodes, "again", &json!({}));
    assert!(again.iter().all(|code| *code == 403), "{again:?}");
    let rev = guarded["rev"].as_str().expect("rev");
    let path = format!("/guarded/_design/guard?rev={rev}");
    let (code, deleted) = http_json(&nodes[1], "DELETE", &path, None);
    assert_eq!(code, 200, "{deleted}");
    let gone = statuses(&nodes, "gone", &json!({}));
    assert!(gone.iter().all(|code| *code == 201), "{gone:?}");
}
