//! The failover log of docs/format/dcp.md: one default entry carrying the uuid mutation tokens
//! always had, a new branch prepended at the high seqno and kept across a restart, and the
//! document a change entry names as a DCP stream sends it.
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{
    Engine, EngineOptions, KvMutation, KvOutcome, StoreMode, FAILOVER_ENTRIES_MAX,
};

fn open(dir: &std::path::Path) -> Arc<Engine> {
    Arc::new(Engine::open(dir, EngineOptions::default()).expect("open engine"))
}

fn store(value: &str) -> KvMutation {
    KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::from(value.to_string()),
        json: true,
        item_flags: 7,
        expiry: 0,
        cas: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_branch_is_prepended_kept_and_named_by_the_vbucket_uuid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let original;
    let branch;
    {
        let engine = open(dir.path());
        engine.create_bucket("db", 4).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        let vbucket = bucket.vbucket_of(b"k");
        original = bucket.vbucket_uuid(vbucket);
        let log = bucket
            .failover_log(vbucket)
            .expect("log")
            .expect("in range");
        assert_eq!(log.len(), 1);
        assert_eq!((log[0].uuid, log[0].seqno), (original, 0));
        assert!(bucket.failover_log(4).expect("log").is_none());

        for round in 0..3 {
            let outcome = bucket
                .kv_mutate(
                    &b"k"[..],
                    store(&format!("{{\"n\":{round}}}")),
                    &settee_engine::Writer::system(),
                )
                .await;
            assert!(
                matches!(outcome, Ok(KvOutcome::Stored { .. })),
                "{outcome:?}"
            );
        }
        branch = bucket
            .new_failover_entry(vbucket)
            .await
            .expect("write")
            .expect("in range");
        assert_eq!(branch.seqno, 3);
        assert_ne!(branch.uuid, original);
        assert_eq!(bucket.vbucket_uuid(vbucket), branch.uuid);
        // The other vbuckets keep their history.
        let other = (vbucket + 1) % 4;
        assert_eq!(
            bucket
                .failover_log(other)
                .expect("log")
                .expect("in range")
                .len(),
            1
        );
    }
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    let vbucket = bucket.vbucket_of(b"k");
    let log = bucket
        .failover_log(vbucket)
        .expect("log")
        .expect("in range");
    assert_eq!(log.len(), 2);
    assert_eq!((log[0].uuid, log[0].seqno), (branch.uuid, 3));
    assert_eq!((log[1].uuid, log[1].seqno), (original, 0));
    assert_eq!(bucket.vbucket_uuid(vbucket), branch.uuid);

    for _ in 0..FAILOVER_ENTRIES_MAX + 3 {
        bucket.new_failover_entry(vbucket).await.expect("write");
    }
    let log = bucket
        .failover_log(vbucket)
        .expect("log")
        .expect("in range");
    assert_eq!(log.len(), FAILOVER_ENTRIES_MAX);
    assert_eq!(bucket.vbucket_uuid(vbucket), log[0].uuid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_item_is_the_document_at_its_entry_and_none_once_written_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", 1).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    bucket
        .kv_mutate(
            &b"a"[..],
            store("{\"v\":1}"),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("write");
    let first = bucket.vbucket_stream(0, 0, 10).expect("stream");
    let settee_engine::StreamEntry::Change(entry) = &first[0] else {
        panic!("an event")
    };
    let item = bucket.stream_item(entry).expect("read").expect("present");
    assert_eq!(&item.body[..], b"{\"v\":1}");
    assert!(item.json && !item.deleted);
    assert_eq!((item.item_flags, item.rev_seqno), (7, 1));
    assert!(item.xattrs.is_empty());

    bucket
        .kv_mutate(
            &b"a"[..],
            KvMutation::Remove { cas: 0 },
            &settee_engine::Writer::system(),
        )
        .await
        .expect("remove");
    assert_eq!(bucket.stream_item(entry).expect("read"), None);
    let now = bucket.vbucket_stream(0, 0, 10).expect("stream");
    let settee_engine::StreamEntry::Change(entry) = &now[0] else {
        panic!("an event")
    };
    let item = bucket.stream_item(entry).expect("read").expect("present");
    assert!(item.deleted);
    assert_eq!((entry.seqno, item.rev_seqno), (2, 2));
}
