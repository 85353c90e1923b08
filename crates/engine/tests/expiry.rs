//! Expiry: lazy (reads stop seeing the document at once) and background (the purger turns it
//! into a deletion with a new seqno and revision).
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::clock::ManualClock;
use settee_engine::{Engine, EngineOptions, KvMutation, KvOutcome, SeqVector, StoreMode};

#[tokio::test]
async fn expired_documents_vanish_then_become_deletions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000));
    let options = EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let engine = Engine::open(dir.path(), options).expect("open");
    engine.create_bucket("b", 4).await.expect("create");
    let bucket = engine.bucket("b").expect("bucket");
    let set = |expiry| KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::from_static(b"{\"a\":1}"),
        json: true,
        item_flags: 7,
        expiry,
        cas: 0,
    };
    let stored = bucket
        .kv_mutate(b"short", set(1_000_010), &settee_engine::Writer::system())
        .await
        .expect("set");
    assert!(matches!(stored, KvOutcome::Stored { .. }));
    bucket
        .kv_mutate(b"forever", set(0), &settee_engine::Writer::system())
        .await
        .expect("set");
    assert_eq!(
        bucket
            .kv_get(b"short")
            .expect("get")
            .map(|value| value.item_flags),
        Some(7)
    );
    clock.advance_secs(11);
    assert_eq!(bucket.kv_get(b"short").expect("get"), None, "lazy expiry");
    assert!(bucket.kv_get(b"forever").expect("get").is_some());
    let high_before = bucket.high_seqnos().sum();
    assert_eq!(bucket.purge_expired().await.expect("purge"), 1);
    assert_eq!(bucket.purge_expired().await.expect("purge again"), 0);
    let record = bucket
        .read_record(b"short")
        .expect("read")
        .expect("tombstone");
    assert!(record.is_deleted());
    assert_eq!(record.leaves[0].rev.pos, 2);
    assert_eq!(bucket.high_seqnos().sum(), high_before + 1);
    assert_eq!(bucket.doc_counts(), (1, 1));
    let deletions: Vec<_> = bucket
        .changes(SeqVector::zero(4))
        .map(|entry| entry.expect("entry"))
        .filter(|entry| entry.deleted)
        .collect();
    assert_eq!(deletions.len(), 1);
    // Re-creating an expired document works like re-creating a deleted one.
    let again = bucket
        .kv_mutate(
            b"short",
            KvMutation::Store {
                mode: StoreMode::Add,
                value: Bytes::from_static(b"{}"),
                json: true,
                item_flags: 0,
                expiry: 0,
                cas: 0,
            },
            &settee_engine::Writer::system(),
        )
        .await
        .expect("add");
    assert!(matches!(again, KvOutcome::Stored { .. }));
}
