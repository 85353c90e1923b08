//! A purge reaches the replicas (docs/format/replica.md, "Purges reach the replicas"), between
//! three real `settee serve` processes: `PUT /db?n=2` (1 replica); documents written over HTTP,
//! a third of them purged whole with `POST /db/_purge`; every replica vbucket catches up with
//! its active (the purge markers raise the actives' seqnos, and the replicas follow them); then
//! a node holding actives of purged documents is killed (-9) and failed over, its replicas are
//! promoted, and the purged documents stay gone (404, and out of `_changes` and `doc_count`)
//! while every other document reads back from its new active.

mod support;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use support::kv::{all_vb_seqnos, Kv};
use support::{call_json, until, Client, Server};

const SECRET: &str = "the secret of the purge test";
const DOCS: usize = 60;
const VBUCKETS: u16 = 16;

fn kv(server: &Server) -> Kv {
    Kv::open(&server.kv_addr, "admin", "secret", "db")
}

fn id(index: usize) -> String {
    format!("doc-{index:03}")
}

/// Every third document is purged.
fn purged(index: usize) -> bool {
    index.is_multiple_of(3)
}

fn vbucket_of(index: usize) -> u16 {
    settee_engine::vbucket::vbucket_of(id(index).as_bytes(), VBUCKETS)
}

/// Which of our nodes listens on `kv_addr`.
fn index_of(nodes: &[Option<Server>], kv_addr: &str) -> usize {
    nodes
        .iter()
        .position(|node| node.as_ref().is_some_and(|node| node.kv_addr == kv_addr))
        .expect("a listed node is one of ours")
}

fn node(nodes: &[Option<Server>], index: usize) -> &Server {
    nodes[index].as_ref().expect("a running node")
}

/// Each vbucket's (active, replica) node as the map says, by our node indexes.
fn placement(nodes: &[Option<Server>], from: usize) -> Vec<(usize, usize)> {
    let (servers, rows) = support::kv::vbucket_map(&mut kv(node(nodes, from)));
    let server_of: Vec<usize> = servers.iter().map(|addr| index_of(nodes, addr)).collect();
    let at = |slot: i64| server_of[usize::try_from(slot).expect("a node")];
    rows.iter().map(|row| (at(row[0]), at(row[1]))).collect()
}

/// Waits until every replica vbucket holds its active's high seqno (GET_ALL_VB_SEQNOS by
/// state: 1 active, 2 replica).
fn replicas_caught_up(nodes: &[Option<Server>], placed: &[(usize, usize)]) {
    until("replicas caught up", || {
        let seqnos = |state: u32| -> Vec<BTreeMap<u16, u64>> {
            (0..3)
                .map(|index| all_vb_seqnos(&mut kv(node(nodes, index)), state))
                .collect()
        };
        let (actives, replicas) = (seqnos(1), seqnos(2));
        let caught_up = placed.iter().enumerate().all(|(vb, (active, replica))| {
            let vb = u16::try_from(vb).expect("vb");
            let written = actives[*active].get(&vb).copied();
            written.is_some() && replicas[*replica].get(&vb) == written.as_ref()
        });
        caught_up.then_some(())
    });
}

