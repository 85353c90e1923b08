//! Manifest changes on a bucket: persistence across restarts, the system events each change
//! writes into every vbucket's stream, what is (and is not) written to `meta`, limits, and the
//! format version a first change leaves.

use std::sync::Arc;

use settee_engine::{Engine, EngineError, EngineOptions, Manifest, StreamEntry, SystemEventKind};
use settee_storage::Cf;

const VBUCKETS: u16 = 4;

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(dir, EngineOptions::default()).expect("open")
}

/// Every `meta` key of the store, sorted.
fn meta_keys(engine: &Engine) -> Vec<Vec<u8>> {
    engine
        .store()
        .scan(Cf::Meta, b"", &[0xff; 8], false)
        .map(|item| item.expect("meta").0.to_vec())
        .collect()
}

fn has_key_starting(keys: &[Vec<u8>], prefix: &[u8]) -> bool {
    keys.iter().any(|key| key.starts_with(prefix))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_without_changes_has_the_default_manifest_and_writes_nothing_new() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    bucket
        .kv_mutate(
            b"k",
            settee_engine::KvMutation::Store {
                mode: settee_engine::StoreMode::Set,
                value: bytes::Bytes::from_static(b"{}"),
                json: true,
                item_flags: 0,
                expiry: 0,
                cas: 0,
            },
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    assert_eq!(*bucket.manifest(), Manifest::default());
    let keys = meta_keys(&engine);
    for prefix in [
        b"bucket/manifest/".as_slice(),
        b"bucket/cstats/",
        b"bucket/dropped/",
        b"node/format_version",
    ] {
        assert!(
            !has_key_starting(&keys, prefix),
            "{} written",
            String::from_utf8_lossy(prefix)
        );
    }
    // Collection 0's counts are the vbucket's.
    assert_eq!(bucket.doc_counts_in(0).expect("counts"), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_persist_and_write_one_event_per_vbucket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let high_before = bucket.high_seqnos();
    let manifest = bucket.create_scope("inventory").await.expect("scope");
    assert_eq!(manifest.uid(), 1);
    bucket
        .create_collection("inventory", "airline", Some(3600))
        .await
        .expect("airline");
    let manifest = bucket
        .create_collection("inventory", "route", None)
        .await
        .expect("route");
    assert_eq!(manifest.uid(), 3);
    assert_eq!(manifest.collection_id("inventory.route").ok(), Some(9));
    let keys = meta_keys(&engine);
    assert!(has_key_starting(&keys, b"bucket/manifest/"));
    assert!(has_key_starting(&keys, b"bucket/cstats/"));
    let format = engine
        .store()
        .get(Cf::Meta, b"node/format_version")
        .expect("read")
        .expect("written by the first change");
    assert_eq!(format, 2u32.to_be_bytes());
    // Three events per vbucket, in order, each with the uid it produced.
    for vbucket in 0..VBUCKETS {
        assert_eq!(
            bucket.high_seqnos().get(vbucket),
            high_before.get(vbucket) + 3
        );
        let events: Vec<(SystemEventKind, u64, u32, u32, Option<u32>, String)> = bucket
            .vbucket_stream(vbucket, 0, 100)
            .expect("stream")
            .into_iter()
            .map(|entry| match entry {
                StreamEntry::Event(event) => (
                    event.kind,
                    event.manifest_uid,
                    event.scope_id,
                    event.collection_id,
                    event.max_ttl,
                    event.name,
                ),
                other => panic!("no documents: {other:?}"),
            })
            .collect();
        assert_eq!(
            events,
            vec![
                (
                    SystemEventKind::ScopeCreated,
                    1,
                    8,
                    0,
                    None,
                    "inventory".into()
                ),
                (
                    SystemEventKind::CollectionCreated,
                    2,
                    8,
                    8,
                    Some(3600),
                    "airline".into()
                ),
                (
                    SystemEventKind::CollectionCreated,
                    3,
                    8,
                    9,
                    None,
                    "route".into()
                ),
            ]
        );
        // Collection 0's feed has no events.
        assert!(bucket
            .vbucket_changes(vbucket, 0, 100)
            .expect("changes")
            .is_empty());
    }
    drop(bucket);
    drop(engine);
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(*bucket.manifest(), *manifest);
    // Seqnos go on after the events.
    let next = bucket.create_scope("more").await.expect("scope");
    assert_eq!(next.uid(), 4);
    assert_eq!(bucket.high_seqnos().get(0), high_before.get(0) + 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_scope_drops_its_collections_and_refusals_are_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("s").await.expect("scope");
    bucket.create_collection("s", "a", None).await.expect("a");
    bucket.create_collection("s", "b", None).await.expect("b");
    assert!(matches!(
        bucket.create_scope("s").await,
        Err(EngineError::ScopeExists(_))
    ));
    assert!(matches!(
        bucket.create_collection("s", "a", None).await,
        Err(EngineError::CollectionExists(_))
    ));
    assert!(matches!(
        bucket.create_collection("t", "a", None).await,
        Err(EngineError::UnknownScope { manifest_uid: 3 })
    ));
    assert!(matches!(
        bucket.drop_collection("_default", "_default").await,
        Err(EngineError::Invalid(_))
    ));
    assert!(matches!(
        bucket.drop_scope("_default").await,
        Err(EngineError::Invalid(_))
    ));
    assert!(matches!(
        bucket.create_scope("%s").await,
        Err(EngineError::InvalidName(_))
    ));
    // A refused change leaves the manifest and the streams as they were.
    assert_eq!(bucket.manifest().uid(), 3);
    let manifest = bucket.drop_scope("s").await.expect("drop");
    assert_eq!(manifest.uid(), 4);
    assert_eq!(manifest.collection_ids(), vec![0]);
    let dropped = bucket.dropped_collections();
    assert_eq!(dropped.keys().copied().collect::<Vec<_>>(), vec![8, 9]);
    assert_eq!(dropped[&9].name, "b");
    assert_eq!(dropped[&9].uid, 4);
    let kinds: Vec<SystemEventKind> = bucket
        .vbucket_stream(1, 3, 100)
        .expect("stream")
        .into_iter()
        .filter_map(|entry| match entry {
            StreamEntry::Event(event) => Some(event.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            SystemEventKind::CollectionDropped,
            SystemEventKind::CollectionDropped,
            SystemEventKind::ScopeDropped,
        ]
    );
    // The vbucket-wide stream passes over the dropped collections' create events.
    let all: Vec<SystemEventKind> = bucket
        .vbucket_stream(1, 0, 100)
        .expect("stream")
        .into_iter()
        .filter_map(|entry| match entry {
            StreamEntry::Event(event) => Some(event.kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        all,
        vec![
            SystemEventKind::ScopeCreated,
            SystemEventKind::CollectionDropped,
            SystemEventKind::CollectionDropped,
            SystemEventKind::ScopeDropped,
        ]
    );
    drop(bucket);
    drop(engine);
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.manifest().uid(), 4);
    assert_eq!(bucket.dropped_collections().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_engine_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EngineOptions {
        scopes_per_bucket_max: 2,
        collections_per_bucket_max: 2,
        ..EngineOptions::default()
    };
    let engine = Engine::open(dir.path(), options).expect("open");
    engine.create_bucket("db", 1).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("a").await.expect("a");
    assert!(matches!(
        bucket.create_scope("b").await,
        Err(EngineError::LimitReached(_))
    ));
    bucket.create_collection("a", "x", None).await.expect("x");
    assert!(matches!(
        bucket.create_collection("a", "y", None).await,
        Err(EngineError::LimitReached(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_format_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let engine = open(dir.path());
        let mut batch = settee_storage::Batch::new();
        batch.put(
            Cf::Meta,
            b"node/format_version".to_vec(),
            3u32.to_be_bytes().to_vec(),
        );
        engine.store().commit(batch).await.expect("write");
    }
    let refused = Engine::open(dir.path(), EngineOptions::default()).err();
    assert!(
        matches!(refused, Some(EngineError::Invalid(ref text)) if text.contains("format version 3")),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_bucket_takes_its_collections_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(open(dir.path()));
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("s").await.expect("scope");
    bucket.create_collection("s", "c", None).await.expect("c");
    bucket.drop_collection("s", "c").await.expect("drop");
    drop(bucket);
    assert!(engine.delete_bucket("db").await.expect("delete"));
    let keys = meta_keys(&engine);
    for prefix in [
        b"bucket/manifest/".as_slice(),
        b"bucket/cstats/",
        b"bucket/dropped/",
        b"bucket/vbstats/",
    ] {
        assert!(!has_key_starting(&keys, prefix));
    }
}

/// A cluster node takes the map's manifest: the same manifest after, the events of the
/// difference in its active vbuckets only, a restart keeps it, and an older or equal
/// manifest changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_manifest_writes_its_events_into_active_vbuckets_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = settee_manifest::ManifestLimits {
        scopes_max: 10,
        collections_max: 10,
    };
    let mut target = Manifest::default();
    for change in [
        settee_manifest::ManifestChange::CreateScope {
            name: "inventory".into(),
        },
        settee_manifest::ManifestChange::CreateCollection {
            scope: "inventory".into(),
            name: "airline".into(),
            max_ttl: Some(60),
        },
    ] {
        target = target.plan(&change, limits).expect("plan").manifest;
    }
    let actives = [true, false, true, false];
    {
        let engine = open(dir.path());
        engine.create_bucket("db", VBUCKETS).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        let before = bucket.high_seqnos();
        let adopted = bucket
            .adopt_manifest(&target, &actives)
            .await
            .expect("adopt");
        assert_eq!(*adopted, target);
        let after = bucket.high_seqnos();
        for (vbucket, active) in actives.iter().enumerate() {
            let written = after.get(vbucket as u16) - before.get(vbucket as u16);
            assert_eq!(written, if *active { 2 } else { 0 }, "vb {vbucket}");
        }
        // The same manifest again, or an older one: nothing.
        bucket
            .adopt_manifest(&target, &actives)
            .await
            .expect("again");
        bucket
            .adopt_manifest(&Manifest::default(), &actives)
            .await
            .expect("older");
        assert_eq!(bucket.high_seqnos(), after);
        assert_eq!(*bucket.manifest(), target);
    }
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket after a restart");
    assert_eq!(*bucket.manifest(), target);
    assert!(bucket.manifest().find("inventory", "airline").is_some());
}
