//! Purges reach the replicas (docs/format/replica.md, "Purges reach the replicas"): a purge that
//! leaves a document with no leaf writes a purge marker at a new seqno, which `_changes` (both
//! ways) and the indexers' reads skip and the vbucket stream carries; writing the key again
//! removes the marker, also after a reopen; a purge that keeps leaves rewrites the record
//! instead; a replica applying the active's stream ends without the purged documents (record,
//! entries, attachment bodies, expiry entries) and with the active's counters; compaction
//! deletes a marker only once it is a day old and every replica of its vbucket acknowledged it,
//! raising the vbucket's purge seqno.

mod support;

use std::sync::Arc;
use support::replica_items;

use bytes::Bytes;
use settee_engine::clock::ManualClock;
use settee_engine::durability::Level;
use settee_engine::{
    AttachmentInput, Bucket, ChangeEntry, DocUpdate, Engine, EngineOptions, KvMutation,
    PurgeMarker, ReplicaBatch, ReplicaItem, RevId, SeqVector, SkipStats, StoreMode, StreamEntry,
    VbRole, Writer, PURGE_MARKERS_KEEP_SECS,
};
use settee_storage::Cf;

const VBUCKETS: u16 = 4;

fn open(dir: &std::path::Path) -> Arc<Engine> {
    Arc::new(Engine::open(dir, EngineOptions::default()).expect("open engine"))
}

fn update(key: &str, body: &str) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::copy_from_slice(body.as_bytes()),
        attachments: Vec::new(),
    }
}

/// A key of `vbucket` in a bucket of [`VBUCKETS`] vbuckets.
fn key_in(vbucket: u16, index: usize) -> String {
    (0..)
        .map(|n| format!("doc-{index}-{n}"))
        .find(|key| settee_engine::vbucket::vbucket_of(key.as_bytes(), VBUCKETS) == vbucket)
        .expect("a key")
}

async fn save(bucket: &Bucket, key: &str) {
    let saved = bucket.update_docs(vec![update(key, r#"{"v":1}"#)], true);
    saved.await.expect("save");
}

/// Purges every leaf of `key`.
async fn purge_whole(bucket: &Bucket, key: &str) {
    let record = bucket.read_record(key.as_bytes()).expect("read");
    let leaves: Vec<RevId> = record
        .expect("a document to purge")
        .leaves
        .iter()
        .map(|leaf| leaf.rev.clone())
        .collect();
    let purged = bucket.purge(key.as_bytes(), &leaves).await.expect("purge");
    assert_eq!(purged.len(), leaves.len());
}

fn markers(bucket: &Bucket, vbucket: u16) -> Vec<PurgeMarker> {
    let stream = bucket.vbucket_stream(vbucket, 0, 10_000).expect("stream");
    stream
        .into_iter()
        .filter_map(|entry| match entry {
            StreamEntry::Purge(marker) => Some(marker),
            _ => None,
        })
        .collect()
}

fn ids(entries: &[ChangeEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| String::from_utf8(entry.key.clone()).expect("utf-8"))
        .collect()
}

/// Applies what `source` streams for `vbucket` past the replica's high seqno, as one snapshot
/// up to the source's high seqno; returns how many items were applied.
async fn follow(source: &Bucket, replica: &Bucket, vbucket: u16) -> usize {
    let since = replica.high_seqnos().get(vbucket);
    let high = source.high_seqnos().get(vbucket);
    let batch = ReplicaBatch {
        items: replica_items(source, vbucket, since),
        high_seqno: high,
        snapshot: (since, high),
    };
    replica.apply_replica(vbucket, batch).await.expect("apply")
}

#[tokio::test]
async fn a_purge_writes_a_marker_at_a_new_seqno_that_feeds_skip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let vbucket = 1;
    let (gone, kept) = (key_in(vbucket, 0), key_in(vbucket, 1));
    save(&bucket, &gone).await;
    save(&bucket, &kept).await;
    let high = bucket.high_seqnos().get(vbucket);
    purge_whole(&bucket, &gone).await;

    // One new seqno: the marker's, naming the key; the document's own entry is gone.
    assert_eq!(bucket.high_seqnos().get(vbucket), high + 1);
    let found = markers(&bucket, vbucket);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].seqno, found[0].collection, found[0].key.as_slice()),
        (high + 1, 0, gone.as_bytes())
    );
    let stream = bucket.vbucket_stream(vbucket, 0, 100).expect("stream");
    assert_eq!(stream.len(), 2, "{stream:?}");
    assert!(bucket.read_record(gone.as_bytes()).expect("read").is_none());
    assert_eq!(bucket.doc_counts(), (1, 0));
    assert_eq!(bucket.vb_state(vbucket).high_seqno, high + 1);

    // Every feed skips it (and counts nothing as undecodable); a feed's end covers it.
    let mut forward = bucket.changes(SeqVector::zero(VBUCKETS));
    let seen: Vec<ChangeEntry> = forward
        .by_ref()
        .map(|entry| entry.expect("entry"))
        .collect();
    assert_eq!(ids(&seen), [kept.as_str()]);
    assert_eq!(forward.end_position().get(vbucket), high + 1);
    let backward: Vec<ChangeEntry> = bucket
        .changes_descending(SeqVector::zero(VBUCKETS))
        .map(|entry| entry.expect("entry"))
        .collect();
    assert_eq!(ids(&backward), [kept.as_str()]);
    let indexed = bucket.vbucket_changes(vbucket, 0, 100).expect("changes");
    assert_eq!(ids(&indexed), [kept.as_str()]);
    assert_eq!(bucket.skip_stats(), SkipStats::default());

    // A compaction leaves a young marker alone.
    let report = bucket.compact().await.expect("compact");
    assert_eq!(report.purge_markers_removed, 0);
    assert_eq!(markers(&bucket, vbucket), found);
    assert_eq!(bucket.purge_seqno(vbucket), 0);
}

