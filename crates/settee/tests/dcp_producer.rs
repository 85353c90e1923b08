//! The DCP producer of a real `settee serve` (docs/format/dcp.md), driven at the wire level:
//! streams from 0 list every change of a vbucket in seqno order under snapshot markers and
//! then follow new writes; resuming continues; a wrong uuid or a consumer ahead rolls back;
//! collections reach only collection-aware consumers; flow control holds the producer until
//! the consumer acknowledges; bad requests get kv_engine's statuses on a connection that keeps
//! working.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use settee_kv_codec::dcp::{open_flags, snapshot_flags, Message};
use settee_kv_codec::{decode, encode_request, feature, leb128, opcode, status, Decoded, Magic};
use support::kv::{store_extras, Kv};
use support::{Client, Server};

const VBUCKETS: u16 = 64;

/// One frame from the producer, owned.
#[derive(Clone, Debug)]
struct Received {
    magic: Magic,
    opcode: u8,
    /// Vbucket of a request, status of a response.
    vbucket_or_status: u16,
    opaque: u32,
    cas: u64,
    datatype: u8,
    extras: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
    /// The whole frame's length (what flow control counts).
    len: usize,
}

impl Received {
    fn message(&self) -> Option<Message<'_>> {
        let frame = settee_kv_codec::Frame {
            magic: self.magic,
            opcode: self.opcode,
            datatype: self.datatype,
            vbucket_or_status: self.vbucket_or_status,
            opaque: self.opaque,
            cas: self.cas,
            framing_extras: &[],
            extras: &self.extras,
            key: &self.key,
            value: &self.value,
        };
        Message::parse(&frame)
    }
}

/// A DCP consumer over a raw socket.
struct Dcp {
    kv: Kv,
    opaque: u32,
    /// Stream messages that arrived while a reply was awaited, in order.
    stash: std::collections::VecDeque<Received>,
}

impl Dcp {
    /// Authenticated as `user`, bucket selected, DCP_OPEN sent under a name of its own;
    /// returns the open's status.
    fn open(
        server: &Server,
        user: &str,
        password: &str,
        features: &[u16],
        flags: u32,
    ) -> (Dcp, u16) {
        static CONNECTIONS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = CONNECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Dcp::open_named(
            server,
            user,
            password,
            features,
            flags,
            &format!("test:consumer-{n}"),
        )
    }

    fn open_named(
        server: &Server,
        user: &str,
        password: &str,
        features: &[u16],
        flags: u32,
        name: &str,
    ) -> (Dcp, u16) {
        let mut kv = Kv::connect(&server.kv_addr);
        kv.hello(features);
        assert_eq!(kv.auth(user, password), 0);
        assert_eq!(kv.call(opcode::SELECT_BUCKET, b"db", &[], &[], 0).status, 0);
        let mut dcp = Dcp {
            kv,
            opaque: 1000,
            stash: Default::default(),
        };
        let mut extras = [0u8; 8];
        extras[4..].copy_from_slice(&flags.to_be_bytes());
        let reply = dcp.call(opcode::DCP_OPEN, 0, &extras, name.as_bytes(), b"");
        (dcp, reply.vbucket_or_status)
    }

    fn admin(server: &Server, collections: bool) -> Dcp {
        let mut features = vec![feature::XERROR, feature::SELECT_BUCKET, feature::JSON];
        if collections {
            features.push(feature::COLLECTIONS);
        }
        let (dcp, code) = Dcp::open(server, "admin", "secret", &features, open_flags::PRODUCER);
        assert_eq!(code, 0);
        dcp
    }

    fn send(&mut self, op: u8, vbucket: u16, extras: &[u8], key: &[u8], value: &[u8]) -> u32 {
        self.opaque += 1;
        let mut frame = Vec::new();
        encode_request(
            &mut frame,
            op,
            vbucket,
            self.opaque,
            0,
            0,
            &[],
            extras,
            key,
            value,
        );
        self.kv.stream.write_all(&frame).unwrap();
        self.opaque
    }

    /// The next frame, or `None` if none comes within `wait`.
    fn next_within(&mut self, wait: Duration) -> Option<Received> {
        if let Some(stashed) = self.stash.pop_front() {
            return Some(stashed);
        }
        self.read_frame(wait)
    }

