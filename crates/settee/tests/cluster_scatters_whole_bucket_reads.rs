//! Whole-bucket reads answer for the whole cluster from any node: three real `settee serve`
//! processes and a bucket with one copy of each document (`n=1`), so every node holds only the
//! documents of its own active vbuckets and can list the others only by asking their nodes.
//! `_all_docs` (ranges, `skip`/`limit`, `descending`, `keys`, `include_docs`, `update_seq`) and
//! `_changes` feeds (normal, longpoll, continuous live and finished, eventsource) answer
//! through every node as one node with every document would;
//! a feed read from one node resumes on another from its `last_seq` or any row's `seq`
//! without repeating or missing a change. `_security` and `_revs_limit` set through one node
//! hold on every node. Then the cluster port is driven directly with the
//! cluster secret: a scattered request for vbuckets the receiver is not the active of, or one
//! that is not a whole-bucket read, is refused.

mod support;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::{AuthMethod, ForwardHttp, Identity, Refusal, ScatterHttp};
use settee_cluster_net::{Secret, TcpTransport};
use support::kv::Kv;
use support::{call_json as call, cluster_addr, get_json as get, until, Client, Server};

const SECRET: &str = "the secret of the scatter test";
const VBUCKETS: u16 = 16;
const DOCS: usize = 60;

fn ids(rows: &Value, field: &str) -> Vec<String> {
    rows.as_array()
        .expect("rows")
        .iter()
        .map(|row| row[field].as_str().expect("an id").to_owned())
        .collect()
}

