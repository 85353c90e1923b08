//! Rebalance between real `settee serve` processes (docs/format/rebalance.md), once moving
//! vbuckets as files and once by the rebuild path:
//! two nodes hold a bucket with one replica, a view and a Mango index; a third joins and
//! `POST /controller/rebalance` (Couchbase's form, on a management port) moves vbuckets to it
//! while a client keeps writing through the HTTP door (retrying the 503 of a vbucket being
//! taken over, as a client retries a temporary failure). `/pools/default/rebalanceProgress`
//! reports it running, then `none`. Afterwards the new node is the active of some vbuckets
//! and a replica of others, every acknowledged document reads back through every node,
//! `_all_docs`, the view and `_find` count them all, and each vbucket's replica holds its
//! active's seqno. Then a node is rebalanced out (`ejectedNodes`): it holds nothing and is
//! ejected, and the two left serve everything. A known-node list that is not the cluster's
//! is refused with ns_server's `{"mismatch": 1}`.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use serde_json::{json, Value};
use support::kv::{all_vb_seqnos, vbucket_map, Kv};
use support::{cluster_addr, http_json as http, until, Client, Server};

const SECRET: &str = "the secret of the rebalance test";
const DOCS: usize = 400;

fn post_form(server: &Server, path: &str, form: &str) -> (u16, String) {
    let mut mgmt = Client::connect(&server.mgmt_addr).expect("connect");
    let content_type = [("Content-Type", "application/x-www-form-urlencoded")];
    let answer = mgmt
        .request_with("POST", path, &content_type, Some(form.as_bytes()))
        .expect("POST");
    (
        answer.status,
        String::from_utf8_lossy(&answer.body).into_owned(),
    )
}

fn progress(server: &Server) -> Value {
    let mut mgmt = Client::connect(&server.mgmt_addr).expect("connect");
    let answer = mgmt
        .request("GET", "/pools/default/rebalanceProgress", None)
        .expect("GET");
    assert_eq!(answer.status, 200);
    serde_json::from_slice(&answer.body).expect("json")
}