    fn read_frame(&mut self, wait: Duration) -> Option<Received> {
        let deadline = Instant::now() + wait;
        loop {
            if let Ok(Decoded::Frame(frame, used)) = decode(&self.kv.buffer, 1 << 26) {
                let received = Received {
                    magic: frame.magic,
                    opcode: frame.opcode,
                    vbucket_or_status: frame.vbucket_or_status,
                    opaque: frame.opaque,
                    cas: frame.cas,
                    datatype: frame.datatype,
                    extras: frame.extras.to_vec(),
                    key: frame.key.to_vec(),
                    value: frame.value.to_vec(),
                    len: used,
                };
                self.kv.buffer.drain(..used);
                return Some(received);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.kv.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.kv.stream.read(&mut chunk) {
                Ok(0) => panic!("the producer closed the connection"),
                Ok(read) => self.kv.buffer.extend_from_slice(&chunk[..read]),
                Err(_) => return None,
            }
        }
    }

    fn next(&mut self) -> Received {
        self.next_within(Duration::from_secs(20))
            .expect("a frame from the producer")
    }

    /// Sends a request and returns its response, keeping stream messages that come first.
    fn call(&mut self, op: u8, vbucket: u16, extras: &[u8], key: &[u8], value: &[u8]) -> Received {
        let opaque = self.send(op, vbucket, extras, key, value);
        loop {
            let frame = self
                .read_frame(Duration::from_secs(20))
                .expect("a reply from the producer");
            if frame.magic != Magic::Response {
                self.stash.push_back(frame);
                continue;
            }
            {
                assert_eq!(
                    (frame.opcode, frame.opaque),
                    (op, opaque),
                    "replies come in order"
                );
                return frame;
            }
        }
    }

    fn control(&mut self, key: &str, value: &str) -> u16 {
        self.call(
            opcode::DCP_CONTROL,
            0,
            &[],
            key.as_bytes(),
            value.as_bytes(),
        )
        .vbucket_or_status
    }

    fn stream(
        &mut self,
        vbucket: u16,
        start: u64,
        end: u64,
        uuid: u64,
        snap: (u64, u64),
        value: &[u8],
    ) -> Received {
        let mut extras = vec![0u8; 8];
        for field in [start, end, uuid, snap.0, snap.1] {
            extras.extend_from_slice(&field.to_be_bytes());
        }
        self.call(opcode::DCP_STREAM_REQ, vbucket, &extras, b"", value)
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// (uuid, seqno) pairs of a failover log.
fn failover_log(value: &[u8]) -> Vec<(u64, u64)> {
    assert_eq!(value.len() % 16, 0);
    value
        .chunks(16)
        .map(|entry| (u64_at(entry, 0), u64_at(entry, 8)))
        .collect()
}

fn high_seqnos(dcp: &mut Dcp) -> Vec<u64> {
    let reply = dcp.call(opcode::GET_ALL_VB_SEQNOS, 0, &1u32.to_be_bytes(), b"", b"");
    assert_eq!(reply.vbucket_or_status, 0);
    assert_eq!(reply.value.len(), VBUCKETS as usize * 10);
    reply
        .value
        .chunks(10)
        .enumerate()
        .map(|(vbucket, entry)| {
            assert_eq!(u16::from_be_bytes([entry[0], entry[1]]) as usize, vbucket);
            u64_at(entry, 2)
        })
        .collect()
}

fn keys_in(vbucket: u16, count: usize) -> Vec<String> {
    (0..)
        .map(|n| format!("doc-{n}"))
        .filter(|key| settee_engine::vbucket::vbucket_of(key.as_bytes(), VBUCKETS) == vbucket)
        .take(count)
        .collect()
}

fn set(kv: &mut Kv, key: &[u8], value: &[u8]) {
    let reply = kv.call(opcode::SET, key, &store_extras(3, 0), value, 0);
    assert_eq!(reply.status, 0);
}

fn setup(server: &Server) -> Kv {
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/db", None).unwrap().status, 201);
    Kv::open(&server.kv_addr, "admin", "secret", "db")
}

/// What a vbucket's stream said about each key: (seqno, deleted, value), and its markers.
#[derive(Default)]
struct Seen {
    items: BTreeMap<Vec<u8>, (u64, bool, Vec<u8>)>,
    markers: Vec<(u64, u64, u32)>,
    last_seqno: u64,
}

/// Reads messages until every vbucket in `until` has reached its seqno (markers checked:
/// every item inside the latest marker, seqnos rising).
fn collect(dcp: &mut Dcp, until: &BTreeMap<u16, u64>) -> BTreeMap<u16, Seen> {
    let mut seen: BTreeMap<u16, Seen> = BTreeMap::new();
    let done = |seen: &BTreeMap<u16, Seen>| {
        until
            .iter()
            .all(|(vb, high)| seen.get(vb).map_or(*high == 0, |s| s.last_seqno >= *high))
    };
    while !done(&seen) {
        let Some(frame) = dcp.next_within(Duration::from_secs(20)) else {
            let reached: Vec<_> = seen
                .iter()
                .map(|(vb, s)| (*vb, s.last_seqno, s.markers.clone()))
                .collect();
            panic!("stalled: want {until:?}, reached {reached:?}");
        };
        let vbucket = frame.vbucket_or_status;
        let vb = seen.entry(vbucket).or_default();
        let (seqno, key, deleted, value) = match frame.message().expect("a DCP message") {
            Message::SnapshotMarker { start, end, flags } => {
                vb.markers.push((start, end, flags));
                continue;
            }
            Message::Mutation { meta, key, value } => (meta.seqno, key, false, value),
            Message::Deletion {
                meta, key, value, ..
            } => (meta.seqno, key, true, value),
            other => panic!("unexpected {other:?}"),
        };
        let (start, end, _) = *vb.markers.last().expect("an item after a marker");
        assert!(
            seqno > vb.last_seqno && seqno <= end && seqno >= start,
            "{seqno} in {start}..={end}"
        );
        vb.last_seqno = seqno;
        vb.items
            .insert(key.to_vec(), (seqno, deleted, value.to_vec()));
    }
    seen
}

#[test]
fn a_stream_from_zero_lists_every_change_in_order_and_follows_new_writes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let mut expected: BTreeMap<Vec<u8>, (bool, Vec<u8>)> = BTreeMap::new();
    for n in 0..120 {
        let key = format!("k{n}");
        let value = format!("{{\"n\":{n}}}");
        set(&mut kv, key.as_bytes(), value.as_bytes());
        expected.insert(key.into_bytes(), (false, value.into_bytes()));
    }
    for n in (0..120).step_by(7) {
        let key = format!("k{n}");
        assert_eq!(
            kv.call(opcode::DELETE, key.as_bytes(), &[], &[], 0).status,
            0
        );
        expected.insert(key.into_bytes(), (true, Vec::new()));
    }
    for n in (1..120).step_by(11) {
        let key = format!("k{n}");
        let value = format!("{{\"n\":{n},\"again\":true}}");
        set(&mut kv, key.as_bytes(), value.as_bytes());
        expected.insert(key.into_bytes(), (false, value.into_bytes()));
    }

    let mut dcp = Dcp::admin(&server, false);
    assert_eq!(dcp.control("enable_noop", "true"), 0);
    assert_eq!(dcp.control("set_noop_interval", "120"), 0);
    let highs = high_seqnos(&mut dcp);
    let mut until = BTreeMap::new();
    for vbucket in 0..VBUCKETS {
        let reply = dcp.stream(vbucket, 0, u64::MAX, 0, (0, 0), b"");
        assert_eq!(reply.vbucket_or_status, 0, "vbucket {vbucket}");
        let log = failover_log(&reply.value);
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].1, 0);
        until.insert(vbucket, highs[vbucket as usize]);
    }
    let seen = collect(&mut dcp, &until);
    let mut streamed: BTreeMap<Vec<u8>, (bool, Vec<u8>)> = BTreeMap::new();
    for (vbucket, vb) in &seen {
        // One disk snapshot from 0 to the high seqno the stream started with.
        assert_eq!(vb.markers.len(), 1, "vbucket {vbucket}");
        let (start, end, flags) = vb.markers[0];
        assert_eq!((start, end), (0, highs[*vbucket as usize]));
        assert_eq!(flags, snapshot_flags::DISK | snapshot_flags::CHECKPOINT);
        for (key, (_, deleted, value)) in &vb.items {
            assert_eq!(settee_engine::vbucket::vbucket_of(key, VBUCKETS), *vbucket);
            streamed.insert(key.clone(), (*deleted, value.clone()));
        }
    }
    assert_eq!(streamed, expected);

