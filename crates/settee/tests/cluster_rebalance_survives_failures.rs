//! A rebalance that does not run to its end leaves a whole cluster (docs/format/rebalance.md,
//! section 4), between real `settee serve` processes moving vbuckets as files through a
//! throttle of 1 MB/s, so that the moves take seconds:
//! - stopped midway (`POST /controller/stopRebalance`): every vbucket is wholly at its old or
//!   its new place (an active and a caught-up replica on distinct nodes), no node is ejected,
//!   every document is counted by every read path; a second rebalance then completes;
//! - its target killed (-9) midway, with a client writing throughout: the node is failed over
//!   (auto-failover at 1 s), the moves it was to receive are aborted, the rebalance ends, every
//!   vbucket has an active on the nodes left, and every write acknowledged as replicated (201)
//!   reads back, as does every document written before.

mod support;

use std::collections::BTreeMap;

use serde_json::json;
use support::rebalance::{
    counts, fill, kv_map, member_names, member_states, members, post_form, progress, rebalance,
    replicas_caught_up, start_node, start_rebalance, wait_rebalanced, Writer,
};
use support::{cluster_addr, http_json as http, until, Server};

const SECRET: &str = "the secret of the rebalance failure test";
/// About 6 MB of documents: a rebalance to a third node moves seconds' worth at 1 MB/s.
const DOCS: usize = 6000;
const DOC_BYTES: usize = 1000;
const THROTTLE: [&str; 2] = ["--rebalance-throttle-mbps", "1"];

/// Two nodes holding the bucket and a third joined, not yet holding anything; the names of
/// the three by KV address order of start.
fn cluster(dirs: &[tempfile::TempDir]) -> ([Server; 3], [String; 3], u64) {
    let first = start_node(dirs[0].path(), SECRET, None, "files", &THROTTLE);
    let join = cluster_addr(&first);
    let second = start_node(dirs[1].path(), SECRET, Some(&join), "files", &THROTTLE);
    until("two members", || (members(&first) == 2).then_some(()));
    let designs = fill(&first, DOCS, DOC_BYTES);
    let third = start_node(dirs[2].path(), SECRET, Some(&join), "files", &THROTTLE);
    until("three members", || (members(&first) == 3).then_some(()));
    let names = member_names(&first);
    let nodes = [first, second, third];
    let named = [0, 1, 2].map(|index| names[&nodes[index].kv_addr].clone());
    (nodes, named, designs)
}

/// Waits until the rebalance has finished some moves of the third node but not all.
fn midway(server: &Server, third: &str) {
    until("the rebalance midway", || {
        let shown = progress(server);
        let share = shown[third]["progress"].as_f64()?;
        assert_eq!(
            shown["status"], "running",
            "ended before it was seen midway"
        );
        (share > 0.0).then_some(())
    });
}

/// Every document written before the rebalance reads back through `server`.
fn every_document(server: &Server) {
    for n in (0..DOCS).step_by(97) {
        let (status, doc) = http(server, "GET", &format!("/db/doc-{n:04}"), None);
        assert_eq!((status, &doc["n"]), (200, &json!(n)), "{doc}");
    }
}

#[test]
fn a_stopped_rebalance_leaves_every_vbucket_whole_and_another_completes() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let ([first, second, third], [n1, n2, n3], designs) = cluster(&dirs);
    let all = [&n1, &n2, &n3];
    start_rebalance(&first, &all, &[]);
    midway(&first, &n3);
    let (status, body) = post_form(&second, "/controller/stopRebalance", "");
    assert_eq!(status, 200, "{body}");
    wait_rebalanced(&first);

    // Every vbucket whole at its old or new place; nobody ejected; every document counted.
    let states = member_states(&first);
    assert!(
        all.iter().all(|name| states[*name] == "active"),
        "{states:?}"
    );
    let (_, rows) = kv_map(&first, 3);
    assert!(rows
        .iter()
        .all(|row| row[0] >= 0 && row[1] >= 0 && row[0] != row[1]));
    let nodes = [&first, &second, &third];
    replicas_caught_up(&nodes);
    let docs = DOCS as u64;
    for node in nodes {
        until("every document counted", || {
            (counts(node) == [docs + designs, docs, docs]).then_some(())
        });
    }
    every_document(&third);

    // The rebalance can be run again, and completes.
    rebalance(&third, &all, &[]);
    let (servers, rows) = kv_map(&first, 3);
    let slot = servers
        .iter()
        .position(|addr| *addr == third.kv_addr)
        .expect("the new node serves") as i64;
    let share = rows.iter().filter(|row| row[0] == slot).count();
    assert!(
        share >= rows.len() / 4,
        "the new node holds {share} actives"
    );
    replicas_caught_up(&nodes);
    for node in nodes {
        until("every document counted", || {
            (counts(node) == [docs + designs, docs, docs]).then_some(())
        });
    }
}

#[test]
fn a_rebalance_whose_target_dies_ends_and_loses_no_replicated_write() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let ([first, second, third], [n1, n2, n3], _) = cluster(&dirs);
    let (status, body) = post_form(&first, "/settings/autoFailover", "enabled=true&timeout=1");
    assert_eq!(status, 200, "{body}");
    let writer = Writer::start(first.addr.clone(), DOCS);
    start_rebalance(&first, &[&n1, &n2, &n3], &[]);
    midway(&first, &n3);
    third.kill9();

    until("the dead target failed over", || {
        (member_states(&first)[&n3] == "failed").then_some(())
    });
    wait_rebalanced(&first);
    let written = writer.finish();
    assert!(!written.acknowledged.is_empty());
    let (servers, rows) = kv_map(&first, 2);
    assert!(servers.contains(&first.kv_addr) && servers.contains(&second.kv_addr));
    assert!(
        rows.iter().all(|row| row[0] >= 0),
        "every vbucket has an active"
    );
    for node in [&first, &second] {
        every_document(node);
        let missing: Vec<&String> = written
            .replicated
            .iter()
            .filter(|id| http(node, "GET", &format!("/db/{id}"), None).0 != 200)
            .collect();
        assert!(missing.is_empty(), "replicated writes lost: {missing:?}");
    }
    let states: BTreeMap<String, String> = member_states(&second);
    assert_eq!(states[&n1], "active");
    assert_eq!(states[&n2], "active");
}
