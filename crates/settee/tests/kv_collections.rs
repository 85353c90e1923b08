//! Scopes and collections through a real `settee serve`: the management REST API on the
//! management port (as Couchbase 7's ns_server answers it) and the KV door's collection-id
//! prefix, GET_COLLECTIONS_MANIFEST, GET_COLLECTION_ID, GET_SCOPE_ID and the UNKNOWN_*
//! replies, with kv_engine's rules (docs/format/collections.md, "KV door facts").

mod support;

use std::io::Write;

use settee_kv_codec::subdoc::op as subdoc_op;
use settee_kv_codec::{datatype, feature, leb128, opcode, status};
use support::kv::{store_extras, Kv};
use support::{Client, Server};

/// `cid` in LEB128 followed by `key`.
fn ckey(cid: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    leb128::encode_u32(cid, &mut out);
    out.extend_from_slice(key);
    out
}

fn form(mgmt: &mut Client, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let response = mgmt.request(method, path, Some(body.as_bytes())).unwrap();
    let value = serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null);
    (response.status, value)
}

fn uid_of(value: &serde_json::Value) -> u64 {
    u64::from_str_radix(value["uid"].as_str().expect("uid"), 16).unwrap()
}

fn collections_kv(server: &Server) -> Kv {
    let mut kv = Kv::connect(&server.kv_addr);
    let accepted = kv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::COLLECTIONS,
    ]);
    assert!(accepted.contains(&feature::COLLECTIONS));
    assert_eq!(kv.auth("admin", "secret"), 0);
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"travel", &[], &[], 0)
            .status,
        0
    );
    kv
}

/// (manifest uid, id) of a GET_COLLECTION_ID / GET_SCOPE_ID success.
fn ids(kv: &mut Kv, op: u8, path: &[u8]) -> (u64, u32) {
    let reply = kv.call(op, b"", &[], path, 0);
    assert_eq!(reply.status, 0, "{}", String::from_utf8_lossy(path));
    assert_eq!(reply.extras.len(), 12);
    assert!(reply.value.is_empty());
    (
        u64::from_be_bytes(reply.extras[..8].try_into().unwrap()),
        u32::from_be_bytes(reply.extras[8..].try_into().unwrap()),
    )
}

/// An UNKNOWN_* reply as kv_engine sends it: no extras, JSON with the manifest uid.
fn assert_unknown(reply: &support::kv::Reply, code: u16, uid: u64) {
    assert_eq!(reply.status, code);
    assert!(reply.extras.is_empty());
    assert_eq!(reply.datatype, datatype::JSON);
    let body: serde_json::Value = serde_json::from_slice(&reply.value).unwrap();
    assert_eq!(body["manifest_uid"], format!("{uid:x}"));
    assert!(body["error"]["context"].is_string());
}

