//! CouchDB partitioned databases (`docs/format/partitions.md`), as CouchDB 3.5 answers them:
//! `PUT /db?partitioned=true`, `partition:id` ids, `/db/_partition/{p}` info, `_all_docs`,
//! partitioned views and Mango indexes, the 400s of mixing partition and global queries, and
//! `_purge` taking purged documents out of views and Mango indexes (the purge log), across a
//! restart.

mod support;

use serde_json::{json, Value};
use support::{Client, Server};

fn ids(answer: &Value, member: &str, field: &str) -> Vec<String> {
    answer[member]
        .as_array()
        .unwrap_or_else(|| panic!("{member} in {answer}"))
        .iter()
        .map(|row| row[field].as_str().unwrap_or("-").to_string())
        .collect()
}

fn fill(http: &mut Client) {
    let docs: Vec<Value> = (1..=20)
        .map(|i| {
            let partition = if i % 2 == 0 { "foo" } else { "bar" };
            json!({"_id": format!("{partition}:{i:02}"), "value": i, "some": "field"})
        })
        .collect();
    let (status, _) = http.call("POST", "/p/_bulk_docs", Some(json!({"docs": docs})));
    assert_eq!(status, 201);
}

#[test]
fn a_partitioned_database_as_couchdb_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();

    let (status, body) = http.call("PUT", "/bad?partitioned=tru", None);
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("Invalid `partitioned` parameter"))
    );
    let (status, body) = http.call("PUT", "/_replicator?partitioned=true", None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(http.call("PUT", "/p?partitioned=true", None).0, 201);
    assert_eq!(http.call("PUT", "/plain", None).0, 201);
    assert_eq!(
        http.call("GET", "/p", None).1["props"],
        json!({"partitioned": true})
    );
    assert_eq!(http.call("GET", "/plain", None).1["props"], json!({}));

    // Ids: CouchDB's refusals, reserved ids free.
    for (id, error, reason) in [
        (
            "nopartition",
            "illegal_docid",
            "Doc id must be of form partition:id",
        ),
        ("foo:", "illegal_docid", "Document id must not be empty"),
        (":x", "illegal_partition", "Partition must not be empty"),
        (
            "_x:1",
            "illegal_docid",
            "Only reserved document ids may start with underscore.",
        ),
    ] {
        let (status, body) = http.call("PUT", &format!("/p/{id}"), Some(json!({})));
        assert_eq!((status, body["error"].as_str()), (400, Some(error)), "{id}");
        assert_eq!(body["reason"], reason, "{id}");
    }
    let bulk = json!({"docs": [{"_id": "nopartition"}]});
    assert_eq!(http.call("POST", "/p/_bulk_docs", Some(bulk)).0, 400);
    assert_eq!(
        http.call("PUT", "/plain/nopartition", Some(json!({}))).0,
        201
    );
    fill(&mut http);
    assert_eq!(http.call("PUT", "/p/_design/d", Some(json!({}))).0, 201);
    let (status, body) = http.call("POST", "/p/_bulk_get", Some(json!({"docs": [{"id": "x"}]})));
    assert_eq!(status, 200);
    assert_eq!(
        body["results"][0]["docs"][0]["error"]["error"],
        "illegal_docid"
    );

    // The partition's info and _all_docs.
    let (status, info) = http.call("GET", "/p/_partition/foo", None);
    assert_eq!(status, 200);
    assert_eq!(
        (info["doc_count"].clone(), info["partition"].clone()),
        (json!(10), json!("foo"))
    );
    assert!(info["sizes"]["external"].as_u64().unwrap() > 0, "{info}");
    let (_, empty) = http.call("GET", "/p/_partition/none", None);
    assert_eq!(
        (
            empty["doc_count"].clone(),
            empty["sizes"]["external"].clone()
        ),
        (json!(0), json!(0))
    );
    assert_eq!(
        http.call("GET", "/p/_partition/_bad", None).1["error"],
        "illegal_partition"
    );
    assert_eq!(http.call("GET", "/plain/_partition/foo", None).0, 400);
    let (_, listed) = http.call("GET", "/p/_partition/foo/_all_docs?limit=3&skip=1", None);
    assert_eq!(ids(&listed, "rows", "id"), ["foo:04", "foo:06", "foo:08"]);
    assert_eq!(listed["total_rows"], 10);
    let (_, listed) = http.call(
        "GET",
        "/p/_partition/bar/_all_docs?descending=true&limit=2",
        None,
    );
    assert_eq!(ids(&listed, "rows", "id"), ["bar:19", "bar:17"]);
    let (status, body) = http.call("GET", "/p/_partition/foo/_all_docs?partition=bar", None);
    assert_eq!(
        (status, body["reason"].as_str()),
        (
            400,
            Some("Conflicting value for `partition` in query string")
        )
    );

    // Views: partitioned by default in a partitioned database, global when asked.
    let map = "function(doc) { if (doc.some) emit(doc.value, null); }";
    let ddoc = json!({"views": {"v": {"map": map, "reduce": "_count"}}});
    assert_eq!(http.call("PUT", "/p/_design/part", Some(ddoc)).0, 201);
    let global = json!({"views": {"v": {"map": map}}, "options": {"partitioned": false}});
    assert_eq!(http.call("PUT", "/p/_design/glob", Some(global)).0, 201);
    let refused = json!({"views": {"v": {"map": map}}, "options": {"partitioned": true}});
    let (status, body) = http.call("PUT", "/plain/_design/x", Some(refused));
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_design_doc"))
    );

    let (status, rows) = http.call(
        "GET",
        "/p/_partition/foo/_design/part/_view/v?reduce=false&start_key=5&limit=3",
        None,
    );
    assert_eq!(status, 200, "{rows}");
    assert_eq!(ids(&rows, "rows", "id"), ["foo:06", "foo:08", "foo:10"]);
    assert_eq!(rows["total_rows"], 10);
    let (_, reduced) = http.call("GET", "/p/_partition/bar/_design/part/_view/v", None);
    assert_eq!(reduced["rows"][0]["value"], 10);
    let (status, body) = http.call("GET", "/p/_design/part/_view/v", None);
    assert_eq!(status, 400);
    assert!(
        body["reason"].as_str().unwrap().contains("mandatory"),
        "{body}"
    );
    let (status, body) = http.call("GET", "/p/_partition/foo/_design/glob/_view/v", None);
    assert_eq!(status, 400);
    assert!(
        body["reason"].as_str().unwrap().contains("not supported"),
        "{body}"
    );
    let (_, all) = http.call("GET", "/p/_design/glob/_view/v", None);
    assert_eq!(all["total_rows"], 20);

    // Mango: a partitioned index for partition queries, `_all_docs` for global ones.
    let index = json!({"index": {"fields": ["value"]}});
    assert_eq!(http.call("POST", "/p/_index", Some(index)).0, 200);
    let query = json!({"selector": {"value": {"$gte": 5}}, "limit": 3});
    let (_, found) = http.call("POST", "/p/_partition/bar/_find", Some(query.clone()));
    assert_eq!(ids(&found, "docs", "_id"), ["bar:05", "bar:07", "bar:09"]);
    let (_, explained) = http.call("POST", "/p/_partition/bar/_explain", Some(query.clone()));
    assert_eq!(explained["index"]["type"], "json", "{explained}");
    assert_eq!(explained["mrargs"]["partition"], "bar");
    let (_, explained) = http.call("POST", "/p/_explain", Some(query.clone()));
    assert_eq!(explained["index"]["name"], "_all_docs");
    let sorted = json!({"selector": {"some": "field"}, "sort": ["some"]});
    let (status, body) = http.call("POST", "/p/_partition/foo/_find", Some(sorted));
    assert_eq!(status, 400);
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .starts_with("No partitioned index"),
        "{body}"
    );

    // Purge: the document leaves the partitioned view and the Mango index, also after a
    // restart (the purge log and the index state are on disk).
    let (_, doc) = http.call("GET", "/p/bar:07", None);
    let purge = json!({"bar:07": [doc["_rev"]]});
    assert_eq!(http.call("POST", "/p/_purge", Some(purge)).0, 201);
    let (_, found) = http.call("POST", "/p/_partition/bar/_find", Some(query.clone()));
    assert_eq!(ids(&found, "docs", "_id"), ["bar:05", "bar:09", "bar:11"]);
    let (_, rows) = http.call(
        "GET",
        "/p/_partition/bar/_design/part/_view/v?reduce=false",
        None,
    );
    assert_eq!(rows["total_rows"], 9);
    assert!(!ids(&rows, "rows", "id").contains(&"bar:07".to_string()));
    drop(http);
    server.stop();

    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(
        http.call("GET", "/p", None).1["props"],
        json!({"partitioned": true})
    );
    assert_eq!(http.call("PUT", "/p/nopartition", Some(json!({}))).0, 400);
    let (_, doc) = http.call("GET", "/p/foo:10", None);
    let purge = json!({"foo:10": [doc["_rev"]]});
    assert_eq!(http.call("POST", "/p/_purge", Some(purge)).0, 201);
    let (_, rows) = http.call(
        "GET",
        "/p/_partition/foo/_design/part/_view/v?reduce=false",
        None,
    );
    assert_eq!(rows["total_rows"], 9);
    assert!(!ids(&rows, "rows", "id").contains(&"foo:10".to_string()));
    let (_, all) = http.call("GET", "/p/_design/glob/_view/v", None);
    assert_eq!(all["total_rows"], 18);
}

