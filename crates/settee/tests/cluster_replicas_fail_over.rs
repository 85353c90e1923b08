//! Replica vbuckets follow the committed cluster map and failover promotes them, between three
//! real `settee serve` processes: `PUT /db?n=2` (1 replica); documents written over KV to each
//! key's active reach its replica (every replica vbucket's seqno catches up with its active's,
//! as GET_ALL_VB_SEQNOS reports them by state); a replica vbucket refuses KV writes (an HTTP
//! write through its node is forwarded to the active);
//! then one node is killed (-9) and failed over (`POST /controller/failOver` on the leader's
//! management port), its replicas are promoted, every vbucket has an active again and every
//! document reads back from it. Then the auto-failover timeout is set to 1 s over
//! `/settings/autoFailover`; the killed node restarts fenced, is added back
//! (`/controller/reAddNode`, delta recovery) and catches up as a replica; the third node is
//! killed and the auto-failover alone promotes its replicas, some on the added-back node.

mod support;

use std::collections::BTreeMap;

use serde_json::Value;
use settee_kv_codec::{opcode, status};
use support::kv::{all_vb_seqnos, store_extras, Kv};
use support::{http_json as http, until, Client, Server};

const SECRET: &str = "the secret of the failover test";
const DOCS: usize = 300;
const VBUCKETS: u16 = 64;

fn kv(server: &Server) -> Kv {
    Kv::open(&server.kv_addr, "admin", "secret", "db")
}

/// (serverList as KV addresses, each vbucket's row) of a node's terse config.
fn vbucket_map(server: &Server) -> (Vec<String>, Vec<Vec<i64>>) {
    support::kv::vbucket_map(&mut kv(server))
}