#[tokio::test]
async fn writing_the_key_again_removes_its_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vbucket = 3;
    let gone = key_in(vbucket, 0);
    {
        let engine = open(dir.path());
        engine.create_bucket("db", VBUCKETS).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        save(&bucket, &gone).await;
        purge_whole(&bucket, &gone).await;
        assert_eq!(markers(&bucket, vbucket).len(), 1);
        // Through the CouchDB path.
        save(&bucket, &gone).await;
        assert_eq!(markers(&bucket, vbucket), []);
        let stream = bucket.vbucket_stream(vbucket, 0, 100).expect("stream");
        assert_eq!(stream.len(), 1, "{stream:?}");
        purge_whole(&bucket, &gone).await;
        assert_eq!(markers(&bucket, vbucket).len(), 1);
    }
    // After a reopen (the bucket does not know yet whether the vbucket holds markers), through
    // the KV path.
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    let high = bucket.high_seqnos().get(vbucket);
    let store = KvMutation::Store {
        mode: StoreMode::Add,
        value: Bytes::from_static(b"{}"),
        json: true,
        item_flags: 0,
        expiry: 0,
        cas: 0,
    };
    let system = Writer::system();
    let stored = bucket.kv_mutate(gone.as_bytes(), store, &system);
    stored.await.expect("add");
    assert_eq!(markers(&bucket, vbucket), []);
    let stream = bucket.vbucket_stream(vbucket, 0, 100).expect("stream");
    assert_eq!(stream.len(), 1, "{stream:?}");
    assert_eq!(stream[0].seqno(), high + 1);
    assert_eq!(bucket.doc_counts(), (1, 0));
}