    // The same as the CouchDB door's `_changes`: every id once, deleted where it says so.
    let mut http = Client::connect(&server.addr).unwrap();
    let changes = http.request("GET", "/db/_changes", None).unwrap().json();
    let listed: BTreeMap<Vec<u8>, bool> = changes["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let id = row["id"].as_str().unwrap().as_bytes().to_vec();
            (id, row["deleted"].as_bool().unwrap_or(false))
        })
        .collect();
    let streamed_ids: BTreeMap<Vec<u8>, bool> = streamed
        .iter()
        .map(|(key, (deleted, _))| (key.clone(), *deleted))
        .collect();
    assert_eq!(listed, streamed_ids);

    // New writes arrive as memory snapshots on the streams still open.
    set(&mut kv, b"k5", b"{\"late\":1}");
    assert_eq!(kv.call(opcode::DELETE, b"k6", &[], &[], 0).status, 0);
    let vb5 = settee_engine::vbucket::vbucket_of(b"k5", VBUCKETS);
    let vb6 = settee_engine::vbucket::vbucket_of(b"k6", VBUCKETS);
    let later = high_seqnos(&mut dcp);
    let until: BTreeMap<u16, u64> = [(vb5, later[vb5 as usize]), (vb6, later[vb6 as usize])].into();
    let mut got = BTreeMap::new();
    for (vbucket, vb) in collect(&mut dcp, &until) {
        let (start, _, flags) = vb.markers[0];
        assert_eq!(start, highs[vbucket as usize] + 1);
        assert_eq!(flags, snapshot_flags::MEMORY | snapshot_flags::CHECKPOINT);
        got.extend(vb.items);
    }
    assert_eq!(got[&b"k5".to_vec()].2, b"{\"late\":1}");
    assert!(got[&b"k6".to_vec()].1);
    assert_eq!(got.len(), 2);
    server.stop();
}