/// The high seqno of each vbucket a node holds in `state` (1 active, 2 replica).
fn seqnos(server: &Server, state: u32) -> BTreeMap<u16, u64> {
    all_vb_seqnos(&mut kv(server), state)
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

/// Reads every document from its active as the map (`servers`, `rows`) places it, waiting
/// out NOT_MY_VBUCKET while a node still follows the map.
fn read_back_every_document(
    nodes: &[Option<Server>],
    servers: &[String],
    rows: &[Vec<i64>],
    when: &str,
) {
    let server_of: Vec<usize> = servers.iter().map(|addr| index_of(nodes, addr)).collect();
    let mut connections: BTreeMap<usize, Kv> = server_of
        .iter()
        .map(|index| (*index, kv(node(nodes, *index))))
        .collect();
    for index in 0..DOCS {
        let vb = settee_engine::vbucket::vbucket_of(&key(index), VBUCKETS);
        let active = rows[usize::from(vb)][0];
        let target = server_of[usize::try_from(active).expect("an active")];
        let connection = connections.get_mut(&target).expect("a connection");
        let read = until("a document read", || {
            let reply = connection.call(opcode::GET, &key(index), &[], &[], 0);
            (reply.status != status::NOT_MY_VBUCKET).then_some(reply)
        });
        assert_eq!(read.status, status::SUCCESS, "doc {index} {when}");
        assert_eq!(read.value, value(index), "doc {index} {when}");
    }
}

fn key(index: usize) -> Vec<u8> {
    format!("doc-{index:04}").into_bytes()
}

fn value(index: usize) -> Vec<u8> {
    format!("{{\"n\":{index}}}").into_bytes()
}

#[test]
fn replicas_follow_the_map_and_failover_promotes_them() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut nodes: Vec<Option<Server>> =
        support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET)
            .map(Some)
            .into();
    let (created, body) = http(node(&nodes, 0), "PUT", "/db?n=2", None);
    assert_eq!(created, 201, "{body}");
    for index in 0..3 {
        until("the bucket everywhere", || {
            let (status, _) = http(node(&nodes, index), "GET", "/db", None);
            (status == 200).then_some(())
        });
    }

    // Each document to its active node.
    let (servers, rows) = vbucket_map(node(&nodes, 0));
    let server_of: Vec<usize> = servers.iter().map(|addr| index_of(&nodes, addr)).collect();
    let active_of = |rows: &[Vec<i64>], vb: u16| rows[usize::from(vb)][0];
    let mut connections: Vec<Kv> = (0..3).map(|index| kv(node(&nodes, index))).collect();
    for index in 0..DOCS {
        let vb = settee_engine::vbucket::vbucket_of(&key(index), VBUCKETS);
        let target = server_of[usize::try_from(active_of(&rows, vb)).expect("an active")];
        until("a stored document", || {
            let reply = connections[target].call(
                opcode::SET,
                &key(index),
                &store_extras(0, 0),
                &value(index),
                0,
            );
            // NOT_MY_VBUCKET only while the node is still following the map.
            assert!(
                matches!(reply.status, status::SUCCESS | status::NOT_MY_VBUCKET),
                "SET status {:#x}",
                reply.status
            );
            (reply.status == status::SUCCESS).then_some(())
        });
    }

    // Every replica vbucket catches up with its active.
    until("replicas caught up", || {
        let actives: Vec<_> = (0..3).map(|i| seqnos(node(&nodes, i), 1)).collect();
        let replicas: Vec<_> = (0..3).map(|i| seqnos(node(&nodes, i), 2)).collect();
        let caught_up = (0..VBUCKETS).all(|vb| {
            let row = &rows[usize::from(vb)];
            let active = server_of[usize::try_from(row[0]).expect("an active")];
            let replica = server_of[usize::try_from(row[1]).expect("a replica")];
            let written = actives[active].get(&vb).copied();
            written.is_some() && replicas[replica].get(&vb).copied() == written
        });
        caught_up.then_some(())
    });

    // A replica vbucket refuses KV writes; an HTTP request reaching the replica's node is
    // forwarded to the active, which answers it (a PUT without a revision: 409).
    let vb = settee_engine::vbucket::vbucket_of(&key(0), VBUCKETS);
    let replica = server_of[usize::try_from(rows[usize::from(vb)][1]).expect("a replica")];
    let refused = connections[replica].call(opcode::SET, &key(0), &store_extras(0, 0), b"{}", 0);
    assert_eq!(refused.status, status::NOT_MY_VBUCKET);
    let doc = format!("/db/{}", String::from_utf8(key(0)).expect("utf-8"));
    let (status, body) = http(node(&nodes, replica), "PUT", &doc, Some("{\"n\":-1}"));
    assert_eq!(status, 409, "{body}");
    let (status, body) = http(node(&nodes, replica), "GET", &doc, None);
    assert_eq!((status, &body["n"]), (200, &Value::from(0)), "{body}");

    // Kill a node that does not lead the Raft group, then fail it over on the leader's
    // management port (Couchbase's hard failover); the auto-failover (5 s) would too.
    let (_, status) = http(node(&nodes, 0), "GET", "/_node/_local/_cluster", None);
    let leader_id = status["leader"].as_u64().expect("a leader");
    let node_id = |index: usize| {
        let (_, status) = http(node(&nodes, index), "GET", "/_node/_local/_cluster", None);
        status["node"].as_u64().expect("a node id")
    };
    let ids: Vec<u64> = (0..3).map(node_id).collect();
    let leader = ids
        .iter()
        .position(|id| *id == leader_id)
        .expect("a leader");
    let victim = (0..3)
        .rev()
        .find(|index| *index != leader)
        .expect("a follower");
    let victim_name = status["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|member| member["id"].as_u64() == Some(ids[victim]))
        .and_then(|member| member["name"].as_str())
        .expect("the victim's name")
        .to_string();
    let victim_kv = node(&nodes, victim).kv_addr.clone();
    let mut killed = nodes[victim].take().expect("running");
    let _ = killed.child.kill();
    let _ = killed.child.wait();
    drop(connections);
    let mut mgmt = Client::connect(&node(&nodes, leader).mgmt_addr).expect("connect");
    let form = format!("otpNode={}", victim_name.replace('@', "%40"));
    let content_type = [("Content-Type", "application/x-www-form-urlencoded")];
    let failed = mgmt
        .request_with(
            "POST",
            "/controller/failOver",
            &content_type,
            Some(form.as_bytes()),
        )
        .expect("failOver");
    assert_eq!(
        failed.status,
        200,
        "{}",
        String::from_utf8_lossy(&failed.body)
    );
    let mut mgmt = Client::connect(&node(&nodes, leader).mgmt_addr).expect("connect");
    let unknown = mgmt
        .request_with(
            "POST",
            "/controller/failOver",
            &content_type,
            Some(b"otpNode=nobody"),
        )
        .expect("failOver");
    assert_eq!(unknown.status, 400);
    let survivor = leader;
    let (servers, rows) = until("the failover", || {
        let (servers, rows) = vbucket_map(node(&nodes, survivor));
        let done = servers.len() == 2 && rows.iter().all(|row| row[0] >= 0);
        done.then_some((servers, rows))
    });
    assert!(!servers.contains(&victim_kv));

    // Every document reads back from its active, wherever that is now.
    read_back_every_document(&nodes, &servers, &rows, "after the failover");

    // The auto-failover settings, as Couchbase's REST API shows and changes them.
    let settings = |server: &Server| -> Value {
        let mut mgmt = Client::connect(&server.mgmt_addr).expect("connect");
        let got = mgmt
            .request("GET", "/settings/autoFailover", None)
            .expect("GET");
        assert_eq!(got.status, 200);
        serde_json::from_slice(&got.body).expect("json")
    };
    let shown = settings(node(&nodes, survivor));
    assert_eq!(
        (&shown["enabled"], &shown["timeout"], &shown["count"]),
        (&Value::from(true), &Value::from(5), &Value::from(1)),
        "{shown}"
    );
    let post = |server: &Server, path: &str, form: &str| {
        let mut mgmt = Client::connect(&server.mgmt_addr).expect("connect");
        let answer = mgmt
            .request_with("POST", path, &content_type, Some(form.as_bytes()))
            .expect("POST");
        (
            answer.status,
            String::from_utf8_lossy(&answer.body).into_owned(),
        )
    };
    let other = (0..3)
        .find(|index| *index != leader && *index != victim)
        .expect("the third node");
    let (status, body) = post(
        node(&nodes, other),
        "/settings/autoFailover",
        "enabled=true&timeout=0",
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("timeout"), "{body}");
    // From any node, not only the leader's.
    let (status, body) = post(
        node(&nodes, other),
        "/settings/autoFailover",
        "enabled=true&timeout=1",
    );
    assert_eq!(status, 200, "{body}");
    until("the new timeout everywhere", || {
        (settings(node(&nodes, leader))["timeout"] == 1).then_some(())
    });

    // The failed node restarts on its addresses; it is fenced (it serves no vbucket) until
    // it is added back (delta recovery): then it is a replica of its chains again, catches up,
    // and holds what a later failover needs.
    nodes[victim] = Some(support::restart_cluster_node(&killed, SECRET));
    drop(killed);
    let fenced = kv(node(&nodes, victim)).call(opcode::GET, &key(0), &[], &[], 0);
    assert_eq!(fenced.status, status::NOT_MY_VBUCKET);
    let victim_form = format!("otpNode={}", victim_name.replace('@', "%40"));
    let (status, body) = post(node(&nodes, other), "/controller/reAddNode", &victim_form);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(node(&nodes, other), "/controller/reAddNode", &victim_form);
    assert_eq!(status, 400, "{body}");
    let (status, _) = post(
        node(&nodes, other),
        "/controller/reAddNode",
        "otpNode=nobody",
    );
    assert_eq!(status, 400);
    let (servers, rows) = until("the node back in the map", || {
        let (servers, rows) = vbucket_map(node(&nodes, survivor));
        let back = servers.len() == 3 && rows.iter().all(|row| row[0] >= 0 && row[1] >= 0);
        back.then_some((servers, rows))
    });
    let server_of: Vec<usize> = servers.iter().map(|addr| index_of(&nodes, addr)).collect();
    until("the added-back node caught up", || {
        let actives: Vec<_> = (0..3).map(|i| seqnos(node(&nodes, i), 1)).collect();
        let replicas: Vec<_> = (0..3).map(|i| seqnos(node(&nodes, i), 2)).collect();
        let caught_up = rows.iter().enumerate().all(|(vb, row)| {
            let vb = u16::try_from(vb).expect("vb");
            let active = server_of[usize::try_from(row[0]).expect("an active")];
            let replica = server_of[usize::try_from(row[1]).expect("a replica")];
            let written = actives[active].get(&vb).copied();
            written.is_some() && replicas[replica].get(&vb).copied() == written
        });
        caught_up.then_some(())
    });

    // The third node dies (kill -9) and nobody asks: the 1 s auto-failover promotes its
    // replicas, some of them on the added-back node, and every document reads back.
    nodes[other].take().expect("running").kill9();
    let (servers, rows) = until("the auto-failover", || {
        let (servers, rows) = vbucket_map(node(&nodes, leader));
        let done = servers.len() == 2 && rows.iter().all(|row| row[0] >= 0);
        done.then_some((servers, rows))
    });
    let server_of: Vec<usize> = servers.iter().map(|addr| index_of(&nodes, addr)).collect();
    assert!(
        rows.iter()
            .any(|row| server_of[usize::try_from(row[0]).expect("active")] == victim),
        "the added-back node holds actives after the failover"
    );
    read_back_every_document(&nodes, &servers, &rows, "after the second failover");
    for server in nodes.into_iter().flatten() {
        server.stop();
    }
}
