//! Buckets live in the cluster map and the KV door routes by it, between three real
//! `settee serve` processes: `PUT /db?n=2` on one node opens the bucket on all three with the
//! same vbucket count; every node's terse config lists the three nodes and the same vbucket map
//! (1 replica); a raw GET or SET sent to a node that is not the key's active is answered
//! NOT_MY_VBUCKET with that config, while the active node stores and serves it (and its
//! replica receives it); a connection that asked in HELLO is pushed the next map.

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::Value;
use settee_kv_codec::{decode, feature, opcode, status, Decoded, Magic};
use support::kv::{store_extras, Kv};
use support::{Client, Server};

const SECRET: &str = "the secret of the routing test";

fn http(server: &Server, method: &str, path: &str) -> (u16, Value) {
    let mut client = Client::connect(&server.addr).expect("connect");
    let response = client.request(method, path, None).expect("request");
    (response.status, response.json())
}

/// Polls (bounded) until `done` holds for the node's answer to `GET path`.
fn until(server: &Server, path: &str, done: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http(server, "GET", path);
        if done(status, &body) {
            return body;
        }
        assert!(Instant::now() < deadline, "{path}: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kv(server: &Server, bucket: &str) -> Kv {
    Kv::open(&server.kv_addr, "admin", "secret", bucket)
}

fn terse_config(server: &Server, bucket: &str) -> Value {
    let reply = kv(server, bucket).call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    assert_eq!(reply.status, status::SUCCESS);
    serde_json::from_slice(&reply.value).expect("a JSON config")
}

/// The status of the next reply on `kv`, skipping the map pushes before it.
fn reply_skipping_pushes(kv: &mut Kv) -> u16 {
    loop {
        if let Ok(Decoded::Frame(frame, used)) = decode(&kv.buffer, 1 << 26) {
            let reply = (frame.magic != Magic::ServerRequest).then(|| frame.status());
            kv.buffer.drain(..used);
            match reply {
                Some(status) => return status,
                None => continue,
            }
        }
        let mut chunk = [0u8; 65536];
        let read = kv
            .stream
            .read(&mut chunk)
            .expect("a reply before the read timeout");
        assert!(read > 0, "the node closed the connection");
        kv.buffer.extend_from_slice(&chunk[..read]);
    }
}

/// A server request (magic 0x82) read off `kv`: (opcode, key, extras, value).
fn server_request(kv: &mut Kv) -> (u8, Vec<u8>, Vec<u8>, Vec<u8>) {
    loop {
        if let Ok(Decoded::Frame(frame, used)) = decode(&kv.buffer, 1 << 26) {
            let pushed = (frame.magic == Magic::ServerRequest).then(|| {
                let parts = (frame.key, frame.extras, frame.value);
                (
                    frame.opcode,
                    parts.0.to_vec(),
                    parts.1.to_vec(),
                    parts.2.to_vec(),
                )
            });
            kv.buffer.drain(..used);
            match pushed {
                Some(request) => return request,
                None => continue,
            }
        }
        let mut chunk = [0u8; 65536];
        let read = kv
            .stream
            .read(&mut chunk)
            .expect("a push before the read timeout");
        assert!(read > 0, "the node closed the connection");
        kv.buffer.extend_from_slice(&chunk[..read]);
    }
}

#[test]
fn buckets_follow_the_map_and_kv_requests_go_to_the_active() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);

    let (created, body) = http(&nodes[0], "PUT", "/routed?n=2");
    assert_eq!(created, 201, "{body}");
    let (again, body) = http(&nodes[2], "PUT", "/routed");
    assert_eq!((again, body["error"].as_str()), (412, Some("file_exists")));
    for node in &nodes {
        let info = until(node, "/routed", |status, _| status == 200);
        assert_eq!(info["cluster"]["q"], 64);
    }

    // A connection on node 2 that asks for map pushes.
    let mut pushed = kv(&nodes[1], "routed");
    // HELLO again, now asking for pushes; they may come at any time from here on (the
    // orchestrator's voter changes are map changes too), even before HELLO's own reply.
    let features: Vec<u8> = [
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::DUPLEX,
        feature::CLUSTERMAP_CHANGE_NOTIFICATION,
    ]
    .iter()
    .flat_map(|code| code.to_be_bytes())
    .collect();
    pushed.send(opcode::HELLO, b"routing test", &[], &features, 0);
    assert_eq!(reply_skipping_pushes(&mut pushed), status::SUCCESS);

    // Every node gives the same map of three nodes, one replica, its own node marked.
    // (The orchestrator's voter changes move the map too: read until every node is on one.)
    let configs: Vec<Value> = support::until("one map revision on every node", || {
        let configs: Vec<Value> = nodes
            .iter()
            .map(|node| terse_config(node, "routed"))
            .collect();
        configs
            .iter()
            .all(|config| config["rev"] == configs[0]["rev"])
            .then_some(configs)
    });
    let map = &configs[0]["vBucketServerMap"];
    assert_eq!(map["serverList"].as_array().map(Vec::len), Some(3));
    assert_eq!(map["numReplicas"], 1);
    for (index, config) in configs.iter().enumerate() {
        assert_eq!(config["vBucketServerMap"], *map, "node {index}");
        assert_eq!(config["rev"], configs[0]["rev"]);
        let this: Vec<bool> = config["nodesExt"]
            .as_array()
            .expect("nodesExt")
            .iter()
            .map(|node| node["thisNode"] == true)
            .collect();
        assert_eq!(this.iter().filter(|mark| **mark).count(), 1);
    }
    // serverList entry -> our node, by KV port.
    let server_list: Vec<String> = map["serverList"]
        .as_array()
        .expect("serverList")
        .iter()
        .map(|entry| entry.as_str().expect("host:port").to_string())
        .collect();
    let node_at = |index: usize| {
        nodes
            .iter()
            .find(|node| node.kv_addr == server_list[index])
            .expect("a listed node is one of ours")
    };

    let key = b"routed-key";
    let vbucket = settee_engine::vbucket::vbucket_of(key, 64);
    let row = &map["vBucketMap"][usize::from(vbucket)];
    let active = row[0].as_u64().expect("an active") as usize;
    assert!(row[1]
        .as_i64()
        .is_some_and(|replica| replica >= 0 && replica as usize != active));
    let elsewhere = (active + 1) % 3;

    let mut wrong = kv(node_at(elsewhere), "routed");
    for op in [opcode::SET, opcode::GET] {
        let (extras, value) = if op == opcode::SET {
            (store_extras(0, 0), &b"{\"n\":1}"[..])
        } else {
            (vec![], &b""[..])
        };
        let reply = wrong.call(op, key, &extras, value, 0);
        assert_eq!(reply.status, status::NOT_MY_VBUCKET, "op {op:#x}");
        let config: Value = serde_json::from_slice(&reply.value).expect("the config");
        assert_eq!(config["vBucketServerMap"], *map);
    }
    let mut right = kv(node_at(active), "routed");
    let stored = right.call(opcode::SET, key, &store_extras(0, 0), b"{\"n\":1}", 0);
    assert_eq!(stored.status, status::SUCCESS);
    let read = right.call(opcode::GET, key, &[], &[], 0);
    assert_eq!((read.status, read.value.as_slice()), (0, &b"{\"n\":1}"[..]));
    // Over HTTP every node answers it: the others forward the request to the active.
    for index in 0..3 {
        let (status, body) = http(node_at(index), "GET", "/routed/routed-key");
        assert_eq!((status, &body["n"]), (200, &Value::from(1)), "{body}");
    }

    // The next map change is pushed to the connection that asked.
    let rev = configs[0]["rev"].as_i64().expect("rev");
    let (created, _) = http(&nodes[2], "PUT", "/another");
    assert_eq!(created, 201);
    let (value, pushed_rev) = loop {
        let (code, key, extras, value) = server_request(&mut pushed);
        assert_eq!((code, key.as_slice()), (0x01, &b"routed"[..]));
        assert_eq!(extras.len(), 16);
        let epoch = i64::from_be_bytes(extras[..8].try_into().expect("8 bytes"));
        let pushed_rev = i64::from_be_bytes(extras[8..].try_into().expect("8 bytes"));
        assert_eq!(epoch, 1);
        if pushed_rev > rev {
            break (value, pushed_rev);
        }
    };
    let config: Value = serde_json::from_slice(&value).expect("a pushed config");
    assert_eq!(config["rev"], pushed_rev);
    assert_eq!(config["vBucketServerMap"], *map);

    // DELETE on another node drops it everywhere.
    let (deleted, _) = http(&nodes[1], "DELETE", "/another");
    assert_eq!(deleted, 200);
    for node in &nodes {
        until(node, "/another", |status, _| status == 404);
    }
    for node in nodes {
        node.stop();
    }
}