#[test]
fn resuming_continues_and_a_wrong_history_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let keys = keys_in(9, 12);
    for key in &keys[..8] {
        set(&mut kv, key.as_bytes(), b"{\"first\":true}");
    }
    let mut dcp = Dcp::admin(&server, false);
    let high = high_seqnos(&mut dcp)[9];
    assert_eq!(high, 8);
    // A bounded stream: everything up to 8, then STREAM_END OK.
    let reply = dcp.stream(9, 0, high, 0, (0, 0), b"");
    assert_eq!(reply.vbucket_or_status, 0);
    let uuid = failover_log(&reply.value)[0].0;
    let seen = collect(&mut dcp, &BTreeMap::from([(9, high)]));
    assert_eq!(seen[&9].items.len(), 8);
    let end = dcp.next();
    assert_eq!(end.message(), Some(Message::StreamEnd { reason: 0 }));

    for key in &keys[8..] {
        set(&mut kv, key.as_bytes(), b"{\"second\":true}");
    }
    set(&mut kv, keys[0].as_bytes(), b"{\"first\":false}");
    // Resume from (uuid, 8): only the five newer changes.
    let reply = dcp.stream(9, high, u64::MAX, uuid, (high, high), b"");
    assert_eq!(reply.vbucket_or_status, 0);
    let seen = collect(&mut dcp, &BTreeMap::from([(9, 13)]));
    let items = &seen[&9].items;
    let resumed: BTreeSet<&[u8]> = items.keys().map(|key| key.as_slice()).collect();
    let wanted: BTreeSet<&[u8]> = keys[8..]
        .iter()
        .chain(&keys[..1])
        .map(|key| key.as_bytes())
        .collect();
    assert_eq!(resumed, wanted);
    assert!(items.values().all(|(seqno, _, _)| *seqno > high));

    // The stream is open: a second request for the vbucket is KEY_EEXISTS.
    assert_eq!(
        dcp.stream(9, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
        status::KEY_EEXISTS
    );
    let closed = dcp.call(opcode::DCP_CLOSE_STREAM, 9, &[], b"", b"");
    assert_eq!(closed.vbucket_or_status, 0);
    let again = dcp.call(opcode::DCP_CLOSE_STREAM, 9, &[], b"", b"");
    assert_eq!(again.vbucket_or_status, status::KEY_ENOENT);

    // A uuid this vbucket never had: roll back to 0.
    let rollback = dcp.stream(9, 5, u64::MAX, uuid ^ 1, (5, 5), b"");
    assert_eq!(rollback.vbucket_or_status, status::ROLLBACK);
    assert_eq!(rollback.value, 0u64.to_be_bytes());
    // A consumer ahead of the producer on its history: roll back to the high seqno.
    let ahead = dcp.stream(9, 20, u64::MAX, uuid, (20, 20), b"");
    assert_eq!(ahead.vbucket_or_status, status::ROLLBACK);
    assert_eq!(ahead.value, 13u64.to_be_bytes());
    // ...or to the start of its unfinished snapshot.
    let partial = dcp.stream(9, 12, u64::MAX, uuid, (10, 20), b"");
    assert_eq!(partial.vbucket_or_status, status::ROLLBACK);
    assert_eq!(partial.value, 10u64.to_be_bytes());
    // Ranges and vbuckets out of bounds.
    assert_eq!(
        dcp.stream(9, 7, 3, uuid, (7, 7), b"").vbucket_or_status,
        status::ERANGE
    );
    assert_eq!(
        dcp.stream(9, 7, 30, uuid, (8, 9), b"").vbucket_or_status,
        status::ERANGE
    );
    assert_eq!(
        dcp.stream(VBUCKETS, 0, 9, 0, (0, 0), b"").vbucket_or_status,
        status::NOT_MY_VBUCKET
    );
    // The failover log on its own; the vbucket's uuid is the one mutation tokens carry.
    let log = dcp.call(opcode::DCP_GET_FAILOVER_LOG, 9, &[], b"", b"");
    assert_eq!(failover_log(&log.value), vec![(uuid, 0)]);

    // Requests a producer does not take: a status each, and the connection goes on.
    assert_eq!(
        dcp.call(0xee, 0, &[], b"", b"").vbucket_or_status,
        status::UNKNOWN_COMMAND
    );
    assert_eq!(
        dcp.call(opcode::GET, 9, &[], keys[0].as_bytes(), b"")
            .vbucket_or_status,
        status::NOT_SUPPORTED
    );
    assert_eq!(
        dcp.call(opcode::DCP_MUTATION, 9, &[0; 31], b"k", b"")
            .vbucket_or_status,
        status::NOT_SUPPORTED
    );
    assert_eq!(
        dcp.call(opcode::DCP_OPEN, 0, &[0, 0, 0, 0, 0, 0, 0, 1], b"x", b"")
            .vbucket_or_status,
        status::EINVAL
    );
    assert_eq!(dcp.control("no_such_control", "1"), status::EINVAL);
    assert_eq!(
        dcp.call(opcode::DCP_STREAM_REQ, 9, &[0; 12], b"", b"")
            .vbucket_or_status,
        status::EINVAL
    );
    assert_eq!(
        dcp.call(opcode::NOOP, 0, &[], b"", b"").vbucket_or_status,
        0
    );

    // Resuming after a restart: the same history, no rollback.
    drop(dcp);
    server.stop();
    let server = Server::start(dir.path());
    let mut dcp = Dcp::admin(&server, false);
    let reply = dcp.stream(9, 13, u64::MAX, uuid, (13, 13), b"");
    assert_eq!(reply.vbucket_or_status, 0);
    assert!(
        dcp.next_within(Duration::from_millis(300)).is_none(),
        "nothing new to send"
    );
    server.stop();
}

