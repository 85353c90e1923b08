//! A view query answers for the whole cluster from any node, as one node holding every
//! document answers it: three real `settee serve` processes and one single node, the same
//! documents and design document written to both. The design document lives in one vbucket,
//! so two of the three nodes do not hold it; the node the client reached reads it and carries
//! it to the others. Map rows (ranges, `skip`/`limit`, `descending`, `keys` with repeats,
//! `include_docs`, raw collation) and every built-in reduce and a JavaScript one (`group`,
//! `group_level`, `keys`) must give the single node's answer through every cluster node, for a
//! bucket with one copy of each document (`n=1`) and one with a replica (`n=2`, where every
//! node also indexes vbuckets it does not answer for). The design document's JavaScript
//! `_changes` filters, `_show` and `_list` functions (a list reads every node's rows) and
//! `_info` work through every node, and a
//! `_view_cleanup` through one keeps every node's index. A changed design document is used at
//! once everywhere; a missing one, a missing view and a bad parameter answer as on one node.

mod support;

use serde_json::{json, Value};
use support::{call_json as call, until, Client, Server};

const SECRET: &str = "the secret of the scattered views test";
const DOCS: usize = 90;

fn design() -> Value {
    let by4 = "function (doc) { if (typeof doc.n === 'number') emit(doc.n % 4, doc.n); }";
    json!({
        "filters": {"even": "function (doc, req) { return doc.n % 2 === 0; }"},
        "shows": {"n": "function (doc, req) { return {body: 'n=' + (doc ? doc.n : 'none')}; }"},
        "lists": {"keys": "function (head, req) { var row, out = [head.total_rows]; while ((row = getRow())) { out.push(row.id + '=' + JSON.stringify(row.key)); } return out.join(','); }"},
        "views": {
            "by_n": {"map": "function (doc) { if (typeof doc.n === 'number') emit(doc.n % 7, doc.n); }"},
            "pairs": {
                "map": "function (doc) { if (typeof doc.n === 'number') emit([doc.n % 3, doc.n % 5], 1); }",
                "reduce": "_count"
            },
            "sum": {"map": by4, "reduce": "_sum"},
            "stats": {"map": by4, "reduce": "_stats"},
            "top": {"map": by4, "reduce": "_top_3"},
            "first": {"map": by4, "reduce": "_first"},
            "last": {"map": by4, "reduce": "_last"},
            "js": {"map": by4, "reduce": "function (keys, values, rereduce) { return sum(values); }"},
            "distinct": {
                "map": "function (doc) { if (typeof doc.n === 'number') emit(doc.n % 9, null); }",
                "reduce": "_approx_count_distinct"
            },
            "raw": {
                "map": "function (doc) { if (typeof doc.n === 'number') emit(doc.n % 2 ? 'a' + doc.n : 'B' + doc.n, null); }",
                "options": {"collation": "raw"}
            }
        }
    })
}

/// (method, path after `/db/_design/app/`, body): every query is asked of both.
fn queries() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        ("GET", "_view/by_n", None),
        ("GET", "_view/by_n?limit=5&skip=3", None),
        ("GET", "_view/by_n?descending=true&limit=7", None),
        (
            "GET",
            "_view/by_n?startkey=2&endkey=4&inclusive_end=false",
            None,
        ),
        ("GET", "_view/by_n?key=3&include_docs=true", None),
        (
            "GET",
            "_view/by_n?startkey=2&startkey_docid=doc-050&limit=4",
            None,
        ),
        ("POST", "_view/by_n", Some(json!({"keys": [5, 1, 5, 99]}))),
        (
            "GET",
            "_view/by_n?keys=%5B3%2C0%5D&descending=true&limit=20",
            None,
        ),
        (
            "POST",
            "_view/by_n?limit=3",
            Some(json!({"limit": 50, "skip": 1})),
        ),
        ("GET", "_view/pairs", None),
        ("GET", "_view/pairs?group=true", None),
        ("GET", "_view/pairs?group_level=1", None),
        ("GET", "_view/pairs?group_level=1&descending=true", None),
        ("GET", "_view/pairs?group=true&skip=2&limit=3", None),
        (
            "GET",
            "_view/pairs?startkey=%5B1%5D&endkey=%5B2%5D&group=true",
            None,
        ),
        (
            "POST",
            "_view/pairs?group=true",
            Some(json!({"keys": [[0, 1], [2, 3], [0, 1], [9, 9]]})),
        ),
        ("GET", "_view/pairs?reduce=false&limit=4", None),
        ("GET", "_view/sum", None),
        ("GET", "_view/sum?group=true", None),
        ("GET", "_view/stats?group=true", None),
        ("GET", "_view/stats", None),
        ("GET", "_view/top?group=true", None),
        ("GET", "_view/top", None),
        ("GET", "_view/first?group=true", None),
        ("GET", "_view/last", None),
        ("GET", "_view/js?group=true", None),
        ("GET", "_view/js", None),
        ("GET", "_view/distinct", None),
        ("GET", "_view/raw", None),
        ("GET", "_view/raw?descending=true&limit=10", None),
        (
            "POST",
            "_view/by_n/queries",
            Some(json!({"queries": [{"limit": 2}, {"key": 3}, {"keys": [1, 1]}]})),
        ),
        (
            "POST",
            "_view/sum",
            Some(json!({"queries": [{}, {"group": true}]})),
        ),
    ]
}

