//! The indexer against a real engine: builds, incremental updates and deletions, rebuilds on a
//! design change, cleanup, and `update=true` while writers keep writing.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use settee_engine::{Bucket, DocUpdate, Engine, EngineOptions, Keyspace, RevId, UpdateOutcome};
use settee_views::{KeyRange, Views, ViewsConfig};

async fn setup(vbuckets: u16) -> (tempfile::TempDir, Arc<Engine>, Arc<Bucket>, Arc<Views>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("engine"));
    engine.create_bucket("db", vbuckets).await.expect("bucket");
    let bucket = engine.bucket("db").expect("bucket");
    let views = Views::new(engine.clone(), ViewsConfig::default()).expect("views");
    (dir, engine, bucket, views)
}

async fn put(
    bucket: &Bucket,
    id: &str,
    parent: Option<RevId>,
    body: Value,
    deleted: bool,
) -> RevId {
    let outcome = bucket
        .update_docs(
            vec![DocUpdate {
                key: id.as_bytes().to_vec(),
                parent,
                history: Vec::new(),
                deleted,
                body: Bytes::from(body.to_string()),
                attachments: Vec::new(),
            }],
            true,
        )
        .await
        .expect("update");
    match &outcome[0] {
        UpdateOutcome::Saved { rev, .. } => rev.clone(),
        other => panic!("{other:?}"),
    }
}

fn design() -> Value {
    json!({"views": {
        "by_type": {"map": "function (doc) { if (doc.type) { emit([doc.type, doc.n], doc.n); } }", "reduce": "_sum"},
        "tags": {"map": "function (doc) { (doc.tags || []).forEach(function (t) { emit(t, null); }); }"}
    }})
}

