//! settee -> settee replication between two real `settee serve` processes: one-shot and
//! continuous `_replicate`, filtered replications, `_replicator` documents, and a replication
//! interrupted by SIGKILL of the target that resumes from its checkpoint. Every test ends by
//! comparing the two databases revision by revision (bodies, deleted flags, histories,
//! conflicts), not by counting.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Client, Server, ADMIN};

fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut client = Client::connect(addr).expect("connect");
    let body = body.map(|body| body.to_string());
    let response = client
        .request(method, path, body.as_deref().map(str::as_bytes))
        .expect("request");
    (response.status, response.json())
}

fn url(server: &Server, db: &str) -> String {
    format!("http://{ADMIN}@{}/{db}", server.addr)
}

/// Every document (deleted ones too) with all its leaves: rev -> (deleted, body, history).
fn snapshot(addr: &str, db: &str) -> BTreeMap<String, Vec<Value>> {
    let (status, changes) = call(addr, "GET", &format!("/{db}/_changes?style=all_docs"), None);
    assert_eq!(status, 200, "{changes}");
    let mut docs = BTreeMap::new();
    for row in changes["results"].as_array().expect("results") {
        let id = row["id"].as_str().expect("id").to_string();
        let path = format!(
            "/{db}/{id}?open_revs=all&revs=true&attachments=true",
            id = id.replace('/', "%2F")
        );
        let (status, leaves) = call(addr, "GET", &path, None);
        assert_eq!(status, 200, "{leaves}");
        let mut leaves: Vec<Value> = leaves
            .as_array()
            .expect("leaves")
            .iter()
            .map(|leaf| leaf["ok"].clone())
            .collect();
        leaves.sort_by_key(|leaf| leaf["_rev"].as_str().unwrap_or("").to_string());
        docs.insert(id, leaves);
    }
    docs
}

fn assert_same(a: &str, db_a: &str, b: &str, db_b: &str) {
    let left = snapshot(a, db_a);
    let right = snapshot(b, db_b);
    assert_eq!(left.len(), right.len(), "document counts differ");
    for (id, leaves) in &left {
        assert_eq!(Some(leaves), right.get(id), "document {id} differs");
    }
    for id in left.keys() {
        let (_, x) = call(
            a,
            "GET",
            &format!("/{db_a}/{id}?conflicts=true&deleted_conflicts=true"),
            None,
        );
        let (_, y) = call(
            b,
            "GET",
            &format!("/{db_b}/{id}?conflicts=true&deleted_conflicts=true"),
            None,
        );
        assert_eq!(x, y, "winner or conflicts of {id} differ");
    }
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Documents with updates, deletions, an attachment and a conflict.
fn fill(addr: &str, db: &str, count: usize) {
    assert_eq!(call(addr, "PUT", &format!("/{db}"), None).0, 201);
    let docs: Vec<Value> = (0..count)
        .map(|n| json!({"_id": format!("doc{n:05}"), "n": n, "type": if n % 3 == 0 { "keep" } else { "other" }}))
        .collect();
    let (status, rows) = call(
        addr,
        "POST",
        &format!("/{db}/_bulk_docs"),
        Some(json!({"docs": docs})),
    );
    assert_eq!(status, 201, "{rows}");
    let rev = |id: &str| call(addr, "GET", &format!("/{db}/{id}"), None).1["_rev"].clone();
    let edited = json!({"_id": "doc00001", "_rev": rev("doc00001"), "n": 1, "edited": true});
    assert_eq!(
        call(addr, "PUT", &format!("/{db}/doc00001"), Some(edited)).0,
        201
    );
    let path = format!(
        "/{db}/doc00002?rev={}",
        rev("doc00002").as_str().expect("rev")
    );
    assert_eq!(call(addr, "DELETE", &path, None).0, 200);
    let with_attachment = json!({
        "_id": "doc00004", "_rev": rev("doc00004"),
        "_attachments": {"a.txt": {"content_type": "text/plain", "data": "aGVsbG8gd29ybGQ="}}
    });
    assert_eq!(
        call(
            addr,
            "PUT",
            &format!("/{db}/doc00004"),
            Some(with_attachment)
        )
        .0,
        201
    );
    let conflict = json!({"docs": [{"_id": "doc00005", "_rev": "2-ffff", "_revisions": {"start": 2, "ids": ["ffff", "aaaa"]}, "other": true}], "new_edits": false});
    assert_eq!(
        call(addr, "POST", &format!("/{db}/_bulk_docs"), Some(conflict)).0,
        201
    );
}

#[test]
fn one_shot_push_copies_everything_and_checkpoints_both_sides() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 200);
    let target = json!({"url": format!("http://{}/dst", b.addr), "auth": {"basic": {"username": "admin", "password": "secret"}}});
    let request =
        json!({"source": "src", "target": target, "create_target": true, "worker_batch_size": 37});
    let (status, answer) = call(&a.addr, "POST", "/_replicate", Some(request.clone()));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["history"][0]["docs_written"], 201);
    assert_same(&a.addr, "src", &b.addr, "dst");
    let (_, conflicted) = call(&b.addr, "GET", "/dst/doc00005?conflicts=true", None);
    assert_eq!(conflicted["_conflicts"].as_array().map(Vec::len), Some(1));
    // A second run finds nothing to do.
    let (_, again) = call(&a.addr, "POST", "/_replicate", Some(request.clone()));
    assert_eq!(again["no_changes"], true, "{again}");
    let (_, jobs) = call(&a.addr, "GET", "/_scheduler/jobs", None);
    assert_eq!(
        jobs["total_rows"], 0,
        "one-shot jobs leave the table when done"
    );
    // The checkpoint is in _local/<replication id> on both sides, with the same session.
    let base = replication_id(&a.addr, &request);
    for (addr, db) in [(&a.addr, "src"), (&b.addr, "dst")] {
        let (status, log) = call(addr, "GET", &format!("/{db}/_local/{base}"), None);
        assert_eq!(status, 200, "{log}");
        assert_eq!(log["session_id"], answer["session_id"]);
        assert_eq!(log["replication_id_version"], 4);
        assert_eq!(log["source_last_seq"], answer["source_last_seq"]);
        assert_eq!(log["history"][0]["docs_written"], 201);
    }
    a.stop();
    b.stop();
}

