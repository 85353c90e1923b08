//! The data directory 30733d8 (0.1.0, format version 1) wrote in
//! `crates/engine/testdata/datadir-30733d8/` (`scripts/make-testdata-30733d8.sh`), served by
//! this build: the JavaScript view and the Mango index 30733d8 built answer as 30733d8 did
//! (`expected/*.json`) with `update=false`, so neither index was rebuilt, and after an update
//! too. The engine's own test of the directory (`crates/engine/tests/old_data_dir_30733d8.rs`)
//! checks the documents, the feeds and that no key is rewritten.

mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::{Client, Server, ADMIN};

const TESTDATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/testdata/datadir-30733d8"
);

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn expected(name: &str) -> Value {
    let path = Path::new(TESTDATA).join("expected").join(name);
    serde_json::from_slice(&std::fs::read(&path).expect("expected file")).expect("json")
}

fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let mut client = Client::connect_as(addr, ADMIN).expect("connect");
    let body = body.map(|body| body.to_string());
    let response = client
        .request(method, path, body.as_deref().map(str::as_bytes))
        .expect("request");
    assert_eq!(response.status, 200, "{method} {path}: {}", response.json());
    response.json()
}

#[test]
fn the_indexes_30733d8_built_answer_as_recorded_without_a_rebuild() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    copy_dir(&Path::new(TESTDATA).join("db"), &data.join("db"));
    let server = Server::start(&data);
    let addr = server.addr.as_str();
    let find =
        json!({"selector": {"n": {"$gte": 0}}, "use_index": "mango", "fields": ["_id", "n"]});
    for update in ["false", "true"] {
        let view = call(
            addr,
            "GET",
            &format!("/db/_design/app/_view/by_n?reduce=false&update={update}"),
            None,
        );
        assert_eq!(view, expected("view_by_n.json"), "update={update}");
        let reduced = call(
            addr,
            "GET",
            &format!("/db/_design/app/_view/by_n?update={update}"),
            None,
        );
        assert_eq!(
            reduced,
            expected("view_by_n_reduced.json"),
            "update={update}"
        );
        let mut body = find.clone();
        body["update"] = json!(update == "true");
        let found = call(addr, "POST", "/db/_find", Some(body));
        assert_eq!(
            found["docs"],
            expected("find_n.json")["docs"],
            "update={update}"
        );
    }
    let info = call(addr, "GET", "/db", None);
    let recorded = expected("db_info.json");
    for field in ["doc_count", "doc_del_count", "purge_seq"] {
        assert_eq!(info[field], recorded[field], "{field}");
    }
    // 30733d8 wrote update_seq in the compact form only; it is CouchDB's packed form now
    // (docs/format/update-seq.md). The same position either way: same sum, and a feed from
    // either one has nothing more.
    let (seq, recorded_seq) = (
        info["update_seq"].as_str().expect("seq"),
        recorded["update_seq"].as_str().expect("recorded seq"),
    );
    let sum = |seq: &str| seq.split_once('-').map(|(sum, _)| sum.to_string());
    assert_eq!(sum(seq), sum(recorded_seq));
    assert!(seq.contains("-g1"), "{seq}");
    for since in [seq, recorded_seq] {
        let changes = call(addr, "GET", &format!("/db/_changes?since={since}"), None);
        assert_eq!(changes["results"], json!([]), "since={since}");
    }
}