/// The members' names as `/_node/_local/_cluster` lists them, by KV address.
fn member_names(server: &Server) -> BTreeMap<String, String> {
    let (_, status) = http(server, "GET", "/_node/_local/_cluster", None);
    status["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|member| member["state"] == "active")
        .map(|member| {
            (
                member["kv_addr"].as_str().expect("kv_addr").to_owned(),
                member["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect()
}

fn members(server: &Server) -> usize {
    member_names(server).len()
}

/// The count of documents every read path gives through `server`: `_all_docs`, the view's
/// `_count` and `_find` (all must agree).
fn counts(server: &Server) -> [u64; 3] {
    let (status, all) = http(server, "GET", "/db/_all_docs?limit=0", None);
    assert_eq!(status, 200, "{all}");
    let (status, view) = http(server, "GET", "/db/_design/app/_view/by_n", None);
    assert_eq!(status, 200, "{view}");
    let find = json!({"selector": {"n": {"$gte": 0}}, "fields": ["_id"], "limit": 100000});
    let (status, found) = http(server, "POST", "/db/_find", Some(&find.to_string()));
    assert_eq!(status, 200, "{found}");
    [
        all["total_rows"].as_u64().expect("total_rows"),
        view["rows"][0]["value"].as_u64().unwrap_or(0),
        found["docs"].as_array().expect("docs").len() as u64,
    ]
}

/// Writes documents `w-0`, `w-1`, ... through `http_addr` until `stop`, retrying each on a 503
/// (a vbucket being taken over); returns how many were acknowledged (201 or 202, or a retry's 409).
fn writer(http_addr: String, stop: Arc<AtomicBool>) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut written = 0;
        while !stop.load(Ordering::Relaxed) {
            let path = format!("/db/w-{written}");
            let body = format!("{{\"n\":{}}}", DOCS + written);
            let mut retried = false;
            loop {
                let mut client = Client::connect(&http_addr).expect("connect");
                let answer = client
                    .request("PUT", &path, Some(body.as_bytes()))
                    .expect("PUT");
                match answer.status {
                    // 202: stored on the active before every replica held it (a chain
                    // changing), as CouchDB answers a write short of its quorum.
                    201 | 202 => break,
                    // A retry of a write whose 503 came after it was stored.
                    409 if retried => break,
                    503 => {
                        retried = true;
                        thread::sleep(std::time::Duration::from_millis(20));
                    }
                    other => panic!(
                        "PUT {path}: {other} {}",
                        String::from_utf8_lossy(&answer.body)
                    ),
                }
            }
            written += 1;
        }
        written
    })
}

/// Rebalances with `known` and `ejected` names through `server` and waits until it is over.
fn rebalance(server: &Server, known: &[&String], ejected: &[&String]) {
    let join = |names: &[&String]| {
        names
            .iter()
            .map(|name| name.replace('@', "%40"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let form = format!("knownNodes={}&ejectedNodes={}", join(known), join(ejected));
    let (status, body) = post_form(server, "/controller/rebalance", &form);
    assert_eq!(status, 200, "{body}");
    let running = progress(server);
    assert!(
        running["status"] == "running" || running["status"] == "none",
        "{running}"
    );
    until("the rebalance to end", || {
        (progress(server)["status"] == "none").then_some(())
    });
}

/// Every vbucket of the map `server` routes by: each replica has its active's high seqno.
fn replicas_caught_up(nodes: &[&Server]) {
    until("every replica caught up", || {
        let mut kv = Kv::open(&nodes[0].kv_addr, "admin", "secret", "db");
        let (servers, rows) = vbucket_map(&mut kv);
        let by_addr: BTreeMap<&str, &Server> = nodes
            .iter()
            .map(|node| (node.kv_addr.as_str(), *node))
            .collect();
        let seqnos = |addr: &str, state: u32| {
            let node = by_addr.get(addr)?;
            Some(all_vb_seqnos(
                &mut Kv::open(&node.kv_addr, "admin", "secret", "db"),
                state,
            ))
        };
        let actives: Vec<_> = servers.iter().map(|addr| seqnos(addr, 1)).collect();
        let replicas: Vec<_> = servers.iter().map(|addr| seqnos(addr, 2)).collect();
        let caught = rows.iter().enumerate().all(|(vb, row)| {
            let vb = u16::try_from(vb).expect("vbucket");
            let (Ok(active), Ok(replica)) = (usize::try_from(row[0]), usize::try_from(row[1]))
            else {
                return false;
            };
            let written = actives[active].as_ref().and_then(|held| held.get(&vb));
            written.is_some()
                && replicas[replica].as_ref().and_then(|held| held.get(&vb)) == written
        });
        caught.then_some(())
    });
}

/// A cluster node moving vbuckets in `mode` (`files` or `rebuild`).
fn start_node(dir: &std::path::Path, join: Option<&str>, mode: &str) -> Server {
    let mut args = vec![
        "--cluster-addr",
        "127.0.0.1:0",
        "--cluster-secret",
        SECRET,
        "--rebalance-mode",
        mode,
    ];
    if let Some(join) = join {
        args.extend_from_slice(&["--join", join]);
    }
    Server::start_with(dir, &args)
}

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
    let first = start_node(dirs[0].path(), None, mode);
    let join = cluster_addr(&first);
    let second = start_node(dirs[1].path(), Some(&join), mode);
    until("two members", || (members(&first) == 2).then_some(()));
    let (created, body) = http(&first, "PUT", "/db?n=2", None);
    assert_eq!(created, 201, "{body}");
    until("the bucket on both", || {
        (http(&second, "GET", "/db", None).0 == 200).then_some(())
    });
    let design = json!({"views": {"by_n": {"map": "function (doc) { if (doc.n >= 0) emit(doc.n, null); }", "reduce": "_count"}}});
    let (status, body) = http(&first, "PUT", "/db/_design/app", Some(&design.to_string()));
    assert_eq!(status, 201, "{body}");
    let index = json!({"index": {"fields": ["n"]}, "name": "by-n"});
    let (status, body) = http(&first, "POST", "/db/_index", Some(&index.to_string()));
    assert_eq!(status, 200, "{body}");
    let docs: Vec<Value> = (0..DOCS)
        .map(|n| json!({"_id": format!("doc-{n:04}"), "n": n}))
        .collect();
    let bulk = json!({ "docs": docs }).to_string();
    let (status, body) = http(&first, "POST", "/db/_bulk_docs", Some(&bulk));
    assert_eq!(status, 201, "{body}");
    // `_all_docs` lists the two design documents too (the view's and the Mango index's).
    let designs = 2;
    assert_eq!(
        counts(&first),
        [DOCS as u64 + designs, DOCS as u64, DOCS as u64]
    );

    // A third node joins; it holds nothing until the rebalance.
    let third = start_node(dirs[2].path(), Some(&join), mode);
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
    let stop = Arc::new(AtomicBool::new(false));
    let writing = writer(second.addr.clone(), stop.clone());
    rebalance(&third, &[&n1, &n2, &n3], &[]);
    stop.store(true, Ordering::Relaxed);
    let written = writing.join().expect("the writer") as u64;
    assert!(written > 0, "the writer wrote during the rebalance");

    let (servers, rows) = until("three servers in the KV config", || {
        let mut kv = Kv::open(&first.kv_addr, "admin", "secret", "db");
        let (servers, rows) = vbucket_map(&mut kv);
        (servers.len() == 3).then_some((servers, rows))
    });
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
    let total = DOCS as u64 + written;
    for node in all {
        until("every read path counts every document", || {
            (counts(node) == [total + designs, total, total]).then_some(())
        });
        for n in (0..DOCS).step_by(37) {
            let (status, doc) = http(node, "GET", &format!("/db/doc-{n:04}"), None);
            assert_eq!((status, &doc["n"]), (200, &json!(n)), "{doc}");
        }
        let last = written - 1;
        let (status, doc) = http(node, "GET", &format!("/db/w-{last}"), None);
        assert_eq!(status, 200, "{doc}");
    }

    // Rebalance the first node out.
    rebalance(&second, &[&n1, &n2, &n3], &[&n1]);
    let (_, status) = http(&second, "GET", "/_node/_local/_cluster", None);
    let states: BTreeMap<String, String> = status["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|member| {
            (
                member["name"].as_str().expect("name").to_owned(),
                member["state"].as_str().expect("state").to_owned(),
            )
        })
        .collect();
    assert_eq!(states[&n1], "ejected", "{status}");
    // The KV door routes by the map once the node followed it.
    let (servers, rows) = until("two servers in the KV config", || {
        let mut kv = Kv::open(&second.kv_addr, "admin", "secret", "db");
        let (servers, rows) = vbucket_map(&mut kv);
        (servers.len() == 2).then_some((servers, rows))
    });
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