#[tokio::test]
async fn a_purge_that_keeps_leaves_rewrites_the_record_at_a_new_seqno() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let vbucket = 0;
    let key = key_in(vbucket, 0);
    let conflict = |rev: &str, body: &str| DocUpdate {
        history: vec![RevId::parse(rev).expect("rev")],
        ..update(&key, body)
    };
    let conflicts = vec![
        conflict("1-aaaa", r#"{"side":"a"}"#),
        conflict("1-bbbb", r#"{"side":"b"}"#),
    ];
    bucket.update_docs(conflicts, false).await.expect("write");
    let high = bucket.high_seqnos().get(vbucket);
    let purged = bucket
        .purge(key.as_bytes(), &[RevId::parse("1-bbbb").expect("rev")])
        .await
        .expect("purge");
    assert_eq!(purged.len(), 1);
    let record = bucket
        .read_record(key.as_bytes())
        .expect("read")
        .expect("kept");
    assert_eq!(record.leaves.len(), 1);
    assert_eq!(record.seqno, high + 1);
    let stream = bucket.vbucket_stream(vbucket, 0, 100).expect("stream");
    assert!(
        matches!(&stream[..], [StreamEntry::Change(change)] if change.seqno == high + 1),
        "{stream:?}"
    );
}

#[tokio::test]
async fn a_replica_following_the_stream_loses_what_the_active_purged() {
    let (active_dir, replica_dir) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let active = open(active_dir.path());
    active.create_bucket("db", VBUCKETS).await.expect("create");
    let source = active.bucket("db").expect("bucket");
    let vbucket = 2;
    let keys: Vec<String> = (0..5).map(|index| key_in(vbucket, index)).collect();
    for key in &keys[2..] {
        save(&source, key).await;
    }
    // keys[0]: an attachment and an old revision; keys[1]: an expiry.
    let mut attached = update(&keys[0], "{}");
    attached.attachments = vec![AttachmentInput::Data {
        name: "a.txt".into(),
        content_type: "text/plain".into(),
        data: Bytes::from_static(b"attachment body"),
        encoding: Default::default(),
        revpos: None,
    }];
    source.update_docs(vec![attached], true).await.expect("att");
    let expiring = KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::from_static(b"{}"),
        json: true,
        item_flags: 0,
        expiry: source.now_secs() + 3600,
        cas: 0,
    };
    let system = Writer::system();
    let stored = source.kv_mutate(keys[1].as_bytes(), expiring, &system);
    stored.await.expect("expiring");
    let md5 = source
        .read_record(keys[0].as_bytes())
        .expect("read")
        .expect("doc")
        .leaves[0]
        .attachments[0]
        .md5;

    let replica = open(replica_dir.path());
    replica.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = replica.bucket("db").expect("bucket");
    bucket
        .set_vbucket_role(vbucket, VbRole::Replica)
        .await
        .expect("role");
    assert_eq!(follow(&source, &bucket, vbucket).await, keys.len());
    let held = bucket
        .get_attachment(keys[0].as_bytes(), &md5)
        .expect("att");
    assert_eq!(held.as_deref(), Some(b"attachment body".as_slice()));

    // The active purges two documents whole; the replica follows.
    purge_whole(&source, &keys[0]).await;
    purge_whole(&source, &keys[1]).await;
    let since = bucket.high_seqnos().get(vbucket);
    let items = replica_items(&source, vbucket, since);
    assert!(
        matches!(&items[..], [ReplicaItem::Purge(_), ReplicaItem::Purge(_)]),
        "{items:?}"
    );
    assert_eq!(follow(&source, &bucket, vbucket).await, 2);
    let equal = |bucket: &Bucket| {
        assert_eq!(
            bucket.high_seqnos().get(vbucket),
            source.high_seqnos().get(vbucket)
        );
        assert_eq!(bucket.doc_counts(), source.doc_counts());
        assert_eq!(bucket.record_bytes(), source.record_bytes());
        assert_eq!(bucket.vb_state(vbucket), source.vb_state(vbucket));
        assert_eq!(
            replica_items(bucket, vbucket, 0),
            replica_items(&source, vbucket, 0)
        );
        for key in &keys {
            assert_eq!(
                bucket.read_record(key.as_bytes()).expect("read"),
                source.read_record(key.as_bytes()).expect("read"),
            );
        }
    };
    equal(&bucket);
    assert_eq!(source.doc_counts(), (3, 0));
    assert!(bucket
        .read_record(keys[0].as_bytes())
        .expect("read")
        .is_none());
    let held = bucket
        .get_attachment(keys[0].as_bytes(), &md5)
        .expect("att");
    assert_eq!(held, None);
    // No expiry entry is left for the purged document (the exp range of collection 0).
    let mut lower = bucket.id().to_be_bytes().to_vec();
    lower.extend_from_slice(&vbucket.to_be_bytes());
    let mut upper = lower.clone();
    upper.extend_from_slice(&[0xff; 8]);
    let expiring: Vec<_> = replica
        .store()
        .scan(Cf::Exp, &lower, &upper, false)
        .map(|item| item.expect("exp").0.to_vec())
        .filter(|key| key.ends_with(keys[1].as_bytes()))
        .collect();
    assert_eq!(expiring, Vec::<Vec<u8>>::new());
    // Re-sent, the markers change nothing.
    let resent = ReplicaBatch {
        high_seqno: source.high_seqnos().get(vbucket),
        snapshot: (0, source.high_seqnos().get(vbucket)),
        items,
    };
    assert_eq!(
        bucket.apply_replica(vbucket, resent).await.expect("again"),
        0
    );
    equal(&bucket);

    // The key written again on the active replaces the replica's marker too, after a reopen.
    drop(bucket);
    drop(replica);
    let replica = open(replica_dir.path());
    let bucket = replica.bucket("db").expect("bucket");
    save(&source, &keys[0]).await;
    assert_eq!(follow(&source, &bucket, vbucket).await, 1);
    assert_eq!(markers(&bucket, vbucket).len(), 1);
    equal(&bucket);
}

