//! The database requests that act on every document, or on every node's index, answer for the
//! whole cluster from any node: three real `settee serve` processes and a bucket with one copy
//! of each document (`n=1`), so a node can reach another node's documents only by asking it.
//! `_missing_revs` and `_purge` go to each document's node; a `descending=true` `_changes`
//! lists every node's changes newest first (`limit=1` is the latest write of the cluster) and
//! each row's `seq` resumes a forward feed on any node with exactly the rows before it;
//! `_compact` compacts every node's vbuckets (old revisions are gone everywhere);
//! `_compact/{ddoc}` and `_design/{d}/_info` reach every node's index, wherever the design
//! document lives. `/_node/{member}/...` is answered by the member named, through any node;
//! driven directly, the cluster port refuses a node request for another member or outside
//! `/_node/_local`.

mod support;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::{AuthMethod, ForwardHttp, Identity, Refusal};
use settee_cluster_net::{Secret, TcpTransport};
use support::{call_json as call, cluster_addr, get_json as get, until, Server};

const SECRET: &str = "the secret of the maintenance test";
const VBUCKETS: u16 = 16;
const DOCS: usize = 30;

/// Writes `DOCS` documents (through every node in turn) and gives each one's first revision.
fn write_docs(nodes: &[Server; 3], db: &str) -> Vec<(String, String)> {
    (0..DOCS)
        .map(|index| {
            let id = format!("doc-{index:03}");
            let (status, body) = call(
                &nodes[index % 3],
                "PUT",
                &format!("/{db}/{id}"),
                Some(json!({"n": index})),
            );
            assert_eq!(status, 201, "PUT {id}: {body}");
            (id, body["rev"].as_str().expect("rev").to_owned())
        })
        .collect()
}

/// A database of `n` copies of each document.
fn create_db(nodes: &[Server; 3], db: &str, n: u8) {
    let (created, body) = call(&nodes[0], "PUT", &format!("/{db}?q={VBUCKETS}&n={n}"), None);
    assert_eq!(created, 201, "{body}");
    for node in nodes {
        until("the database everywhere", || {
            (call(node, "GET", &format!("/{db}"), None).0 == 200).then_some(())
        });
    }
}

#[test]
fn maintenance_requests_reach_every_node() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);
    create_db(&nodes, "db", 1);
    let docs = write_docs(&nodes, "db");

    // _missing_revs: a known revision of a document on any node is not missing.
    for (index, node) in nodes.iter().enumerate() {
        let mut asked = serde_json::Map::new();
        for (id, rev) in &docs {
            asked.insert(id.clone(), json!([rev, "9-unknown"]));
        }
        let (status, body) = call(
            node,
            "POST",
            "/db/_missing_revs",
            Some(Value::Object(asked)),
        );
        assert_eq!(status, 200, "{body}");
        let missing = body["missing_revs"].as_object().expect("missing_revs");
        assert_eq!(missing.len(), DOCS, "through node {index}: {body}");
        for (id, _) in &docs {
            assert_eq!(
                missing[id],
                json!(["9-unknown"]),
                "{id} through node {index}"
            );
        }
    }

    descending_changes(&nodes, &docs);
    design_indexes(&nodes, "db");
    compaction(&nodes, &docs);
    // With replicas, a node's `_info` counts the vbuckets it answers for, not its replicas.
    create_db(&nodes, "replicated", 3);
    write_docs(&nodes, "replicated");
    design_indexes(&nodes, "replicated");

    // _purge through one node purges documents of every node.
    let (purged, kept) = docs.split_at(DOCS / 2);
    let asked: serde_json::Map<String, Value> = purged
        .iter()
        .map(|(id, _)| {
            let current = get(&nodes[0], &format!("/db/{id}"));
            (id.clone(), json!([current["_rev"]]))
        })
        .collect();
    let (status, body) = call(
        &nodes[1],
        "POST",
        "/db/_purge",
        Some(Value::Object(asked.clone())),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["purge_seq"], Value::Null);
    assert_eq!(
        body["purged"],
        Value::Object(asked),
        "every document purged"
    );
    for node in &nodes {
        for (id, _) in purged {
            let (status, _) = call(node, "GET", &format!("/db/{id}"), None);
            assert_eq!(status, 404, "{id} is purged");
        }
        for (id, _) in kept {
            get(node, &format!("/db/{id}"));
        }
        // The design document counts too.
        let info = get(node, "/db");
        assert_eq!(info["doc_count"], json!(DOCS - purged.len() + 1));
        assert_eq!(
            info["purge_seq"],
            json!(purged.len().to_string()),
            "every node's purges"
        );
    }
    node_requests(&nodes);
    for node in nodes {
        node.stop();
    }
}

