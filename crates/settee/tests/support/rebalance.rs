//! What the rebalance tests share: nodes started with a rebalance mode, the management door's
//! rebalance calls, a writer that keeps writing through the HTTP door, and the checks that
//! every vbucket is whole and every document counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use super::kv::{all_vb_seqnos, vbucket_map, Kv};
use super::{http_json as http, until, Client, Server};

/// A cluster node moving vbuckets in `mode` (`files` or `rebuild`), with `extra` flags.
pub fn start_node(
    dir: &Path,
    secret: &str,
    join: Option<&str>,
    mode: &str,
    extra: &[&str],
) -> Server {
    let mut args = vec![
        "--cluster-addr",
        "127.0.0.1:0",
        "--cluster-secret",
        secret,
        "--rebalance-mode",
        mode,
    ];
    if let Some(join) = join {
        args.extend_from_slice(&["--join", join]);
    }
    args.extend_from_slice(extra);
    Server::start_with(dir, &args)
}

/// A form POST to the management door: (status, body).
pub fn post_form(server: &Server, path: &str, form: &str) -> (u16, String) {
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

pub fn progress(server: &Server) -> Value {
    let mut mgmt = Client::connect(&server.mgmt_addr).expect("connect");
    let answer = mgmt
        .request("GET", "/pools/default/rebalanceProgress", None)
        .expect("GET");
    assert_eq!(answer.status, 200);
    serde_json::from_slice(&answer.body).expect("json")
}

/// Each member's state by name, as `/_node/_local/_cluster` lists them.
pub fn member_states(server: &Server) -> BTreeMap<String, String> {
    let (_, status) = http(server, "GET", "/_node/_local/_cluster", None);
    status["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|member| {
            (
                member["name"].as_str().expect("name").to_owned(),
                member["state"].as_str().expect("state").to_owned(),
            )
        })
        .collect()
}

