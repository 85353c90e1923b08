//! Sync writes between three real `settee serve` processes (docs/format/replica.md, "Sync
//! writes on the active"): a bucket with one replica (`PUT /db?n=2`), so a majority is the
//! active and its replica.
//!
//! - KV SETs with durability `majority` and `persistToMajority` succeed, and when the answer
//!   comes the replica node has already persisted the write's seqno (GET_ALL_VB_SEQNOS state 2
//!   against the mutation token);
//! - a sync write is hidden from KV readers (SYNC_WRITE_RE_COMMIT_IN_PROGRESS, which the SDKs
//!   retry) while it waits and, answered ambiguous, until the replica holds it;
//! - HTTP PUTs answer 201 by default (CouchDB's quorum = majority), the first ones right after
//!   `PUT /db` too (the new replicas' streams are waited for), with `w=1` and `w=2`, and
//!   202 with `w=3` (more copies than the bucket keeps);
//! - with the replica's node paused (SIGSTOP) a majority write answers SYNC_WRITE_AMBIGUOUS at
//!   its timeout, and while it waits another write to the key answers SYNC_WRITE_IN_PROGRESS;
//!   after SIGCONT majority writes succeed again;
//! - with the replica's node killed (-9) majority writes answer DURABILITY_IMPOSSIBLE, HTTP
//!   PUTs 202, while writes without durability (and `w=1`) still succeed.
//!
//! The paused node is not the Raft leader, and is paused for less than one auto-failover
//! timeout (5 s) plus the ambiguous write's own timeout: the map does not change under the
//! pause.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use settee_kv_codec::{encode_request, feature, opcode, status, FramingExtras};
use support::kv::{all_vb_seqnos, store_extras, Kv, Reply};
use support::{cluster_addr, http_json as http, until, Client, Server};

const SECRET: &str = "the secret of the sync write test";
const VBUCKETS: u16 = 64;
const MAJORITY: u8 = 1;
const PERSIST_TO_MAJORITY: u8 = 3;

fn start(dir: &Path, join: Option<&str>) -> Server {
    support::start_cluster_node(dir, SECRET, join)
}

/// A KV connection to the bucket with framing extras and mutation tokens negotiated.
fn kv(server: &Server) -> Kv {
    kv_to(server, "db")
}

fn kv_to(server: &Server, bucket: &str) -> Kv {
    let mut kv = Kv::connect(&server.kv_addr);
    kv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::ALT_REQUEST_SUPPORT,
        feature::MUTATION_SEQNO,
        feature::SYNC_REPLICATION,
    ]);
    assert_eq!(kv.auth("admin", "secret"), 0);
    let selected = kv.call(opcode::SELECT_BUCKET, bucket.as_bytes(), &[], &[], 0);
    assert_eq!(selected.status, status::SUCCESS);
    kv
}

/// Sends a SET with a durability requirement (level, timeout in ms); returns its opaque.
fn send_durable_set(kv: &mut Kv, key: &[u8], value: &[u8], durability: (u8, u16)) -> u32 {
    let mut framing = Vec::new();
    FramingExtras::encode_durability(durability.0, Some(durability.1), &mut framing);
    kv.opaque += 1;
    let vbucket = settee_engine::vbucket::vbucket_of(key, VBUCKETS);
    let mut frame = Vec::new();
    encode_request(
        &mut frame,
        opcode::SET,
        vbucket,
        kv.opaque,
        0,
        0,
        &framing,
        &store_extras(0, 0),
        key,
        value,
    );
    std::io::Write::write_all(&mut kv.stream, &frame).expect("send");
    kv.opaque
}

fn durable_set(kv: &mut Kv, key: &[u8], value: &[u8], durability: (u8, u16)) -> Reply {
    let opaque = send_durable_set(kv, key, value, durability);
    let reply = kv.read().expect("a reply");
    assert_eq!(reply.opaque, opaque);
    reply
}

/// The high seqno of each vbucket of `bucket` a node holds in `state` (1 active, 2 replica).
fn seqnos(server: &Server, bucket: &str, state: u32) -> BTreeMap<u16, u64> {
    all_vb_seqnos(&mut kv_to(server, bucket), state)
}

/// A bucket's vbucket rows (indexes into the serverList) and the serverList's nodes of ours.
fn placement(nodes: &[Server], bucket: &str) -> (Vec<usize>, Vec<Vec<i64>>) {
    let (servers, rows) = support::kv::vbucket_map(&mut kv_to(&nodes[0], bucket));
    let servers = servers
        .iter()
        .map(|addr| {
            let ours = nodes.iter().position(|node| node.kv_addr == *addr);
            ours.expect("one of ours")
        })
        .collect();
    (servers, rows)
}

/// The (active, replica) nodes of `key` by [`placement`].
fn copies(servers: &[usize], rows: &[Vec<i64>], key: &[u8]) -> (usize, usize) {
    let row = &rows[usize::from(settee_engine::vbucket::vbucket_of(key, VBUCKETS))];
    let at = |slot: i64| servers[usize::try_from(slot).expect("placed")];
    (at(row[0]), at(row[1]))
}

