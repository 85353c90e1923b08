//! Collections through the CouchDB door (`docs/format/collections.md`, "CouchDB-door database
//! names"): `bucket$scope$collection` is a database with its own documents, `_local`
//! documents, `_all_docs`, `_changes`, views and Mango indexes; the bucket's own name stays
//! `_default._default`; the same documents are seen through the KV door; `PUT` creates a
//! collection, `DELETE` drops it, and a name made again is a new, empty collection.

mod support;

use serde_json::{json, Value};
use settee_kv_codec::{feature, leb128, opcode};
use support::kv::{store_extras, Kv};
use support::{Client, Server};

const AIRLINE: &str = "/travel$inventory$airline";

fn ids_of(rows: &Value) -> Vec<String> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_string())
        .collect()
}

fn setup() -> (tempfile::TempDir, Server, Client) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/travel", None).0, 201);
    (dir, server, http)
}

#[test]
fn a_collection_is_a_database_of_its_own() {
    let (_dir, server, mut http) = setup();
    let (status, body) = http.call("PUT", AIRLINE, None);
    assert_eq!((status, &body), (201, &json!({"ok": true})));
    assert_eq!(http.call("PUT", AIRLINE, None).0, 412);
    // The management REST API sees the scope and collection PUT made.
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let scopes = mgmt
        .request("GET", "/pools/default/buckets/travel/scopes", None)
        .unwrap()
        .json();
    let inventory = scopes["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|scope| scope["name"] == "inventory")
        .expect("scope created by PUT");
    assert_eq!(inventory["collections"][0]["name"], "airline");

    // The same key in the bucket and in the collection is two documents.
    assert_eq!(
        http.call("PUT", "/travel/k", Some(json!({"in": "default"})))
            .0,
        201
    );
    assert_eq!(
        http.call(
            "PUT",
            &format!("{AIRLINE}/k"),
            Some(json!({"in": "airline"}))
        )
        .0,
        201
    );
    for id in ["a1", "a2", "_design/x"] {
        let body = if id.starts_with("_design") {
            json!({"views": {"by_in": {"map": "function (doc) { if (doc.in) emit(doc.in, 1); }"}}})
        } else {
            json!({"in": "airline", "n": id})
        };
        assert_eq!(
            http.call("PUT", &format!("{AIRLINE}/{id}"), Some(body)).0,
            201
        );
    }
    assert_eq!(http.call("GET", "/travel/k", None).1["in"], "default");
    assert_eq!(
        http.call("GET", &format!("{AIRLINE}/k"), None).1["in"],
        "airline"
    );
    assert_eq!(http.call("GET", "/travel/a1", None).0, 404);

    // Database information is the collection's.
    let (status, info) = http.call("GET", AIRLINE, None);
    assert_eq!(status, 200);
    assert_eq!(info["db_name"], "travel$inventory$airline");
    assert_eq!(info["doc_count"], 4);
    assert_eq!(http.call("GET", "/travel", None).1["doc_count"], 1);

    // _all_docs and _changes list the collection's documents only, and the bucket's feed
    // none of them.
    let all = http.call("GET", &format!("{AIRLINE}/_all_docs"), None).1;
    assert_eq!(ids_of(&all["rows"]), ["_design/x", "a1", "a2", "k"]);
    assert_eq!(all["total_rows"], 4);
    let changes = http.call("GET", &format!("{AIRLINE}/_changes"), None).1;
    let mut changed = ids_of(&changes["results"]);
    changed.sort();
    assert_eq!(changed, ["_design/x", "a1", "a2", "k"]);
    let default_changes = http.call("GET", "/travel/_changes", None).1;
    assert_eq!(ids_of(&default_changes["results"]), ["k"]);
    // A feed resumes from its last_seq: a later write shows alone.
    let since = changes["last_seq"].as_str().unwrap().to_string();
    assert_eq!(http.call("PUT", "/travel/d2", Some(json!({}))).0, 201);
    assert_eq!(
        http.call(
            "PUT",
            &format!("{AIRLINE}/a3"),
            Some(json!({"in": "airline"}))
        )
        .0,
        201
    );
    let later = http
        .call("GET", &format!("{AIRLINE}/_changes?since={since}"), None)
        .1;
    assert_eq!(ids_of(&later["results"]), ["a3"]);

    // A JavaScript view indexes the collection's documents only.
    let view = http
        .call(
            "GET",
            &format!("{AIRLINE}/_design/x/_view/by_in?reduce=false"),
            None,
        )
        .1;
    assert_eq!(view["total_rows"], 4);
    assert!(view["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|row| row["key"] == "airline"));

    // _local documents are per database.
    assert_eq!(
        http.call(
            "PUT",
            &format!("{AIRLINE}/_local/cp"),
            Some(json!({"at": 1}))
        )
        .0,
        201
    );
    assert_eq!(http.call("GET", "/travel/_local/cp", None).0, 404);
    assert_eq!(
        http.call("GET", &format!("{AIRLINE}/_local/cp"), None).1["at"],
        1
    );

    // _all_dbs lists the collection under its door name.
    let dbs = http.call("GET", "/_all_dbs", None).1;
    assert!(dbs
        .as_array()
        .unwrap()
        .contains(&json!("travel$inventory$airline")));
    assert!(dbs.as_array().unwrap().contains(&json!("travel")));
}

#[test]
fn mango_indexes_and_queries_cover_one_collection() {
    let (_dir, _server, mut http) = setup();
    assert_eq!(http.call("PUT", AIRLINE, None).0, 201);
    let mut bulk = Vec::new();
    for n in 0..20 {
        bulk.push(json!({"_id": format!("air{n:02}"), "kind": "airline", "n": n}));
    }
    let (status, _) = http.call(
        "POST",
        &format!("{AIRLINE}/_bulk_docs"),
        Some(json!({"docs": bulk})),
    );
    assert_eq!(status, 201);
    // Documents that would match in the bucket's default collection stay out of the answers.
    for n in 0..5 {
        let doc = json!({"kind": "airline", "n": n});
        assert_eq!(
            http.call("PUT", &format!("/travel/def{n}"), Some(doc)).0,
            201
        );
    }
    let index = json!({"index": {"fields": ["n"]}, "name": "by-n", "ddoc": "idx"});
    let (status, created) = http.call("POST", &format!("{AIRLINE}/_index"), Some(index));
    assert_eq!((status, created["result"].as_str()), (200, Some("created")));
    let indexes = http.call("GET", &format!("{AIRLINE}/_index"), None).1;
    assert_eq!(indexes["total_rows"], 2);
    assert_eq!(http.call("GET", "/travel/_index", None).1["total_rows"], 1);

    let query = json!({"selector": {"n": {"$gte": 15}}, "fields": ["_id"]});
    let (status, found) = http.call("POST", &format!("{AIRLINE}/_find"), Some(query.clone()));
    assert_eq!(status, 200, "{found}");
    let ids: Vec<&str> = found["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["air15", "air16", "air17", "air18", "air19"]);
    let explained = http
        .call("POST", &format!("{AIRLINE}/_explain"), Some(query))
        .1;
    assert_eq!(explained["index"]["name"], "by-n");
    // Without an index: the collection's documents, through its _all_docs.
    let all = json!({"selector": {"kind": "airline"}, "fields": ["_id"], "limit": 100});
    let found = http
        .call("POST", &format!("{AIRLINE}/_find"), Some(all.clone()))
        .1;
    assert_eq!(found["docs"].as_array().unwrap().len(), 20);
    let found = http.call("POST", "/travel/_find", Some(all)).1;
    assert_eq!(found["docs"].as_array().unwrap().len(), 5);
}

#[test]
fn both_doors_see_the_same_documents_of_a_collection() {
    let (_dir, server, mut http) = setup();
    // A collection with capitals and '%' in its names, made through the door.
    let door = "/travel$(eu)$route()(x)";
    assert_eq!(http.call("PUT", door, None).0, 201);
    let mut kv = Kv::connect(&server.kv_addr);
    kv.hello(&[
        feature::XERROR,
        feature::SELECT_BUCKET,
        feature::JSON,
        feature::COLLECTIONS,
    ]);
    assert_eq!(kv.auth("admin", "secret"), 0);
    assert_eq!(
        kv.call(opcode::SELECT_BUCKET, b"travel", &[], &[], 0)
            .status,
        0
    );
    let reply = kv.call(opcode::GET_COLLECTION_ID, b"", &[], b"EU.route%X", 0);
    assert_eq!(
        reply.status, 0,
        "the door made scope EU, collection route%X"
    );
    let cid = u32::from_be_bytes(reply.extras[8..12].try_into().unwrap());
    let mut key = Vec::new();
    leb128::encode_u32(cid, &mut key);
    key.extend_from_slice(b"from-kv");
    let stored = kv.call(
        opcode::SET,
        &key,
        &store_extras(0, 0),
        br#"{"door":"kv"}"#,
        0,
    );
    assert_eq!(stored.status, 0);
    let (status, doc) = http.call("GET", &format!("{door}/from-kv"), None);
    assert_eq!((status, doc["door"].as_str()), (200, Some("kv")));
    assert_eq!(http.call("GET", "/travel/from-kv", None).0, 404);
    assert_eq!(
        http.call(
            "PUT",
            &format!("{door}/from-http"),
            Some(json!({"door": "http"}))
        )
        .0,
        201
    );
    let mut key = Vec::new();
    leb128::encode_u32(cid, &mut key);
    key.extend_from_slice(b"from-http");
    let read = kv.call(opcode::GET, &key, &[], &[], 0);
    assert_eq!(
        (read.status, read.value.as_slice()),
        (0, br#"{"door":"http"}"#.as_slice())
    );
}

#[test]
fn a_dropped_collection_is_gone_and_its_name_comes_back_empty() {
    let (_dir, _server, mut http) = setup();
    assert_eq!(http.call("PUT", AIRLINE, None).0, 201);
    let ddoc = json!({"views": {"all": {"map": "function (doc) { emit(doc._id, null); }"}}});
    assert_eq!(
        http.call("PUT", &format!("{AIRLINE}/_design/v"), Some(ddoc.clone()))
            .0,
        201
    );
    assert_eq!(
        http.call("PUT", &format!("{AIRLINE}/old"), Some(json!({})))
            .0,
        201
    );
    let view = http
        .call("GET", &format!("{AIRLINE}/_design/v/_view/all"), None)
        .1;
    assert_eq!(ids_of(&view["rows"]), ["old"]);

    assert_eq!(
        http.call("DELETE", AIRLINE, None),
        (200, json!({"ok": true}))
    );
    assert_eq!(http.call("GET", &format!("{AIRLINE}/old"), None).0, 404);
    assert_eq!(http.call("GET", AIRLINE, None).0, 404);
    assert_eq!(http.call("DELETE", AIRLINE, None).0, 404);
    let dbs = http.call("GET", "/_all_dbs", None).1;
    assert!(!dbs
        .as_array()
        .unwrap()
        .contains(&json!("travel$inventory$airline")));
    // The bucket itself is untouched.
    assert_eq!(http.call("GET", "/travel", None).0, 200);

    assert_eq!(http.call("PUT", AIRLINE, None).0, 201);
    let info = http.call("GET", AIRLINE, None).1;
    assert_eq!(
        (info["doc_count"].as_u64(), info["doc_del_count"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        http.call("GET", &format!("{AIRLINE}/_all_docs"), None).1["rows"],
        json!([])
    );
    assert_eq!(
        http.call("GET", &format!("{AIRLINE}/_changes"), None).1["results"],
        json!([])
    );
    // The same design document in the new collection indexes from nothing.
    assert_eq!(
        http.call("PUT", &format!("{AIRLINE}/_design/v"), Some(ddoc))
            .0,
        201
    );
    assert_eq!(
        http.call("PUT", &format!("{AIRLINE}/new"), Some(json!({})))
            .0,
        201
    );
    let view = http
        .call("GET", &format!("{AIRLINE}/_design/v/_view/all"), None)
        .1;
    assert_eq!(ids_of(&view["rows"]), ["new"], "{view}");
}

#[test]
fn bucket_names_and_collection_names_never_collide() {
    let (_dir, server, mut http) = setup();
    // `other` is no bucket: this is a CouchDB database name like any other.
    assert_eq!(http.call("PUT", "/other$s$c", None).0, 201);
    assert_eq!(http.call("PUT", "/other", None).0, 201);
    // Creating other.s.c would give a collection the name of the bucket `other$s$c`.
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let scopes = "/pools/default/buckets/other/scopes";
    assert_eq!(
        mgmt.request("POST", scopes, Some(b"name=s"))
            .unwrap()
            .status,
        200
    );
    let refused = mgmt
        .request("POST", &format!("{scopes}/s/collections"), Some(b"name=c"))
        .unwrap();
    assert_eq!(
        refused.status,
        400,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    // And the other way: a bucket cannot take a live collection's door name.
    assert_eq!(http.call("PUT", AIRLINE, None).0, 201);
    assert_eq!(http.call("PUT", "/travel$inventory$airline", None).0, 412);
    // Names that are not a canonical encoding, or that spell _default._default, name nothing.
    assert_eq!(http.call("GET", "/travel$_default$_default", None).0, 404);
    assert_eq!(
        http.call("GET", "/travel$(i)(n)ventory$airline", None).0,
        404
    );
    // Names a collection may not have are refused as CouchDB refuses database names.
    let (status, body) = http.call("PUT", "/travel$inventory$_hidden", None);
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("illegal_database_name"))
    );
}