#[test]
fn only_admins_open_dcp_and_ordinary_connections_refuse_stream_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut http = Client::connect(&server.addr).unwrap();
    support::add_member(&mut http, "db", "bob", "bobpw");

    let features = [feature::XERROR, feature::SELECT_BUCKET];
    let (mut member, code) = Dcp::open(&server, "bob", "bobpw", &features, open_flags::PRODUCER);
    assert_eq!(code, status::EACCESS);
    // Still an ordinary connection: a stream request is not DCP here.
    let refused = member.stream(0, 0, u64::MAX, 0, (0, 0), b"");
    assert_eq!(refused.vbucket_or_status, status::EINVAL);
    // The bucket config names the address the client connected to, never `$HOST`.
    let config = member.call(opcode::GET_CLUSTER_CONFIG, 0, &[], b"", b"");
    let config = String::from_utf8(config.value).unwrap();
    let kv_port = server.kv_addr.rsplit(':').next().unwrap();
    assert!(
        config.contains(&format!("\"127.0.0.1:{kv_port}\"")),
        "{config}"
    );
    assert!(!config.contains("$HOST"), "{config}");
    let (_, code) = Dcp::open(&server, "admin", "secret", &features, 0);
    assert_eq!(
        code,
        status::NOT_SUPPORTED,
        "consumer connections are not offered"
    );
    let (_, code) = Dcp::open(
        &server,
        "admin",
        "secret",
        &features,
        open_flags::PRODUCER | 0x02,
    );
    assert_eq!(code, status::EINVAL);
    server.stop();
}

/// `cid` in LEB128 followed by `key`.
fn ckey(cid: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    leb128::encode_u32(cid, &mut out);
    out.extend_from_slice(key);
    out
}