/// Writes `key` with `write` until it succeeds (before that, the nodes may not route the new
/// bucket yet, or its replica stream may not be open: NOT_MY_VBUCKET, DURABILITY_IMPOSSIBLE),
/// then checks that `replica` had persisted the write's seqno when the answer came.
fn on_the_replica_when_answered(
    replica: &Server,
    bucket: &str,
    key: &[u8],
    mut write: impl FnMut() -> Reply,
) {
    let reply = until("a durable write", || {
        let reply = write();
        assert!(
            matches!(
                reply.status,
                status::SUCCESS | status::NOT_MY_VBUCKET | status::DURABILITY_IMPOSSIBLE
            ),
            "SET status {:#x}",
            reply.status
        );
        (reply.status == status::SUCCESS).then_some(reply)
    });
    let seqno = u64::from_be_bytes(reply.extras[8..16].try_into().expect("a token"));
    let vbucket = settee_engine::vbucket::vbucket_of(key, VBUCKETS);
    let persisted = seqnos(replica, bucket, 2)[&vbucket];
    assert!(
        persisted >= seqno,
        "replica at {persisted}, write at {seqno}"
    );
}

fn signal(server: &Server, name: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(server.child.id().to_string())
        .status()
        .expect("kill");
    assert!(sent.success());
}

