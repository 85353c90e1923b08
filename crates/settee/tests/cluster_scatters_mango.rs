//! Mango answers for the whole cluster from any node, as one node holding every document
//! answers: three real `settee serve` processes and one single node with the same documents.
//! Indexes created through different nodes (each written to its design document's node), then
//! `_find` (no index, a JSON index with `sort` both ways, `skip`/`limit`, `fields`, `$in`, two
//! fields), `_explain` and `GET _index` through every cluster node equal the single node's;
//! paging with bookmarks continues from one node on another; deleting an index through a node
//! that does not hold it removes it everywhere, and `_bulk_delete` answers in the request's
//! order. For `n=1` and `n=2` (replica vbuckets indexed
//! too, answered only by their active).

mod support;

use serde_json::{json, Value};
use support::{call_json as call, until, Server};

const SECRET: &str = "the secret of the scattered mango test";
const DOCS: usize = 90;

fn ok(server: &Server, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = call(server, method, path, body);
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {answer}"
    );
    answer
}

fn finds() -> Vec<Value> {
    vec![
        json!({"selector": {"n": {"$gt": 80}}}),
        json!({"selector": {"n": {"$gte": 0}}, "sort": [{"n": "asc"}], "limit": 7, "skip": 3}),
        json!({"selector": {"n": {"$lt": 50}}, "sort": [{"n": "desc"}], "limit": 5}),
        json!({"selector": {"n": {"$gt": 20}}, "sort": ["n"], "fields": ["_id"], "limit": 4}),
        json!({"selector": {"n": {"$in": [3, 33, 63, 89, 1000]}}}),
        json!({"selector": {"g": 2, "n": {"$gt": 30}}, "sort": [{"g": "asc"}, {"n": "asc"}]}),
        json!({"selector": {"g": {"$gte": 1}}, "sort": [{"g": "desc"}, {"n": "desc"}], "limit": 9}),
        json!({"selector": {"_id": {"$gt": "doc-070"}}, "limit": 6, "skip": 2}),
        json!({"selector": {"n": {"$gte": 0}}, "sort": [{"n": "asc"}], "skip": 200}),
    ]
}

/// What must be equal: the documents and the bookmark.
fn comparable(answer: &Value) -> Value {
    json!({"docs": answer["docs"], "bookmark": answer["bookmark"]})
}