#[test]
fn management_rest_creates_lists_and_drops_as_ns_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/travel", None).unwrap().status, 201);
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let scopes = "/pools/default/buckets/travel/scopes";

    let (code, listed) = form(&mut mgmt, "GET", scopes, "");
    assert_eq!(code, 200);
    assert_eq!(
        listed,
        serde_json::json!({"uid": "0", "scopes": [{"name": "_default", "uid": "0",
            "collections": [{"name": "_default", "uid": "0", "history": false}]}]})
    );

    let (code, created) = form(&mut mgmt, "POST", scopes, "name=inventory");
    assert_eq!((code, uid_of(&created)), (200, 1));
    let (code, refused) = form(&mut mgmt, "POST", scopes, "name=inventory");
    assert_eq!(code, 400);
    assert_eq!(
        refused["errors"]["_"],
        "Scope with name \"inventory\" already exists"
    );
    let collections = format!("{scopes}/inventory/collections");
    let (code, created) = form(&mut mgmt, "POST", &collections, "name=airline&maxTTL=3600");
    assert_eq!((code, uid_of(&created)), (200, 2));
    let (code, _) = form(&mut mgmt, "POST", &collections, "name=route&maxTTL=-1");
    assert_eq!(code, 200);
    let (code, _) = form(&mut mgmt, "POST", &collections, "name=hotel");
    assert_eq!(code, 200);
    let (code, refused) = form(&mut mgmt, "POST", &collections, "name=route");
    assert_eq!(code, 400);
    assert_eq!(
        refused["errors"]["_"],
        "Collection with name \"route\" in scope \"inventory\" already exists"
    );
    let (code, refused) = form(
        &mut mgmt,
        "POST",
        &format!("{scopes}/nope/collections"),
        "name=c",
    );
    assert_eq!(code, 404);
    assert_eq!(
        refused["errors"]["_"],
        "Scope with name \"nope\" is not found"
    );
    let (code, _) = form(&mut mgmt, "POST", &collections, "name=_system");
    assert_eq!(code, 400);
    let (code, _) = form(&mut mgmt, "POST", &collections, "name=bad&maxTTL=-2");
    assert_eq!(code, 400);
    let (code, _) = form(
        &mut mgmt,
        "POST",
        "/pools/default/buckets/absent/scopes",
        "name=s",
    );
    assert_eq!(code, 404);

    let (code, listed) = form(&mut mgmt, "GET", scopes, "");
    assert_eq!(code, 200);
    assert_eq!(listed["uid"], "4");
    let inventory = &listed["scopes"][1];
    assert_eq!(
        (&inventory["name"], &inventory["uid"]),
        (&"inventory".into(), &"8".into())
    );
    assert_eq!(
        inventory["collections"],
        serde_json::json!([
            {"name": "airline", "uid": "8", "maxTTL": 3600, "history": false},
            {"name": "route", "uid": "9", "maxTTL": -1, "history": false},
            {"name": "hotel", "uid": "a", "maxTTL": 0, "history": false},
        ])
    );

    let (code, refused) = form(&mut mgmt, "DELETE", &format!("{collections}/absent"), "");
    assert_eq!(code, 404);
    assert_eq!(
        refused["errors"]["_"],
        "Collection with name \"absent\" in scope \"inventory\" is not found"
    );
    let (code, dropped) = form(&mut mgmt, "DELETE", &format!("{collections}/hotel"), "");
    assert_eq!((code, uid_of(&dropped)), (200, 5));
    let (code, _) = form(&mut mgmt, "DELETE", &format!("{scopes}/_default"), "");
    assert_eq!(code, 400);
    let (code, refused) = form(&mut mgmt, "DELETE", &format!("{scopes}/nope"), "");
    assert_eq!(code, 404);
    assert_eq!(
        refused["errors"]["_"],
        "Scope with name \"nope\" is not found"
    );

    // A member of the bucket reads the manifest but may not change it.
    support::add_member(&mut http, "travel", "bob", "bobpw");
    let mut bob = Client::connect_as(&server.mgmt_addr, "bob:bobpw").unwrap();
    assert_eq!(form(&mut bob, "GET", scopes, "").0, 200);
    assert_eq!(form(&mut bob, "POST", scopes, "name=mine").0, 403);
    server.stop();
}