#[test]
fn any_node_lists_and_follows_every_document_of_the_cluster() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);
    let (created, body) = call(&nodes[0], "PUT", &format!("/db?q={VBUCKETS}&n=1"), None);
    assert_eq!(created, 201, "{body}");
    for node in &nodes {
        until("the bucket everywhere", || {
            (call(node, "GET", "/db", None).0 == 200).then_some(())
        });
    }
    let mut all: Vec<String> = (0..DOCS).map(|i| format!("doc-{i:03}")).collect();
    for (index, id) in all.iter().enumerate() {
        let (status, body) = call(
            &nodes[index % 3],
            "PUT",
            &format!("/db/{id}"),
            Some(json!({"n": index})),
        );
        assert_eq!(status, 201, "PUT {id}: {body}");
    }
    all.sort();

    for (index, node) in nodes.iter().enumerate() {
        let listed = get(node, "/db/_all_docs");
        assert_eq!(listed["total_rows"], json!(DOCS), "through node {index}");
        assert_eq!(listed["offset"], json!(0));
        assert_eq!(ids(&listed["rows"], "id"), all, "every id, in order");

        let page = get(node, "/db/_all_docs?skip=5&limit=10");
        assert_eq!(ids(&page["rows"], "id"), all[5..15], "skip and limit");
        assert_eq!(page["offset"], json!(5));
        let range = get(
            node,
            "/db/_all_docs?startkey=%22doc-010%22&endkey=%22doc-019%22&inclusive_end=false",
        );
        assert_eq!(ids(&range["rows"], "id"), all[10..19]);
        assert_eq!(range["offset"], json!(10), "the documents before the range");
        let last = get(node, "/db/_all_docs?descending=true&limit=3");
        let expected: Vec<String> = all.iter().rev().take(3).cloned().collect();
        assert_eq!(ids(&last["rows"], "id"), expected, "descending");

        let (status, keyed) = call(
            node,
            "POST",
            "/db/_all_docs?include_docs=true",
            Some(json!({"keys": ["doc-031", "missing", "doc-002", 7]})),
        );
        assert_eq!(status, 200, "{keyed}");
        let rows = keyed["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 4, "{keyed}");
        assert_eq!(rows[0]["doc"]["n"], json!(31));
        assert_eq!(rows[1], json!({"key": "missing", "error": "not_found"}));
        assert_eq!(rows[2]["id"], json!("doc-002"));
        assert_eq!(rows[3], json!({"key": 7, "error": "not_found"}));
        assert_eq!(keyed["offset"], Value::Null);

        let seq = get(node, "/db/_all_docs?update_seq=true&limit=0")["update_seq"].clone();
        let (_, feed) = call(
            node,
            "GET",
            &format!("/db/_changes?since={}", seq.as_str().expect("a sequence")),
            None,
        );
        assert_eq!(
            feed["results"],
            json!([]),
            "update_seq covers every vbucket"
        );
    }

    // A database's security object and revision limit, set through one node, hold on every
    // node (each node keeps its own, as each CouchDB shard does).
    let security = json!({"admins": {"names": [], "roles": []}, "members": {"names": [], "roles": ["readers"]}});
    let (status, body) = call(&nodes[2], "PUT", "/db/_security", Some(security.clone()));
    assert_eq!((status, body), (200, json!({"ok": true})));
    let (status, body) = call(&nodes[1], "PUT", "/db/_revs_limit", Some(json!(7)));
    assert_eq!((status, body), (200, json!({"ok": true})));
    for node in &nodes {
        assert_eq!(get(node, "/db/_security"), security);
        assert_eq!(get(node, "/db/_revs_limit"), json!(7));
    }
    let (status, _) = call(&nodes[0], "PUT", "/db/_revs_limit", Some(json!("seven")));
    assert_eq!(status, 400, "a bad limit is refused as on one node");
    for node in &nodes {
        assert_eq!(
            get(node, "/db/_revs_limit"),
            json!(7),
            "and changes nothing"
        );
    }
    let (status, body) = call(&nodes[0], "PUT", "/db/_security", Some(json!({})));
    assert_eq!((status, body), (200, json!({"ok": true})));

    // A whole feed through node 0, then the writes after it through node 1 from its last_seq.
    let feed = get(&nodes[0], "/db/_changes");
    let mut seen = ids(&feed["results"], "id");
    seen.sort();
    assert_eq!(seen, all, "every document once");
    let last_seq = feed["last_seq"].as_str().expect("last_seq").to_owned();
    let more: Vec<String> = (0..5).map(|i| format!("late-{i}")).collect();
    for (index, id) in more.iter().enumerate() {
        let (status, body) = call(
            &nodes[index % 3],
            "PUT",
            &format!("/db/{id}"),
            Some(json!({})),
        );
        assert_eq!(status, 201, "{body}");
    }
    let later = get(&nodes[1], &format!("/db/_changes?since={last_seq}"));
    let mut later_ids = ids(&later["results"], "id");
    later_ids.sort();
    assert_eq!(later_ids, more, "only the writes after last_seq");
    let now = get(&nodes[2], "/db/_changes?since=now");
    assert_eq!(now["results"], json!([]));
    let after_now = get(
        &nodes[0],
        &format!(
            "/db/_changes?since={}",
            now["last_seq"].as_str().expect("seq")
        ),
    );
    assert_eq!(after_now["results"], json!([]), "now covers every vbucket");

    // Pages of 7 through the nodes in turn, each from the previous page's last row's seq.
    let mut paged = Vec::new();
    let mut since = "0".to_owned();
    for turn in 0.. {
        let page = get(
            &nodes[turn % 3],
            &format!("/db/_changes?limit=7&since={since}"),
        );
        let rows = page["results"].as_array().expect("results");
        assert!(rows.len() <= 7);
        if rows.is_empty() {
            break;
        }
        paged.extend(ids(&page["results"], "id"));
        since = rows[rows.len() - 1]["seq"]
            .as_str()
            .expect("a seq")
            .to_owned();
        assert!(turn < 20, "the pages end");
    }
    let unique: BTreeSet<&String> = paged.iter().collect();
    assert_eq!(unique.len(), paged.len(), "no change twice: {paged:?}");
    let expected: BTreeSet<&String> = all.iter().chain(&more).collect();
    assert_eq!(unique, expected, "every change once across the pages");

    // A longpoll feed through node 1 waits for a write that lands on any node.
    let quiet = get(
        &nodes[1],
        "/db/_changes?feed=longpoll&since=now&timeout=300",
    );
    assert_eq!(quiet["results"], json!([]), "nothing within the timeout");
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            get(
                &nodes[1],
                "/db/_changes?feed=longpoll&since=now&timeout=20000",
            )
        });
        std::thread::sleep(std::time::Duration::from_millis(600));
        for (index, id) in ["polled-a", "polled-b", "polled-c"].iter().enumerate() {
            let (status, body) = call(&nodes[index], "PUT", &format!("/db/{id}"), Some(json!({})));
            assert_eq!(status, 201, "{body}");
        }
        let answer = waiting.join().expect("the longpoll answers");
        let polled = ids(&answer["results"], "id");
        assert!(!polled.is_empty(), "the longpoll saw a write: {answer}");
        assert!(
            polled.iter().all(|id| id.starts_with("polled-")),
            "{answer}"
        );
    });

    continuous_feeds(&nodes);

    // A filtered feed: the filter runs on every node.
    let (status, filtered) = call(
        &nodes[2],
        "POST",
        "/db/_changes?filter=_doc_ids",
        Some(json!({"doc_ids": ["doc-007", "late-3"]})),
    );
    assert_eq!(status, 200, "{filtered}");
    let mut filtered_ids = ids(&filtered["results"], "id");
    filtered_ids.sort();
    assert_eq!(filtered_ids, ["doc-007", "late-3"]);

    bulk_requests(&nodes);
    // The database's information counts every document, and its update_seq every vbucket.
    let total = get(&nodes[0], "/db/_all_docs?limit=0")["total_rows"].clone();
    for node in &nodes {
        let info = get(node, "/db");
        assert_eq!(info["doc_count"], total, "{info}");
        let since = info["update_seq"].as_str().expect("update_seq");
        let after = get(node, &format!("/db/_changes?since={since}"));
        assert_eq!(
            after["results"],
            json!([]),
            "update_seq covers every vbucket"
        );
    }
    replicated_bucket(&nodes);
    transport_refusals(&nodes);
}