#[test]
fn collection_events_and_documents_reach_only_collection_aware_streams() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let scopes = "/pools/default/buckets/db/scopes";
    assert_eq!(
        mgmt.request("POST", scopes, Some(b"name=shop"))
            .unwrap()
            .status,
        200
    );
    let collections = format!("{scopes}/shop/collections");
    assert_eq!(
        mgmt.request("POST", &collections, Some(b"name=items"))
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        mgmt.request("POST", &collections, Some(b"name=other"))
            .unwrap()
            .status,
        200
    );
    // Collection ids 8 (items) and 9 (other); one document in each and in _default, all in
    // vbucket 5.
    let key = keys_in(5, 1).remove(0);
    set(&mut kv, key.as_bytes(), b"{\"where\":\"default\"}");
    let mut ckv = Kv::connect(&server.kv_addr);
    ckv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::COLLECTIONS,
    ]);
    assert_eq!(ckv.auth("admin", "secret"), 0);
    assert_eq!(
        ckv.call(opcode::SELECT_BUCKET, b"db", &[], &[], 0).status,
        0
    );
    for (cid, value) in [
        (8u32, &b"{\"where\":\"items\"}"[..]),
        (9, b"{\"where\":\"other\"}"),
    ] {
        let mut frame = Vec::new();
        encode_request(
            &mut frame,
            opcode::SET,
            5,
            77,
            0,
            0,
            &[],
            &store_extras(0, 0),
            &ckey(cid, key.as_bytes()),
            value,
        );
        ckv.stream.write_all(&frame).unwrap();
        assert_eq!(ckv.read().expect("reply").status, 0);
    }

    // Not collection-aware: collection 0's document only, no events.
    let mut plain = Dcp::admin(&server, false);
    let high = high_seqnos(&mut plain)[5];
    assert_eq!(
        plain.stream(5, 0, high, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    let mut messages = Vec::new();
    loop {
        let frame = plain.next();
        let message = format!("{:?}", frame.message().expect("message"));
        if frame.opcode == opcode::DCP_STREAM_END {
            break;
        }
        messages.push((frame.opcode, frame.key.clone(), message));
    }
    let opcodes: Vec<u8> = messages.iter().map(|m| m.0).collect();
    assert_eq!(
        opcodes,
        vec![opcode::DCP_SNAPSHOT_MARKER, opcode::DCP_MUTATION]
    );
    assert_eq!(messages[1].1, key.as_bytes());

    // Collection-aware, everything: the scope and collection events of vbucket 5, then the
    // three documents with their collection ids in front of the keys.
    let mut aware = Dcp::admin(&server, true);
    assert_eq!(
        aware.stream(5, 0, high, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    let mut events = Vec::new();
    let mut keys = Vec::new();
    loop {
        let frame = aware.next();
        match frame.message().expect("message") {
            Message::SystemEvent {
                event,
                version,
                key,
                value,
                ..
            } => events.push((event, version, key.to_vec(), value.to_vec())),
            Message::Mutation { key, .. } => keys.push(key.to_vec()),
            Message::StreamEnd { reason } => {
                assert_eq!(reason, 0);
                break;
            }
            Message::SnapshotMarker { .. } | Message::SeqnoAdvanced { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let names: Vec<(u32, &[u8])> = events.iter().map(|e| (e.0, e.2.as_slice())).collect();
    assert_eq!(names, vec![(3, &b"shop"[..]), (0, b"items"), (0, b"other")]);
    // BeginCollection v0: manifest uid, scope id, collection id.
    assert_eq!(events[1].1, 0);
    assert_eq!(&events[1].3[8..], &[0, 0, 0, 8, 0, 0, 0, 8]);
    assert_eq!(
        keys,
        vec![
            ckey(0, key.as_bytes()),
            ckey(8, key.as_bytes()),
            ckey(9, key.as_bytes())
        ]
    );

    // Filtered on collection 8: its event and document, then SEQNO_ADVANCED past the rest.
    let filtered = aware.stream(5, 0, high, 0, (0, 0), br#"{"uid":"0","collections":["8"]}"#);
    assert_eq!(filtered.vbucket_or_status, 0);
    let mut got = Vec::new();
    loop {
        let frame = aware.next();
        match frame.message().expect("message") {
            Message::StreamEnd { .. } => break,
            Message::SnapshotMarker { .. } => {}
            other => got.push(format!("{other:?}")),
        }
    }
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got[0].starts_with("SystemEvent"));
    assert!(
        got[1].starts_with("Mutation") && got[1].contains("key: [8, "),
        "{got:?}"
    );
    assert_eq!(got[2], format!("SeqnoAdvanced {{ seqno: {high} }}"));
    let unknown = aware.stream(5, 0, high, 0, (0, 0), br#"{"collections":["77"]}"#);
    assert_eq!(unknown.vbucket_or_status, status::UNKNOWN_COLLECTION);
    server.stop();
}

#[test]
fn flow_control_holds_the_producer_until_the_consumer_acknowledges() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(1000));
    let keys = keys_in(3, 40);
    for key in &keys {
        set(&mut kv, key.as_bytes(), body.as_bytes());
    }
    let mut dcp = Dcp::admin(&server, false);
    const WINDOW: usize = 4096;
    assert_eq!(
        dcp.control("connection_buffer_size", &WINDOW.to_string()),
        0
    );
    assert_eq!(
        dcp.stream(3, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    let mut mutations = 0;
    let mut rounds = 0;
    while mutations < keys.len() {
        // Take what the producer sends until it stops: no more than the window, plus the one
        // message that crossed it.
        let mut bytes = 0;
        while let Some(frame) = dcp.next_within(Duration::from_millis(400)) {
            assert_eq!(
                frame.magic,
                Magic::Request,
                "nothing answers an acknowledgement"
            );
            bytes += frame.len;
            if frame.opcode == opcode::DCP_MUTATION {
                mutations += 1;
            }
        }
        assert!(bytes > 0, "the producer sends once acknowledged");
        assert!(
            bytes < WINDOW + 1200,
            "{bytes} bytes sent into a window of {WINDOW}"
        );
        let left = keys.len() - mutations;
        if left > 0 {
            assert!(bytes >= WINDOW, "the producer stopped early: {bytes}");
        }
        dcp.send(
            opcode::DCP_BUFFER_ACKNOWLEDGEMENT,
            0,
            &(bytes as u32).to_be_bytes(),
            b"",
            b"",
        );
        rounds += 1;
    }
    assert_eq!(mutations, keys.len());
    assert!(
        rounds >= 9,
        "40 KiB through a 4 KiB window took {rounds} rounds"
    );
    server.stop();
}

#[test]
fn idle_consumers_get_noops_and_one_that_stops_answering_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut dcp = Dcp::admin(&server, false);
    assert_eq!(dcp.control("enable_noop", "true"), 0);
    assert_eq!(dcp.control("set_noop_interval", "1"), 0);
    for _ in 0..2 {
        let noop = dcp.next_within(Duration::from_secs(3)).expect("a DCP_NOOP");
        assert_eq!(
            (noop.magic, noop.opcode),
            (Magic::Request, opcode::DCP_NOOP)
        );
        let mut response = Vec::new();
        settee_kv_codec::encode_response(
            &mut response,
            opcode::DCP_NOOP,
            0,
            noop.opaque,
            0,
            0,
            &[],
            &[],
            &[],
        );
        dcp.kv.stream.write_all(&response).unwrap();
    }
    // The response was not answered back, and the connection still serves requests.
    assert_eq!(
        dcp.call(opcode::NOOP, 0, &[], b"", b"").vbucket_or_status,
        0
    );
    let unanswered = dcp.next_within(Duration::from_secs(3)).expect("a DCP_NOOP");
    assert_eq!(unanswered.opcode, opcode::DCP_NOOP);
    assert!(
        dcp.kv.closed_by_server(),
        "a consumer silent for an interval is closed"
    );
    server.stop();
}

#[test]
fn close_stream_ends_the_stream_and_says_so_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let mut dcp = Dcp::admin(&server, false);
    assert_eq!(
        dcp.control("send_stream_end_on_client_close_stream", "true"),
        0
    );
    assert_eq!(dcp.control("v7_dcp_status_codes", "true"), 0);
    assert_eq!(
        dcp.stream(4, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    assert_eq!(
        dcp.call(opcode::DCP_CLOSE_STREAM, 4, &[], b"", b"")
            .vbucket_or_status,
        0
    );
    let end = dcp.next();
    assert_eq!(
        (end.opcode, end.vbucket_or_status),
        (opcode::DCP_STREAM_END, 4)
    );
    assert_eq!(end.message(), Some(Message::StreamEnd { reason: 1 }));
    let again = dcp.call(opcode::DCP_CLOSE_STREAM, 4, &[], b"", b"");
    assert_eq!(again.vbucket_or_status, status::DCP_STREAM_NOT_FOUND);
    // The vbucket may be streamed again.
    assert_eq!(
        dcp.stream(4, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    server.stop();
}

#[test]
fn open_flags_shape_values_and_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let keys = keys_in(2, 2);
    set(&mut kv, keys[0].as_bytes(), b"{\"kept\":true}");
    set(&mut kv, keys[1].as_bytes(), b"{\"gone\":true}");
    let removed = kv.call(opcode::DELETE, keys[1].as_bytes(), &[], &[], 0);
    assert_eq!(removed.status, 0);
    let features = [feature::XERROR, feature::SELECT_BUCKET, feature::JSON];
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;

    // Deletion times (DELETION v2) and no values, the JSON datatype kept.
    let flags = open_flags::PRODUCER
        | open_flags::INCLUDE_DELETE_TIMES
        | open_flags::NO_VALUE_WITH_UNDERLYING_DATATYPE;
    let (mut dcp, code) = Dcp::open(&server, "admin", "secret", &features, flags);
    assert_eq!(code, 0);
    assert_eq!(dcp.stream(2, 0, 3, 0, (0, 0), b"").vbucket_or_status, 0);
    let marker = dcp.next();
    assert_eq!(marker.opcode, opcode::DCP_SNAPSHOT_MARKER);
    let mutation = dcp.next();
    assert_eq!(
        (mutation.opcode, mutation.extras.len()),
        (opcode::DCP_MUTATION, 31)
    );
    assert!(mutation.value.is_empty());
    assert_eq!(mutation.datatype, settee_kv_codec::datatype::JSON);
    assert_eq!(&mutation.extras[16..20], &3u32.to_be_bytes(), "item flags");
    let deletion = dcp.next();
    assert_eq!(
        (deletion.opcode, deletion.extras.len()),
        (opcode::DCP_DELETION, 21)
    );
    match deletion.message() {
        Some(Message::Deletion {
            meta,
            delete_time: Some(time),
            key,
            ..
        }) => {
            assert_eq!((meta.seqno, meta.rev_seqno), (3, 2));
            assert_eq!(key, keys[1].as_bytes());
            assert!(
                time >= before.saturating_sub(1) && time <= before + 60,
                "{time}"
            );
        }
        other => panic!("not a DELETION v2: {other:?}"),
    }
    assert_eq!(dcp.next().message(), Some(Message::StreamEnd { reason: 0 }));

    // The default: values, and DELETION v1.
    let (mut plain, code) = Dcp::open(&server, "admin", "secret", &features, open_flags::PRODUCER);
    assert_eq!(code, 0);
    assert_eq!(plain.stream(2, 0, 3, 0, (0, 0), b"").vbucket_or_status, 0);
    plain.next();
    assert_eq!(plain.next().value, b"{\"kept\":true}");
    assert_eq!(plain.next().extras.len(), 18);
    server.stop();
}

#[test]
fn a_database_admin_streams_until_the_right_is_taken_away() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut kv = setup(&server);
    let mut http = Client::connect(&server.addr).unwrap();
    support::add_member(&mut http, "db", "carol", "carolpw");
    let admins = br#"{"admins":{"names":["carol"],"roles":[]},"members":{"names":[],"roles":[]}}"#;
    let put = http.request("PUT", "/db/_security", Some(admins)).unwrap();
    assert_eq!(put.status, 200);

    let features = [feature::XERROR, feature::SELECT_BUCKET];
    let (mut dcp, code) = Dcp::open(&server, "carol", "carolpw", &features, open_flags::PRODUCER);
    assert_eq!(code, 0, "a database admin may open DCP");
    let key = keys_in(1, 1).remove(0);
    set(&mut kv, key.as_bytes(), b"{\"v\":1}");
    assert_eq!(
        dcp.stream(1, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
        0
    );
    assert_eq!(dcp.next().opcode, opcode::DCP_SNAPSHOT_MARKER);
    assert_eq!(dcp.next().opcode, opcode::DCP_MUTATION);

    // No longer an admin: the next write ends the open stream, and no new one opens.
    let members = br#"{"admins":{"names":[],"roles":[]},"members":{"names":["carol"],"roles":[]}}"#;
    let put = http.request("PUT", "/db/_security", Some(members)).unwrap();
    assert_eq!(put.status, 200);
    set(&mut kv, key.as_bytes(), b"{\"v\":2}");
    let end = dcp.next();
    assert_eq!(end.message(), Some(Message::StreamEnd { reason: 8 }));
    let refused = dcp.stream(1, 0, u64::MAX, 0, (0, 0), b"");
    assert_eq!(refused.vbucket_or_status, status::EACCESS);
    server.stop();
}

#[test]
fn a_newer_connection_of_the_same_name_closes_the_older() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    setup(&server);
    let features = [feature::XERROR, feature::SELECT_BUCKET];
    let open = |name: &str| {
        let (dcp, code) = Dcp::open_named(
            &server,
            "admin",
            "secret",
            &features,
            open_flags::PRODUCER,
            name,
        );
        assert_eq!(code, 0);
        dcp
    };
    let mut older = open("connector:1");
    let mut other = open("connector:2");
    let mut newer = open("connector:1");
    assert!(
        older.kv.closed_by_server(),
        "the older connection of the name is closed"
    );
    for dcp in [&mut other, &mut newer] {
        assert_eq!(
            dcp.call(opcode::NOOP, 0, &[], b"", b"").vbucket_or_status,
            0
        );
        assert_eq!(
            dcp.stream(0, 0, u64::MAX, 0, (0, 0), b"").vbucket_or_status,
            0
        );
    }
    server.stop();
}
