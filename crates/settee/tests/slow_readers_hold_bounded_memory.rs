//! A client that asks for large replies and does not read them cannot make the server hold
//! them all. On the KV door, 300 pipelined GETs (and sub-document lookups) of a 2 MB
//! document are 600 MB of replies: the server stops taking the connection's requests while
//! its unsent replies are over its budget, so its memory stays bounded (/proc VmRSS), another
//! client keeps working meanwhile, and the slow reader, once it reads, gets every reply, in
//! order without UnorderedExecution. On the HTTP door, `_all_docs?include_docs=true`, a view
//! whose rows are 100 MB (its values, or its documents with `include_docs=true`) and a
//! descending `_changes` with the documents stream in bounded chunks to a client that does not
//! read, while another client is answered; once it reads, it gets the whole, valid answer.

mod support;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use settee_kv_codec::subdoc::{op, put_lookup_spec};
use settee_kv_codec::{encode_request, feature, opcode};
use support::kv::{store_extras, Kv};
use support::{put_big_documents, Client, Server};

const DOC_BYTES: usize = 2 << 20;
const PIPELINED: usize = 300;
/// 600 MB of replies are asked for; a server holding them shows it. Its own buffers, a few
/// replies in flight and the kernel's socket buffers stay far below this.
const RSS_GROWTH_MAX_KB: u64 = 150 << 10;
/// How long the server is watched while the client does not read.
const WATCH_FOR: Duration = Duration::from_secs(2);

/// The largest VmRSS growth seen over [`WATCH_FOR`], in kB.
fn rss_growth_while_not_reading(server: &Server, baseline_kb: u64) -> u64 {
    let started = Instant::now();
    let mut peak = 0;
    while started.elapsed() < WATCH_FOR {
        peak = peak.max(server.memory_kb("VmRSS").saturating_sub(baseline_kb));
        std::thread::sleep(Duration::from_millis(50));
    }
    peak
}

/// Sends `count` copies of a request at once, without reading; their opaques in order.
fn pipeline(kv: &mut Kv, count: usize, op: u8, key: &[u8], value: &[u8]) -> Vec<u32> {
    let mut frames = Vec::new();
    let mut opaques = Vec::new();
    for _ in 0..count {
        kv.opaque += 1;
        let vbucket = settee_engine::vbucket::vbucket_of(key, kv.vbuckets);
        encode_request(
            &mut frames,
            op,
            vbucket,
            kv.opaque,
            0,
            0,
            &[],
            &[],
            key,
            value,
        );
        opaques.push(kv.opaque);
    }
    kv.stream.write_all(&frames).unwrap();
    opaques
}

/// A client on another connection is answered while the slow one is stuck.
fn other_client_works(server: &Server, round: usize) {
    let mut other = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let key = format!("other-{round}");
    let set = other.call(opcode::SET, key.as_bytes(), &store_extras(0, 0), b"1", 0);
    assert_eq!(set.status, 0);
    let get = other.call(opcode::GET, b"small", &[], &[], 0);
    assert_eq!((get.status, get.value.as_slice()), (0, &b"\"s\""[..]));
}

#[test]
fn kv_slow_readers_hold_bounded_memory_and_get_every_reply() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    let mut setup = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(DOC_BYTES - 11));
    assert_eq!(big.len(), DOC_BYTES);
    let set = setup.call(opcode::SET, b"big", &store_extras(0, 0), big.as_bytes(), 0);
    assert_eq!(set.status, 0);
    let set = setup.call(opcode::SET, b"small", &store_extras(0, 0), b"\"s\"", 0);
    assert_eq!(set.status, 0);
    // Warm the read path once, so the baseline includes it.
    assert_eq!(
        setup.call(opcode::GET, b"big", &[], &[], 0).value.len(),
        DOC_BYTES
    );

    let mut lookup = Vec::new();
    put_lookup_spec(&mut lookup, op::GET, 0, b"blob");
    let cases: [(&str, bool, u8, &[u8]); 3] = [
        ("ordered GET", false, opcode::GET, &[]),
        ("unordered GET", true, opcode::GET, &[]),
        (
            "ordered sub-document lookup",
            false,
            opcode::SUBDOC_MULTI_LOOKUP,
            &lookup,
        ),
    ];
    for (round, (case, unordered, request, value)) in cases.into_iter().enumerate() {
        let mut slow = Kv::connect(&server.kv_addr);
        let mut features = vec![feature::XERROR, feature::SELECT_BUCKET, feature::JSON];
        if unordered {
            features.push(feature::UNORDERED_EXECUTION);
        }
        slow.hello(&features);
        assert_eq!(slow.auth("admin", "secret"), 0);
        assert_eq!(
            slow.call(opcode::SELECT_BUCKET, b"default", &[], &[], 0)
                .status,
            0
        );
        let baseline = server.memory_kb("VmRSS");
        let mut opaques = pipeline(&mut slow, PIPELINED, request, b"big", value);
        other_client_works(&server, round);
        let growth = rss_growth_while_not_reading(&server, baseline);
        eprintln!("{case}: the server grew by {growth} kB while the client did not read");
        assert!(
            growth < RSS_GROWTH_MAX_KB,
            "{case}: the server grew by {growth} kB for a client that does not read"
        );
        other_client_works(&server, round + 10);
        // Now it reads: every reply, whole, in order unless unordered.
        let mut got = Vec::new();
        for _ in 0..PIPELINED {
            let reply = slow
                .read()
                .unwrap_or_else(|| panic!("{case}: reply {} of {PIPELINED}", got.len() + 1));
            assert_eq!(reply.status, 0, "{case}");
            assert!(reply.value.len() >= DOC_BYTES - 11, "{case}: a whole value");
            got.push(reply.opaque);
        }
        if unordered {
            got.sort_unstable();
            opaques.sort_unstable();
        }
        assert_eq!(got, opaques, "{case}: every reply once");
    }
    server.stop();
}