#[test]
fn any_node_finds_as_one_node_holding_every_document() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);
    let single = Server::start(dirs[3].path());
    for (db, copies) in [("one", 1), ("two", 2)] {
        ok(&nodes[0], "PUT", &format!("/{db}?q=16&n={copies}"), None);
        ok(&single, "PUT", &format!("/{db}?q=16"), None);
        for node in &nodes {
            until("the bucket everywhere", || {
                (call(node, "GET", &format!("/{db}"), None).0 == 200).then_some(())
            });
        }
        for i in 0..DOCS {
            let doc = json!({"n": i, "g": i % 3});
            ok(
                &nodes[i % 3],
                "PUT",
                &format!("/{db}/doc-{i:03}"),
                Some(doc.clone()),
            );
            ok(&single, "PUT", &format!("/{db}/doc-{i:03}"), Some(doc));
        }
        let indexes = [
            json!({"index": {"fields": ["n"]}, "name": "by-n", "ddoc": "by-n"}),
            json!({"index": {"fields": ["g", "n"]}, "name": "by-g-n"}),
            json!({"index": {"fields": ["unused"]}, "name": "unused", "ddoc": "spare"}),
        ];
        for (index, definition) in indexes.iter().enumerate() {
            let made = ok(
                &nodes[index],
                "POST",
                &format!("/{db}/_index"),
                Some(definition.clone()),
            );
            assert_eq!(made["result"], json!("created"), "{made}");
            let again = ok(
                &nodes[(index + 1) % 3],
                "POST",
                &format!("/{db}/_index"),
                Some(definition.clone()),
            );
            assert_eq!(again["result"], json!("exists"), "{again}");
            ok(
                &single,
                "POST",
                &format!("/{db}/_index"),
                Some(definition.clone()),
            );
        }

        let listed = ok(&single, "GET", &format!("/{db}/_index"), None);
        for (index, node) in nodes.iter().enumerate() {
            assert_eq!(
                ok(node, "GET", &format!("/{db}/_index"), None),
                listed,
                "GET _index through node {index}"
            );
        }
        for find in finds() {
            let expected = ok(&single, "POST", &format!("/{db}/_find"), Some(find.clone()));
            let explained = ok(
                &single,
                "POST",
                &format!("/{db}/_explain"),
                Some(find.clone()),
            );
            for (index, node) in nodes.iter().enumerate() {
                let got = ok(node, "POST", &format!("/{db}/_find"), Some(find.clone()));
                assert_eq!(
                    comparable(&got),
                    comparable(&expected),
                    "{find} through node {index}"
                );
                let explain = ok(node, "POST", &format!("/{db}/_explain"), Some(find.clone()));
                assert_eq!(explain, explained, "_explain {find} through node {index}");
            }
        }

        // Paging: each page from the next node, with the previous page's bookmark.
        let all = ok(
            &single,
            "POST",
            &format!("/{db}/_find"),
            Some(json!({"selector": {"n": {"$gte": 0}}, "sort": ["n"], "limit": 1000})),
        );
        let mut paged = Vec::new();
        let mut bookmark = None;
        for page in 0.. {
            let mut find = json!({"selector": {"n": {"$gte": 0}}, "sort": ["n"], "limit": 10});
            if let Some(bookmark) = &bookmark {
                find["bookmark"] = json!(bookmark);
            }
            let answer = ok(
                &nodes[page % 3],
                "POST",
                &format!("/{db}/_find"),
                Some(find),
            );
            let docs = answer["docs"].as_array().expect("docs").clone();
            if docs.is_empty() {
                break;
            }
            paged.extend(docs);
            bookmark = Some(answer["bookmark"].as_str().expect("bookmark").to_owned());
        }
        assert_eq!(Value::Array(paged), all["docs"]);

        // Deleted through every node in turn: gone from every listing.
        ok(
            &nodes[2],
            "DELETE",
            &format!("/{db}/_index/spare/json/unused"),
            None,
        );
        ok(
            &single,
            "DELETE",
            &format!("/{db}/_index/spare/json/unused"),
            None,
        );
        let listed = ok(&single, "GET", &format!("/{db}/_index"), None);
        for node in &nodes {
            assert_eq!(ok(node, "GET", &format!("/{db}/_index"), None), listed);
        }
        // Several design documents at once, in the request's order.
        for name in ["b1", "b2", "b3", "b4"] {
            let definition = json!({"index": {"fields": [name]}, "ddoc": name, "name": name});
            ok(
                &nodes[1],
                "POST",
                &format!("/{db}/_index"),
                Some(definition.clone()),
            );
            ok(&single, "POST", &format!("/{db}/_index"), Some(definition));
        }
        let bulk = json!({"docids": ["b3", "_design/b1", "nothing", "b4", "_design/b2"]});
        let path = format!("/{db}/_index/_bulk_delete");
        let expected = ok(&single, "POST", &path, Some(bulk.clone()));
        assert_eq!(
            expected["success"].as_array().map(Vec::len),
            Some(4),
            "{expected}"
        );
        assert_eq!(ok(&nodes[0], "POST", &path, Some(bulk)), expected);
        assert_eq!(
            ok(&nodes[2], "GET", &format!("/{db}/_index"), None),
            ok(&single, "GET", &format!("/{db}/_index"), None)
        );
    }

    // A query no index serves, and a bad bookmark: the single node's errors.
    for find in [
        json!({"selector": {"n": 1}, "sort": ["unindexed"]}),
        json!({"selector": {"n": 1}, "bookmark": "not a bookmark"}),
    ] {
        let expected = call(&single, "POST", "/one/_find", Some(find.clone()));
        for node in &nodes {
            assert_eq!(
                call(node, "POST", "/one/_find", Some(find.clone())),
                expected
            );
        }
    }
}