/// `/_node/{name}/...` through every node, for every member: the member named answers.
fn node_requests(nodes: &[Server; 3]) {
    let names: Vec<String> = nodes
        .iter()
        .map(|node| {
            let name = get(node, "/_node/_local")["name"].clone();
            name.as_str().expect("a name").to_owned()
        })
        .collect();
    let membership = get(&nodes[0], "/_membership");
    for name in &names {
        assert!(
            membership["all_nodes"]
                .as_array()
                .expect("all_nodes")
                .contains(&json!(name)),
            "{name} in {membership}"
        );
    }
    for (index, name) in names.iter().enumerate() {
        // Each member gets its own value through another node, and keeps it.
        let through = &nodes[(index + 1) % 3];
        let path = format!("/_node/{name}/_config/settee_test/who");
        let (status, body) = call(through, "PUT", &path, Some(json!(format!("node {index}"))));
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(
            get(&nodes[index], "/_node/_local/_config/settee_test/who"),
            json!(format!("node {index}"))
        );
        for node in nodes {
            assert_eq!(get(node, &path), json!(format!("node {index}")), "{path}");
            assert_eq!(get(node, &format!("/_node/{name}"))["name"], json!(name));
        }
    }
    let (status, body) = call(&nodes[0], "GET", "/_node/settee-1@nowhere/_config", None);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["reason"], json!("no such node: settee-1@nowhere"));

    // The cluster port itself: a NodeHttp for another member, or outside the node API, runs
    // nothing.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let peer = TcpTransport::new(0, Secret::new(SECRET));
    let request = |member: &str, target: &str| ForwardHttp {
        revision: 0,
        epoch: 0,
        bucket: member.into(),
        vbucket: 0,
        method: "GET".into(),
        target: target.into(),
        identity: Identity {
            name: Some("admin".into()),
            roles: vec!["_admin".into()],
            auth: AuthMethod::Basic,
        },
        headers: vec![],
        body: vec![],
    };
    let send = |request: ForwardHttp| {
        runtime
            .block_on(peer.node_http(0, &cluster_addr(&nodes[0]), &request))
            .expect("the node answers")
    };
    let answered = send(request(&names[0], "/_node/_local/_config/settee_test/who"))
        .expect("its own member name");
    assert_eq!(answered.status, 200);
    for refused in [
        request(&names[1], "/_node/_local/_config"),
        request(&names[0], "/db/_all_docs"),
        request(&names[0], "/_node/_localx"),
    ] {
        match send(refused) {
            Err(Refusal { code, .. }) => assert_eq!(code, ErrorCode::Refused),
            Ok(reply) => panic!("answered {reply:?}"),
        }
    }
}