/// The base replication id `node` computes for `request`: cancelling a replication that is
/// not running answers 404 with the id as the reason, as CouchDB does.
fn replication_id(node: &str, request: &Value) -> String {
    let mut cancel = request.clone();
    cancel["cancel"] = json!(true);
    let (status, answer) = call(node, "POST", "/_replicate", Some(cancel));
    assert_eq!(status, 404, "{answer}");
    let id = answer["reason"].as_str().expect("id");
    id.split('+').next().expect("base").to_string()
}

#[test]
fn continuous_filtered_pull_follows_new_writes_until_cancelled() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 30);
    assert_eq!(call(&b.addr, "PUT", "/dst", None).0, 201);
    let request = json!({
        "source": url(&a, "src"), "target": "dst", "continuous": true,
        "selector": {"type": "keep"}
    });
    let (status, answer) = call(&b.addr, "POST", "/_replicate", Some(request));
    assert_eq!(status, 202, "{answer}");
    let id = answer["_local_id"].as_str().expect("id").to_string();
    assert!(id.ends_with("+continuous"), "{id}");
    let count = |addr: &str, db: &str| {
        call(addr, "GET", &format!("/{db}"), None).1["doc_count"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_until("the first filtered documents", || {
        count(&b.addr, "dst") == 10
    });
    let written = json!({"docs": [{"_id": "late-keep", "type": "keep"}, {"_id": "late-other", "type": "other"}]});
    assert_eq!(
        call(&a.addr, "POST", "/src/_bulk_docs", Some(written)).0,
        201
    );
    wait_until("a write made after the replication started", || {
        call(&b.addr, "GET", "/dst/late-keep", None).0 == 200
    });
    assert_eq!(call(&b.addr, "GET", "/dst/late-other", None).0, 404);
    let (_, jobs) = call(&b.addr, "GET", "/_scheduler/jobs", None);
    assert_eq!(jobs["jobs"][0]["id"], id.as_str(), "{jobs}");
    let (_, tasks) = call(&b.addr, "GET", "/_active_tasks", None);
    assert_eq!(tasks[0]["type"], "replication", "{tasks}");
    let (status, cancelled) = call(
        &b.addr,
        "POST",
        "/_replicate",
        Some(json!({"replication_id": id, "cancel": true})),
    );
    assert_eq!(status, 200, "{cancelled}");
    let (status, _) = call(
        &b.addr,
        "POST",
        "/_replicate",
        Some(json!({"replication_id": id, "cancel": true})),
    );
    assert_eq!(status, 404);
    let (_, jobs) = call(&b.addr, "GET", "/_scheduler/jobs", None);
    assert_eq!(jobs["total_rows"], 0);
    // The target holds exactly the source's documents the selector keeps.
    let (_, kept) = call(&b.addr, "GET", "/dst/_all_docs", None);
    for row in kept["rows"].as_array().expect("rows") {
        let (_, doc) = call(
            &a.addr,
            "GET",
            &format!("/src/{}", row["id"].as_str().expect("id")),
            None,
        );
        assert_eq!(doc["type"], "keep");
    }
    a.stop();
    b.stop();
}

#[test]
fn replicator_documents_run_and_record_their_state() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 40);
    let doc = json!({"source": url(&a, "src"), "target": "copy", "create_target": true, "doc_ids": ["doc00001", "doc00004", "doc00005"]});
    assert_eq!(
        call(&b.addr, "PUT", "/_replicator/by-ids", Some(doc)).0,
        201
    );
    let bad = json!({"source": url(&a, "src"), "target": "copy", "doc_ids": 7});
    assert_eq!(call(&b.addr, "PUT", "/_replicator/bad", Some(bad)).0, 201);
    wait_until("the document to complete", || {
        call(&b.addr, "GET", "/_replicator/by-ids", None).1["_replication_state"] == "completed"
    });
    wait_until("the bad document to fail", || {
        call(&b.addr, "GET", "/_replicator/bad", None).1["_replication_state"] == "failed"
    });
    let (_, done) = call(&b.addr, "GET", "/_replicator/by-ids", None);
    // doc00005 has two leaves (a conflict): four revisions for three documents.
    assert_eq!(done["_replication_stats"]["docs_written"], 4, "{done}");
    assert!(done["_replication_state_time"].is_string());
    let (_, failed) = call(&b.addr, "GET", "/_replicator/bad", None);
    assert!(failed["_replication_state_reason"]
        .as_str()
        .unwrap_or("")
        .contains("doc_ids"));
    let (_, state) = call(&b.addr, "GET", "/_scheduler/docs/_replicator/by-ids", None);
    assert_eq!(state["state"], "completed", "{state}");
    assert_eq!(
        state["id"].as_str().map(str::len),
        Some(32 + "+create_target".len()),
        "{state}"
    );
    let (_, state) = call(&b.addr, "GET", "/_scheduler/docs/_replicator/bad", None);
    assert_eq!(state["state"], "failed", "{state}");
    let (_, all) = call(&b.addr, "GET", "/_scheduler/docs", None);
    assert_eq!(all["total_rows"], 2, "{all}");
    let (_, copy) = call(&b.addr, "GET", "/copy/_all_docs", None);
    let ids: Vec<&str> = copy["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["id"].as_str())
        .collect();
    assert_eq!(ids, ["doc00001", "doc00004", "doc00005"]);
    let (_, doc5) = call(&b.addr, "GET", "/copy/doc00005?conflicts=true", None);
    let (_, source5) = call(&a.addr, "GET", "/src/doc00005?conflicts=true", None);
    assert_eq!(doc5, source5);
    a.stop();
    b.stop();
}