#[test]
fn purged_documents_leave_the_views_of_a_plain_database() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/d", None).0, 201);
    let map = "function(doc) { emit(doc.n, null); }";
    let ddoc = json!({"views": {"v": {"map": map}}});
    assert_eq!(http.call("PUT", "/d/_design/v", Some(ddoc)).0, 201);
    let mut revs = Vec::new();
    for n in 0..5 {
        let (_, saved) = http.call("PUT", &format!("/d/doc{n}"), Some(json!({"n": n})));
        revs.push(saved["rev"].clone());
    }
    assert_eq!(
        http.call("GET", "/d/_design/v/_view/v", None).1["total_rows"],
        5
    );
    // Purged after the index was built, and before it is read again.
    let purge = json!({"doc1": [revs[1]], "doc3": [revs[3]]});
    assert_eq!(http.call("POST", "/d/_purge", Some(purge)).0, 201);
    let (_, rows) = http.call("GET", "/d/_design/v/_view/v", None);
    assert_eq!(ids(&rows, "rows", "id"), ["doc0", "doc2", "doc4"]);
    assert_eq!(rows["total_rows"], 3);
    // A new view built after the purges never sees them.
    let other = json!({"views": {"w": {"map": "function(doc) { emit(doc._id, 1); }"}}});
    assert_eq!(http.call("PUT", "/d/_design/w", Some(other)).0, 201);
    let (_, rows) = http.call("GET", "/d/_design/w/_view/w", None);
    assert_eq!(ids(&rows, "rows", "id"), ["doc0", "doc2", "doc4"]);
}

