//! Issue 18 with REAL old data: a data directory written by settee 30733d8
//! (testdata/make_issue18_fixture.sh) holding 20 good documents, a built JavaScript view and
//! Mango index, the document `x` that 30733d8 stored with an empty revision tree (which hid the
//! whole database there), a 100,000-deep JSON value and a 9 MB one written over the KV door.
//! Opened by this build, every reader lists the good documents, the bad ones are counted in
//! `GET /settee/stats`, and an admin removes `x` with `_purge`.
//!
//! Against 30733d8 itself (`SETTEE_TEST_BIN=/work/base/settee-30733d8`) the first check fails:
//! `_all_docs` lists no row at all.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::{Client, Server, ADMIN};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/testdata/issue18-30733d8.tar.gz"
);
const GOOD: usize = 20;
const MEMBER: &str = "bob:bobpw";

fn call_as(
    addr: &str,
    credentials: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut client = Client::connect_as(addr, credentials).expect("connect");
    let body = body.map(|body| body.to_string());
    let response = client
        .request(method, path, body.as_deref().map(str::as_bytes))
        .expect("request");
    (response.status, response.json())
}

fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    call_as(addr, ADMIN, method, path, body)
}

fn unpack_fixture(into: &Path) {
    let status = Command::new("tar")
        .args(["-xzf", FIXTURE, "-C"])
        .arg(into)
        .status()
        .expect("run tar");
    assert!(status.success(), "unpacking {FIXTURE}");
}

fn good_ids() -> BTreeSet<String> {
    (0..GOOD).map(|index| format!("good{index:02}")).collect()
}

fn ids_of(rows: &Value, member: &str) -> BTreeSet<String> {
    rows.as_array()
        .unwrap_or_else(|| panic!("no rows: {rows}"))
        .iter()
        .filter_map(|row| row[member].as_str().map(str::to_string))
        .collect()
}

fn stats(server: &Server) -> Value {
    let (status, stats) = call(&server.mgmt_addr, "GET", "/settee/stats", None);
    assert_eq!(status, 200, "{stats}");
    stats
}