#[test]
fn killed_target_resumes_from_its_checkpoint_without_duplicates() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let a = Server::start(dir_a.path());
    let b = Server::start(dir_b.path());
    let b_addr = b.addr.clone();
    const DOCS: usize = 6000;
    assert_eq!(call(&a.addr, "PUT", "/src", None).0, 201);
    for chunk in 0..(DOCS / 1000) {
        let docs: Vec<Value> = (0..1000)
            .map(|n| json!({"_id": format!("d{:06}", chunk * 1000 + n), "pad": "x".repeat(64)}))
            .collect();
        assert_eq!(
            call(
                &a.addr,
                "POST",
                "/src/_bulk_docs",
                Some(json!({"docs": docs}))
            )
            .0,
            201
        );
    }
    assert_eq!(call(&b.addr, "PUT", "/dst", None).0, 201);
    let request = json!({
        "source": "src", "target": url(&b, "dst"),
        "worker_batch_size": 10, "worker_processes": 1, "checkpoint_interval": 20,
        "retries_per_request": 1
    });
    let a_addr = a.addr.clone();
    let first_request = request.clone();
    let first =
        std::thread::spawn(move || call(&a_addr, "POST", "/_replicate", Some(first_request)));
    let count = |addr: &str| {
        call(addr, "GET", "/dst", None).1["doc_count"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_until("the replication to be under way", || count(&b_addr) >= 500);
    b.kill9();
    let (status, answer) = first.join().expect("thread");
    assert_ne!(
        status, 200,
        "the first run must have been interrupted: {answer}"
    );
    // The same address again, so the replication id (which hashes it) is the same.
    let b = Server::start_on(dir_b.path(), &b_addr, &[]);
    assert_eq!(b.addr, b_addr);
    let before = count(&b.addr);
    assert!(before < DOCS as u64, "{before}");
    // What the target's checkpoint says survived the kill: the run resumes from there.
    let base = replication_id(&a.addr, &request);
    let (status, target_log) = call(&b.addr, "GET", &format!("/dst/_local/{base}"), None);
    assert_eq!(
        status, 200,
        "a checkpoint was written before the kill: {target_log}"
    );
    let (status, answer) = call(&a.addr, "POST", "/_replicate", Some(request));
    assert_eq!(status, 200, "{answer}");
    let resumed_from = &answer["history"][0]["start_last_seq"];
    assert_ne!(
        resumed_from,
        &json!(0),
        "the second run must resume from the checkpoint: {answer}"
    );
    assert_eq!(count(&b.addr), DOCS as u64);
    // Nothing duplicated: every document has its one revision, no conflicts, no extra leaves.
    let (_, all) = call(&b.addr, "GET", "/dst/_all_docs", None);
    for row in all["rows"].as_array().expect("rows") {
        assert!(
            row["value"]["rev"].as_str().expect("rev").starts_with("1-"),
            "{row}"
        );
    }
    assert_same(&a.addr, "src", &b.addr, "dst");
    for (addr, db) in [(&a.addr, "src"), (&b.addr, "dst")] {
        let (_, log) = call(addr, "GET", &format!("/{db}/_local/{base}"), None);
        assert_eq!(log["session_id"], answer["session_id"], "{log}");
        assert_eq!(
            log["history"][1]["session_id"], target_log["session_id"],
            "{log}"
        );
    }
    a.stop();
    b.stop();
}

#[test]
fn purges_are_not_replicated_and_do_not_disturb_checkpoints() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 20);
    let request = json!({"source": "src", "target": url(&b, "dst"), "create_target": true});
    let replicate = || {
        let (status, answer) = call(&a.addr, "POST", "/_replicate", Some(request.clone()));
        assert_eq!(status, 200, "{answer}");
        answer
    };
    replicate();
    let rev = |addr: &str, db: &str, id: &str| {
        call(addr, "GET", &format!("/{db}/{id}"), None).1["_rev"].clone()
    };
    let purge = |addr: &str, db: &str, id: &str| {
        let body = json!({ id: [rev(addr, db, id)] });
        let (status, answer) = call(addr, "POST", &format!("/{db}/_purge"), Some(body));
        assert_eq!(status, 201, "{answer}");
        assert_eq!(
            answer["purged"][id].as_array().map(Vec::len),
            Some(1),
            "{answer}"
        );
    };
    // Purged on the target: the checkpoint is past it, so it does not come back.
    purge(&b.addr, "dst", "doc00003");
    let again = replicate();
    assert_eq!(again["no_changes"], true, "{again}");
    assert_eq!(call(&b.addr, "GET", "/dst/doc00003", None).0, 404);
    // Purged on the source: not replicated (the target keeps its copy), and a document
    // written and purged between two runs is simply absent from the feed: nothing fails.
    purge(&a.addr, "src", "doc00006");
    let late = json!({"_id": "late", "v": 1});
    assert_eq!(call(&a.addr, "POST", "/src", Some(late)).0, 201);
    purge(&a.addr, "src", "late");
    let edited =
        json!({"_id": "doc00007", "_rev": rev(&a.addr, "src", "doc00007"), "edited": true});
    assert_eq!(call(&a.addr, "PUT", "/src/doc00007", Some(edited)).0, 201);
    let answer = replicate();
    assert_eq!(answer["history"][0]["doc_write_failures"], 0, "{answer}");
    // Counters in the history are cumulative across sessions, as in CouchDB.
    let found = |entry: usize| {
        answer["history"][entry]["missing_found"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(
        found(0) - found(1),
        1,
        "only the edit was missing: {answer}"
    );
    assert_eq!(call(&b.addr, "GET", "/dst/doc00006", None).0, 200);
    assert_eq!(call(&b.addr, "GET", "/dst/late", None).0, 404);
    // An edit on the source of the document the target purged brings it back whole.
    let edited = json!({"_id": "doc00003", "_rev": rev(&a.addr, "src", "doc00003"), "back": true});
    assert_eq!(call(&a.addr, "PUT", "/src/doc00003", Some(edited)).0, 201);
    replicate();
    let (_, back) = call(&b.addr, "GET", "/dst/doc00003?revs=true", None);
    assert_eq!(back["back"], true, "{back}");
    assert_eq!(
        back["_revisions"]["ids"].as_array().map(Vec::len),
        Some(2),
        "{back}"
    );
    let (_, info) = call(&b.addr, "GET", "/dst", None);
    assert_eq!(info["purge_seq"], "1");
    a.stop();
    b.stop();
}

#[test]
fn javascript_filter_with_query_params_and_its_code_in_the_id() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 30);
    let ddoc = json!({"filters": {"by_type": "function(doc, req) { return doc.type === req.query.type; }"}});
    let (status, saved) = call(&a.addr, "PUT", "/src/_design/app", Some(ddoc));
    assert_eq!(status, 201, "{saved}");
    let request = json!({
        "source": url(&a, "src"), "target": "dst", "create_target": true,
        "filter": "app/by_type", "query_params": {"type": "keep"}
    });
    let (status, answer) = call(&b.addr, "POST", "/_replicate", Some(request.clone()));
    assert_eq!(status, 200, "{answer}");
    let (_, copied) = call(&b.addr, "GET", "/dst/_all_docs", None);
    let rows = copied["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10, "{copied}");
    for row in rows {
        let (_, doc) = call(
            &b.addr,
            "GET",
            &format!("/dst/{}", row["id"].as_str().expect("id")),
            None,
        );
        assert_eq!(doc["type"], "keep");
    }
    // The id hashes the filter's code: a new version of the function is a new replication.
    let before = replication_id(&b.addr, &request);
    let ddoc = json!({"_rev": saved["rev"], "filters": {"by_type": "function(doc, req) { return doc.type !== req.query.type; }"}});
    assert_eq!(call(&a.addr, "PUT", "/src/_design/app", Some(ddoc)).0, 201);
    assert_ne!(replication_id(&b.addr, &request), before);
    a.stop();
    b.stop();
}

