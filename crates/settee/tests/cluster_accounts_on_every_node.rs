//! Accounts are the cluster's (docs/format/cluster-map.md, "Accounts on every member"): three
//! real `settee serve` processes. The node that forms the cluster brings its `_users`; a node
//! that joins gives up its own accounts for the cluster's; an account made or changed through
//! any node logs in on every node, on the HTTP door and the KV door (SCRAM), and a changed
//! password stops working on a node as soon as the change has reached it (cached logins
//! follow replicated writes).

mod support;

use serde_json::json;
use support::kv::Kv;
use support::{call_json as call, cluster_addr, get_json as get, until, Client, Server};

const SECRET: &str = "the secret of the accounts test";

fn account(name: &str, password: &str) -> serde_json::Value {
    json!({"_id": format!("org.couchdb.user:{name}"), "name": name, "type": "user",
           "roles": [], "password": password})
}

/// Makes the account `name` with `password` through `node`.
fn make_account(node: &Server, name: &str, password: &str) {
    let (status, body) = call(
        node,
        "PUT",
        &format!("/_users/org.couchdb.user:{name}"),
        Some(account(name, password)),
    );
    assert_eq!(status, 201, "making {name}: {body}");
}

/// Who `name:password` logs in as on `node`'s HTTP door (None: refused).
fn http_login(node: &Server, name: &str, password: &str) -> Option<String> {
    let mut client = Client::connect_as(&node.addr, &format!("{name}:{password}")).ok()?;
    let (status, body) = client.call("GET", "/_session", None);
    if status != 200 {
        return None;
    }
    body["userCtx"]["name"].as_str().map(str::to_owned)
}

fn logs_in(node: &Server, name: &str, password: &str) -> bool {
    http_login(node, name, password).as_deref() == Some(name)
}

/// Whether `name:password` passes SCRAM-SHA512 on `node`'s KV door.
fn kv_logs_in(node: &Server, name: &str, password: &str) -> bool {
    let mut kv = Kv::connect(&node.kv_addr);
    kv.auth(name, password) == 0
}

#[test]
fn accounts_made_through_any_node_log_in_on_every_node() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    // The second node served alone first, with an account of its own.
    let alone = Server::start(dirs[1].path());
    make_account(&alone, "bob", "bob-pw");
    assert!(logs_in(&alone, "bob", "bob-pw"));
    alone.stop();

    let first = support::start_cluster_node(dirs[0].path(), SECRET, None);
    make_account(&first, "ann", "ann-pw");
    let join = cluster_addr(&first);
    let nodes = [
        first,
        support::start_cluster_node(dirs[1].path(), SECRET, Some(&join)),
        support::start_cluster_node(dirs[2].path(), SECRET, Some(&join)),
    ];
    for node in &nodes {
        until("three members", || {
            let members = get(node, "/_node/_local/_cluster")["members"].clone();
            (members.as_array().map(Vec::len) == Some(3)).then_some(())
        });
    }
    // _users is in the map with every vbucket active on the first node and a copy on each
    // other node.
    let cluster = get(&nodes[2], "/_node/_local/_cluster");
    let users = cluster["buckets"]
        .as_array()
        .and_then(|buckets| buckets.iter().find(|bucket| bucket["name"] == "_users"))
        .unwrap_or_else(|| panic!("_users in the map: {cluster}"));
    assert_eq!(users["replicas"], 2, "{users}");
    let actives = users["actives"].as_object().expect("actives");
    assert_eq!(actives.len(), 1, "{users}");

    // The first node's account logs in everywhere, on both doors; the joiner's own is gone.
    for (index, node) in nodes.iter().enumerate() {
        until(&format!("ann logs in on node {index}"), || {
            logs_in(node, "ann", "ann-pw").then_some(())
        });
        assert!(
            kv_logs_in(node, "ann", "ann-pw"),
            "KV login on node {index}"
        );
        assert!(!kv_logs_in(node, "ann", "wrong"), "KV node {index}");
        until(&format!("bob is gone from node {index}"), || {
            (!logs_in(node, "bob", "bob-pw")).then_some(())
        });
    }
    let (status, _) = call(&nodes[1], "GET", "/_users/org.couchdb.user:bob", None);
    assert_eq!(status, 404);

    // An account made through the last node (it is forwarded to the first) logs in everywhere.
    make_account(&nodes[2], "cy", "cy-pw");
    for (index, node) in nodes.iter().enumerate() {
        until(&format!("cy logs in on node {index}"), || {
            logs_in(node, "cy", "cy-pw").then_some(())
        });
    }

    // A password changed through the second node: once the new one works on a node, the old
    // one (just verified, so cached) is refused there at once.
    for node in &nodes {
        assert!(logs_in(node, "cy", "cy-pw"));
    }
    let (status, stored) = call(&nodes[1], "GET", "/_users/org.couchdb.user:cy", None);
    assert_eq!(status, 200, "{stored}");
    let mut changed = account("cy", "cy-new");
    changed["_rev"] = stored["_rev"].clone();
    let (status, body) = call(
        &nodes[1],
        "PUT",
        "/_users/org.couchdb.user:cy",
        Some(changed),
    );
    assert_eq!(status, 201, "{body}");
    for (index, node) in nodes.iter().enumerate() {
        until(&format!("the new password on node {index}"), || {
            logs_in(node, "cy", "cy-new").then_some(())
        });
        assert!(
            !logs_in(node, "cy", "cy-pw"),
            "old password on node {index}"
        );
        assert!(kv_logs_in(node, "cy", "cy-new"), "KV node {index}");
    }
    for node in nodes {
        node.stop();
    }
}
