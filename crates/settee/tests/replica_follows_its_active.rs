//! Two real `settee serve` processes: node B follows node A's bucket as a replica over DCP
//! (`--replica-of`, docs/format/replica.md). Writes on A through both doors — revision trees
//! with conflicts from `new_edits=false`, a deletion, an attachment, KV values with flags and
//! expiry — reach B with the same seqnos, CASes and revision trees; B refuses writes to its
//! replica vbuckets on both doors; kill -9 of B while it streams and a restart resume from its
//! persisted seqnos (not from 0); a node with another cluster secret cannot log in to stream.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use settee_kv_codec::{feature, opcode, status};
use support::kv::{store_extras, Kv};
use support::{binary, Client, Server};

const SECRET: &str = "the secret of the replica test";
const VBUCKETS: u16 = 8;

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").to_string()
}

/// A node whose every stdout line is kept (the replica hook prints its stream starts).
fn start_collecting(dir: &Path, extra: &[&str]) -> (Server, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--kv-addr",
            "127.0.0.1:0",
        ])
        .args([
            "--mgmt-addr",
            "127.0.0.1:0",
            "--admin",
            support::ADMIN,
            "--data-dir",
        ])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn settee");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut reader = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut addr, mut kv_addr) = (None, None);
    while kv_addr.is_none() {
        let line = reader.next().expect("settee exited").expect("line");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            addr = rest.split_whitespace().next().map(str::to_string);
        }
        if let Some(rest) = line.split("couchbase kv on ").nth(1) {
            kv_addr = rest.split_whitespace().next().map(str::to_string);
        }
        lines.lock().expect("lines").push(line);
    }
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in reader.map_while(Result::ok) {
            kept.lock().expect("lines").push(line);
        }
    });
    let server = Server {
        child,
        addr: addr.expect("http address"),
        kv_addr: kv_addr.expect("kv address"),
        mgmt_addr: String::new(),
        data_dir: dir.to_owned(),
        banner: Vec::new(),
    };
    (server, lines)
}

