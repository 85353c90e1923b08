//! `/_node/{node}/_config` (issue 22, point 3): a `PUT` of a setting settee uses changes what
//! the node does at once, and after a restart; `X-Couch-Persist: false` changes last until
//! the restart only; `DELETE` gives the default back. Each answer as CouchDB 3.5.0 gave it.

mod support;

use support::{Client, Server};

const NODE: &str = "node9@127.0.0.1";

fn put_config(http: &mut Client, path: &str, value: &str) -> support::Response {
    let body = serde_json::to_vec(&serde_json::json!(value)).unwrap();
    http.request("PUT", &format!("/_node/_local/_config/{path}"), Some(&body))
        .unwrap()
}

fn start(dir: &std::path::Path) -> (Server, Client) {
    let server = Server::start_with(dir, &["--node-name", NODE]);
    let http = Client::connect(&server.addr).unwrap();
    (server, http)
}

/// A document of about `bytes` bytes.
fn doc_of(bytes: usize) -> Vec<u8> {
    format!("{{\"pad\":\"{}\"}}", "x".repeat(bytes)).into_bytes()
}

#[test]
fn config_changes_take_effect_and_persist() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut http) = start(dir.path());
    assert_eq!(http.request("PUT", "/db", None).unwrap().status, 201);

    // Unset keys are 404 unknown_config_value; a first PUT answers the old value "".
    let unset = http
        .request("GET", "/_node/_local/_config/uuids/algorithm", None)
        .unwrap();
    assert_eq!(unset.status, 404);
    assert_eq!(
        unset.json(),
        serde_json::json!({"error": "not_found", "reason": "unknown_config_value"})
    );
    let set = put_config(&mut http, "uuids/algorithm", "utc_id");
    assert_eq!((set.status, set.json()), (200, serde_json::json!("")));
    let set = put_config(&mut http, "uuids/utc_id_suffix", "-cfgtest");
    assert_eq!(set.status, 200);
    // The node's own name reaches the same configuration as _local.
    let read = http
        .request("GET", &format!("/_node/{NODE}/_config/uuids"), None)
        .unwrap();
    assert_eq!(
        read.json(),
        serde_json::json!({"algorithm": "utc_id", "utc_id_suffix": "-cfgtest"})
    );

    // [uuids]: /_uuids and POST /db make ids with the algorithm at once; utc_id ids
    // increase even when made within one microsecond; caches are told not to keep them.
    let answer = http.request("GET", "/_uuids?count=200", None).unwrap();
    assert!(answer
        .header("etag")
        .is_some_and(|tag| tag.starts_with('"')));
    assert_eq!(
        answer.header("expires"),
        Some("Mon, 01 Jan 1990 00:00:00 GMT")
    );
    let ids: Vec<String> = answer.json()["uuids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    for id in &ids {
        assert!(id.ends_with("-cfgtest") && id.len() == 14 + 8, "{id}");
    }
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    let posted = http.request("POST", "/db", Some(b"{}")).unwrap().json();
    assert!(posted["id"].as_str().unwrap().ends_with("-cfgtest"));

    // [couchdb] max_document_size: the door refuses a larger document at once.
    assert_eq!(
        http.request("PUT", "/db/big1", Some(&doc_of(500)))
            .unwrap()
            .status,
        201
    );
    let set = put_config(&mut http, "couchdb/max_document_size", "200");
    assert_eq!(set.status, 200);
    assert_eq!(set.json(), serde_json::json!("8000000"));
    let refused = http.request("PUT", "/db/big2", Some(&doc_of(500))).unwrap();
    assert_eq!(refused.status, 413);
    assert_eq!(refused.json()["error"], "document_too_large");

    // [chttpd] allow_jsonp: ?callback wraps JSON answers, an unsafe name is 400.
    let plain = http.request("GET", "/db/big1?callback=cb", None).unwrap();
    assert_eq!(plain.header("content-type"), Some("application/json"));
    assert_eq!(
        put_config(&mut http, "chttpd/allow_jsonp", "true").status,
        200
    );
    let wrapped = http.request("GET", "/db/big1?callback=cb", None).unwrap();
    assert_eq!(wrapped.status, 200);
    assert_eq!(
        wrapped.header("content-type"),
        Some("application/javascript")
    );
    let text = String::from_utf8(wrapped.body.clone()).unwrap();
    assert!(
        text.starts_with("/* CouchDB */cb({\"_id\":\"big1\""),
        "{text}"
    );
    assert!(text.ends_with(");\n"), "{text}");
    let missing = http.request("GET", "/nodb?callback=cb", None).unwrap();
    assert_eq!(missing.status, 404);
    assert!(String::from_utf8_lossy(&missing.body).starts_with("/* CouchDB */cb({\"error\""));
    let bad = http
        .request("GET", "/db/big1?callback=cb%22", None)
        .unwrap();
    assert_eq!(
        (bad.status, bad.json()),
        (
            400,
            serde_json::json!({"error": "bad_request", "reason": "invalid_callback"})
        )
    );

    // [httpd] x_forwarded_host: Location reads the header it names.
    assert_eq!(
        put_config(&mut http, "httpd/x_forwarded_host", "X-Host").status,
        200
    );
    let located = http
        .request_with(
            "PUT",
            "/db/located",
            &[
                ("Content-Type", "application/json"),
                ("X-Host", "proxy.example"),
            ],
            Some(b"{}"),
        )
        .unwrap();
    assert_eq!(
        located.header("location"),
        Some("http://proxy.example/db/located")
    );

    // [chttpd] decode_plus_to_space: on by default (a raw + is a space), off keeps +.
    let spaced = http.request("PUT", "/db/a+b", Some(b"{}")).unwrap().json();
    assert_eq!(spaced["id"], "a b");
    assert_eq!(
        put_config(&mut http, "chttpd/decode_plus_to_space", "false").status,
        200
    );
    let kept = http.request("PUT", "/db/a+b", Some(b"{}")).unwrap().json();
    assert_eq!(kept["id"], "a+b");

    // A write with X-Couch-Persist: false takes effect but is not saved.
    let volatile = http
        .request_with(
            "PUT",
            "/_node/_local/_config/test/volatile",
            &[
                ("Content-Type", "application/json"),
                ("X-Couch-Persist", "false"),
            ],
            Some(b"\"v\""),
        )
        .unwrap();
    assert_eq!(volatile.status, 200);
    let read = http
        .request("GET", "/_node/_local/_config/test/volatile", None)
        .unwrap();
    assert_eq!(read.json(), serde_json::json!("v"));

    // Values settee could not use are refused and change nothing.
    let refused = put_config(&mut http, "uuids/algorithm", "bogus");
    assert_eq!(refused.status, 400);
    let refused = put_config(&mut http, "couchdb/max_document_size", "lots");
    assert_eq!(refused.status, 400);
    let not_string = http
        .request("PUT", "/_node/_local/_config/a/b", Some(b"11"))
        .unwrap();
    assert_eq!(
        (not_string.status, not_string.json()),
        (
            400,
            serde_json::json!({"error": "bad_request", "reason": "a JSON string expected"})
        )
    );

    // After a restart: the saved writes hold, the unsaved one is gone.
    server.stop();
    let (server, mut http) = start(dir.path());
    let refused = http.request("PUT", "/db/big3", Some(&doc_of(500))).unwrap();
    assert_eq!(refused.status, 413, "max_document_size after a restart");
    let id = http.request("POST", "/db", Some(b"{}")).unwrap().json()["id"].clone();
    assert!(id.as_str().unwrap().ends_with("-cfgtest"), "{id}");
    let wrapped = http.request("GET", "/?callback=cb", None).unwrap();
    assert_eq!(
        wrapped.header("content-type"),
        Some("application/javascript")
    );
    let gone = http
        .request("GET", "/_node/_local/_config/test/volatile", None)
        .unwrap();
    assert_eq!(gone.status, 404);
    let ini = std::fs::read_to_string(dir.path().join("local.ini")).unwrap();
    assert!(ini.contains("[uuids]\nalgorithm = utc_id\n"), "{ini}");

    // DELETE answers the value and gives the default back, at once and after a restart.
    let deleted = http
        .request(
            "DELETE",
            "/_node/_local/_config/couchdb/max_document_size",
            None,
        )
        .unwrap();
    assert_eq!(
        (deleted.status, deleted.json()),
        (200, serde_json::json!("200"))
    );
    let again = http
        .request(
            "DELETE",
            "/_node/_local/_config/couchdb/max_document_size",
            None,
        )
        .unwrap();
    assert_eq!(again.status, 404);
    assert_eq!(
        http.request("PUT", "/db/big4", Some(&doc_of(500)))
            .unwrap()
            .status,
        201
    );
    assert_eq!(
        http.request("DELETE", "/_node/_local/_config/uuids/algorithm", None)
            .unwrap()
            .status,
        200
    );
    server.stop();
    let (server, mut http) = start(dir.path());
    assert_eq!(
        http.request("PUT", "/db/big5", Some(&doc_of(500)))
            .unwrap()
            .status,
        201
    );
    let read = http
        .request(
            "GET",
            "/_node/_local/_config/couchdb/max_document_size",
            None,
        )
        .unwrap();
    assert_eq!(read.status, 404);
    let id = http.request("POST", "/db", Some(b"{}")).unwrap().json()["id"].clone();
    assert!(!id.as_str().unwrap().ends_with("-cfgtest"), "{id}");
    server.stop();
}