/// The lines of a finished continuous feed: its rows, then its `last_seq` line.
fn feed_lines(body: &[u8]) -> (Vec<Value>, Value) {
    let text = String::from_utf8(body.to_vec()).expect("utf-8");
    let mut lines: Vec<Value> = text
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON line: {line}")))
        .collect();
    let last = lines.pop().expect("a last_seq line");
    (lines, last)
}

/// Continuous and eventsource feeds through one node stream every node's changes: a finished
/// one lists what the normal feed lists and ends with a `last_seq` the normal feed resumes
/// from; a live one sends heartbeats while nothing changes, then the writes made through every
/// node as they land; `limit` cuts across nodes.
fn continuous_feeds(nodes: &[Server; 3]) {
    let normal = get(&nodes[0], "/db/_changes");
    let mut expected = ids(&normal["results"], "id");
    expected.sort();
    let response = Client::connect(&nodes[2].addr)
        .expect("connect")
        .request("GET", "/db/_changes?feed=continuous&timeout=300", None)
        .expect("the feed");
    assert_eq!(response.status, 200);
    let (rows, last) = feed_lines(&response.body);
    let mut streamed = ids(&Value::Array(rows), "id");
    streamed.sort();
    assert_eq!(streamed, expected, "every node's changes");
    let last_seq = last["last_seq"].as_str().expect("last_seq");
    assert_eq!(last["pending"], 0, "{last}");
    let after = get(&nodes[1], &format!("/db/_changes?since={last_seq}"));
    assert_eq!(after["results"], json!([]), "last_seq covers every vbucket");

    let response = Client::connect(&nodes[1].addr)
        .expect("connect")
        .request(
            "GET",
            "/db/_changes?feed=continuous&limit=5&timeout=5000",
            None,
        )
        .expect("the feed");
    let (rows, last) = feed_lines(&response.body);
    assert_eq!(rows.len(), 5, "limit across nodes");
    assert!(last["pending"].as_u64().expect("pending") > 0, "{last}");

    let response = Client::connect(&nodes[0].addr)
        .expect("connect")
        .request("GET", "/db/_changes?feed=eventsource&limit=2", None)
        .expect("the feed");
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let text = String::from_utf8(response.body).expect("utf-8");
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|event| !event.is_empty())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    for event in events {
        let (data, id) = event.split_once("\nid: ").expect("an id line");
        let row: Value =
            serde_json::from_str(data.strip_prefix("data: ").expect("data")).expect("the row");
        assert_eq!(row["seq"], id, "{event}");
    }

    // An EventSource reconnecting with Last-Event-ID goes on after that event, once.
    let seqs: Vec<String> = normal["results"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["seq"].as_str().expect("seq").to_owned())
        .collect();
    let resumed = Client::connect(&nodes[2].addr)
        .expect("connect")
        .request_with(
            "GET",
            "/db/_changes?feed=eventsource&timeout=300",
            &[("Last-Event-ID", &seqs[1])],
            None,
        )
        .expect("the feed");
    let text = String::from_utf8(resumed.body).expect("utf-8");
    let events = text.split("\n\n").filter(|event| !event.is_empty()).count();
    assert_eq!(
        events,
        seqs.len() - 2,
        "every change after the event, once: {text}"
    );

    // Live: the feed is open through node 0 before the writes, made through every node.
    let mut stream = std::net::TcpStream::connect(&nodes[0].addr).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .expect("timeout");
    let auth = support::base64_engine::encode(support::ADMIN.as_bytes());
    let head = format!(
        "GET /db/_changes?feed=continuous&since=now&heartbeat=100 HTTP/1.1\r\n\
         Host: test\r\nAuthorization: Basic {auth}\r\n\r\n"
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).expect("request");
    let mut seen = Vec::new();
    let mut read_for = |millis: u64, seen: &mut Vec<u8>| {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(millis);
        let mut buffer = [0u8; 4096];
        while std::time::Instant::now() < until {
            match std::io::Read::read(&mut stream, &mut buffer) {
                Ok(0) => break,
                Ok(read) => seen.extend_from_slice(&buffer[..read]),
                Err(_) => {}
            }
        }
    };
    read_for(700, &mut seen);
    let quiet = String::from_utf8_lossy(&seen).to_string();
    assert!(quiet.starts_with("HTTP/1.1 200"), "{quiet}");
    assert!(!quiet.contains("\"id\""), "no change yet: {quiet}");
    assert!(
        quiet.matches("1\r\n\n\r\n").count() >= 2,
        "heartbeats: {quiet:?}"
    );
    for (index, id) in ["live-a", "live-b", "live-c"].iter().enumerate() {
        let (status, body) = call(&nodes[index], "PUT", &format!("/db/{id}"), Some(json!({})));
        assert_eq!(status, 201, "{body}");
    }
    until("the live feed streams the three writes", || {
        read_for(200, &mut seen);
        let text = String::from_utf8_lossy(&seen);
        ["live-a", "live-b", "live-c"]
            .iter()
            .all(|id| text.contains(&format!("\"id\":\"{id}\"")))
            .then_some(())
    });
}

