//! Disk footprint as a user judges it with `du`: after 100,000 small sequential documents and a
//! `_compact`, the data directory holds little more than its SST files (no write-ahead log kept
//! alive by a column family that is never flushed, no preallocated log), and `GET /db` reports
//! `sizes` as CouchDB means them: `file` the bytes on disk, `active` the live part (<= file).

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Client, Server};

const DOCS: usize = 100_000;
const DOCS_PER_BULK: usize = 10_000;
/// The data directory may hold at most this many times the bytes of its SST files (the
/// rest: MANIFEST, OPTIONS, RocksDB's LOG, the node's small files).
const DU_TO_SST_RATIO_MAX: u64 = 2;
/// A bound against hanging while the compaction runs, not a timing assertion.
const COMPACTION_DEADLINE: Duration = Duration::from_secs(120);

/// What `du` counts: allocated blocks of every file below `dir`.
fn du_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let metadata = entry.metadata().expect("metadata");
        total += if metadata.is_dir() {
            du_bytes(&entry.path())
        } else {
            metadata.blocks() * 512
        };
    }
    total
}

fn sst_bytes(db_dir: &Path) -> u64 {
    std::fs::read_dir(db_dir)
        .expect("read_dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sst"))
        .map(|path| std::fs::metadata(path).expect("metadata").len())
        .sum()
}

fn sizes(client: &mut Client) -> (Value, bool) {
    let info = client.request("GET", "/db", None).expect("db info").json();
    let sizes = info["sizes"].clone();
    let file = sizes["file"].as_u64().expect("file");
    let active = sizes["active"].as_u64().expect("active");
    assert!(active <= file, "sizes.active > sizes.file: {sizes}");
    (sizes, info["compact_running"] == true)
}

#[test]
fn compaction_leaves_little_more_than_live_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let mut client = Client::connect(&server.addr).expect("connect");
    assert_eq!(client.request("PUT", "/db", None).unwrap().status, 201);
    for first in (0..DOCS).step_by(DOCS_PER_BULK) {
        let docs: Vec<Value> = (first..first + DOCS_PER_BULK)
            .map(|index| json!({"_id": format!("doc{index:08}"), "value": index, "kind": "sequential"}))
            .collect();
        let body = serde_json::to_vec(&json!({ "docs": docs })).expect("json");
        let response = client
            .request("POST", "/db/_bulk_docs", Some(&body))
            .expect("bulk");
        assert_eq!(response.status, 201);
    }
    let (before, _) = sizes(&mut client);
    assert!(
        before["file"].as_u64() > Some(0),
        "written data takes disk space before it is flushed: {before}"
    );

    let compact = client
        .request("POST", "/db/_compact", Some(b"{}"))
        .expect("compact");
    assert_eq!(compact.status, 202);
    let deadline = Instant::now() + COMPACTION_DEADLINE;
    let after = loop {
        let (sizes, running) = sizes(&mut client);
        if !running {
            break sizes;
        }
        assert!(Instant::now() < deadline, "compaction never finished");
        std::thread::sleep(Duration::from_millis(100));
    };

    let db_dir = server.data_dir.join("db");
    let sst = sst_bytes(&db_dir);
    let du = du_bytes(&server.data_dir);
    let listing: Vec<(String, u64, u64)> = std::fs::read_dir(&db_dir)
        .expect("read_dir")
        .map(|entry| {
            let entry = entry.expect("entry");
            let metadata = entry.metadata().expect("metadata");
            (
                entry.file_name().to_string_lossy().into_owned(),
                metadata.len(),
                metadata.blocks() * 512,
            )
        })
        .collect();
    assert!(sst > 0);
    assert!(
        du <= DU_TO_SST_RATIO_MAX * sst,
        "du {du} bytes for {sst} bytes of SST files: {listing:?}"
    );
    // The database is nearly all that is stored: its file size is its SST files' size.
    let file = after["file"].as_u64().expect("file");
    assert!(
        file >= sst / 2 && file <= sst,
        "sizes.file {file} for {sst} bytes of SST files: {after}"
    );
    server.stop();
}