/// Waits (bounded, so a broken replica fails the test instead of hanging it) for a line.
fn wait_for_line(lines: &Arc<Mutex<Vec<String>>>, from: usize, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(line) = lines.lock().expect("lines")[from..]
            .iter()
            .find(|line| line.contains(needle))
        {
            return line.clone();
        }
        assert!(Instant::now() < deadline, "no line with {needle:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The stream starts a `streams from vb:seqno,...` line names.
fn starts(line: &str) -> Vec<(u16, u64)> {
    let list = line.split("streams from ").nth(1).expect("a start list");
    list.split(',')
        .map(|pair| {
            let (vb, seqno) = pair.split_once(':').expect("vb:seqno");
            (vb.parse().expect("vb"), seqno.parse().expect("seqno"))
        })
        .collect()
}

fn kv(server: &Server) -> Kv {
    let mut kv = Kv::open(&server.kv_addr, "admin", "secret", "db");
    kv.vbuckets = VBUCKETS;
    kv
}

/// Every vbucket's high seqno, as GET_ALL_VB_SEQNOS reports it (`None` before B has the
/// bucket).
fn seqnos(server: &Server) -> Option<Vec<u64>> {
    let mut kv = Kv::connect(&server.kv_addr);
    kv.hello(&[feature::XERROR, feature::SELECT_BUCKET]);
    assert_eq!(kv.auth("admin", "secret"), 0);
    let selected = kv.call(opcode::SELECT_BUCKET, b"db", &[], &[], 0).status;
    if selected != 0 {
        return None;
    }
    let reply = kv.call(opcode::GET_ALL_VB_SEQNOS, &[], &[], &[], 0);
    assert_eq!(reply.status, 0);
    Some(
        reply
            .value
            .chunks_exact(10)
            .map(|pair| u64::from_be_bytes(pair[2..].try_into().expect("8 bytes")))
            .collect(),
    )
}

fn wait_caught_up(active: &Server, replica: &Server) -> Vec<u64> {
    let target = seqnos(active).expect("the active's bucket");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if seqnos(replica).as_ref() == Some(&target) {
            return target;
        }
        assert!(Instant::now() < deadline, "the replica did not catch up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn get(server: &Server, path: &str) -> Value {
    let (code, body) = Client::connect(&server.addr)
        .expect("connect")
        .call("GET", path, None);
    assert_eq!(code, 200, "{path}: {body}");
    body
}

/// Everything B must hold as A holds it: the change feed (ids, seqs, revisions, deletions)
/// and every document with its revision tree, conflicts, local seq and attachments.
fn assert_same_documents(active: &Server, replica: &Server) {
    let changes = "/db/_changes?style=all_docs";
    let feed = get(active, changes);
    assert_eq!(feed["results"], get(replica, changes)["results"]);
    let ids: Vec<String> = feed["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| row["id"].as_str().expect("id").to_string())
        .collect();
    assert!(ids.len() > 10, "{feed}");
    for id in ids {
        let path = format!(
            "/db/{id}?revs=true&open_revs=all&local_seq=true&attachments=true&conflicts=true"
        );
        let mut a = Client::connect(&active.addr).expect("connect");
        let mut b = Client::connect(&replica.addr).expect("connect");
        let accept = [("Accept", "application/json")];
        let from_a = a.request_with("GET", &path, &accept, None).expect("get");
        let from_b = b.request_with("GET", &path, &accept, None).expect("get");
        assert_eq!(from_a.status, 200);
        assert_eq!(from_a.json(), from_b.json(), "{id}");
    }
}

fn write_on_active(active: &Server) {
    let mut http = Client::connect(&active.addr).expect("connect");
    assert_eq!(http.call("PUT", &format!("/db?q={VBUCKETS}"), None).0, 201);
    for index in 0..30 {
        let body = json!({"n": index, "text": "plain document"});
        let (code, _) = http.call("PUT", &format!("/db/doc-{index}"), Some(body));
        assert_eq!(code, 201);
    }
    let conflicts = json!({"new_edits": false, "docs": [
        {"_id": "conflicted", "_rev": "1-aaaa", "side": "a"},
        {"_id": "conflicted", "_rev": "1-bbbb", "side": "b"},
        {"_id": "conflicted", "_rev": "2-cccc", "_revisions": {"start": 2, "ids": ["cccc", "aaaa"]}, "side": "a2"},
    ]});
    assert_eq!(http.call("POST", "/db/_bulk_docs", Some(conflicts)).0, 201);
    let (_, doc) = http.call("GET", "/db/doc-3", None);
    let rev = doc["_rev"].as_str().expect("rev");
    assert_eq!(
        http.call("DELETE", &format!("/db/doc-3?rev={rev}"), None).0,
        200
    );
    let with_attachment = json!({"_attachments": {"note.txt": {
        "content_type": "text/plain", "data": "aGVsbG8gcmVwbGljYQ=="}}});
    assert_eq!(
        http.call("PUT", "/db/attached", Some(with_attachment)).0,
        201
    );
    let mut kv = kv(active);
    for index in 0..10u32 {
        let key = format!("kv-{index}");
        let value = format!("{{\"kv\":{index}}}");
        let extras = store_extras(0xabc0 + index, 4_000_000_000);
        assert_eq!(
            kv.call(opcode::SET, key.as_bytes(), &extras, value.as_bytes(), 0)
                .status,
            0
        );
    }
}

/// KV documents: the same value, flags and CAS on both nodes.
fn assert_same_kv(active: &Server, replica: &Server) {
    let (mut a, mut b) = (kv(active), kv(replica));
    for index in 0..10 {
        let key = format!("kv-{index}");
        let (from_a, from_b) = (
            a.call(opcode::GET, key.as_bytes(), &[], &[], 0),
            b.call(opcode::GET, key.as_bytes(), &[], &[], 0),
        );
        assert_eq!(from_a.status, 0);
        assert_eq!(
            (from_a.status, from_a.cas, &from_a.extras, &from_a.value),
            (from_b.status, from_b.cas, &from_b.extras, &from_b.value)
        );
    }
}

fn bulk_write(active: &Server, first: usize, count: usize) {
    let mut http = Client::connect(&active.addr).expect("connect");
    for start in (first..first + count).step_by(100) {
        let docs: Vec<Value> = (start..start + 100)
            .map(|index| json!({"_id": format!("bulk-{index:05}"), "payload": "x".repeat(300)}))
            .collect();
        let (code, _) = http.call("POST", "/db/_bulk_docs", Some(json!({"docs": docs})));
        assert_eq!(code, 201);
    }
}

#[test]
fn a_replica_follows_its_active_and_resumes_after_kill9() {
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let a_cluster = free_addr();
    let active = Server::start_with(
        dirs[0].path(),
        &["--cluster-addr", &a_cluster, "--cluster-secret", SECRET],
    );
    write_on_active(&active);

    let b_cluster = free_addr();
    let replica_of = format!("{}/db", active.kv_addr);
    let b_args = [
        "--cluster-addr",
        &b_cluster,
        "--cluster-secret",
        SECRET,
        "--replica-of",
        &replica_of,
    ];
    let (replica, lines) = start_collecting(dirs[1].path(), &b_args);
    let first = starts(&wait_for_line(&lines, 0, "streams from"));
    assert_eq!(first.len(), VBUCKETS as usize);
    assert!(first.iter().all(|(_, seqno)| *seqno == 0), "{first:?}");
    let caught_up = wait_caught_up(&active, &replica);
    assert_same_documents(&active, &replica);
    assert_same_kv(&active, &replica);

    // Replica vbuckets refuse front-door writes on both doors.
    let mut http = Client::connect(&replica.addr).expect("connect");
    let (code, body) = http.call("PUT", "/db/doc-0", Some(json!({"n": "on b"})));
    assert_eq!(
        (code, body["error"].as_str()),
        (503, Some("service_unavailable"))
    );
    let (code, _) = http.call(
        "POST",
        "/db/_bulk_docs",
        Some(json!({"docs": [{"_id": "b"}]})),
    );
    assert_eq!(code, 503);
    let reply = kv(&replica).call(opcode::SET, b"kv-0", &store_extras(0, 0), b"{}", 0);
    assert_eq!(reply.status, status::NOT_MY_VBUCKET);

    // kill -9 while B streams a few thousand more documents, then restart it.
    bulk_write(&active, 0, 1500);
    let deadline = Instant::now() + Duration::from_secs(60);
    while seqnos(&replica).expect("bucket").iter().sum::<u64>() <= caught_up.iter().sum::<u64>() {
        assert!(Instant::now() < deadline, "the replica did not move");
        std::thread::sleep(Duration::from_millis(5));
    }
    replica.kill9();
    bulk_write(&active, 1500, 500);
    let (replica, lines) = start_collecting(dirs[1].path(), &b_args);
    let resumed = starts(&wait_for_line(&lines, 0, "streams from"));
    for ((vbucket, from), before) in resumed.iter().zip(&caught_up) {
        assert!(
            from >= before,
            "vbucket {vbucket} restarted below {before}: {from}"
        );
    }
    assert!(resumed.iter().map(|(_, from)| from).sum::<u64>() > 0);
    wait_caught_up(&active, &replica);
    assert_same_documents(&active, &replica);
    assert_same_kv(&active, &replica);

    // The records stream is for nodes only: a database admin keeps the standard stream.
    let mut admin = kv(&active);
    admin.hello(&[feature::XERROR, feature::COLLECTIONS]);
    let mut open_extras = vec![0u8; 8];
    open_extras[4..].copy_from_slice(&1u32.to_be_bytes());
    assert_eq!(
        admin
            .call(opcode::DCP_OPEN, b"outside", &open_extras, &[], 0)
            .status,
        0
    );
    let records = admin.call(opcode::DCP_CONTROL, b"settee_records", &[], b"true", 0);
    assert_eq!(records.status, status::EACCESS);

    // A node with another secret cannot log in as a node, so it cannot stream.
    let mut intruder = Kv::connect(&active.kv_addr);
    intruder.hello(&[feature::XERROR]);
    let wrong = settee_auth::node_password("not the secret of this cluster");
    assert_eq!(
        intruder.auth(settee_auth::NODE_USER, &wrong),
        status::AUTH_ERROR
    );
    let c_cluster = free_addr();
    let c_args = [
        "--cluster-addr",
        &c_cluster,
        "--cluster-secret",
        "not the secret of this cluster",
        "--replica-of",
        &replica_of,
    ];
    let (outsider, lines) = start_collecting(dirs[2].path(), &c_args);
    let failed = wait_for_line(&lines, 0, "connection failed");
    assert!(failed.contains("refused the node login"), "{failed}");
    assert!(seqnos(&outsider).is_none(), "no bucket was replicated");
    outsider.stop();
    replica.stop();
    active.stop();
}
