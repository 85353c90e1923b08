//! The Couchbase KV door of a real `settee serve`, driven over TCP with the shared frame codec:
//! handshake and auth, the operations' statuses, one document through both doors, and
//! malformed frames that must close only their own connection and lose nothing.
//! (The official SDKs are exercised by tests/compat-kv; this test pins wire-level details.)

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use settee_kv_codec::{datatype, feature, opcode, status};
use support::kv::{counter_extras, store_extras, Kv, Reply};
use support::{Client, Server};

fn setup(server: &Server) {
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    assert_eq!(http.request("PUT", "/private", None).unwrap().status, 201);
    let user = br#"{"name":"alice","password":"alicepw","roles":[],"type":"user"}"#;
    assert_eq!(
        http.request("PUT", "/_users/org.couchdb.user:alice", Some(user))
            .unwrap()
            .status,
        201
    );
    let security =
        br#"{"admins":{"names":[],"roles":[]},"members":{"names":["alice"],"roles":[]}}"#;
    assert_eq!(
        http.request("PUT", "/default/_security", Some(security))
            .unwrap()
            .status,
        200
    );
}

#[test]
fn handshake_operations_and_both_doors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);

    // Authentication: wrong password and an account without access to a bucket.
    let mut kv = Kv::connect(&server.kv_addr);
    let accepted = kv.hello(&[feature::XERROR, feature::SELECT_BUCKET, 0x7777]);
    assert_eq!(accepted, vec![feature::XERROR, feature::SELECT_BUCKET]);
    assert_eq!(kv.auth("alice", "wrong"), status::AUTH_ERROR);
    // Still unauthenticated: refused before anything else is looked at, as kv_engine.
    assert_eq!(
        kv.call(opcode::GET, b"k", &[], &[], 0).status,
        status::EACCESS
    );
    assert_eq!(kv.auth("alice", "alicepw"), 0);
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"private", &[], &[], 0)
            .status,
        status::EACCESS
    );
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"nope", &[], &[], 0).status,
        status::EACCESS
    );
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"default", &[], &[], 0)
            .status,
        0
    );
    let config = kv.call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    let config: serde_json::Value = serde_json::from_slice(&config.value).unwrap();
    assert_eq!(
        config["vBucketServerMap"]["vBucketMap"]
            .as_array()
            .unwrap()
            .len(),
        64
    );
    let kv_port: u16 = server.kv_addr.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(config["nodesExt"][0]["services"]["kv"], kv_port);

    // Store family and CAS.
    let set = kv.call(
        opcode::SET,
        b"doc",
        &store_extras(0x0200_0000, 0),
        br#"{"a":1}"#,
        0,
    );
    assert_eq!(set.status, 0);
    let get = kv.call(opcode::GET, b"doc", &[], &[], 0);
    assert_eq!((get.status, get.cas), (0, set.cas));
    assert_eq!(get.extras, 0x0200_0000u32.to_be_bytes());
    assert_eq!(get.value, br#"{"a":1}"#);
    let add = kv.call(opcode::ADD, b"doc", &store_extras(0, 0), b"{}", 0);
    assert_eq!(add.status, status::KEY_EEXISTS);
    let stale = kv.call(
        opcode::REPLACE,
        b"doc",
        &store_extras(0, 0),
        b"{}",
        set.cas + 1,
    );
    assert_eq!(stale.status, status::KEY_EEXISTS);
    let missing = kv.call(opcode::REPLACE, b"absent", &store_extras(0, 0), b"{}", 0);
    assert_eq!(missing.status, status::KEY_ENOENT);
    let bad = kv.call(opcode::SET, b"doc", &[1, 2, 3], b"{}", 0);
    assert_eq!(bad.status, status::EINVAL);
    let long_key = vec![b'k'; 251];
    assert_eq!(
        kv.call(opcode::SET, &long_key, &store_extras(0, 0), b"{}", 0)
            .status,
        status::EINVAL
    );

    // Counters and append.
    let created = kv.call(opcode::INCREMENT, b"ctr", &counter_extras(5, 10, 0), &[], 0);
    assert_eq!(
        (created.status, created.value.clone()),
        (0, 10u64.to_be_bytes().to_vec())
    );
    let bumped = kv.call(opcode::INCREMENT, b"ctr", &counter_extras(5, 10, 0), &[], 0);
    assert_eq!(bumped.value, 15u64.to_be_bytes());
    let floor = kv.call(
        opcode::DECREMENT,
        b"ctr",
        &counter_extras(100, 0, 0),
        &[],
        0,
    );
    assert_eq!(floor.value, 0u64.to_be_bytes());
    let no_create = kv.call(
        opcode::INCREMENT,
        b"ctr2",
        &counter_extras(1, 0, u32::MAX),
        &[],
        0,
    );
    assert_eq!(no_create.status, status::KEY_ENOENT);
    assert_eq!(
        kv.call(opcode::INCREMENT, b"doc", &counter_extras(1, 0, 0), &[], 0)
            .status,
        status::DELTA_BADVAL
    );
    kv.call(opcode::SET, b"text", &store_extras(0, 0), b"middle", 0);
    kv.call(opcode::APPEND, b"text", &[], b"-end", 0);
    kv.call(opcode::PREPEND, b"text", &[], b"start-", 0);
    assert_eq!(
        kv.call(opcode::GET, b"text", &[], &[], 0).value,
        b"start-middle-end"
    );
    assert_eq!(
        kv.call(opcode::APPEND, b"absent", &[], b"x", 0).status,
        status::NOT_STORED
    );

    // Locks: others see CAS -1 and cannot write; the holder can; unlock needs the lock CAS.
    let locked = kv.call(opcode::GET_LOCKED, b"doc", &5u32.to_be_bytes(), &[], 0);
    assert_eq!(locked.status, 0);
    assert_eq!(kv.call(opcode::GET, b"doc", &[], &[], 0).cas, u64::MAX);
    assert_eq!(
        kv.call(opcode::SET, b"doc", &store_extras(0, 0), b"{}", 0)
            .status,
        status::LOCKED
    );
    assert_eq!(
        kv.call(opcode::GET_LOCKED, b"doc", &[], &[], 0).status,
        status::LOCKED
    );
    assert_eq!(
        kv.call(opcode::UNLOCK_KEY, b"doc", &[], &[], locked.cas + 1)
            .status,
        status::LOCKED
    );
    assert_eq!(
        kv.call(opcode::UNLOCK_KEY, b"doc", &[], &[], locked.cas)
            .status,
        0
    );
    let relock = kv.call(opcode::GET_LOCKED, b"doc", &[], &[], 0);
    let holder = kv.call(
        opcode::SET,
        b"doc",
        &store_extras(0x0200_0000, 0),
        br#"{"b":2}"#,
        relock.cas,
    );
    assert_eq!(holder.status, 0);
    assert_ne!(kv.call(opcode::GET, b"doc", &[], &[], 0).cas, u64::MAX);

    // GET_META sees tombstones; touch and expiry.
    let meta = kv.call(opcode::GET_META, b"doc", &[], &[], 0);
    assert_eq!((meta.status, &meta.extras[..4]), (0, &[0u8, 0, 0, 0][..]));
    kv.call(opcode::SET, b"gone", &store_extras(0, 0), b"{}", 0);
    assert_eq!(kv.call(opcode::DELETE, b"gone", &[], &[], 0).status, 0);
    let tomb = kv.call(opcode::GET_META, b"gone", &[], &[], 0);
    assert_eq!((tomb.status, &tomb.extras[..4]), (0, &[0u8, 0, 0, 1][..]));
    assert_eq!(
        kv.call(opcode::GET, b"gone", &[], &[], 0).status,
        status::KEY_ENOENT
    );
    assert_eq!(
        kv.call(opcode::DELETE, b"gone", &[], &[], 0).status,
        status::KEY_ENOENT
    );
    kv.call(opcode::SET, b"short", &store_extras(0, 1), b"{}", 0);
    assert_eq!(
        kv.call(opcode::TOUCH, b"text", &100u32.to_be_bytes(), &[], 0)
            .status,
        0
    );
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        kv.call(opcode::GET, b"short", &[], &[], 0).status,
        status::KEY_ENOENT
    );
    assert_eq!(kv.call(opcode::GET, b"text", &[], &[], 0).status, 0);

    // Quiet gets answer only hits; NOOP flushes the pipeline.
    kv.send(opcode::GETQ, b"absent", &[], &[], 0);
    let hit = kv.send(opcode::GETQ, b"doc", &[], &[], 0);
    let noop = kv.send(opcode::NOOP, b"", &[], &[], 0);
    assert_eq!(kv.read().unwrap().opaque, hit);
    assert_eq!(kv.read().unwrap().opaque, noop);
    assert_eq!(
        kv.call(0xee, b"", &[], &[], 0).status,
        status::UNKNOWN_COMMAND
    );

    // One document, two doors: every mutation changes both the CAS and the revision.
    let mut http = Client::connect(&server.addr).unwrap();
    let first = http.request("GET", "/default/doc", None).unwrap().json();
    assert_eq!(first["b"], 2);
    let rev1 = first["_rev"].as_str().unwrap().to_string();
    let cas1 = kv.call(opcode::GET, b"doc", &[], &[], 0).cas;
    // A KV lock holds HTTP writers off too, until it is released.
    let lock = kv.call(opcode::GET_LOCKED, b"doc", &15u32.to_be_bytes(), &[], 0);
    assert_eq!(lock.status, 0);
    let while_locked = http
        .request(
            "PUT",
            &format!("/default/doc?rev={rev1}"),
            Some(br#"{"c":3}"#),
        )
        .unwrap();
    assert_eq!(while_locked.status, 409);
    assert_eq!(
        kv.call(opcode::UNLOCK_KEY, b"doc", &[], &[], lock.cas)
            .status,
        0
    );
    let put = http
        .request(
            "PUT",
            &format!("/default/doc?rev={rev1}"),
            Some(br#"{"c":3}"#),
        )
        .unwrap();
    assert_eq!(put.status, 201);
    let put_generation: u64 = put.json()["rev"]
        .as_str()
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let after_http = kv.call(opcode::GET, b"doc", &[], &[], 0);
    assert_eq!(after_http.value, br#"{"c":3}"#);
    assert_ne!(after_http.cas, cas1);
    kv.call(
        opcode::SET,
        b"doc",
        &store_extras(0, 0),
        br#"{"d":4}"#,
        after_http.cas,
    );
    let last = http.request("GET", "/default/doc", None).unwrap().json();
    assert_eq!(last["d"], 4);
    assert!(last["_rev"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}-", put_generation + 1)));
    server.stop();
}

#[test]
fn snappy_values_both_ways_only_when_negotiated() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let big: Vec<u8> = format!(r#"{{"text":"{}"}}"#, "settee ".repeat(2000)).into_bytes();
    let compressed = snap::raw::Encoder::new().compress_vec(&big).unwrap();

    let mut plain = Kv::connect(&server.kv_addr);
    let accepted = plain.hello(&[feature::XERROR, feature::SELECT_BUCKET, feature::JSON]);
    assert!(!accepted.contains(&feature::SNAPPY));
    assert_eq!(plain.auth("alice", "alicepw"), 0);
    assert_eq!(
        plain
            .call(opcode::SELECT_BUCKET, b"default", &[], &[], 0)
            .status,
        0
    );
    // Snappy data from a client that did not negotiate it is refused.
    plain.datatype = datatype::SNAPPY;
    let refused = plain.call(opcode::SET, b"big", &store_extras(0, 0), &compressed, 0);
    assert_eq!(refused.status, status::EINVAL);
    plain.datatype = 0;

    let mut snappy = Kv::connect(&server.kv_addr);
    let accepted = snappy.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::SNAPPY,
    ]);
    assert!(accepted.contains(&feature::SNAPPY));
    assert_eq!(snappy.auth("alice", "alicepw"), 0);
    assert_eq!(
        snappy
            .call(opcode::SELECT_BUCKET, b"default", &[], &[], 0)
            .status,
        0
    );
    snappy.datatype = datatype::SNAPPY | datatype::JSON;
    let stored = snappy.call(opcode::SET, b"big", &store_extras(0, 0), &compressed, 0);
    assert_eq!(stored.status, 0);
    snappy.datatype = 0;
    assert_eq!(
        snappy
            .call(opcode::SET, b"small", &store_extras(0, 0), br#"{"a":1}"#, 0)
            .status,
        0
    );

    // The stored value is the decompressed one: the other connection and HTTP read it plain.
    let read_plain = plain.call(opcode::GET, b"big", &[], &[], 0);
    assert_eq!(read_plain.datatype & datatype::SNAPPY, 0);
    assert_eq!(read_plain.value, big);
    let mut http = Client::connect(&server.addr).unwrap();
    let doc = http.request("GET", "/default/big", None).unwrap().json();
    assert_eq!(doc["text"].as_str().unwrap().len(), "settee ".len() * 2000);

    // The negotiating connection gets large values compressed, small ones as they are.
    let read_snappy = snappy.call(opcode::GET, b"big", &[], &[], 0);
    assert_ne!(read_snappy.datatype & datatype::SNAPPY, 0);
    assert_ne!(read_snappy.datatype & datatype::JSON, 0);
    assert!(read_snappy.value.len() < big.len() / 2);
    assert_eq!(
        snap::raw::Decoder::new()
            .decompress_vec(&read_snappy.value)
            .unwrap(),
        big
    );
    let small = snappy.call(opcode::GET, b"small", &[], &[], 0);
    assert_eq!(small.datatype & datatype::SNAPPY, 0);
    assert_eq!(small.value, br#"{"a":1}"#);
    server.stop();
}

#[test]
fn a_pipelined_read_sees_the_writes_sent_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut kv = Kv::open(&server.kv_addr, "alice", "alicepw", "default");
    for round in 0..50u32 {
        // SET, INCREMENT, APPEND and GET back to back, without waiting: without
        // UnorderedExecution each must see the effect of the ones before it.
        let value = format!("v{round}");
        let set = kv.send(opcode::SET, b"rw", &store_extras(0, 0), value.as_bytes(), 0);
        let get = kv.send(opcode::GET, b"rw", &[], &[], 0);
        let append = kv.send(opcode::APPEND, b"rw", &[], b"-x", 0);
        let get_appended = kv.send(opcode::GETK, b"rw", &[], &[], 0);
        let count = kv.send(
            opcode::INCREMENT,
            b"ctr-rw",
            &counter_extras(1, 0, 0),
            &[],
            0,
        );
        let get_count = kv.send(opcode::GET, b"ctr-rw", &[], &[], 0);
        let replies: Vec<Reply> = (0..6).map(|_| kv.read().expect("reply")).collect();
        let opaques: Vec<u32> = replies.iter().map(|reply| reply.opaque).collect();
        assert_eq!(opaques, [set, get, append, get_appended, count, get_count]);
        assert!(replies.iter().all(|reply| reply.status == 0));
        assert_eq!(replies[1].value, value.as_bytes());
        assert_eq!(replies[3].value, format!("{value}-x").as_bytes());
        assert_eq!(replies[5].value, round.to_string().as_bytes());
    }
    drop(kv);
    // The management port reports latency percentiles by opcode (server admins only).
    // A connection's own counts reach the node's when it closes (or every second).
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let mut timings = serde_json::Value::Null;
    for _ in 0..50 {
        let response = mgmt.request("GET", "/settee/timings", None).unwrap();
        assert_eq!(response.status, 200);
        timings = response.json();
        if timings["GET"]["count"].as_u64().unwrap_or(0) >= 100 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(timings["GET"]["count"].as_u64().unwrap() >= 100);
    assert!(timings["SET"]["count"].as_u64().unwrap() >= 50);
    assert!(
        timings["GET"]["p99_us"].as_u64().unwrap() >= timings["GET"]["p50_us"].as_u64().unwrap()
    );
    server.stop();
}

/// With UnorderedExecution a batch of pipelined data requests is split across threads: every
/// request must still get exactly one reply, the right one, whatever the order; a non-data
/// request in the middle of a batch is answered too.
#[test]
fn an_unordered_connection_answers_every_pipelined_request_once() {
    use settee_kv_codec::subdoc::{op, put_lookup_spec};
    use std::collections::HashMap;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut kv = Kv::connect(&server.kv_addr);
    let accepted = kv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::UNORDERED_EXECUTION,
    ]);
    assert!(accepted.contains(&feature::UNORDERED_EXECUTION));
    assert_eq!(kv.auth("alice", "alicepw"), 0);
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"default", &[], &[], 0)
            .status,
        0
    );
    // What each opaque must be answered with: (status, value).
    let mut expected: HashMap<u32, (u16, Vec<u8>)> = HashMap::new();
    let read_all = |kv: &mut Kv, expected: &mut HashMap<u32, (u16, Vec<u8>)>| {
        while !expected.is_empty() {
            let reply = kv.read().expect("a reply for every request");
            let (status, value) = expected
                .remove(&reply.opaque)
                .unwrap_or_else(|| panic!("unexpected or repeated opaque {}", reply.opaque));
            assert_eq!(reply.status, status, "opaque {}", reply.opaque);
            if !value.is_empty() {
                assert_eq!(reply.value, value, "opaque {}", reply.opaque);
            }
        }
    };
    for i in 0..100 {
        let key = format!("u{i}");
        let body = format!(r#"{{"n":{i},"tag":"t{i}"}}"#);
        let opaque = kv.send(
            opcode::SET,
            key.as_bytes(),
            &store_extras(0, 0),
            body.as_bytes(),
            0,
        );
        expected.insert(opaque, (0, Vec::new()));
    }
    read_all(&mut kv, &mut expected);
    for round in 0..5 {
        for i in 0..100 {
            let key = format!("u{i}");
            let opaque = kv.send(opcode::GET, key.as_bytes(), &[], &[], 0);
            expected.insert(
                opaque,
                (0, format!(r#"{{"n":{i},"tag":"t{i}"}}"#).into_bytes()),
            );
            let mut specs = Vec::new();
            put_lookup_spec(&mut specs, op::GET, 0, b"tag");
            put_lookup_spec(&mut specs, op::GET, 0, b"n");
            let opaque = kv.send(opcode::SUBDOC_MULTI_LOOKUP, key.as_bytes(), &[], &specs, 0);
            let tag = format!(r#""t{i}""#);
            let number = i.to_string();
            let mut results = Vec::new();
            for value in [tag.as_bytes(), number.as_bytes()] {
                results.extend_from_slice(&0u16.to_be_bytes());
                results.extend_from_slice(&(value.len() as u32).to_be_bytes());
                results.extend_from_slice(value);
            }
            expected.insert(opaque, (0, results));
            let missing = format!("missing-{round}-{i}");
            let opaque = kv.send(opcode::GET, missing.as_bytes(), &[], &[], 0);
            expected.insert(opaque, (status::KEY_ENOENT, Vec::new()));
            if i == 50 {
                // Not a data request: answered in the middle of the batch.
                let opaque = kv.send(opcode::NOOP, b"", &[], &[], 0);
                expected.insert(opaque, (0, Vec::new()));
            }
            let opaque = kv.send(
                opcode::INCREMENT,
                format!("c{}", i % 10).as_bytes(),
                &counter_extras(1, 1, 0),
                &[],
                0,
            );
            expected.insert(opaque, (0, Vec::new()));
        }
        read_all(&mut kv, &mut expected);
    }
    // Every increment happened exactly once: 5 rounds x 10 per counter, starting at 1.
    for counter in 0..10 {
        let reply = kv.call(opcode::GET, format!("c{counter}").as_bytes(), &[], &[], 0);
        assert_eq!(reply.value, b"50", "counter c{counter}");
    }
    server.stop();
}

#[test]
fn malformed_frames_close_only_their_connection_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut good = Kv::open(&server.kv_addr, "admin", "secret", "default");
    for index in 0..200 {
        let key = format!("key-{index}");
        let reply = good.call(
            opcode::SET,
            key.as_bytes(),
            &store_extras(0, 0),
            b"\"v\"",
            0,
        );
        assert_eq!(reply.status, 0);
    }
    let garbage: [&[u8]; 3] = [
        // Unknown magic.
        &[0x42; 24],
        // Sections longer than the body.
        &[
            0x80, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        // A body length far above any limit.
        &[
            0x80, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    ];
    for bytes in garbage {
        let mut bad = Kv::open(&server.kv_addr, "admin", "secret", "default");
        bad.stream.write_all(bytes).unwrap();
        assert!(
            bad.closed_by_server(),
            "server must close a connection sending {bytes:?}"
        );
        // The well-behaved connection is unaffected.
        assert_eq!(good.call(opcode::GET, b"key-7", &[], &[], 0).status, 0);
    }
    // Nothing acknowledged is lost, even across a crash.
    let data_dir = server.data_dir.clone();
    server.kill9();
    let server = Server::start(&data_dir);
    let mut kv = Kv::open(&server.kv_addr, "admin", "secret", "default");
    for index in 0..200 {
        let key = format!("key-{index}");
        assert_eq!(
            kv.call(opcode::GET, key.as_bytes(), &[], &[], 0).value,
            b"\"v\""
        );
    }
    server.stop();
}

/// The bulk lane's counters (`/settee/timings`).
fn bulk_lane(server: &Server) -> serde_json::Value {
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let response = mgmt.request("GET", "/settee/timings", None).unwrap();
    assert_eq!(response.status, 200);
    response.json()["bulk_lane"].clone()
}

/// Connections moved to the bulk lane so far.
fn bulk_lane_moves(server: &Server) -> u64 {
    bulk_lane(server)["connections_moved"]
        .as_u64()
        .expect("bulk_lane.connections_moved")
}

/// A connection that pipelines and keeps its thread busy moves to the bulk lane between two
/// requests (`--kv-bulk-busy-share 0`: as soon as it pipelines). It must go on answering every
/// request in order, with a frame split across writes (and so across the move) intact; a
/// connection with one request in flight at a time never moves.
#[test]
fn a_pipelining_connection_moves_to_the_bulk_lane_and_keeps_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--kv-bulk-busy-share", "0"]);
    setup(&server);
    let mut light = Kv::open(&server.kv_addr, "alice", "alicepw", "default");
    let until = Instant::now() + Duration::from_millis(400);
    while Instant::now() < until {
        let reply = light.call(opcode::GET, b"absent", &[], &[], 0);
        assert_eq!(reply.status, status::KEY_ENOENT);
    }
    assert_eq!(
        bulk_lane_moves(&server),
        0,
        "one request per read must not move"
    );

    let mut heavy = Kv::open(&server.kv_addr, "alice", "alicepw", "default");
    // Each round writes 32 SET + GET pairs in one write, plus the first half of a GET whose
    // second half starts the next round's write.
    let mut split_tail: Vec<u8> = Vec::new();
    let mut split_opaque: Option<(u32, Vec<u8>)> = None;
    let mut round = |kv: &mut Kv, round: u32| {
        let mut burst = std::mem::take(&mut split_tail);
        let mut expected: Vec<(u32, Option<Vec<u8>>)> = Vec::new();
        if let Some((opaque, value)) = split_opaque.take() {
            expected.push((opaque, Some(value)));
        }
        for index in 0..32u32 {
            let key = format!("lane-{index}");
            let value = format!("round {round} value {index}").into_bytes();
            let set = kv.encode(
                &mut burst,
                opcode::SET,
                key.as_bytes(),
                &store_extras(0, 0),
                &value,
                0,
            );
            expected.push((set, None));
            let get = kv.encode(&mut burst, opcode::GET, key.as_bytes(), &[], &[], 0);
            expected.push((get, Some(value)));
        }
        let mut half = Vec::new();
        let opaque = kv.encode(&mut half, opcode::GET, b"lane-0", &[], &[], 0);
        let cut = half.len() / 2;
        burst.extend_from_slice(&half[..cut]);
        split_tail = half[cut..].to_vec();
        split_opaque = Some((opaque, format!("round {round} value 0").into_bytes()));
        kv.stream.write_all(&burst).unwrap();
        for (opaque, value) in expected {
            let reply = kv.read().expect("a reply for every request");
            assert_eq!(
                reply.opaque, opaque,
                "replies in request order (round {round})"
            );
            assert_eq!(reply.status, 0);
            if let Some(value) = value {
                assert_eq!(reply.value, value);
            }
        }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rounds = 0;
    while bulk_lane_moves(&server) == 0 {
        assert!(
            Instant::now() < deadline,
            "the pipelining connection never moved"
        );
        for _ in 0..20 {
            round(&mut heavy, rounds);
            rounds += 1;
        }
    }
    // On the bulk lane now: the split frame and everything after it still answered in order.
    for _ in 0..20 {
        round(&mut heavy, rounds);
        rounds += 1;
    }
    assert_eq!(bulk_lane_moves(&server), 1);
    // It has a seat on one of the lane's threads; the light connection has none.
    let seats: Vec<u64> = bulk_lane(&server)["connections"]
        .as_array()
        .expect("bulk_lane.connections")
        .iter()
        .map(|count| count.as_u64().expect("a count"))
        .collect();
    assert_eq!(seats.iter().sum::<u64>(), 1, "{seats:?}");
    // The light connection, still on the main lane, sees the heavy one's writes.
    let reply = light.call(opcode::GET, b"lane-5", &[], &[], 0);
    assert_eq!(reply.status, 0);
    assert_eq!(
        reply.value,
        format!("round {} value 5", rounds - 1).into_bytes()
    );
    server.stop();
}

/// Requests kv_engine refuses are refused: a shape its validators reject (a GET with extras,
/// a SET without them...) is EINVAL and runs nothing; the cluster map is not given out before
/// authentication; framing extras (magic 0x08) need HELLO's AltRequestSupport. The
/// connection goes on working after each refusal.
#[test]
fn requests_kv_engine_refuses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);

    // The cluster map names every node and port: only for authenticated connections.
    let mut anonymous = Kv::connect(&server.kv_addr);
    anonymous.hello(&[feature::XERROR, feature::JSON]);
    let config = anonymous.call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    assert_eq!(config.status, status::EACCESS);
    assert!(!String::from_utf8_lossy(&config.value).contains("nodesExt"));
    assert_eq!(anonymous.auth("alice", "alicepw"), 0);
    let config = anonymous.call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    assert_eq!(config.status, 0);
    assert!(String::from_utf8_lossy(&config.value).contains("nodesExt"));

    let mut kv = Kv::open(&server.kv_addr, "alice", "alicepw", "default");
    let set = kv.call(opcode::SET, b"doc", &store_extras(0, 0), br#"{"a":1}"#, 0);
    assert_eq!(set.status, 0);
    // (opcode, key, extras, value, cas)
    type Request<'a> = (u8, &'a [u8], Vec<u8>, &'a [u8], u64);
    let refused: [Request; 9] = [
        // A GET with 8 bytes of extras (memcached and kv_engine: EINVAL).
        (opcode::GET, b"doc", vec![0; 8], b"", 0),
        (opcode::GETQ, b"doc", vec![0; 8], b"", 0),
        (opcode::GET, b"doc", vec![], b"value", 0),
        (opcode::GET, b"doc", vec![], b"", set.cas),
        (opcode::SET, b"doc", vec![0; 4], b"{}", 0),
        (opcode::DELETE, b"doc", vec![0; 4], b"", 0),
        (opcode::ADD, b"new", store_extras(0, 0), b"{}", 5),
        (opcode::INCREMENT, b"n", counter_extras(1, 0, 0), b"1", 0),
        (opcode::NOOP, b"key", vec![], b"", 0),
    ];
    for (op, key, extras, value, cas) in refused {
        let reply = kv.call(op, key, &extras, value, cas);
        assert_eq!(reply.status, status::EINVAL, "opcode {op:#04x}");
    }
    let unlock = kv.call(opcode::UNLOCK_KEY, b"doc", &[], &[], 0);
    assert_eq!(unlock.status, status::EINVAL);
    // Nothing ran: the document is as it was, no counter or new key exists.
    let get = kv.call(opcode::GET, b"doc", &[], &[], 0);
    assert_eq!((get.status, get.value.as_slice()), (0, &br#"{"a":1}"#[..]));
    assert_eq!(get.cas, set.cas);
    for key in [&b"new"[..], b"n"] {
        assert_eq!(
            kv.call(opcode::GET, key, &[], &[], 0).status,
            status::KEY_ENOENT
        );
    }

    // Framing extras without AltRequestSupport: refused, nothing stored.
    let alt_set = |kv: &mut Kv, key: &[u8]| {
        let mut frame = Vec::new();
        let opaque = kv.opaque + 1;
        kv.opaque = opaque;
        let vbucket = settee_engine::vbucket::vbucket_of(key, kv.vbuckets);
        // Frame info 5 (PreserveTTL), no data.
        settee_kv_codec::encode_request(
            &mut frame,
            opcode::SET,
            vbucket,
            opaque,
            0,
            0,
            &[0x50],
            &store_extras(0, 0),
            key,
            b"{}",
        );
        assert_eq!(frame[0], 0x08, "alternative request magic");
        kv.stream.write_all(&frame).unwrap();
        let reply = kv.read().expect("reply");
        assert_eq!(reply.opaque, opaque);
        reply.status
    };
    assert_eq!(alt_set(&mut kv, b"alt"), status::EINVAL);
    assert_eq!(
        kv.call(opcode::GET, b"alt", &[], &[], 0).status,
        status::KEY_ENOENT
    );
    let accepted = kv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::ALT_REQUEST_SUPPORT,
    ]);
    assert!(accepted.contains(&feature::ALT_REQUEST_SUPPORT));
    assert_eq!(alt_set(&mut kv, b"alt"), 0);
    assert_eq!(kv.call(opcode::GET, b"alt", &[], &[], 0).status, 0);
    server.stop();
}