/// The serving members' names by KV address.
pub fn member_names(server: &Server) -> BTreeMap<String, String> {
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

pub fn members(server: &Server) -> usize {
    member_names(server).len()
}

/// A bucket `db` with one replica, a view (`_design/app`, `by_n` counting documents with a
/// number `n`), a Mango index on `n`, and `docs` documents `doc-NNNN` of about `bytes` bytes.
/// Returns the design documents `_all_docs` lists besides.
pub fn fill(server: &Server, docs: usize, bytes: usize) -> u64 {
    let (created, body) = http(server, "PUT", "/db?n=2", None);
    assert_eq!(created, 201, "{body}");
    let design = json!({"views": {"by_n": {"map": "function (doc) { if (doc.n >= 0) emit(doc.n, null); }", "reduce": "_count"}}});
    let (status, body) = http(server, "PUT", "/db/_design/app", Some(&design.to_string()));
    assert_eq!(status, 201, "{body}");
    let index = json!({"index": {"fields": ["n"]}, "name": "by-n"});
    let (status, body) = http(server, "POST", "/db/_index", Some(&index.to_string()));
    assert_eq!(status, 200, "{body}");
    let pad = "x".repeat(bytes);
    for chunk in (0..docs).collect::<Vec<_>>().chunks(500) {
        let batch: Vec<Value> = chunk
            .iter()
            .map(|n| json!({"_id": format!("doc-{n:04}"), "n": n, "pad": pad}))
            .collect();
        let bulk = json!({ "docs": batch }).to_string();
        let (status, body) = http(server, "POST", "/db/_bulk_docs", Some(&bulk));
        assert_eq!(status, 201, "{body}");
    }
    2
}

/// `_all_docs`' total, the view's `_count` and `_find`'s documents through `server`.
pub fn counts(server: &Server) -> [u64; 3] {
    let (status, all) = http(server, "GET", "/db/_all_docs?limit=0", None);
    assert_eq!(status, 200, "{all}");
    let (status, view) = http(server, "GET", "/db/_design/app/_view/by_n", None);
    assert_eq!(status, 200, "{view}");
    let find = json!({"selector": {"n": {"$gte": 0}}, "fields": ["_id"], "limit": 1_000_000});
    let (status, found) = http(server, "POST", "/db/_find", Some(&find.to_string()));
    assert_eq!(status, 200, "{found}");
    [
        all["total_rows"].as_u64().expect("total_rows"),
        view["rows"][0]["value"].as_u64().unwrap_or(0),
        found["docs"].as_array().expect("docs").len() as u64,
    ]
}

/// What a [`Writer`] wrote: every document acknowledged, and those acknowledged with 201
/// (stored on a majority of the vbucket's chain, HTTP `w`).
#[derive(Default)]
pub struct Written {
    pub acknowledged: Vec<String>,
    pub replicated: BTreeSet<String>,
}

pub struct Writer {
    stop: Arc<AtomicBool>,
    task: thread::JoinHandle<Written>,
}

impl Writer {
    /// Writes documents `w-0`, `w-1`, ... (numbers `n` from `first_n`) through `http_addr`
    /// until stopped, one at a time, retrying each on a 503 (a vbucket being taken over, a
    /// node failing over) and on a refused connection.
    pub fn start(http_addr: String, first_n: usize) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = thread::spawn(move || {
            let mut written = Written::default();
            while !stopping.load(Ordering::Relaxed) {
                let id = format!("w-{}", written.acknowledged.len());
                let path = format!("/db/{id}");
                let body = format!("{{\"n\":{}}}", first_n + written.acknowledged.len());
                let mut retried = false;
                loop {
                    let answer = Client::connect(&http_addr)
                        .and_then(|mut client| client.request("PUT", &path, Some(body.as_bytes())));
                    let Ok(answer) = answer else {
                        retried = true;
                        thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    match answer.status {
                        201 => {
                            written.replicated.insert(id.clone());
                            break;
                        }
                        // 202: stored on the active before every replica held it (a chain
                        // changing), as CouchDB answers a write short of its quorum.
                        202 => break,
                        // A retry of a write whose 503 came after it was stored.
                        409 if retried => break,
                        503 => {
                            retried = true;
                            thread::sleep(Duration::from_millis(20));
                        }
                        other => panic!(
                            "PUT {path}: {other} {}",
                            String::from_utf8_lossy(&answer.body)
                        ),
                    }
                }
                written.acknowledged.push(id);
            }
            written
        });
        Writer { stop, task }
    }

    pub fn finish(self) -> Written {
        self.stop.store(true, Ordering::Relaxed);
        self.task.join().expect("the writer")
    }
}

/// `knownNodes` and `ejectedNodes` as a form.
pub fn rebalance_form(known: &[&String], ejected: &[&String]) -> String {
    let join = |names: &[&String]| {
        names
            .iter()
            .map(|name| name.replace('@', "%40"))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("knownNodes={}&ejectedNodes={}", join(known), join(ejected))
}

/// Starts a rebalance through `server`'s management door.
pub fn start_rebalance(server: &Server, known: &[&String], ejected: &[&String]) {
    let (status, body) = post_form(
        server,
        "/controller/rebalance",
        &rebalance_form(known, ejected),
    );
    assert_eq!(status, 200, "{body}");
}

/// Waits until `server` reports no rebalance running.
pub fn wait_rebalanced(server: &Server) {
    until("the rebalance to end", || {
        (progress(server)["status"] == "none").then_some(())
    });
}

/// Rebalances through `server` and waits until it is over.
pub fn rebalance(server: &Server, known: &[&String], ejected: &[&String]) {
    start_rebalance(server, known, ejected);
    wait_rebalanced(server);
}

/// The KV config of `server` once it lists `servers` nodes: (serverList, vbucket rows).
pub fn kv_map(server: &Server, servers: usize) -> (Vec<String>, Vec<Vec<i64>>) {
    until("the KV config", || {
        let mut kv = Kv::open(&server.kv_addr, "admin", "secret", "db");
        let (list, rows) = vbucket_map(&mut kv);
        (list.len() == servers).then_some((list, rows))
    })
}

/// Every vbucket of the map `nodes[0]` routes by has an active and a replica on distinct
/// nodes, and the replica holds its active's high seqno.
pub fn replicas_caught_up(nodes: &[&Server]) {
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
            active != replica
                && written.is_some()
                && replicas[replica].as_ref().and_then(|held| held.get(&vb)) == written
        });
        caught.then_some(())
    });
}