/// `_bulk_docs`, `_bulk_get` and `_revs_diff` through one node reach every document's active,
/// and answer in the request's order; a `_local` document is read through every node.
fn bulk_requests(nodes: &[Server; 3]) {
    let docs: Vec<Value> = (0..12)
        .map(|i| json!({"_id": format!("bulk-{i:02}"), "i": i}))
        .chain([json!({"made": "by the front node"})])
        .collect();
    let (status, rows) = call(
        &nodes[0],
        "POST",
        "/db/_bulk_docs",
        Some(json!({"docs": docs})),
    );
    assert_eq!(status, 201, "{rows}");
    let rows = rows.as_array().expect("rows").clone();
    assert_eq!(rows.len(), 13);
    for (index, row) in rows.iter().take(12).enumerate() {
        assert_eq!(
            row["id"],
            json!(format!("bulk-{index:02}")),
            "in order: {row}"
        );
        assert_eq!(row["ok"], json!(true));
    }
    let made = rows[12]["id"].as_str().expect("an id made").to_owned();
    let (status, read) = call(&nodes[2], "GET", &format!("/db/{made}"), None);
    assert_eq!((status, &read["made"]), (200, &json!("by the front node")));
    // A second write without revisions: a conflict for each, in order.
    let (status, again) = call(
        &nodes[1],
        "POST",
        "/db/_bulk_docs",
        Some(json!({"docs": [{"_id": "bulk-03"}, {"_id": "bulk-new"}, {"_id": "bulk-07"}]})),
    );
    assert_eq!(status, 201, "{again}");
    let errors: Vec<Value> = again
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["error"].clone())
        .collect();
    assert_eq!(errors, [json!("conflict"), Value::Null, json!("conflict")]);
    assert_eq!(again[1]["id"], json!("bulk-new"));

    let rev_of =
        |id: &str| rows.iter().find(|row| row["id"] == json!(id)).expect("row")["rev"].clone();
    let (status, got) = call(
        &nodes[2],
        "POST",
        "/db/_bulk_get",
        Some(json!({"docs": [
            {"id": "bulk-05"}, {"id": "nowhere"}, {"id": "bulk-01", "rev": rev_of("bulk-01")}
        ]})),
    );
    assert_eq!(status, 200, "{got}");
    let results = got["results"].as_array().expect("results");
    let ids: Vec<&Value> = results.iter().map(|result| &result["id"]).collect();
    assert_eq!(
        ids,
        [&json!("bulk-05"), &json!("nowhere"), &json!("bulk-01")]
    );
    assert_eq!(results[0]["docs"][0]["ok"]["i"], json!(5));
    assert!(results[1]["docs"][0].get("error").is_some(), "{got}");
    assert_eq!(results[2]["docs"][0]["ok"]["_rev"], rev_of("bulk-01"));

    let (status, diff) = call(
        &nodes[1],
        "POST",
        "/db/_revs_diff",
        Some(json!({
            "bulk-02": [rev_of("bulk-02"), "9-missing"],
            "bulk-09": [rev_of("bulk-09")],
            "absent": ["1-a"]
        })),
    );
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["bulk-02"]["missing"], json!(["9-missing"]));
    assert_eq!(diff["absent"], json!({"missing": ["1-a"]}));
    assert!(diff.get("bulk-09").is_none(), "nothing missing: {diff}");

    // A replicator's write: new_edits=false answers nothing for what it stored.
    let (status, stored) = call(
        &nodes[2],
        "POST",
        "/db/_bulk_docs",
        Some(json!({"new_edits": false, "docs": [
            {"_id": "bulk-02", "_rev": "5-abc", "from": "elsewhere"},
            {"_id": "repl-1", "_rev": "1-def"}
        ]})),
    );
    assert_eq!((status, &stored), (201, &json!([])));
    for node in nodes {
        let (status, read) = call(node, "GET", "/db/repl-1", None);
        assert_eq!((status, &read["_rev"]), (200, &json!("1-def")));
    }

    let (status, body) = call(
        &nodes[0],
        "PUT",
        "/db/_local/checkpoint",
        Some(json!({"seq": 7})),
    );
    assert_eq!(status, 201, "{body}");
    for node in nodes {
        let (status, local) = call(node, "GET", "/db/_local/checkpoint", None);
        assert_eq!((status, &local["seq"]), (200, &json!(7)), "{local}");
    }
}

