//! Crash test: writers PUT documents concurrently; the server is killed with SIGKILL at a random
//! moment; after a restart every write that was acknowledged (201) must be there, with its
//! revision (or, for documents updated in place, a revision at least as new), and the change
//! feed must list every document once, by its whole id. In every other run `_compact` runs
//! over and over during the writes, so the kill also lands inside compactions, which rewrite
//! change entries without an fsync (docs/format/keys.md). Repeated `SETTEE_CRASH_RUNS` times
//! (default 20) on the same data directory.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{Client, Server};

const WRITERS: usize = 8;

#[derive(Default)]
struct Acked {
    /// id -> rev of documents written once.
    created: BTreeMap<String, String>,
    /// id -> newest acknowledged rev of documents updated repeatedly.
    updated: BTreeMap<String, String>,
}

fn rev_pos(rev: &str) -> u64 {
    rev.split('-')
        .next()
        .and_then(|pos| pos.parse().ok())
        .unwrap_or(0)
}

fn writer(
    addr: String,
    run: usize,
    thread: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Acked>>,
) {
    let Ok(mut client) = Client::connect(&addr) else {
        return;
    };
    let counter_id = format!("counter-{thread}");
    let mut counter_rev: Option<String> = acked
        .lock()
        .expect("lock")
        .updated
        .get(&counter_id)
        .cloned();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let id = format!("r{run}-t{thread}-{i}");
        let body = format!(
            "{{\"run\":{run},\"thread\":{thread},\"i\":{i},\"pad\":\"{}\"}}",
            "x".repeat(100)
        );
        let Ok(response) = client.request("PUT", &format!("/crash/{id}"), Some(body.as_bytes()))
        else {
            return;
        };
        if response.status == 201 {
            let rev = response.json()["rev"].as_str().expect("rev").to_string();
            acked.lock().expect("lock").created.insert(id, rev);
        }
        if i % 4 == 0 {
            let body = match &counter_rev {
                Some(rev) => format!("{{\"_rev\":\"{rev}\",\"i\":{i}}}"),
                None => format!("{{\"i\":{i}}}"),
            };
            let Ok(response) = client.request(
                "PUT",
                &format!("/crash/{counter_id}"),
                Some(body.as_bytes()),
            ) else {
                return;
            };
            if response.status == 201 {
                let rev = response.json()["rev"].as_str().expect("rev").to_string();
                acked
                    .lock()
                    .expect("lock")
                    .updated
                    .insert(counter_id.clone(), rev.clone());
                counter_rev = Some(rev);
            }
        }
    }
}

fn verify(addr: &str, acked: &Acked, run: usize) {
    let mut client = Client::connect(addr).expect("connect");
    for (id, rev) in &acked.created {
        let response = client
            .request("GET", &format!("/crash/{id}"), None)
            .expect("get");
        assert_eq!(
            response.status,
            200,
            "run {run}: acknowledged {id} lost: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_eq!(
            response.json()["_rev"].as_str(),
            Some(rev.as_str()),
            "run {run}: {id} has another rev"
        );
    }
    for (id, rev) in &acked.updated {
        let response = client
            .request("GET", &format!("/crash/{id}"), None)
            .expect("get");
        assert_eq!(response.status, 200, "run {run}: acknowledged {id} lost");
        let current = response.json()["_rev"].as_str().expect("rev").to_string();
        assert!(
            rev_pos(&current) >= rev_pos(rev),
            "run {run}: {id} went back from {rev} to {current}"
        );
    }
    let response = client
        .request("GET", "/crash/_changes?since=0", None)
        .expect("changes");
    assert_eq!(response.status, 200, "run {run}: _changes");
    let mut seen = std::collections::HashSet::new();
    for row in response.json()["results"].as_array().expect("results") {
        let id = row["id"].as_str().expect("id").to_string();
        assert!(seen.insert(id.clone()), "run {run}: {id} twice in _changes");
    }
    for id in acked.created.keys().chain(acked.updated.keys()) {
        assert!(seen.contains(id), "run {run}: {id} missing from _changes");
    }
}

/// Compacts the database until `stop` (or the server dies), one `_compact` after the other.
/// Returns how many were accepted.
fn compactor(addr: String, stop: Arc<AtomicBool>) -> usize {
    let Ok(mut client) = Client::connect(&addr) else {
        return 0;
    };
    let mut accepted = 0;
    while !stop.load(Ordering::Relaxed) {
        match client.request("POST", "/crash/_compact", None) {
            Ok(response) => {
                assert_eq!(response.status, 202, "_compact");
                accepted += 1;
            }
            Err(_) => break,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    accepted
}

#[test]
fn kill9_loses_no_acknowledged_write() {
    let runs: usize = std::env::var("SETTEE_CRASH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().expect("tempdir");
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut server = Server::start(dir.path());
    let created = Client::connect(&server.addr)
        .expect("connect")
        .request("PUT", "/crash", None)
        .expect("create db");
    assert_eq!(created.status, 201);
    let mut seed = 0x9e3779b97f4a7c15u64;
    for run in 0..runs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..WRITERS)
            .map(|thread| {
                let (addr, stop, acked) = (server.addr.clone(), stop.clone(), acked.clone());
                std::thread::spawn(move || writer(addr, run, thread, stop, acked))
            })
            .collect();
        let compactions = (run % 2 == 1).then(|| {
            let (addr, stop) = (server.addr.clone(), stop.clone());
            std::thread::spawn(move || compactor(addr, stop))
        });
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(150 + seed % 500));
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        for thread in threads {
            let _ = thread.join();
        }
        if let Some(compactions) = compactions {
            let accepted = compactions.join().expect("compactor");
            assert!(accepted > 0, "run {run}: no compaction ran");
        }
        server = Server::start(dir.path());
        let acked = acked.lock().expect("lock");
        assert!(
            !acked.created.is_empty(),
            "run {run}: no write was acknowledged at all"
        );
        verify(&server.addr, &acked, run);
        eprintln!(
            "run {run}: {} acknowledged documents verified after kill -9",
            acked.created.len() + acked.updated.len()
        );
    }
    server.stop();
}