#[test]
fn since_seq_starts_a_first_replication_part_way() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let (a, b) = (Server::start(dir_a.path()), Server::start(dir_b.path()));
    fill(&a.addr, "src", 10);
    let (_, info) = call(&a.addr, "GET", "/src", None);
    let since = info["update_seq"].clone();
    let later = json!({"docs": [{"_id": "later1"}, {"_id": "later2"}]});
    assert_eq!(call(&a.addr, "POST", "/src/_bulk_docs", Some(later)).0, 201);
    let request = json!({"source": "src", "target": url(&b, "dst"), "create_target": true, "since_seq": since});
    let (status, answer) = call(&a.addr, "POST", "/_replicate", Some(request));
    assert_eq!(status, 200, "{answer}");
    let (_, copied) = call(&b.addr, "GET", "/dst/_all_docs", None);
    let ids: Vec<&str> = copied["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["id"].as_str())
        .collect();
    assert_eq!(ids, ["later1", "later2"]);
    assert_eq!(answer["history"][0]["start_last_seq"], since);
    a.stop();
    b.stop();
}

#[test]
fn continuous_replication_survives_a_source_restart_with_backoff() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let a = Server::start(dir_a.path());
    let b = Server::start(dir_b.path());
    let a_addr = a.addr.clone();
    fill(&a.addr, "src", 10);
    assert_eq!(call(&b.addr, "PUT", "/dst", None).0, 201);
    let request = json!({
        "source": url(&a, "src"), "target": "dst", "continuous": true, "retries_per_request": 1
    });
    let (status, answer) = call(&b.addr, "POST", "/_replicate", Some(request));
    assert_eq!(status, 202, "{answer}");
    let count = |addr: &str| {
        call(addr, "GET", "/dst", None).1["doc_count"]
            .as_u64()
            .unwrap_or(0)
    };
    wait_until("the first documents", || count(&b.addr) == 9);
    a.kill9();
    wait_until("the job to notice the source is gone", || {
        let (_, jobs) = call(&b.addr, "GET", "/_scheduler/jobs", None);
        jobs["jobs"][0]["history"]
            .as_array()
            .is_some_and(|events| events.iter().any(|event| event["type"] == "crashed"))
    });
    let a = Server::start_on(dir_a.path(), &a_addr, &[]);
    assert_eq!(
        call(&a.addr, "PUT", "/src/after-restart", Some(json!({"v": 1}))).0,
        201
    );
    wait_until("a write made after the restart", || {
        call(&b.addr, "GET", "/dst/after-restart", None).0 == 200
    });
    let (_, jobs) = call(&b.addr, "GET", "/_scheduler/jobs", None);
    let started = jobs["jobs"][0]["history"].as_array().map(|events| {
        events
            .iter()
            .filter(|event| event["type"] == "started")
            .count()
    });
    assert!(started.is_some_and(|count| count >= 2), "restarted: {jobs}");
    assert_same(&a.addr, "src", &b.addr, "dst");
    a.stop();
    b.stop();
}