/// With a replica of every vbucket (`n=2`) a node holds documents of vbuckets it is not the
/// active of: each node answers only for its actives, so no row comes twice.
fn replicated_bucket(nodes: &[Server; 3]) {
    let (created, body) = call(&nodes[1], "PUT", &format!("/db2?q={VBUCKETS}&n=2"), None);
    assert_eq!(created, 201, "{body}");
    for node in nodes {
        until("db2 everywhere", || {
            (call(node, "GET", "/db2", None).0 == 200).then_some(())
        });
    }
    let mut all: Vec<String> = (0..30).map(|i| format!("r-{i:02}")).collect();
    for (index, id) in all.iter().enumerate() {
        let (status, body) = call(
            &nodes[index % 3],
            "PUT",
            &format!("/db2/{id}"),
            Some(json!({})),
        );
        assert!(status == 201 || status == 202, "PUT {id}: {status} {body}");
    }
    all.sort();
    for node in nodes {
        let listed = get(node, "/db2/_all_docs");
        assert_eq!(ids(&listed["rows"], "id"), all, "each document once");
        assert_eq!(listed["total_rows"], json!(30));
        assert_eq!(
            get(node, "/db2")["doc_count"],
            json!(30),
            "each document once"
        );
        let mut changed = ids(&get(node, "/db2/_changes")["results"], "id");
        changed.sort();
        assert_eq!(changed, all, "each change once");
    }
}

