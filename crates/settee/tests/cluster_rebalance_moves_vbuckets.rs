//! Rebalance between real `settee serve` processes (docs/format/rebalance.md), once moving
//! vbuckets as files and once by the rebuild path: two nodes hold a bucket with one replica,
//! a view and a Mango index; a third joins and `POST /controller/rebalance` (Couchbase's form,
//! on a management port) moves vbuckets to it while a client keeps writing through the HTTP
//! door (retrying the 503 of a vbucket being taken over, as a client retries a temporary
//! failure). `/pools/default/rebalanceProgress` reports it, then `none`. Afterwards the new
//! node is the active of some vbuckets and a replica of others, every acknowledged document
//! reads back through every node, `_all_docs`, the view and `_find` count them all, and each
//! vbucket's replica holds its active's seqno. Then a node is rebalanced out
//! (`ejectedNodes`): it is ejected, and the two left serve everything. A known-node list that
//! is not the cluster's is refused with ns_server's `{"mismatch": 1}`.

mod support;

use serde_json::json;
use support::rebalance::{
    counts, fill, kv_map, member_names, member_states, members, post_form, progress, rebalance,
    replicas_caught_up, start_node, Writer,
};
use support::{cluster_addr, http_json as http, until, Server};

const SECRET: &str = "the secret of the rebalance test";
const DOCS: usize = 400;

#[test]
fn vbuckets_move_as_files_to_a_new_node_and_away_from_an_ejected_one() {
    rebalance_in_and_out("files");
}

#[test]
fn vbuckets_move_by_rebuild_to_a_new_node_and_away_from_an_ejected_one() {
    rebalance_in_and_out("rebuild");
}

fn rebalance_in_and_out(mode: &str) {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let node = |index: usize, join: Option<&str>| -> Server {
        start_node(dirs[index].path(), SECRET, join, mode, &[])
    };
    let first = node(0, None);
    let join = cluster_addr(&first);
    let second = node(1, Some(&join));
    until("two members", || (members(&first) == 2).then_some(()));
    let designs = fill(&first, DOCS, 10);
    until("the bucket on both", || {
        (http(&second, "GET", "/db", None).0 == 200).then_some(())
    });
    let docs = DOCS as u64;
    assert_eq!(counts(&first), [docs + designs, docs, docs]);

    // A third node joins; it holds nothing until the rebalance.
    let third = node(2, Some(&join));
    until("three members", || (members(&first) == 3).then_some(()));
    let names = member_names(&first);
    let name_of = |server: &Server| names[&server.kv_addr].clone();
    let [n1, n2, n3] = [&first, &second, &third].map(name_of);

    // knownNodes must be the cluster's serving members.
    let (status, body) = post_form(
        &first,
        "/controller/rebalance",
        &format!("knownNodes={}", n1.replace('@', "%40")),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("\"mismatch\":1"), "{body}");
    assert_eq!(progress(&first)["status"], "none");

    // Rebalance in, with a client writing throughout.
    let writer = Writer::start(second.addr.clone(), DOCS);
    rebalance(&third, &[&n1, &n2, &n3], &[]);
    let written = writer.finish();
    assert!(
        !written.acknowledged.is_empty(),
        "written during the rebalance"
    );

    let (servers, rows) = kv_map(&first, 3);
    let slot = servers
        .iter()
        .position(|addr| *addr == third.kv_addr)
        .expect("the new node serves") as i64;
    let actives = rows.iter().filter(|row| row[0] == slot).count();
    let replicas = rows.iter().filter(|row| row[1] == slot).count();
    assert!(
        actives > 0 && replicas > 0,
        "the new node holds {actives} actives and {replicas} replicas"
    );
    let all = [&first, &second, &third];
    replicas_caught_up(&all);
    let total = docs + written.acknowledged.len() as u64;
    for node in all {
        until("every read path counts every document", || {
            (counts(node) == [total + designs, total, total]).then_some(())
        });
        for n in (0..DOCS).step_by(37) {
            let (status, doc) = http(node, "GET", &format!("/db/doc-{n:04}"), None);
            assert_eq!((status, &doc["n"]), (200, &json!(n)), "{doc}");
        }
        let last = written.acknowledged.last().expect("a write");
        let (status, doc) = http(node, "GET", &format!("/db/{last}"), None);
        assert_eq!(status, 200, "{doc}");
    }

    // Rebalance the first node out.
    rebalance(&second, &[&n1, &n2, &n3], &[&n1]);
    assert_eq!(member_states(&second)[&n1], "ejected");
    let (servers, rows) = kv_map(&second, 2);
    assert!(!servers.contains(&first.kv_addr));
    assert!(rows
        .iter()
        .all(|row| row[0] >= 0 && row[1] >= 0 && row[0] != row[1]));
    replicas_caught_up(&[&second, &third]);
    for node in [&second, &third] {
        until("the two left count every document", || {
            (counts(node) == [total + designs, total, total]).then_some(())
        });
    }
    drop(first);
}