#[test]
fn the_kv_door_routes_every_key_to_its_collection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/travel", None).unwrap().status, 201);
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let scopes = "/pools/default/buckets/travel/scopes";
    let collections = format!("{scopes}/inventory/collections");
    assert_eq!(form(&mut mgmt, "POST", scopes, "name=inventory").0, 200);
    assert_eq!(form(&mut mgmt, "POST", &collections, "name=airline").0, 200);
    assert_eq!(form(&mut mgmt, "POST", &collections, "name=route").0, 200);

    let mut kv = collections_kv(&server);
    let manifest = kv.call(opcode::GET_COLLECTIONS_MANIFEST, b"", &[], &[], 0);
    assert_eq!(manifest.status, 0);
    let manifest: serde_json::Value = serde_json::from_slice(&manifest.value).unwrap();
    assert_eq!(manifest["uid"], "3");
    assert_eq!(
        manifest["scopes"][1],
        serde_json::json!({"name": "inventory", "uid": "8", "collections": [
            {"name": "airline", "uid": "8"}, {"name": "route", "uid": "9"}]})
    );
    let config = kv.call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    let config: serde_json::Value = serde_json::from_slice(&config.value).unwrap();
    assert_eq!(config["collectionsManifestUid"], "3");

    // Ids by path, in the value or the key; an omitted part is _default.
    assert_eq!(
        ids(&mut kv, opcode::GET_COLLECTION_ID, b"inventory.airline"),
        (3, 8)
    );
    assert_eq!(
        ids(&mut kv, opcode::GET_COLLECTION_ID, b"inventory.route"),
        (3, 9)
    );
    assert_eq!(ids(&mut kv, opcode::GET_COLLECTION_ID, b"."), (3, 0));
    assert_eq!(
        ids(&mut kv, opcode::GET_COLLECTION_ID, b"_default._default"),
        (3, 0)
    );
    assert_eq!(ids(&mut kv, opcode::GET_SCOPE_ID, b"inventory"), (3, 8));
    assert_eq!(
        ids(&mut kv, opcode::GET_SCOPE_ID, b"inventory.anything"),
        (3, 8)
    );
    assert_eq!(ids(&mut kv, opcode::GET_SCOPE_ID, b""), (3, 0));
    // (In the key, on vbucket 0: the helper would put it on the key's vbucket.)
    let mut frame = Vec::new();
    settee_kv_codec::encode_request(
        &mut frame,
        opcode::GET_COLLECTION_ID,
        0,
        77,
        0,
        0,
        &[],
        &[],
        b"inventory.route",
        &[],
    );
    kv.stream.write_all(&frame).unwrap();
    let by_key = kv.read().unwrap();
    assert_eq!(by_key.opaque, 77);
    assert_eq!(
        (by_key.status, &by_key.extras[8..]),
        (0, &9u32.to_be_bytes()[..])
    );
    let reply = kv.call(opcode::GET_COLLECTION_ID, b"", &[], b"inventory.nope", 0);
    assert_unknown(&reply, status::UNKNOWN_COLLECTION, 3);
    let reply = kv.call(opcode::GET_COLLECTION_ID, b"", &[], b"_system._mobile", 0);
    assert_unknown(&reply, status::UNKNOWN_SCOPE, 3);
    let reply = kv.call(opcode::GET_SCOPE_ID, b"", &[], b"nope", 0);
    assert_unknown(&reply, status::UNKNOWN_SCOPE, 3);
    for bad in [&b"a.b.c"[..], b"noDot", b"in ventory.airline"] {
        let reply = kv.call(opcode::GET_COLLECTION_ID, b"", &[], bad, 0);
        assert_eq!(
            reply.status,
            status::EINVAL,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }

    // The same key in three collections: three documents.
    let mut cas = Vec::new();
    for (cid, body) in [
        (0, &br#"{"in":"default"}"#[..]),
        (8, br#"{"in":"airline"}"#),
        (9, br#"{"in":"route"}"#),
    ] {
        let set = kv.call(
            opcode::SET,
            &ckey(cid, b"doc"),
            &store_extras(0, 0),
            body,
            0,
        );
        assert_eq!(set.status, 0, "cid {cid}");
        cas.push(set.cas);
    }
    for (index, (cid, body)) in [
        (0, &br#"{"in":"default"}"#[..]),
        (8, br#"{"in":"airline"}"#),
        (9, br#"{"in":"route"}"#),
    ]
    .into_iter()
    .enumerate()
    {
        let get = kv.call(opcode::GET, &ckey(cid, b"doc"), &[], &[], 0);
        assert_eq!(
            (get.status, get.value.as_slice(), get.cas),
            (0, body, cas[index])
        );
    }
    // CAS and removal stay in their collection.
    let stale = kv.call(
        opcode::REPLACE,
        &ckey(8, b"doc"),
        &store_extras(0, 0),
        b"{}",
        cas[2],
    );
    assert_eq!(stale.status, status::KEY_EEXISTS);
    assert_eq!(
        kv.call(opcode::DELETE, &ckey(9, b"doc"), &[], &[], 0)
            .status,
        0
    );
    assert_eq!(
        kv.call(opcode::GET, &ckey(9, b"doc"), &[], &[], 0).status,
        status::KEY_ENOENT
    );
    assert_eq!(
        kv.call(opcode::GET, &ckey(8, b"doc"), &[], &[], 0).status,
        0
    );
    // Sub-document lookups and mutations too.
    let path = b"in";
    let mut extras = (path.len() as u16).to_be_bytes().to_vec();
    extras.push(0);
    let lookup = kv.call(subdoc_op::GET, &ckey(8, b"doc"), &extras, path, 0);
    assert_eq!(
        (lookup.status, lookup.value.as_slice()),
        (0, &br#""airline""#[..])
    );
    let mut upsert = extras.clone();
    upsert[1] = 1;
    let mutated = kv.call(subdoc_op::DICT_UPSERT, &ckey(8, b"doc"), &upsert, b"x1", 0);
    assert_eq!(mutated.status, 0);
    let get = kv.call(opcode::GET, &ckey(8, b"doc"), &[], &[], 0);
    assert_eq!(get.value, br#"{"in":"airline","x":1}"#);
    let lookup = kv.call(subdoc_op::GET, &ckey(0, b"doc"), &upsert[..3], b"x", 0);
    assert_eq!(lookup.status, status::SUBDOC_PATH_ENOENT);

    // kv_engine's prefix rules.
    for reserved in 1..=7 {
        let reply = kv.call(opcode::GET, &ckey(reserved, b"doc"), &[], &[], 0);
        assert_eq!(reply.status, status::EINVAL, "cid {reserved}");
    }
    for bad in [
        &[0x88u8, 0x00, b'k'][..],
        &[0x80, 0x00, b'k'],
        &[0x08],
        &[0x80; 6],
    ] {
        assert_eq!(
            kv.call(opcode::GET, bad, &[], &[], 0).status,
            status::EINVAL
        );
    }
    let long = vec![b'k'; 246];
    let set = kv.call(opcode::SET, &ckey(8, &long), &store_extras(0, 0), b"{}", 0);
    assert_eq!(set.status, 0);
    let longer = vec![b'k'; 247];
    let set = kv.call(
        opcode::SET,
        &ckey(8, &longer),
        &store_extras(0, 0),
        b"{}",
        0,
    );
    assert_eq!(set.status, status::EINVAL);
    let set = kv.call(
        opcode::SET,
        &ckey(0, &longer),
        &store_extras(0, 0),
        b"{}",
        0,
    );
    assert_eq!(set.status, 0);
    let unknown = kv.call(opcode::GET, &ckey(0x77, b"doc"), &[], &[], 0);
    assert_unknown(&unknown, status::UNKNOWN_COLLECTION, 3);
    let unknown = kv.call(
        opcode::SET,
        &ckey(0x77, b"doc"),
        &store_extras(0, 0),
        b"{}",
        0,
    );
    assert_unknown(&unknown, status::UNKNOWN_COLLECTION, 3);

    // Without HELLO Collections a key is bare and names collection 0.
    let mut plain = Kv::open(&server.kv_addr, "admin", "secret", "travel");
    let get = plain.call(opcode::GET, b"doc", &[], &[], 0);
    assert_eq!(get.value, br#"{"in":"default"}"#);
    assert_eq!(
        plain
            .call(opcode::GET, &ckey(8, b"doc"), &[], &[], 0)
            .status,
        status::KEY_ENOENT
    );

    // A dropped collection's documents are gone; its name comes back empty, with a new id.
    assert_eq!(
        form(&mut mgmt, "DELETE", &format!("{collections}/airline"), "").0,
        200
    );
    let gone = kv.call(opcode::GET, &ckey(8, b"doc"), &[], &[], 0);
    assert_unknown(&gone, status::UNKNOWN_COLLECTION, 4);
    let reply = kv.call(opcode::GET_COLLECTION_ID, b"", &[], b"inventory.airline", 0);
    assert_unknown(&reply, status::UNKNOWN_COLLECTION, 4);
    assert_eq!(form(&mut mgmt, "POST", &collections, "name=airline").0, 200);
    assert_eq!(
        ids(&mut kv, opcode::GET_COLLECTION_ID, b"inventory.airline"),
        (5, 10)
    );
    let fresh = kv.call(opcode::GET, &ckey(10, b"doc"), &[], &[], 0);
    assert_eq!(fresh.status, status::KEY_ENOENT);
    assert_eq!(
        kv.call(opcode::GET, &ckey(0, b"doc"), &[], &[], 0).status,
        0
    );
    server.stop();
}