/// The cluster port, driven as a peer that knows the secret.
fn transport_refusals(nodes: &[Server; 3]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let peer = TcpTransport::new(0, Secret::new(SECRET));
    let scatter_of = |vbuckets: Vec<u16>, target: &str| ScatterHttp {
        design: None,
        vbuckets: vbuckets.into_iter().map(|vbucket| (vbucket, 0)).collect(),
        request: ForwardHttp {
            revision: 0,
            epoch: 0,
            bucket: "db".into(),
            vbucket: 0,
            method: "GET".into(),
            target: target.into(),
            identity: Identity {
                name: Some("admin".into()),
                roles: vec!["_admin".into()],
                auth: AuthMethod::Basic,
            },
            headers: vec![],
            body: vec![],
        },
    };
    let scatter = |target: &str| scatter_of((0..VBUCKETS).collect(), target);
    let refused = |node: usize, request: ScatterHttp| -> ErrorCode {
        let answer = runtime
            .block_on(peer.scatter(0, &cluster_addr(&nodes[node]), &request))
            .expect("the node answers");
        match answer {
            Ok(reply) => panic!("answered {reply:?}"),
            Err(Refusal { code, .. }) => code,
        }
    };
    // Every vbucket of the bucket: no node is the active of all of them.
    assert_eq!(
        refused(0, scatter("/db/_all_docs")),
        ErrorCode::NotMyVbucket
    );
    // Only node 0's own actives, on a map older than their entries: "stale epoch".
    let (servers, rows) =
        support::kv::vbucket_map(&mut Kv::open(&nodes[0].kv_addr, "admin", "secret", "db"));
    let own: Vec<u16> = (0..VBUCKETS)
        .filter(|vbucket| {
            servers[usize::try_from(rows[usize::from(*vbucket)][0]).expect("an active")]
                == nodes[0].kv_addr
        })
        .collect();
    assert!(!own.is_empty(), "node 0 is the active of some vbuckets");
    assert_eq!(
        refused(0, scatter_of(own, "/db/_all_docs")),
        ErrorCode::StaleEpoch
    );
    // A document request is not scattered.
    assert_eq!(refused(1, scatter("/db/doc-001")), ErrorCode::Refused);
    assert_eq!(
        refused(2, scatter("/db/_changes?feed=continuous")),
        ErrorCode::Refused
    );
    // A peer without the secret gets no answer at all.
    let stranger = TcpTransport::new(0, Secret::new("not the secret of this cluster"));
    let answer =
        runtime.block_on(stranger.scatter(0, &cluster_addr(&nodes[0]), &scatter("/db/_all_docs")));
    assert!(answer.is_err(), "a wrong secret is refused: {answer:?}");
}
