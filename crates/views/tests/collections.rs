//! Index groups per collection (`docs/format/collections.md`, CF `view`): the same design
//! document in two collections is two groups over different documents; `_view_cleanup` of one
//! collection leaves the other's groups; a dropped collection's groups leave the disk with the
//! end of its purge.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use settee_engine::{DocUpdate, Engine, EngineOptions, Keyspace, UpdateOutcome};
use settee_storage::Cf;
use settee_views::{KeyRange, Views, ViewsConfig};

async fn put(keyspace: &Keyspace, id: &str, body: Value) {
    let outcome = keyspace
        .update_docs(
            vec![DocUpdate {
                key: id.as_bytes().to_vec(),
                parent: None,
                history: Vec::new(),
                deleted: false,
                body: Bytes::from(body.to_string()),
                attachments: Vec::new(),
            }],
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("update");
    assert!(
        matches!(outcome[0], UpdateOutcome::Saved { .. }),
        "{outcome:?}"
    );
}

async fn ids(views: &Views, keyspace: &Keyspace) -> Vec<String> {
    let found = views
        .design_views(keyspace, "_design/d", None)
        .await
        .expect("design")
        .expect("views");
    found
        .group
        .wait_for(&keyspace.high_seqnos().expect("seqnos"))
        .await
        .expect("built");
    found
        .group
        .scan(0, &KeyRange::default())
        .map(|row| row.expect("row").id_str().into_owned())
        .collect()
}

/// The index groups with rows or state on disk: the 8-byte `bucket | group` prefixes of CF
/// `view` for bucket `bucket`.
fn groups_on_disk(engine: &Engine, bucket: u32) -> BTreeSet<Vec<u8>> {
    let lower = bucket.to_be_bytes().to_vec();
    let upper = (bucket + 1).to_be_bytes().to_vec();
    engine
        .store()
        .scan(Cf::View, &lower, &upper, false)
        .map(|item| item.expect("scan").0[..8].to_vec())
        .collect()
}

fn signature_keys(engine: &Engine) -> usize {
    engine
        .store()
        .scan(Cf::Meta, b"view/", b"view0", false)
        .filter(|item| {
            let key = &item.as_ref().expect("scan").0;
            key.starts_with(b"view/sig/") || key.starts_with(b"view/csig/")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_collection_has_its_own_groups_which_go_with_its_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("engine"));
    engine.create_bucket("db", 16).await.expect("bucket");
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("s").await.expect("scope");
    bucket
        .create_collection("s", "c", None)
        .await
        .expect("collection");
    let cid = bucket.manifest().find("s", "c").expect("live").id;
    let views = Views::new(engine.clone(), ViewsConfig::default()).expect("views");
    let default = Keyspace::default_of(bucket.clone());
    let other = Keyspace::new(bucket.clone(), cid);

    let design = json!({"views": {"all": {"map": "function (doc) { emit(doc._id, null); }"}}});
    for keyspace in [&default, &other] {
        put(keyspace, "_design/d", design.clone()).await;
    }
    for n in 0..5 {
        put(&default, &format!("d{n}"), json!({"n": n})).await;
    }
    for n in 0..3 {
        put(&other, &format!("c{n}"), json!({"n": n})).await;
    }
    assert_eq!(ids(&views, &default).await, ["d0", "d1", "d2", "d3", "d4"]);
    assert_eq!(ids(&views, &other).await, ["c0", "c1", "c2"]);
    assert_eq!(groups_on_disk(&engine, bucket.id()).len(), 2);
    assert_eq!(signature_keys(&engine), 2);

    // Cleanup of the default collection keeping nothing removes its group only.
    let removed = views
        .cleanup(&default, &HashSet::new())
        .await
        .expect("cleanup");
    assert_eq!(removed, 1);
    assert_eq!(groups_on_disk(&engine, bucket.id()).len(), 1);
    assert_eq!(ids(&views, &other).await, ["c0", "c1", "c2"]);
    // The default collection's group comes back on its next query.
    assert_eq!(ids(&views, &default).await.len(), 5);
    assert_eq!(groups_on_disk(&engine, bucket.id()).len(), 2);

    // Dropping the collection: its group stays until the purge ends, then goes with it.
    bucket.drop_collection("s", "c").await.expect("drop");
    bucket.purge_dropped_collections().await.expect("purge");
    assert_eq!(groups_on_disk(&engine, bucket.id()).len(), 1);
    assert_eq!(signature_keys(&engine), 1);
    assert_eq!(ids(&views, &default).await.len(), 5);

    // The name made again is a new collection: its group starts empty.
    bucket
        .create_collection("s", "c", None)
        .await
        .expect("again");
    let cid = bucket.manifest().find("s", "c").expect("live").id;
    let again = Keyspace::new(bucket.clone(), cid);
    put(&again, "_design/d", design).await;
    put(&again, "fresh", json!({})).await;
    assert_eq!(ids(&views, &again).await, ["fresh"]);
}
