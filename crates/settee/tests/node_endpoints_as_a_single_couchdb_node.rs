//! The node's endpoints as a single CouchDB 3.5.0 node answered them (issue 22, points 3 and
//! 11): `/_membership`, `/_node/{name|_local}`, `_config` reads and refusals, `_versions`,
//! `/_cluster_setup`, `/_up`, `/_reshard` as a CouchDB without resharding, and `GET /`
//! advertising only features settee has.

mod support;

use serde_json::json;
use support::{Client, Server};

#[test]
fn node_endpoints_answer_as_a_single_couchdb_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--node-name", "node1@127.0.0.1"]);
    let mut http = Client::connect(&server.addr).unwrap();
    let mut anonymous = Client::connect_as(&server.addr, "nobody:x").unwrap();
    let get = |http: &mut Client, path: &str| http.request("GET", path, None).unwrap();
    let anonymous_get = |http: &mut Client, path: &str| {
        http.request_with("GET", path, &[("Authorization", "")], None)
            .unwrap()
    };

    let membership = get(&mut http, "/_membership");
    assert_eq!(membership.status, 200);
    assert_eq!(
        membership.json(),
        json!({"all_nodes": ["node1@127.0.0.1"], "cluster_nodes": ["node1@127.0.0.1"]})
    );
    assert_eq!(
        get(&mut http, "/_node/_local").json(),
        json!({"name": "node1@127.0.0.1"})
    );

    // Server admins only.
    for path in [
        "/_membership",
        "/_node/_local/_config",
        "/_node/_local/_versions",
        "/_cluster_setup",
    ] {
        let refused = anonymous_get(&mut anonymous, path);
        assert_eq!(refused.status, 401, "{path}");
        assert_eq!(
            refused.json(),
            json!({"error": "unauthorized", "reason": "You are not a server admin."}),
            "{path}"
        );
    }

    // The whole configuration, a section, unknown names.
    let all = get(&mut http, "/_node/node1@127.0.0.1/_config").json();
    assert_eq!(
        all["couchdb"]["database_dir"],
        json!(dir.path().display().to_string())
    );
    let port = server.addr.rsplit(':').next().unwrap();
    assert_eq!(all["chttpd"]["port"], json!(port));
    assert_eq!(
        get(&mut http, "/_node/_local/_config/nosection").json(),
        json!({})
    );
    let other = get(&mut http, "/_node/other@host/_config");
    assert_eq!(
        (other.status, other.json()),
        (
            404,
            json!({"error": "not_found", "reason": "no such node: other@host"})
        )
    );
    let deep = get(&mut http, "/_node/_local/_config/a/b/c");
    assert_eq!(
        (deep.status, deep.json()),
        (404, json!({"error": "not_found", "reason": "missing"}))
    );
    let post = http.request("POST", "/_node/_local/_config", None).unwrap();
    assert_eq!(
        (post.status, post.json()),
        (
            405,
            json!({"error": "method_not_allowed", "reason": "Only GET allowed"})
        )
    );
    let post = http
        .request("POST", "/_node/_local/_config/s/k", Some(b"\"v\""))
        .unwrap();
    assert_eq!(post.json()["reason"], "Only GET,PUT,DELETE allowed");
    let reload = http
        .request("POST", "/_node/_local/_config/_reload", None)
        .unwrap();
    assert_eq!((reload.status, reload.json()), (200, json!({"ok": true})));
    let blacklisted = http
        .request(
            "PUT",
            "/_node/_local/_config/query_servers/x",
            Some(b"\"y\""),
        )
        .unwrap();
    assert_eq!(
        (blacklisted.status, blacklisted.json()),
        (
            403,
            json!({"error": "forbidden", "reason": "Config section blacklisted for modification over HTTP API."})
        )
    );
    let invalid = http
        .request("PUT", "/_node/_local/_config/a/b", Some(b"random"))
        .unwrap();
    assert_eq!(
        (invalid.status, invalid.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "invalid UTF-8 JSON"})
        )
    );

    let versions = get(&mut http, "/_node/_local/_versions");
    assert_eq!(versions.status, 200);
    assert_eq!(versions.json()["javascript_engine"]["name"], "quickjs");

    assert_eq!(
        get(&mut http, "/_up").json(),
        json!({"status": "ok", "seeds": {}})
    );

    let setup = get(&mut http, "/_cluster_setup");
    assert_eq!(setup.json(), json!({"state": "single_node_enabled"}));
    let finish = http
        .request(
            "POST",
            "/_cluster_setup",
            Some(br#"{"action":"finish_cluster"}"#),
        )
        .unwrap();
    assert_eq!(
        (finish.status, finish.json()),
        (
            400,
            json!({"error": "bad_request", "reason": "Cluster is already finished"})
        )
    );
    let bogus = http
        .request("POST", "/_cluster_setup", Some(br#"{"action":"bogus"}"#))
        .unwrap();
    assert_eq!(bogus.json()["reason"], "Invalid Action'");
    let single = http
        .request(
            "POST",
            "/_cluster_setup",
            Some(br#"{"action":"enable_single_node","ensure_dbs_exist":["_users","extra"]}"#),
        )
        .unwrap();
    assert_eq!((single.status, single.json()), (201, json!({"ok": true})));
    assert_eq!(get(&mut http, "/extra").status, 200);
    let put = http.request("PUT", "/_cluster_setup", None).unwrap();
    assert_eq!(put.json()["reason"], "Only GET,POST allowed");

    // No resharding: the path is a database that cannot exist, and GET / does not say
    // `reshard`; it says `partitioned` (partitioned_databases.rs).
    for path in ["/_reshard", "/_reshard/jobs", "/_reshard/state"] {
        let answer = get(&mut http, path);
        assert_eq!(
            (answer.status, answer.json()),
            (
                404,
                json!({"error": "not_found", "reason": "Database does not exist."})
            ),
            "{path}"
        );
    }
    let create = http.request("PUT", "/_reshard", None).unwrap();
    assert_eq!(create.status, 400);
    assert_eq!(create.json()["error"], "illegal_database_name");
    let features = get(&mut http, "/").json()["features"].clone();
    let features: Vec<&str> = features
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        !features.contains(&"reshard") && features.contains(&"partitioned"),
        "{features:?}"
    );
    assert!(features.contains(&"scheduler"));
    server.stop();
}