#[test]
fn purged_documents_stay_gone_after_a_failover() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut nodes: Vec<Option<Server>> =
        support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET)
            .map(Some)
            .into();
    let path = format!("/db?n=2&q={VBUCKETS}");
    let (created, body) = call_json(node(&nodes, 0), "PUT", &path, None);
    assert_eq!(created, 201, "{body}");
    for index in 0..3 {
        until("the bucket everywhere", || {
            let (status, _) = call_json(node(&nodes, index), "GET", "/db", None);
            (status == 200).then_some(())
        });
    }

    // The documents, through one node (each is forwarded to its active), then the purge.
    let docs: Vec<Value> = (0..DOCS)
        .map(|index| json!({"_id": id(index), "n": index}))
        .collect();
    let (status, saved) = until("the documents saved", || {
        let (status, saved) = call_json(
            node(&nodes, 0),
            "POST",
            "/db/_bulk_docs",
            Some(json!({ "docs": docs })),
        );
        let all_ok = saved
            .as_array()
            .is_some_and(|rows| rows.len() == DOCS && rows.iter().all(|row| row["ok"] == true));
        (status == 201 && all_ok).then_some((status, saved))
    });
    assert_eq!(status, 201);
    let revs: BTreeMap<String, String> = saved
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let id = row["id"].as_str().expect("id").to_string();
            (id, row["rev"].as_str().expect("rev").to_string())
        })
        .collect();
    let purge: serde_json::Map<String, Value> = (0..DOCS)
        .filter(|index| purged(*index))
        .map(|index| (id(index), json!([revs[&id(index)]])))
        .collect();
    let (status, answer) = call_json(
        node(&nodes, 1),
        "POST",
        "/db/_purge",
        Some(Value::Object(purge.clone())),
    );
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer["purged"].as_object().map(serde_json::Map::len),
        Some(purge.len()),
        "{answer}"
    );

    // The replicas follow the purges (each one a seqno of its vbucket now).
    let placed = placement(&nodes, 0);
    replicas_caught_up(&nodes, &placed);

    // Fail over a node (not the Raft leader) that is the active of some purged documents: its
    // replicas, which held those documents before the purge, become their actives.
    let (_, cluster) = call_json(node(&nodes, 0), "GET", "/_node/_local/_cluster", None);
    let leader_id = cluster["leader"].as_u64().expect("a leader");
    let ids: Vec<u64> = (0..3)
        .map(|index| {
            let (_, status) = call_json(node(&nodes, index), "GET", "/_node/_local/_cluster", None);
            status["node"].as_u64().expect("a node id")
        })
        .collect();
    let leader = ids.iter().position(|id| *id == leader_id).expect("leader");
    let actives_of_purged = |index: usize| {
        (0..DOCS)
            .filter(|doc| purged(*doc) && placed[usize::from(vbucket_of(*doc))].0 == index)
            .count()
    };
    let victim = (0..3)
        .filter(|index| *index != leader)
        .max_by_key(|index| actives_of_purged(*index))
        .expect("a follower");
    assert!(
        actives_of_purged(victim) > 0,
        "the failed node holds no purged document: the test would prove nothing"
    );
    let victim_name = cluster["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|member| member["id"].as_u64() == Some(ids[victim]))
        .and_then(|member| member["name"].as_str())
        .expect("the victim's name")
        .to_string();
    nodes[victim].take().expect("running").kill9();
    let mut mgmt = Client::connect(&node(&nodes, leader).mgmt_addr).expect("connect");
    let form = format!("otpNode={}", victim_name.replace('@', "%40"));
    let failed = mgmt
        .request_with(
            "POST",
            "/controller/failOver",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some(form.as_bytes()),
        )
        .expect("failOver");
    assert_eq!(
        failed.status,
        200,
        "{}",
        String::from_utf8_lossy(&failed.body)
    );
    until("the failover", || {
        let (servers, rows) = support::kv::vbucket_map(&mut kv(node(&nodes, leader)));
        (servers.len() == 2 && rows.iter().all(|row| row[0] >= 0)).then_some(())
    });

    // Purged documents stay gone, the others are all there, through either survivor.
    let survivors: Vec<usize> = (0..3).filter(|index| *index != victim).collect();
    for index in 0..DOCS {
        let survivor = node(&nodes, survivors[index % 2]);
        let (status, body) = until("a document read", || {
            let (status, body) = call_json(survivor, "GET", &format!("/db/{}", id(index)), None);
            // 503 only while a node still follows the new map.
            (status != 503).then_some((status, body))
        });
        if purged(index) {
            assert_eq!(status, 404, "{} came back: {body}", id(index));
        } else {
            assert_eq!(status, 200, "{}: {body}", id(index));
            assert_eq!(body["n"], index, "{body}");
        }
    }
    let survivor = node(&nodes, survivors[0]);
    let (_, info) = call_json(survivor, "GET", "/db", None);
    let kept = (0..DOCS).filter(|index| !purged(*index)).count();
    assert_eq!(info["doc_count"], kept, "{info}");
    let (_, changes) = call_json(survivor, "GET", "/db/_changes", None);
    let listed: Vec<&str> = changes["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| row["id"].as_str().expect("id"))
        .collect();
    assert_eq!(listed.len(), kept, "{changes}");
    assert!(
        (0..DOCS)
            .filter(|index| purged(*index))
            .all(|index| !listed.contains(&id(index).as_str())),
        "{changes}"
    );
    for server in nodes.into_iter().flatten() {
        server.stop();
    }
}