#[test]
fn a_full_partition_takes_no_write_that_grows_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/p?partitioned=true", None).0, 201);
    let limit = http.call(
        "PUT",
        "/_node/_local/_config/couchdb/max_partition_size",
        Some(json!("4000")),
    );
    assert_eq!(limit.0, 200, "{}", limit.1);
    let filler = "x".repeat(1000);
    let mut revs = Vec::new();
    for i in 0..4 {
        let (status, saved) = http.call("PUT", &format!("/p/foo:{i}"), Some(json!({"v": filler})));
        assert_eq!(status, 201, "{saved}");
        revs.push(saved["rev"].clone());
    }
    // At the limit: a new document, or a larger body, is refused as CouchDB refuses it.
    let (status, body) = http.call("PUT", "/p/foo:new", Some(json!({"v": 1})));
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("partition_overflow"))
    );
    assert_eq!(
        body["reason"],
        "Partition limit exceeded due to update on 'foo:new'"
    );
    let bigger = json!({"_rev": revs[0], "v": format!("{filler}more")});
    assert_eq!(http.call("PUT", "/p/foo:0", Some(bigger)).0, 403);
    let bulk = json!({"docs": [{"_id": "foo:bulk"}, {"_id": "bar:bulk"}]});
    let (status, rows) = http.call("POST", "/p/_bulk_docs", Some(bulk));
    assert_eq!(status, 201);
    assert_eq!(rows[0]["error"], "partition_overflow", "{rows}");
    assert_eq!(rows[1]["ok"], true, "{rows}");
    // What does not grow it passes: a smaller body, a deletion, a replicated revision.
    let smaller = json!({"_rev": revs[1], "v": "small"});
    assert_eq!(http.call("PUT", "/p/foo:1", Some(smaller)).0, 201);
    let (status, _) = http.call(
        "DELETE",
        &format!("/p/foo:2?rev={}", revs[2].as_str().unwrap()),
        None,
    );
    assert_eq!(status, 200);
    let replicated = json!({"_rev": "1-abc", "v": filler});
    assert_eq!(
        http.call("PUT", "/p/foo:rep?new_edits=false", Some(replicated))
            .0,
        201
    );
    // Raising the limit lets it grow again.
    http.call(
        "PUT",
        "/_node/_local/_config/couchdb/max_partition_size",
        Some(json!("1000000")),
    );
    assert_eq!(http.call("PUT", "/p/foo:new", Some(json!({"v": 1}))).0, 201);
}