/// The body without what differs by construction (the index's position's form).
fn comparable(mut body: Value) -> Value {
    if let Some(members) = body.as_object_mut() {
        members.remove("update_seq");
    }
    body
}

fn put_documents(server: &Server, db: &str, start: usize, end: usize) {
    for i in start..end {
        let (status, body) = call(
            server,
            "PUT",
            &format!("/{db}/doc-{i:03}"),
            Some(json!({"n": i})),
        );
        assert_eq!(status, 201, "PUT {db}/doc-{i:03}: {body}");
    }
}

#[test]
fn any_node_answers_a_view_query_as_one_node_holding_every_document() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);
    let single = Server::start(dirs[3].path());
    for (db, copies) in [("one", 1), ("two", 2)] {
        let (status, body) = call(&nodes[0], "PUT", &format!("/{db}?q=16&n={copies}"), None);
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(&single, "PUT", &format!("/{db}?q=16"), None);
        assert_eq!(status, 201, "{body}");
        for node in &nodes {
            until("the bucket everywhere", || {
                (call(node, "GET", &format!("/{db}"), None).0 == 200).then_some(())
            });
        }
    }

    for db in ["one", "two"] {
        for (index, node) in nodes.iter().enumerate() {
            put_documents(node, db, index * DOCS / 3, (index + 1) * DOCS / 3);
        }
        put_documents(&single, db, 0, DOCS);
        let (status, body) = call(
            &nodes[1],
            "PUT",
            &format!("/{db}/_design/app"),
            Some(design()),
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(
            &single,
            "PUT",
            &format!("/{db}/_design/app"),
            Some(design()),
        );
        assert_eq!(status, 201, "{body}");

        for (method, path, body) in queries() {
            let full = format!("/{db}/_design/app/{path}");
            let (status, expected) = call(&single, method, &full, body.clone());
            assert_eq!(
                status, 200,
                "{method} {full} on the single node: {expected}"
            );
            for (index, node) in nodes.iter().enumerate() {
                let (status, got) = call(node, method, &full, body.clone());
                assert_eq!(status, 200, "{method} {full} through node {index}: {got}");
                assert_eq!(
                    comparable(got),
                    comparable(expected.clone()),
                    "{method} {full} through node {index}"
                );
            }
        }

        // `update_seq` names every vbucket: a feed from it lists nothing.
        for node in &nodes {
            let (_, answer) = call(
                node,
                "GET",
                &format!("/{db}/_design/app/_view/by_n?update_seq=true&limit=0"),
                None,
            );
            let seq = answer["update_seq"]
                .as_str()
                .expect("update_seq")
                .to_owned();
            let (_, feed) = call(node, "GET", &format!("/{db}/_changes?since={seq}"), None);
            assert_eq!(feed["results"], json!([]), "{answer}");
        }

        // The design document's other functions, and its index's information, through every
        // node, holding it or not. A list function reads every node's rows.
        let lists = [
            format!("/{db}/_design/app/_list/keys/by_n?skip=3&limit=25"),
            format!("/{db}/_design/app/_list/keys/_all_docs?limit=7&startkey=%22doc-010%22"),
        ];
        let listed: Vec<Vec<u8>> = lists
            .iter()
            .map(|path| {
                let answer = Client::connect(&single.addr)
                    .expect("connect")
                    .request("GET", path, None)
                    .expect("list");
                assert_eq!(answer.status, 200, "{path} on the single node");
                answer.body
            })
            .collect();
        let mut signatures = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            let (status, even) = call(
                node,
                "GET",
                &format!("/{db}/_changes?filter=app/even"),
                None,
            );
            assert_eq!(status, 200, "{even}");
            assert_eq!(
                even["results"].as_array().map(Vec::len),
                Some(DOCS / 2),
                "a JavaScript filter through node {index}"
            );
            let (status, mapped) = call(
                node,
                "GET",
                &format!("/{db}/_changes?filter=_view&view=app/by_n"),
                None,
            );
            assert_eq!(status, 200, "{mapped}");
            assert_eq!(mapped["results"].as_array().map(Vec::len), Some(DOCS));
            let shown = Client::connect(&node.addr)
                .expect("connect")
                .request("GET", &format!("/{db}/_design/app/_show/n/doc-007"), None)
                .expect("show");
            assert_eq!(shown.status, 200, "_show through node {index}");
            assert_eq!(shown.body, b"n=7", "_show through node {index}");
            for (path, expected) in lists.iter().zip(&listed) {
                let answer = Client::connect(&node.addr)
                    .expect("connect")
                    .request("GET", path, None)
                    .expect("list");
                assert_eq!(answer.status, 200, "{path} through node {index}");
                assert_eq!(
                    String::from_utf8_lossy(&answer.body),
                    String::from_utf8_lossy(expected),
                    "{path} through node {index}"
                );
            }
            let (status, info) = call(node, "GET", &format!("/{db}/_design/app/_info"), None);
            assert_eq!(status, 200, "_info through node {index}: {info}");
            signatures.push(info["view_index"]["signature"].clone());
        }
        assert!(
            signatures.windows(2).all(|pair| pair[0] == pair[1]),
            "{signatures:?}"
        );
        // A cleanup through any node keeps every node's index of a design document it uses.
        let (status, body) = call(
            &nodes[0],
            "POST",
            &format!("/{db}/_view_cleanup"),
            Some(json!({})),
        );
        assert_eq!(status, 202, "{body}");
        for node in &nodes {
            let (_, kept) = call(
                node,
                "GET",
                &format!("/{db}/_design/app/_view/by_n?stale=ok"),
                None,
            );
            assert_eq!(kept["total_rows"], json!(DOCS), "{kept}");
        }

        // A new revision of the design document is what every node runs next.
        let (_, current) = call(&nodes[2], "GET", &format!("/{db}/_design/app"), None);
        let mut changed = design();
        changed["_rev"] = current["_rev"].clone();
        changed["views"]["by_n"]["map"] =
            json!("function (doc) { if (doc.n < 10) emit(doc.n, null); }");
        let (status, body) = call(
            &nodes[2],
            "PUT",
            &format!("/{db}/_design/app"),
            Some(changed),
        );
        assert_eq!(status, 201, "{body}");
        for node in &nodes {
            let (_, answer) = call(node, "GET", &format!("/{db}/_design/app/_view/by_n"), None);
            assert_eq!(answer["total_rows"], json!(10), "{answer}");
            let keys: Vec<Value> = answer["rows"]
                .as_array()
                .expect("rows")
                .iter()
                .map(|row| row["key"].clone())
                .collect();
            assert_eq!(keys, (0..10).map(|n| json!(n)).collect::<Vec<_>>());
        }
    }

    // Errors as one node gives them.
    for (path, status) in [
        ("/one/_design/nothing/_view/by_n", 404),
        ("/one/_design/app/_view/nothing", 404),
        ("/one/_design/app/_view/by_n?group=true", 400),
        ("/one/_design/app/_view/sum?keys=%5B1%5D", 400),
    ] {
        let (_, expected) = call(&single, "GET", path, None);
        for (index, node) in nodes.iter().enumerate() {
            let (got_status, got) = call(node, "GET", path, None);
            assert_eq!(got_status, status, "{path} through node {index}: {got}");
            assert_eq!(got, expected, "{path} through node {index}");
        }
    }
}