/// `descending=true`: every node's changes, newest first; each row's `seq` resumes a forward
/// feed, on any node, with exactly the rows above it.
fn descending_changes(nodes: &[Server; 3], docs: &[(String, String)]) {
    let written: Vec<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    for (index, node) in nodes.iter().enumerate() {
        let feed = get(node, "/db/_changes?descending=true");
        let rows = feed["results"].as_array().expect("results");
        let ids: Vec<&str> = rows
            .iter()
            .map(|row| row["id"].as_str().expect("id"))
            .collect();
        let mut newest_first = written.clone();
        newest_first.reverse();
        assert_eq!(ids, newest_first, "through node {index}: newest first");
        let latest = get(node, "/db/_changes?descending=true&limit=1");
        assert_eq!(
            latest["results"][0]["id"],
            json!(written[DOCS - 1]),
            "limit=1"
        );
        assert_eq!(latest["results"].as_array().map(Vec::len), Some(1));
        for (row_index, row) in rows.iter().enumerate().step_by(7) {
            let seq = row["seq"].as_str().expect("seq");
            let resumed = get(
                &nodes[(index + 1) % 3],
                &format!("/db/_changes?since={seq}"),
            );
            let after: BTreeSet<&str> = resumed["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|row| row["id"].as_str().expect("id"))
                .collect();
            let before: BTreeSet<&str> = ids[..row_index].iter().copied().collect();
            assert_eq!(
                after, before,
                "resumed from row {row_index} of node {index}"
            );
        }
        let last = feed["last_seq"].as_str().expect("last_seq");
        let resumed = get(node, &format!("/db/_changes?since={last}"));
        assert_eq!(
            resumed["results"].as_array().map(Vec::len),
            Some(DOCS - 1),
            "the last row's seq replays every row above it"
        );
    }
}

/// A design document on one node: `_info` through every node counts every node's index,
/// `_compact/{ddoc}` through every node is accepted.
fn design_indexes(nodes: &[Server; 3], db: &str) {
    let (status, body) = call(
        &nodes[0],
        "PUT",
        &format!("/{db}/_design/v"),
        Some(json!({"views": {"n": {"map": "function(doc){ emit(doc.n, null); }"}}})),
    );
    assert_eq!(status, 201, "{body}");
    let rows = get(&nodes[1], &format!("/{db}/_design/v/_view/n"));
    assert_eq!(rows["total_rows"], json!(DOCS));
    let infos: Vec<Value> = nodes
        .iter()
        .map(|node| get(node, &format!("/{db}/_design/v/_info")))
        .collect();
    for info in &infos {
        assert_eq!(info["name"], json!("v"));
        assert_eq!(
            info["view_index"]["updates_pending"]["total"],
            json!(0),
            "{info}"
        );
        assert_eq!(
            info["view_index"]["update_seq"], infos[0]["view_index"]["update_seq"],
            "every node counts the whole cluster's index"
        );
    }
    // One write per document and one of the design document, each a seqno of its vbucket.
    assert_eq!(
        infos[0]["view_index"]["update_seq"],
        json!(DOCS + 1),
        "the index has seen every write of every node"
    );
    for (index, node) in nodes.iter().enumerate() {
        let (status, body) = call(node, "POST", &format!("/{db}/_compact/v"), Some(json!({})));
        assert_eq!(status, 202, "_compact/v through node {index}: {body}");
        let (status, body) = call(
            node,
            "POST",
            &format!("/{db}/_compact/none"),
            Some(json!({})),
        );
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["reason"], json!("missing"));
    }
}

/// `_compact` through one node drops the old revisions of every node's documents.
fn compaction(nodes: &[Server; 3], docs: &[(String, String)]) {
    for (id, rev) in docs {
        let (status, body) = call(
            &nodes[0],
            "PUT",
            &format!("/db/{id}"),
            Some(json!({"_rev": rev, "second": true})),
        );
        assert_eq!(status, 201, "{body}");
        get(&nodes[1], &format!("/db/{id}?rev={rev}"));
    }
    let (status, body) = call(&nodes[2], "POST", "/db/_compact", Some(json!({})));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body, json!({"ok": true}));
    until("every node compacted", || {
        (get(&nodes[0], "/db")["compact_running"] == json!(false)).then_some(())
    });
    until("every old revision gone", || {
        docs.iter()
            .all(|(id, rev)| call(&nodes[0], "GET", &format!("/db/{id}?rev={rev}"), None).0 == 404)
            .then_some(())
    });
}