#[test]
fn old_data_with_an_empty_tree_and_over_limit_documents_stays_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    unpack_fixture(dir.path());
    let server = Server::start(&dir.path().join("data"));
    let addr = server.addr.as_str();

    // _all_docs lists every decodable document; x (no revision tree) is left out.
    let (status, all) = call(addr, "GET", "/db/_all_docs", None);
    assert_eq!(status, 200, "{all}");
    let listed = ids_of(&all["rows"], "id");
    assert!(good_ids().is_subset(&listed), "{all}");
    assert!(!listed.contains("x"), "{all}");

    // include_docs: the good documents whole; the over-limit ones null, the rest unaffected.
    let (status, all) = call(addr, "GET", "/db/_all_docs?include_docs=true", None);
    assert_eq!(status, 200, "{all}");
    for row in all["rows"].as_array().expect("rows") {
        let id = row["id"].as_str().expect("id");
        if id == "deep" || id == "big" {
            assert_eq!(row["doc"], Value::Null, "{id}");
        } else if id.starts_with("good") {
            assert_eq!(row["doc"]["type"], "good", "{row}");
        }
    }

    // _changes, with and without documents.
    let (status, changes) = call(addr, "GET", "/db/_changes", None);
    assert_eq!(status, 200, "{changes}");
    let changed = ids_of(&changes["results"], "id");
    assert!(good_ids().is_subset(&changed), "{changes}");
    assert!(!changed.contains("x"));
    let (status, changes) = call(addr, "GET", "/db/_changes?include_docs=true", None);
    assert_eq!(status, 200, "{changes}");
    for row in changes["results"].as_array().expect("results") {
        if row["id"] == "deep" || row["id"] == "big" {
            assert_eq!(row["doc"], Value::Null, "{row}");
        }
    }

    // The JavaScript view built by 30733d8 catches up past x and the 100,000-deep document
    // (which 30733d8 would have fed to QuickJS) and answers for the good documents.
    let (status, view) = call(addr, "GET", "/db/_design/app/_view/by_n?reduce=false", None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(ids_of(&view["rows"], "id"), good_ids());
    let (status, view) = call(addr, "GET", "/db/_design/app/_view/by_n", None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["rows"][0]["value"], GOOD);
    let (status, view) = call(
        addr,
        "GET",
        "/db/_design/app/_view/by_n?reduce=false&include_docs=true&limit=3",
        None,
    );
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["rows"][0]["doc"]["type"], "good");

    // _find through the Mango index, and through _all_docs.
    for selector in [
        json!({"selector": {"n": {"$gte": 0}}, "use_index": "mango"}),
        json!({"selector": {"type": "good"}}),
    ] {
        let (status, found) = call(addr, "POST", "/db/_find", Some(selector.clone()));
        assert_eq!(status, 200, "{selector}: {found}");
        assert_eq!(ids_of(&found["docs"], "_id"), good_ids(), "{selector}");
    }

    // _bulk_get: per-document errors for what cannot be sent, the rest as usual.
    let (status, got) = call(
        addr,
        "POST",
        "/db/_bulk_get",
        Some(json!({"docs": [{"id": "good00"}, {"id": "deep"}, {"id": "big"}, {"id": "x"}]})),
    );
    assert_eq!(status, 200, "{got}");
    let results = got["results"].as_array().expect("results");
    assert_eq!(results[0]["docs"][0]["ok"]["type"], "good");
    assert_eq!(
        results[1]["docs"][0]["error"]["error"], "bad_request",
        "{got}"
    );
    assert_eq!(
        results[2]["docs"][0]["error"]["error"], "document_too_large",
        "{got}"
    );
    assert_eq!(
        results[3]["docs"][0]["error"]["error"], "corrupt_document",
        "{got}"
    );

    // Replication copies the good documents (and the design documents) to another database.
    let source = format!("http://{ADMIN}@{addr}/db");
    let target = format!("http://{ADMIN}@{addr}/copy");
    let (status, replicated) = call(
        addr,
        "POST",
        "/_replicate",
        Some(json!({"source": source, "target": target, "create_target": true})),
    );
    assert_eq!(status, 200, "{replicated}");
    assert_eq!(replicated["ok"], true, "{replicated}");
    let (_, copied) = call(addr, "GET", "/copy/_all_docs", None);
    let copied = ids_of(&copied["rows"], "id");
    assert!(good_ids().is_subset(&copied), "{copied:?}");
    assert!(copied.contains("_design/app"), "{copied:?}");
    assert!(!copied.contains("x") && !copied.contains("deep") && !copied.contains("big"));
    assert!(replicated["history"][0]["doc_write_failures"].as_u64() >= Some(2));

    // The node counted what it skipped, per bucket and in total.
    let counted = stats(&server);
    assert!(
        counted["corrupt_records_skipped"].as_u64() >= Some(1),
        "{counted}"
    );
    assert!(
        counted["over_limit_documents_skipped"].as_u64() >= Some(2),
        "{counted}"
    );
    assert!(counted["buckets"]["db"]["corrupt_records_skipped"].as_u64() >= Some(1));
    assert_eq!(counted["buckets"]["copy"]["corrupt_records_skipped"], 0);

    // Reading x names the problem, for admins and members alike; only an admin may purge.
    let (status, error) = call(addr, "GET", "/db/x", None);
    assert_eq!(status, 500, "{error}");
    assert_eq!(error["error"], "corrupt_document", "{error}");
    assert!(error["reason"]
        .as_str()
        .is_some_and(|reason| reason.contains("_purge")));
    let (status, _) = call(
        addr,
        "PUT",
        "/_users/org.couchdb.user:bob",
        Some(json!({"name": "bob", "password": "bobpw", "roles": [], "type": "user"})),
    );
    assert_eq!(status, 201);
    let (status, _) = call(
        addr,
        "PUT",
        "/db/_security",
        Some(json!({"members": {"names": ["bob"]}})),
    );
    assert_eq!(status, 200);
    let (status, error) = call_as(addr, MEMBER, "GET", "/db/x", None);
    assert_eq!(
        (status, error["error"].as_str()),
        (500, Some("corrupt_document"))
    );
    let (status, _) = call_as(addr, MEMBER, "GET", "/db/_all_docs", None);
    assert_eq!(status, 200);
    let (status, _) = call_as(
        addr,
        MEMBER,
        "POST",
        "/db/_purge",
        Some(json!({"x": ["4294967296-aa"]})),
    );
    assert!(
        status == 401 || status == 403,
        "a member may not purge: {status}"
    );

    let (status, purged) = call(
        addr,
        "POST",
        "/db/_purge",
        Some(json!({"x": ["4294967296-aa"]})),
    );
    assert_eq!(status, 201, "{purged}");
    assert_eq!(purged["purged"]["x"], json!(["4294967296-aa"]));
    assert_eq!(call(addr, "GET", "/db/x", None).0, 404);

    // Nothing bad is left to skip: feeds stop counting.
    let before = stats(&server)["buckets"]["db"]["corrupt_records_skipped"].clone();
    assert_eq!(call(addr, "GET", "/db/_changes", None).0, 200);
    assert_eq!(call(addr, "GET", "/db/_all_docs", None).0, 200);
    assert_eq!(
        stats(&server)["buckets"]["db"]["corrupt_records_skipped"],
        before
    );

    // The write that poisoned 30733d8 now stores a revision like any other.
    let (status, written) = call(
        addr,
        "PUT",
        "/db/x?new_edits=false",
        Some(json!({"_revisions": {"start": 4294967296u64, "ids": ["aa"]}, "v": 1})),
    );
    assert_eq!(status, 201, "{written}");
    let (status, doc) = call(addr, "GET", "/db/x", None);
    assert_eq!((status, doc["_rev"].as_str()), (200, Some("4294967296-aa")));
    let (_, all) = call(addr, "GET", "/db/_all_docs", None);
    assert!(ids_of(&all["rows"], "id").contains("x"));

    // The over-limit documents can still be read one by one, and deleted.
    let (status, deep) = call(addr, "GET", "/db/big", None);
    assert_eq!(status, 200);
    let rev = deep["_rev"].as_str().expect("rev").to_string();
    let (status, _) = call(addr, "DELETE", &format!("/db/big?rev={rev}"), None);
    assert_eq!(status, 200);
    server.stop();
}