async fn rows(views: &Views, bucket: &Arc<Bucket>, view: &str) -> Vec<(Value, String, Value)> {
    let found = views
        .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
        .await
        .expect("design")
        .expect("views");
    found
        .group
        .wait_for(&bucket.high_seqnos())
        .await
        .expect("up to date");
    let index = found.design.view_index(view).expect("view");
    found
        .group
        .scan(index, &KeyRange::default())
        .map(|row| {
            let row = row.expect("row");
            (row.key(), row.id_str().into_owned(), row.value())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_then_follows_updates_and_deletions() {
    let (_dir, _engine, bucket, views) = setup(64).await;
    put(&bucket, "_design/d", None, design(), false).await;
    let mut revs = BTreeMap::new();
    for i in 0..300 {
        let id = format!("doc{i:03}");
        let body =
            json!({"type": if i % 2 == 0 { "even" } else { "odd" }, "n": i, "tags": ["a", "b"]});
        revs.insert(id.clone(), put(&bucket, &id, None, body, false).await);
    }
    let by_type = rows(&views, &bucket, "by_type").await;
    assert_eq!(by_type.len(), 300);
    assert_eq!(by_type[0], (json!(["even", 0]), "doc000".into(), json!(0)));
    assert_eq!(by_type[150], (json!(["odd", 1]), "doc001".into(), json!(1)));
    let tags = rows(&views, &bucket, "tags").await;
    assert_eq!(tags.len(), 600);
    assert!(tags[..300].iter().all(|(key, _, _)| key == "a"));
    assert!(
        tags[..300].windows(2).all(|pair| pair[0].1 < pair[1].1),
        "ids ascend within a key"
    );

    // Change one document's key, delete another, and give a third no tags.
    let rev = put(
        &bucket,
        "doc000",
        revs.get("doc000").cloned(),
        json!({"type": "zzz", "n": 0}),
        false,
    )
    .await;
    revs.insert("doc000".into(), rev);
    put(
        &bucket,
        "doc001",
        revs.get("doc001").cloned(),
        json!({}),
        true,
    )
    .await;
    let by_type = rows(&views, &bucket, "by_type").await;
    assert_eq!(by_type.len(), 299);
    assert_eq!(
        by_type.last().map(|row| row.0.clone()),
        Some(json!(["zzz", 0]))
    );
    assert!(!by_type.iter().any(|row| row.1 == "doc001"));
    let tags = rows(&views, &bucket, "tags").await;
    assert_eq!(tags.len(), 596);
    let found = views
        .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
        .await
        .expect("ok")
        .expect("views");
    assert_eq!(
        found
            .group
            .total_rows(found.design.view_index("tags").expect("tags")),
        596
    );
    assert_eq!(
        found
            .group
            .total_rows(found.design.view_index("by_type").expect("by_type")),
        299
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_ranges_follow_collation() {
    let (_dir, _engine, bucket, views) = setup(16).await;
    put(
        &bucket,
        "_design/d",
        None,
        json!({"views": {"k": {"map": "function (doc) { emit(doc.k, null); }"}}}),
        false,
    )
    .await;
    let keys = [
        json!(null),
        json!(false),
        json!(true),
        json!(1),
        json!(2.5),
        json!("a"),
        json!("b"),
        json!("B"),
        json!(["a"]),
        json!({"a": 1}),
    ];
    for (i, key) in keys.iter().enumerate() {
        put(&bucket, &format!("d{i}"), None, json!({"k": key}), false).await;
    }
    let all: Vec<Value> = rows(&views, &bucket, "k")
        .await
        .into_iter()
        .map(|row| row.0)
        .collect();
    assert_eq!(all, keys);
    let found = views
        .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
        .await
        .expect("ok")
        .expect("views");
    let range = |start: Value, end: Value, inclusive_end: bool, descending: bool| -> Vec<Value> {
        let range = KeyRange {
            start: Some(settee_views::KeyBound {
                key: start,
                doc_id: None,
            }),
            end: Some(settee_views::KeyBound {
                key: end,
                doc_id: None,
            }),
            inclusive_end,
            descending,
            partition: None,
        };
        found
            .group
            .scan(0, &range)
            .map(|row| row.expect("row").key())
            .collect()
    };
    assert_eq!(
        range(json!(1), json!("a"), true, false),
        [json!(1), json!(2.5), json!("a")]
    );
    assert_eq!(
        range(json!(1), json!("a"), false, false),
        [json!(1), json!(2.5)]
    );
    assert_eq!(
        range(json!("B"), json!("a"), true, true),
        [json!("B"), json!("b"), json!("a")]
    );
    assert_eq!(
        range(json!("B"), json!("a"), false, true),
        [json!("B"), json!("b")]
    );
    let offset_range = KeyRange {
        start: Some(settee_views::KeyBound {
            key: json!("a"),
            doc_id: None,
        }),
        ..KeyRange::default()
    };
    assert_eq!(found.group.offset_of(0, &offset_range).expect("offset"), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_design_rebuilds_and_cleanup_drops_the_old_index() {
    let (_dir, _engine, bucket, views) = setup(16).await;
    let rev = put(&bucket, "_design/d", None, design(), false).await;
    for i in 0..20 {
        put(
            &bucket,
            &format!("doc{i}"),
            None,
            json!({"type": "t", "n": i}),
            false,
        )
        .await;
    }
    assert_eq!(rows(&views, &bucket, "by_type").await.len(), 20);
    let old = views
        .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
        .await
        .expect("ok")
        .expect("views")
        .group
        .signature();
    let mut changed = design();
    changed["views"]["by_type"]["map"] = json!("function (doc) { if (doc.n < 5) emit(doc.n, 1); }");
    put(&bucket, "_design/d", Some(rev), changed, false).await;
    assert_eq!(rows(&views, &bucket, "by_type").await.len(), 5);
    let new = views
        .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
        .await
        .expect("ok")
        .expect("views")
        .group
        .signature();
    assert_ne!(old, new);
    let removed = views
        .cleanup(&Keyspace::default_of(bucket.clone()), &HashSet::from([new]))
        .await
        .expect("cleanup");
    assert_eq!(removed, 1);
    assert_eq!(rows(&views, &bucket, "by_type").await.len(), 5);
}

/// A query with update=true reflects every write acknowledged before it, while writers keep
/// writing during the query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_true_sees_every_acknowledged_write_under_concurrent_writers() {
    let (_dir, _engine, bucket, views) = setup(64).await;
    put(
        &bucket,
        "_design/d",
        None,
        json!({"views": {"ids": {"map": "function (doc) { emit(doc._id, doc.w); }"}}}),
        false,
    )
    .await;
    let acknowledged = Arc::new(parking_lot::Mutex::new(HashSet::new()));
    let mut writers = Vec::new();
    for writer in 0..4 {
        let bucket = bucket.clone();
        let acknowledged = acknowledged.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..150 {
                let id = format!("w{writer}-{i}");
                put(&bucket, &id, None, json!({"w": writer}), false).await;
                acknowledged.lock().insert(id);
            }
        }));
    }
    for _ in 0..8 {
        let before: HashSet<String> = acknowledged.lock().clone();
        let found = views
            .design_views(&Keyspace::default_of(bucket.clone()), "_design/d", None)
            .await
            .expect("ok")
            .expect("views");
        found
            .group
            .wait_for(&bucket.high_seqnos())
            .await
            .expect("up to date");
        let seen: HashSet<String> = found
            .group
            .scan(0, &KeyRange::default())
            .map(|row| row.expect("row").id_str().into_owned())
            .collect();
        let missing: Vec<&String> = before.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "acknowledged but not in the view: {missing:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    assert_eq!(rows(&views, &bucket, "ids").await.len(), 600);
}