#[test]
fn sync_writes_wait_for_a_majority_of_the_chain() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let first = start(dirs[0].path(), None);
    let join = cluster_addr(&first);
    let mut nodes = vec![first];
    nodes.push(start(dirs[1].path(), Some(&join)));
    nodes.push(start(dirs[2].path(), Some(&join)));
    for node in &nodes {
        until("three members", || {
            let (_, body) = http(node, "GET", "/_node/_local/_cluster", None);
            (body["members"].as_array().map(Vec::len) == Some(3)).then_some(())
        });
    }
    let (created, body) = http(&nodes[0], "PUT", "/db?n=2", None);
    assert_eq!(created, 201, "{body}");
    for node in &nodes {
        until("the bucket everywhere", || {
            (http(node, "GET", "/db", None).0 == 200).then_some(())
        });
    }
    // The first writes to a database just created meet the quorum: its replicas' streams are
    // waited for, not taken for a node down (202).
    for index in 0..8 {
        let path = format!("/db/first-{index}");
        let (code, body) = http(&nodes[index % 3], "PUT", &path, Some("{}"));
        assert_eq!(code, 201, "PUT {path} right after PUT /db: {body}");
    }
    // A bucket whose minimum durability raises every write (ns_server's form, on any node).
    let form =
        format!("name=strict&replicaNumber=1&numVBuckets={VBUCKETS}&durabilityMinLevel=majority");
    let mut mgmt = Client::connect(&nodes[1].mgmt_addr).expect("connect");
    let created = mgmt
        .request_with(
            "POST",
            "/pools/default/buckets",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            Some(form.as_bytes()),
        )
        .expect("POST");
    assert_eq!(
        created.status,
        202,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    for node in &nodes {
        until("the strict bucket everywhere", || {
            let mut mgmt = Client::connect(&node.mgmt_addr).expect("connect");
            let info = mgmt
                .request("GET", "/pools/default/buckets/strict", None)
                .expect("GET");
            (info.status == 200 && info.json()["durabilityMinLevel"] == "majority").then_some(())
        });
    }
    let (servers, rows) = placement(&nodes, "db");
    let copies_of = |key: &[u8]| copies(&servers, &rows, key);

    // Majority and persistToMajority: the replica has persisted the write when it is answered.
    let mut connections: Vec<Kv> = nodes.iter().map(kv).collect();
    for index in 0..40 {
        let key = format!("durable-{index}").into_bytes();
        let (active, replica) = copies_of(&key);
        let level = if index % 2 == 0 {
            MAJORITY
        } else {
            PERSIST_TO_MAJORITY
        };
        let connection = &mut connections[active];
        on_the_replica_when_answered(&nodes[replica], "db", &key, || {
            durable_set(connection, &key, b"{\"v\":1}", (level, 10_000))
        });
    }

    // Writes without durability to the strict bucket wait for the replica too.
    let (strict_servers, strict_rows) = placement(&nodes, "strict");
    let strict_copies_of = |key: &[u8]| copies(&strict_servers, &strict_rows, key);
    let mut strict: Vec<Kv> = nodes.iter().map(|node| kv_to(node, "strict")).collect();
    for index in 0..10 {
        let key = format!("strict-{index}").into_bytes();
        let (active, replica) = strict_copies_of(&key);
        let connection = &mut strict[active];
        on_the_replica_when_answered(&nodes[replica], "strict", &key, || {
            connection.call(opcode::SET, &key, &store_extras(0, 0), b"{}", 0)
        });
    }

    // The HTTP door: CouchDB's default quorum is met, w=3 asks for more copies than there are.
    let doc = |index: usize| format!("http-{index}");
    let http_active = |index: usize| copies_of(doc(index).as_bytes()).0;
    for (index, query, expected) in [
        (0, "", 201),
        (1, "?w=1", 201),
        (2, "?w=2", 201),
        (3, "?w=3", 202),
    ] {
        let path = format!("/db/{}{query}", doc(index));
        let (code, body) = http(&nodes[http_active(index)], "PUT", &path, Some("{\"n\":1}"));
        assert_eq!(code, expected, "PUT {path}: {body}");
        assert_eq!(body["ok"], Value::Bool(true), "{body}");
    }

    // Pause the replica of a key whose replica node does not lead the Raft group.
    let (_, cluster) = http(&nodes[0], "GET", "/_node/_local/_cluster", None);
    let leader = cluster["leader"].as_u64().expect("a leader");
    let ids: Vec<u64> = nodes
        .iter()
        .map(|node| {
            let (_, status) = http(node, "GET", "/_node/_local/_cluster", None);
            status["node"].as_u64().expect("a node id")
        })
        .collect();
    let key = (0..)
        .map(|index| format!("paused-{index}").into_bytes())
        .find(|key| ids[copies_of(key).1] != leader)
        .expect("a key");
    let (active, replica) = copies_of(&key);
    assert_eq!(
        durable_set(&mut connections[active], &key, b"{}", (MAJORITY, 10_000)).status,
        status::SUCCESS
    );
    let mut other = kv(&nodes[active]);
    signal(&nodes[replica], "STOP");
    let waiting = send_durable_set(
        &mut connections[active],
        &key,
        b"{\"p\":1}",
        (MAJORITY, 2_500),
    );
    // While the sync write waits, any other write to its key is refused.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let reply = other.call(opcode::SET, &key, &store_extras(0, 0), b"{\"o\":1}", 0);
        if reply.status == status::SYNC_WRITE_IN_PROGRESS {
            break;
        }
        // Sent before the sync write started.
        assert_eq!(reply.status, status::SUCCESS);
        assert!(
            attempts < 1_000,
            "the sync write never showed as in progress"
        );
    }
    // Nor is it read: a failover now would promote the replica without it.
    let hidden = other.call(opcode::GET, &key, &[], &[], 0);
    assert_eq!(hidden.status, status::SYNC_WRITE_RE_COMMIT_IN_PROGRESS);
    let reply = connections[active].read().expect("a reply");
    assert_eq!(reply.opaque, waiting);
    assert_eq!(reply.status, status::SYNC_WRITE_AMBIGUOUS);
    // Answered ambiguous, it stays hidden until the replica holds it.
    let hidden = other.call(opcode::GET, &key, &[], &[], 0);
    assert_eq!(hidden.status, status::SYNC_WRITE_RE_COMMIT_IN_PROGRESS);
    signal(&nodes[replica], "CONT");
    let read = until("the ambiguous write durable and read", || {
        let reply = other.call(opcode::GET, &key, &[], &[], 0);
        (reply.status != status::SYNC_WRITE_RE_COMMIT_IN_PROGRESS).then_some(reply)
    });
    assert_eq!(
        (read.status, read.value.as_slice()),
        (status::SUCCESS, &b"{\"p\":1}"[..])
    );
    let reply = durable_set(
        &mut connections[active],
        &key,
        b"{\"p\":2}",
        (MAJORITY, 10_000),
    );
    assert_eq!(reply.status, status::SUCCESS);

    // Kill the replica: a majority cannot be formed once its stream is gone.
    signal(&nodes[replica], "KILL");
    until("DURABILITY_IMPOSSIBLE", || {
        let reply = durable_set(&mut connections[active], &key, b"{}", (MAJORITY, 500));
        // AMBIGUOUS until the active has seen the replica's connection close.
        assert!(
            matches!(
                reply.status,
                status::SYNC_WRITE_AMBIGUOUS | status::DURABILITY_IMPOSSIBLE
            ),
            "durable SET status {:#x}",
            reply.status
        );
        (reply.status == status::DURABILITY_IMPOSSIBLE).then_some(())
    });
    let plain = connections[active].call(opcode::SET, &key, &store_extras(0, 0), b"{}", 0);
    assert_eq!(plain.status, status::SUCCESS);
    // In the strict bucket the same write is raised to majority: impossible now.
    let raised = strict[active].call(opcode::SET, &key, &store_extras(0, 0), b"{}", 0);
    assert_eq!(raised.status, status::DURABILITY_IMPOSSIBLE);
    // HTTP writes to documents whose replica was the killed node: written, quorum unmet,
    // unless w=1.
    let mut orphans = (0..)
        .map(|index| format!("orphan-{index}"))
        .filter(|id| copies_of(id.as_bytes()).1 == replica);
    for (query, expected) in [("", 202), ("?w=2", 202), ("?w=1", 201)] {
        let id = orphans.next().expect("an id");
        let path = format!("/db/{id}{query}");
        let (code, body) = http(&nodes[copies_of(id.as_bytes()).0], "PUT", &path, Some("{}"));
        assert_eq!(code, expected, "PUT {path}: {body}");
        assert_eq!(body["ok"], Value::Bool(true), "{body}");
    }
    for node in nodes {
        node.stop();
    }
}