#[tokio::test]
async fn compaction_ages_markers_out_once_old_and_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_700_000_000));
    let options = || EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let (first, second) = (key_in(0, 0), key_in(1, 0));
    let (at_0, at_1) = {
        let engine = Engine::open(dir.path(), options()).expect("open");
        engine.create_bucket("db", VBUCKETS).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        for key in [&first, &second] {
            save(&bucket, key).await;
            purge_whole(&bucket, key).await;
        }
        let (at_0, at_1) = (markers(&bucket, 0)[0].seqno, markers(&bucket, 1)[0].seqno);
        clock.advance_secs(PURGE_MARKERS_KEEP_SECS as u32 - 10);
        assert_eq!(
            bucket
                .compact()
                .await
                .expect("compact")
                .purge_markers_removed,
            0
        );

        // A day old: vbucket 1 has no replica and loses its marker; vbucket 0's replica
        // (node 7) has acknowledged nothing yet, so its marker stays.
        // (The HLC runs a few ticks ahead of the clock that stood still.)
        clock.advance_secs(11);
        let mut chains = vec![Vec::new(); usize::from(VBUCKETS)];
        chains[0] = vec![7];
        bucket.durability().set_topology(1, &chains, Level::None);
        assert_eq!(
            bucket
                .compact()
                .await
                .expect("compact")
                .purge_markers_removed,
            1
        );
        assert_eq!(
            (markers(&bucket, 0).len(), markers(&bucket, 1).len()),
            (1, 0)
        );
        assert_eq!((bucket.purge_seqno(0), bucket.purge_seqno(1)), (0, at_1));
        bucket.durability().ack(0, 7, at_0 - 1);
        assert_eq!(
            bucket
                .compact()
                .await
                .expect("compact")
                .purge_markers_removed,
            0
        );
        bucket.durability().ack(0, 7, at_0);
        assert_eq!(
            bucket
                .compact()
                .await
                .expect("compact")
                .purge_markers_removed,
            1
        );
        assert_eq!(markers(&bucket, 0), []);
        (at_0, at_1)
    };
    // The purge seqnos outlive a reopen, and the keys are written afresh.
    let engine = Engine::open(dir.path(), options()).expect("reopen");
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!((bucket.purge_seqno(0), bucket.purge_seqno(1)), (at_0, at_1));
    save(&bucket, &first).await;
    assert_eq!(bucket.vbucket_changes(0, 0, 10).expect("changes").len(), 1);
    assert_eq!(bucket.doc_counts(), (1, 0));
}
