//! A real `settee serve` whose data directory is on a small tmpfs that the test fills: writes
//! fail cleanly (CouchDB's 507 `insufficient_storage`, no file path in any body) and `/_up`
//! says why, reads keep working, writes succeed again by themselves once space is freed (no
//! restart), and after a kill -9 every acknowledged write is there and no failed one is.
//!
//! Mounting needs root (CI runs as root); elsewhere the test says so and passes without running.

mod support;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Client, Server};

/// Big enough for RocksDB's first write-ahead log (preallocated) and the 64 MB of free space
/// its SstFileManager wants before it resumes writes after a full disk.
const TMPFS_SIZE: &str = "192m";
/// Free space left when the filler file has taken the rest.
const HEADROOM_BYTES: u64 = 24 << 20;
/// Each bulk request: this many documents of `PAD_BYTES` incompressible characters.
const DOCS_PER_BULK: usize = 50;
const PAD_BYTES: usize = 100_000;
/// More bulk requests than the headroom can hold, so the disk fills for sure.
const BULKS_MAX: usize = 100;
/// How long writes may take to come back once space is freed (RocksDB polls every 5 s); a
/// bound against hanging, not a timing assertion.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(90);

/// A tmpfs mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_SIZE}"), "tmpfs"])
            .arg(dir.path())
            .status();
        match status {
            Ok(status) if status.success() => Some(Tmpfs { dir }),
            other => {
                eprintln!(
                    "SKIPPED disk_full_recovers_without_restart: cannot mount a tmpfs ({other:?}); \
                     this test needs root"
                );
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|status| status.success());
        if !unmounted {
            // Still busy (a process that has not exited yet): detach it now, freed when idle.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Fills the file system with one file, then gives `headroom` bytes back.
fn fill(path: &Path, headroom: u64) -> File {
    let mut file = File::create(path).expect("filler");
    let chunk = vec![0x5au8; 1 << 20];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(count) => written += count as u64,
        }
    }
    file.set_len(written.saturating_sub(headroom))
        .expect("shrink filler");
    file
}

/// Characters that do not compress, so the data really takes disk space.
fn incompressible(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

fn bulk(client: &mut Client, index: usize) -> (support::Response, Vec<String>) {
    let ids: Vec<String> = (0..DOCS_PER_BULK)
        .map(|doc| format!("b{index:03}-{doc:02}"))
        .collect();
    let docs: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(doc, id)| {
            json!({"_id": id, "pad": incompressible((index * DOCS_PER_BULK + doc) as u64, PAD_BYTES)})
        })
        .collect();
    let body = serde_json::to_vec(&json!({ "docs": docs })).expect("json");
    let response = client
        .request("POST", "/db/_bulk_docs", Some(&body))
        .expect("bulk");
    (response, ids)
}

fn assert_clean_failure(response: &support::Response, what: &str, data_dir: &Path) {
    let text = String::from_utf8_lossy(&response.body).into_owned();
    assert_eq!(response.status, 507, "{what}: {text}");
    assert_eq!(
        response.json()["error"],
        "insufficient_storage",
        "{what}: {text}"
    );
    assert!(
        !text.contains('/') && !text.contains(&*data_dir.to_string_lossy()),
        "{what} shows a path: {text}"
    );
}

fn doc_count(client: &mut Client) -> u64 {
    let info = client.request("GET", "/db", None).expect("db info");
    assert_eq!(info.status, 200, "reads work while the disk is full");
    info.json()["doc_count"].as_u64().expect("doc_count")
}

#[test]
fn disk_full_recovers_without_restart() {
    let Some(tmpfs) = Tmpfs::mount() else {
        return;
    };
    let data_dir: PathBuf = tmpfs.path().join("data");
    let server = Server::start(&data_dir);
    let mut client = Client::connect(&server.addr).expect("connect");
    assert_eq!(client.request("PUT", "/db", None).unwrap().status, 201);

    let filler_path = tmpfs.path().join("filler");
    let filler = fill(&filler_path, HEADROOM_BYTES);
    let mut acknowledged: Vec<String> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for index in 0..BULKS_MAX {
        let (response, ids) = bulk(&mut client, index);
        if response.status == 201 {
            let rows = response.json();
            let rows = rows.as_array().expect("rows");
            assert!(rows.iter().all(|row| row["ok"] == true), "{rows:?}");
            acknowledged.extend(ids);
            continue;
        }
        assert_clean_failure(&response, "a bulk write on a full disk", &data_dir);
        refused.extend(ids);
        break;
    }
    assert!(!refused.is_empty(), "the disk never filled");

    let single = client
        .request("PUT", "/db/single", Some(br#"{"a":1}"#))
        .expect("put");
    assert_clean_failure(&single, "a document write on a full disk", &data_dir);
    let up = client.request("GET", "/_up", None).expect("up");
    assert_ne!(up.status, 200, "/_up while the disk is full");
    assert_eq!(up.json()["status"], "insufficient_storage");
    assert_eq!(doc_count(&mut client), acknowledged.len() as u64);

    // Free the space: writes come back by themselves.
    drop(filler);
    std::fs::remove_file(&filler_path).expect("remove filler");
    let deadline = Instant::now() + RECOVERY_DEADLINE;
    loop {
        let response = client
            .request("PUT", "/db/after-recovery", Some(br#"{"a":1}"#))
            .expect("put");
        if response.status == 201 {
            acknowledged.push("after-recovery".into());
            break;
        }
        assert_clean_failure(&response, "a write while space comes back", &data_dir);
        assert!(Instant::now() < deadline, "writes never came back");
        std::thread::sleep(Duration::from_millis(250));
    }
    let up = client.request("GET", "/_up", None).expect("up");
    assert_eq!(up.status, 200, "{:?}", up.json());
    let (response, ids) = bulk(&mut client, BULKS_MAX);
    assert_eq!(response.status, 201, "{:?}", response.json());
    acknowledged.extend(ids);
    assert_eq!(doc_count(&mut client), acknowledged.len() as u64);

    // Nothing acknowledged is lost, nothing refused appears, across a kill -9.
    server.kill9();
    let server = Server::start(&data_dir);
    let mut client = Client::connect(&server.addr).expect("connect");
    assert_eq!(doc_count(&mut client), acknowledged.len() as u64);
    for (ids, wanted) in [(&acknowledged, true), (&refused, false)] {
        let body = serde_json::to_vec(&json!({ "keys": ids })).expect("json");
        let rows = client
            .request("POST", "/db/_all_docs", Some(&body))
            .expect("all_docs")
            .json();
        let rows = rows["rows"].as_array().expect("rows").clone();
        assert_eq!(rows.len(), ids.len());
        for row in rows {
            assert_eq!(
                row.get("error").is_none(),
                wanted,
                "{row} (acknowledged: {wanted})"
            );
        }
    }
    server.stop();
}
