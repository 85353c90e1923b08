//! `_local_docs`, `_design_docs` and `_all_docs` listings as CouchDB answers them: `_local`
//! documents listed with `0-N` revisions (never in `_all_docs`), POST bodies carrying the
//! listing's parameters with the query string taking precedence, `_design_docs` counting only
//! design documents.

mod support;

use serde_json::{json, Value};
use support::{Client, Server};

fn ids(answer: &Value) -> Vec<String> {
    answer["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["id"].as_str().unwrap_or("-").to_string())
        .collect()
}

#[test]
fn local_design_and_all_docs_listings() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/l", None).0, 201);
    for id in ["a", "b", "c"] {
        assert_eq!(
            http.call("PUT", &format!("/l/{id}"), Some(json!({}))).0,
            201
        );
    }
    for id in ["x", "y"] {
        let path = format!("/l/_design/{id}");
        assert_eq!(http.call("PUT", &path, Some(json!({}))).0, 201);
    }
    assert_eq!(
        http.call("PUT", "/l/_local/one", Some(json!({"v": 1}))).0,
        201
    );
    let (_, two) = http.call("PUT", "/l/_local/two", Some(json!({"v": 2})));
    let rev = two["rev"].as_str().expect("rev").to_string();
    let changed = json!({"_rev": rev, "v": 3});
    assert_eq!(http.call("PUT", "/l/_local/two", Some(changed)).0, 201);

    let (status, local) = http.call("GET", "/l/_local_docs", None);
    assert_eq!(status, 200);
    assert_eq!(ids(&local), vec!["_local/one", "_local/two"]);
    assert_eq!(local["rows"][1]["value"]["rev"], "0-2");
    assert_eq!(
        (local["total_rows"].clone(), local["offset"].clone()),
        (Value::Null, Value::Null)
    );
    let (_, docs) = http.call(
        "GET",
        "/l/_local_docs?include_docs=true&descending=true",
        None,
    );
    assert_eq!(ids(&docs), vec!["_local/two", "_local/one"]);
    assert_eq!(docs["rows"][0]["doc"]["v"], 3);
    let keys = json!({"keys": ["_local/two", "_local/none"], "limit": 2});
    let (_, by_key) = http.call("POST", "/l/_local_docs", Some(keys.clone()));
    assert_eq!(by_key["rows"][0]["id"], "_local/two");
    assert_eq!(by_key["rows"][1]["error"], "not_found");
    // The query string wins over the body.
    let (_, limited) = http.call("POST", "/l/_local_docs?limit=1", Some(keys));
    assert_eq!(ids(&limited), vec!["_local/two"]);

    let (_, all) = http.call("GET", "/l/_all_docs", None);
    assert_eq!(all["total_rows"], 5);
    assert!(!ids(&all).iter().any(|id| id.starts_with("_local/")));
    let body = json!({"start_key": "b", "limit": 2, "include_docs": true});
    let (_, posted) = http.call("POST", "/l/_all_docs", Some(body));
    assert_eq!(ids(&posted), vec!["b", "c"]);
    assert!(posted["rows"][0]["doc"].is_object());
    let (_, design) = http.call("GET", "/l/_design_docs", None);
    assert_eq!(
        (design["total_rows"].clone(), ids(&design)),
        (
            json!(2),
            vec!["_design/x".to_string(), "_design/y".to_string()]
        )
    );
    server.stop();
}

#[test]
fn bulk_docs_and_document_ids_as_couchdb() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/b", None).0, 201);
    // `_local` documents are written through `_bulk_docs` too; an illegal id fails it whole.
    let docs =
        json!({"docs": [{"_id": "_design/d"}, {"_id": "_local/l", "v": 1}, {"_id": "plain"}]});
    let (status, rows) = http.call("POST", "/b/_bulk_docs", Some(docs));
    assert_eq!(status, 201);
    assert_eq!(rows[1], json!({"ok": true, "id": "_local/l", "rev": "0-1"}));
    assert_eq!(http.call("GET", "/b/_local/l", None).1["v"], 1);
    let (status, refused) = http.call(
        "POST",
        "/b/_bulk_docs",
        Some(json!({"docs": [{"_id": "ok"}, {"_id": "_bad"}]})),
    );
    assert_eq!(
        (status, refused["error"].clone()),
        (400, json!("illegal_docid"))
    );
    assert_eq!(http.call("GET", "/b/ok", None).0, 404);
    // The body's shape, as CouchDB words it.
    let reason = |http: &mut Client, body: Value| {
        http.call("POST", "/b/_bulk_docs", Some(body)).1["reason"].clone()
    };
    assert_eq!(
        reason(&mut http, json!({"doc": []})),
        "POST body must include `docs` parameter."
    );
    assert_eq!(
        reason(&mut http, json!({"docs": "x"})),
        "`docs` parameter must be an array."
    );
    assert_eq!(
        reason(&mut http, json!({"docs": [], "new_edits": 0})),
        "`new_edits` parameter must be a boolean."
    );
    let (status, all) = http.call(
        "POST",
        "/b/_bulk_docs",
        Some(json!({"docs": [{"_id": "n"}], "all_or_nothing": true})),
    );
    assert_eq!(
        (status, all[0]["error"].clone()),
        (417, json!("not_implemented"))
    );
    // Document ids.
    let (status, answer) = http.call("POST", "/b", Some(json!({"_id": 1})));
    assert_eq!(
        (status, answer["error"].clone()),
        (400, json!("illegal_docid"))
    );
    assert_eq!(
        http.call("PUT", "/b/_other", Some(json!({}))).1["error"],
        "illegal_docid"
    );
    for path in [
        "/b/_local",
        "/b/_local/",
        "/b/_local%2F",
        "/b/_local/foo/bar",
    ] {
        let (status, answer) = http.call("PUT", path, Some(json!({})));
        assert_eq!(
            (status, answer["error"].clone()),
            (400, json!("bad_request")),
            "{path}"
        );
    }
    let (status, answer) = http.call("POST", "/b/_all_docs", Some(json!({"keys": 1})));
    assert_eq!(
        (status, answer["reason"].clone()),
        (400, json!("`keys` body member must be an array."))
    );
    server.stop();
}

#[test]
fn changes_parameters_are_refused_in_couchdbs_words() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/c", None).0, 201);
    let reason = |http: &mut Client, query: &str| {
        let (status, answer) =
            http.call("GET", &format!("/c/_changes?feed=continuous&{query}"), None);
        (
            status,
            answer["reason"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(
        reason(&mut http, "heartbeat=-1000"),
        (
            400,
            "The heartbeat value should be a positive integer (in milliseconds).".into()
        )
    );
    assert_eq!(
        reason(&mut http, "heartbeat=a1000"),
        (
            400,
            "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).".into()
        )
    );
    let (status, answer) = http.call("POST", "/c/_changes", Some(json!(["doc1"])));
    assert_eq!(
        (status, answer["reason"].clone()),
        (400, json!("Request body must be a JSON object"))
    );
    assert_eq!(
        http.call("POST", "/c/_changes", Some(json!({"doc_ids": []})))
            .0,
        200
    );
    server.stop();
}
