//! Dropped collections' data leaves the disk: the purger removes every key of the collection
//! in `doc`, `local`, `att` and `exp`, its `seq` entries and create events (not the drop
//! event), resumes after a restart from the vbucket it reached, and runs by itself in the
//! node's background purger. Other collections' data is never touched.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use settee_engine::{
    AttachmentInput, DocKey, DocUpdate, Engine, EngineOptions, KvMutation, StoreMode, StreamEntry,
    SystemEventKind,
};
use settee_storage::Cf;

const VBUCKETS: u16 = 8;

fn open(dir: &std::path::Path) -> Arc<Engine> {
    Arc::new(Engine::open(dir, EngineOptions::default()).expect("open"))
}

/// Every (cf, key, value) of the store's vbucket-keyed column families.
fn dump(engine: &Engine) -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for cf in [Cf::Doc, Cf::Seq, Cf::Local, Cf::Att, Cf::Exp] {
        for item in engine.store().scan(cf, b"", &[0xff; 8], false) {
            let (key, value) = item.expect("scan");
            out.push((cf.name(), key.to_vec(), value.to_vec()));
        }
    }
    out
}

/// Whether a key of `doc`, `local`, `att` or `exp` belongs to collection `cid`.
fn in_collection(key: &[u8], cid: u32) -> bool {
    key.len() >= 10 && key[4] & 0x80 != 0 && key[6..10] == cid.to_be_bytes()
}

async fn fill(engine: &Engine, cid: u32, prefix: &str) {
    let bucket = engine.bucket("db").expect("bucket");
    for index in 0..40 {
        let key = format!("{prefix}{index}");
        bucket
            .kv_mutate(
                DocKey::new(cid, key.as_bytes()),
                KvMutation::Store {
                    mode: StoreMode::Set,
                    value: Bytes::from_static(b"{\"v\":1}"),
                    json: true,
                    item_flags: 0,
                    expiry: if index % 4 == 0 { 4_000_000_000 } else { 0 },
                    cas: 0,
                },
                &settee_engine::Writer::system(),
            )
            .await
            .expect("set");
        bucket
            .put_local(
                DocKey::new(cid, key.as_bytes()),
                None,
                Some(Bytes::from_static(b"{}")),
            )
            .await
            .expect("local");
    }
    let update = DocUpdate {
        key: format!("{prefix}att").into_bytes(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from_static(b"{}"),
        attachments: vec![AttachmentInput::Data {
            name: "a".into(),
            content_type: "text/plain".into(),
            data: Bytes::from_static(b"body"),
            encoding: Default::default(),
            revpos: None,
        }],
    };
    bucket
        .update_doc_in(cid, update, true, &settee_engine::Writer::system())
        .await
        .expect("attachment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purger_removes_a_dropped_collection_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let kept = bucket
        .create_collection("_default", "kept", None)
        .await
        .expect("kept")
        .collection_id("_default.kept")
        .expect("id");
    let gone = bucket
        .create_collection("_default", "gone", None)
        .await
        .expect("gone")
        .collection_id("_default.gone")
        .expect("id");
    fill(&engine, 0, "zero").await;
    fill(&engine, kept, "kept").await;
    fill(&engine, gone, "gone").await;
    let before = dump(&engine);
    for cf in ["doc", "local", "att", "exp"] {
        assert!(
            before
                .iter()
                .any(|(name, key, _)| *name == cf && in_collection(key, gone)),
            "{cf} holds the collection before the drop"
        );
    }
    bucket
        .drop_collection("_default", "gone")
        .await
        .expect("drop");
    assert!(bucket.disk_sizes().expect("sizes").pending_purge > 0);
    let after_drop = dump(&engine);
    bucket.purge_dropped_collections().await.expect("purge");
    assert!(bucket.dropped_collections().is_empty());
    assert_eq!(bucket.disk_sizes().expect("sizes").pending_purge, 0);
    let after = dump(&engine);
    // What is left is exactly what was there after the drop, minus the collection.
    let expected: Vec<_> = after_drop
        .iter()
        .filter(|(cf, key, value)| {
            if *cf == "seq" {
                let named = match value.first() {
                    Some(3) | Some(4) => value[10..14] == gone.to_be_bytes(),
                    // Create events of the collection go; its drop event stays.
                    Some(5) => value[1] != 1 && value[22..26] == gone.to_be_bytes(),
                    _ => false,
                };
                !named
            } else {
                !in_collection(key, gone)
            }
        })
        .cloned()
        .collect();
    assert_eq!(after, expected);
    assert!(after.len() < after_drop.len());
    // Every vbucket still tells of the drop.
    for vbucket in 0..VBUCKETS {
        let kinds: Vec<SystemEventKind> = bucket
            .vbucket_stream(vbucket, 0, 10_000)
            .expect("stream")
            .into_iter()
            .filter_map(|entry| match entry {
                StreamEntry::Event(event) if event.collection_id == gone => Some(event.kind),
                _ => None,
            })
            .collect();
        assert_eq!(kinds, vec![SystemEventKind::CollectionDropped]);
    }
    assert_eq!(bucket.doc_counts_in(kept).expect("kept"), (41, 0));
    assert_eq!(bucket.doc_counts_in(0).expect("zero"), (41, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_resumes_after_a_restart_from_the_vbucket_it_reached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let gone = bucket
        .create_collection("_default", "gone", None)
        .await
        .expect("gone")
        .collection_id("_default.gone")
        .expect("id");
    fill(&engine, gone, "gone").await;
    bucket
        .drop_collection("_default", "gone")
        .await
        .expect("drop");
    assert!(bucket.purge_dropped_round(3).await.expect("round"));
    assert_eq!(bucket.dropped_collections()[&gone].vbuckets_done, 3);
    let left_in = |engine: &Engine, vbucket: u16| {
        dump(engine)
            .iter()
            .any(|(cf, key, _)| *cf == "doc" && in_collection(key, gone) && key[5] == vbucket as u8)
    };
    assert!((0..3).all(|vbucket| !left_in(&engine, vbucket)));
    assert!((3..VBUCKETS).any(|vbucket| left_in(&engine, vbucket)));
    drop(bucket);
    drop(engine);
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.dropped_collections()[&gone].vbuckets_done, 3);
    bucket.purge_dropped_collections().await.expect("purge");
    assert!(bucket.dropped_collections().is_empty());
    assert!(!dump(&engine)
        .iter()
        .any(|(cf, key, _)| *cf != "seq" && in_collection(key, gone)));
    drop(bucket);
    drop(engine);
    let engine = open(dir.path());
    assert!(engine
        .bucket("db")
        .expect("bucket")
        .dropped_collections()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_purger_starts_on_a_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let gone = bucket
        .create_collection("_default", "gone", None)
        .await
        .expect("gone")
        .collection_id("_default.gone")
        .expect("id");
    fill(&engine, gone, "gone").await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // A long tick: only the drop's wake-up can start the purge.
    let purger = tokio::spawn(engine.clone().run_expiry_purger(
        Duration::from_secs(3600),
        async move {
            let _ = stopped.await;
        },
    ));
    bucket
        .drop_collection("_default", "gone")
        .await
        .expect("drop");
    tokio::time::timeout(Duration::from_secs(60), async {
        while !bucket.dropped_collections().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the purger finishes");
    assert!(!dump(&engine)
        .iter()
        .any(|(cf, key, _)| *cf != "seq" && in_collection(key, gone)));
    let _ = stop.send(());
    purger.await.expect("purger stops");
}