#[test]
fn http_slow_readers_of_streamed_documents_hold_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--max-document-size", "2000000"]);
    let mut http = Client::connect(&server.addr).unwrap();
    put_big_documents(&mut http, 100);
    // Read everything once, so the baseline includes what reading it costs anyway (caches).
    let all = http
        .request("GET", "/db/_all_docs?include_docs=true", None)
        .unwrap();
    assert_eq!(all.status, 200);
    drop(all);

    let baseline = server.memory_kb("VmRSS");
    let mut slow = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "GET /db/_all_docs?include_docs=true HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {}\r\n\r\n",
        support::base64_engine::encode(support::ADMIN.as_bytes())
    );
    slow.write_all(head.as_bytes()).unwrap();
    let growth = rss_growth_while_not_reading(&server, baseline);
    eprintln!("_all_docs: the server grew by {growth} kB while the client did not read");
    assert!(
        growth < 40 << 10,
        "the server grew by {growth} kB for a client that does not read 100 MB"
    );
    // Another client is answered meanwhile; then the slow one reads the whole response.
    let mut other = Client::connect(&server.addr).unwrap();
    assert_eq!(other.request("GET", "/db", None).unwrap().status, 200);
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut body = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    while !body.ends_with(b"0\r\n\r\n") {
        let read = slow.read(&mut chunk).expect("read");
        assert!(read > 0, "closed early");
        body.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&body);
    assert_eq!(text.matches("\"blob\":").count(), 100);
    server.stop();
}

/// Asks for `path` on a connection that then does not read while the server's memory is
/// watched and another client is served; then reads the whole response, which must be valid
/// JSON.
fn read_slowly(server: &Server, path: &str) -> serde_json::Value {
    let mut warm = Client::connect(&server.addr).unwrap();
    // Once whole, so the baseline includes what answering it costs anyway (caches, the index).
    let whole = warm.request("GET", path, None).unwrap();
    assert_eq!(whole.status, 200, "{path}");
    drop(whole);
    let baseline = server.memory_kb("VmRSS");
    let mut slow = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {}\r\n\r\n",
        support::base64_engine::encode(support::ADMIN.as_bytes())
    );
    slow.write_all(head.as_bytes()).unwrap();
    let growth = rss_growth_while_not_reading(server, baseline);
    eprintln!("{path}: the server grew by {growth} kB while the client did not read");
    assert!(
        growth < 40 << 10,
        "{path}: the server grew by {growth} kB for a client that does not read 100 MB"
    );
    let mut other = Client::connect(&server.addr).unwrap();
    assert_eq!(other.request("GET", "/db", None).unwrap().status, 200);
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let response = support::read_response(&mut BufReader::new(slow)).expect("the whole response");
    assert_eq!(response.status, 200, "{path}");
    serde_json::from_slice(&response.body)
        .unwrap_or_else(|error| panic!("{path}: not JSON ({error})"))
}

#[test]
fn http_slow_readers_of_views_and_descending_changes_hold_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--max-document-size", "2000000"]);
    let mut http = Client::connect(&server.addr).unwrap();
    put_big_documents(&mut http, 100);
    let design = br#"{"views": {
        "blobs": {"map": "function (doc) { emit(doc._id, doc.blob); }"},
        "ids": {"map": "function (doc) { emit(doc._id, null); }"}
    }}"#;
    let put = http
        .request("PUT", "/db/_design/big", Some(design))
        .unwrap();
    assert_eq!(put.status, 201);

    // 100 MB of emitted values.
    let blobs = read_slowly(&server, "/db/_design/big/_view/blobs");
    let rows = blobs["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 100);
    assert!(rows
        .iter()
        .all(|row| row["value"].as_str().map(str::len) == Some(1 << 20)));
    // 100 MB of documents.
    let ids = read_slowly(&server, "/db/_design/big/_view/ids?include_docs=true");
    let rows = ids["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 100);
    assert!(rows
        .iter()
        .all(|row| row["doc"]["blob"].as_str().map(str::len) == Some(1 << 20)));
    // Newest first, with the documents.
    let changes = read_slowly(&server, "/db/_changes?descending=true&include_docs=true");
    let results = changes["results"].as_array().expect("results");
    assert_eq!(results.len(), 101, "100 documents and the design document");
    assert_eq!(results[0]["id"], "_design/big");
    assert!(changes["last_seq"].is_string());
    server.stop();
}
