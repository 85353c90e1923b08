//! A full disk (injected: `StoreOptions::no_space`) fails writes cleanly and leaves the engine's
//! in-memory state (document counts, record bytes, seqnos, the row cache) equal to what is on
//! disk, so writes succeed again by themselves once space is back, and a restart finds the same.
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{
    Bucket, DocUpdate, Engine, EngineError, EngineOptions, SeqVector, UpdateOutcome,
};
use settee_storage::{StoreError, StoreHealth};

const VBUCKETS: u16 = 4;

fn options(no_space: &Arc<AtomicBool>) -> EngineOptions {
    let mut options = EngineOptions::default();
    options.store.no_space = Some(no_space.clone());
    options
}

fn create(key: &str, body: &str) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::copy_from_slice(body.as_bytes()),
        attachments: Vec::new(),
    }
}

fn is_no_space(error: &EngineError) -> bool {
    matches!(error, EngineError::Store(StoreError::NoSpace))
}

/// What the change stream (the `seq` column family, on disk) holds: id -> (seqno, vbucket).
fn on_disk(bucket: &Bucket) -> BTreeMap<Vec<u8>, (u64, u16)> {
    bucket
        .changes(SeqVector::zero(VBUCKETS))
        .map(|entry| {
            let entry = entry.expect("change entry");
            (entry.key, (entry.seqno, entry.vbucket))
        })
        .collect()
}

#[tokio::test]
async fn failed_writes_leave_nothing_behind_and_writes_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_space = Arc::new(AtomicBool::new(false));
    let engine = Engine::open(dir.path(), options(&no_space)).expect("open");
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let mut a_rev = None;
    for key in ["a", "b"] {
        let outcome = bucket
            .update_doc(create(key, r#"{"v":1}"#), true)
            .await
            .expect("write");
        let UpdateOutcome::Saved { rev, .. } = outcome else {
            panic!("{outcome:?}");
        };
        a_rev.get_or_insert(rev);
    }
    let (_, a_body) = bucket.read_winner(b"a").expect("read").expect("a");
    let counts = bucket.doc_counts();
    let record_bytes = bucket.record_bytes();
    let high = bucket.high_seqnos();

    no_space.store(true, Ordering::Release);
    let failed = bucket
        .update_doc(create("c", r#"{"v":2}"#), true)
        .await
        .expect_err("the disk is full");
    assert!(is_no_space(&failed), "{failed:?}");
    assert_eq!(engine.store().health(), StoreHealth::NoSpace);
    // A larger body for an existing document: would change the counts if it were half-applied.
    let edit = DocUpdate {
        parent: a_rev,
        ..create("a", r#"{"v":"a much longer body than before"}"#)
    };
    let failed = bucket
        .update_doc(edit, true)
        .await
        .expect_err("the disk is full");
    assert!(is_no_space(&failed), "{failed:?}");
    assert_eq!(bucket.doc_counts(), counts, "counts of failed writes");
    assert_eq!(bucket.record_bytes(), record_bytes);
    assert_eq!(bucket.high_seqnos(), high);
    assert!(bucket.read_winner(b"c").expect("read").is_none());
    assert_eq!(
        bucket.read_winner(b"a").expect("read").expect("a").1,
        a_body
    );

    no_space.store(false, Ordering::Release);
    let outcome = bucket
        .update_doc(create("d", r#"{"v":3}"#), true)
        .await
        .expect("writes succeed again without a restart");
    let UpdateOutcome::Saved { seqno, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(engine.store().health(), StoreHealth::Ok);
    assert_eq!(bucket.doc_counts(), (counts.0 + 1, 0));
    assert!(bucket.record_bytes() > record_bytes);
    let seqnos = on_disk(&bucket);
    assert_eq!(
        seqnos.keys().cloned().collect::<Vec<_>>(),
        [b"a".to_vec(), b"b".to_vec(), b"d".to_vec()]
    );
    assert_eq!(seqnos[&b"d".to_vec()].0, seqno);
    let (counts, record_bytes, high) = (
        bucket.doc_counts(),
        bucket.record_bytes(),
        bucket.high_seqnos(),
    );
    drop(bucket);
    drop(engine);

    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("reopen");
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.doc_counts(), counts);
    assert_eq!(bucket.record_bytes(), record_bytes);
    assert_eq!(bucket.high_seqnos(), high);
}

/// Writers race a disk that fills and empties: each failure is answered as failed to every
/// writer it touched, writes staged on top of a failed one are refused, and afterwards the
/// counts in memory, on disk and after a restart agree, every acknowledged write is there and
/// no seqno was handed to two documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writers_keep_memory_and_disk_equal() {
    const WRITERS: usize = 8;
    const WRITES_PER_WRITER: usize = 150;
    let dir = tempfile::tempdir().expect("tempdir");
    let no_space = Arc::new(AtomicBool::new(false));
    let engine = Engine::open(dir.path(), options(&no_space)).expect("open");
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    // Full from the start (so some writes fail however fast they run), then full and free in
    // turns while the writers run.
    no_space.store(true, Ordering::Release);
    let toggler = {
        let no_space = no_space.clone();
        tokio::spawn(async move {
            for round in 0..40 {
                tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                no_space.store(round % 2 == 1, Ordering::Release);
            }
            no_space.store(false, Ordering::Release);
        })
    };
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let bucket = bucket.clone();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut failed = 0;
            for index in 0..WRITES_PER_WRITER {
                let key = format!("w{writer}-{index}");
                match bucket.update_doc(create(&key, r#"{"x":1}"#), true).await {
                    Ok(UpdateOutcome::Saved { seqno, .. }) => acknowledged.push((key, seqno)),
                    Ok(other) => panic!("{other:?}"),
                    Err(error) if is_no_space(&error) => failed += 1,
                    Err(error) => panic!("{error:?}"),
                }
            }
            (acknowledged, failed)
        }));
    }
    let mut acknowledged = Vec::new();
    let mut failed = 0;
    for writer in writers {
        let (mine, my_failed) = writer.await.expect("writer");
        acknowledged.extend(mine);
        failed += my_failed;
    }
    toggler.await.expect("toggler");
    assert!(failed > 0, "the disk never filled during the writes");
    // One more write per vbucket after the episode, so every vbucket's stats are rewritten.
    for index in 0..64 {
        let key = format!("after-{index}");
        match bucket.update_doc(create(&key, "{}"), true).await {
            Ok(UpdateOutcome::Saved { seqno, .. }) => acknowledged.push((key, seqno)),
            other => panic!("{other:?}"),
        }
    }

    let stored = on_disk(&bucket);
    let mut seen = HashSet::new();
    for (seqno, vbucket) in stored.values() {
        assert!(seen.insert((*vbucket, *seqno)), "seqno {seqno} used twice");
    }
    for (key, seqno) in &acknowledged {
        assert_eq!(
            stored.get(key.as_bytes()).map(|(seqno, _)| *seqno),
            Some(*seqno),
            "acknowledged write of {key}"
        );
    }
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "a write answered as failed is on disk"
    );
    assert_eq!(bucket.doc_counts(), (stored.len() as u64, 0));
    let (counts, record_bytes) = (bucket.doc_counts(), bucket.record_bytes());
    drop(bucket);
    drop(engine);
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("reopen");
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.doc_counts(), counts);
    assert_eq!(bucket.record_bytes(), record_bytes);
}

#[tokio::test]
async fn a_failed_manifest_change_leaves_the_manifest_and_counts_as_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_space = Arc::new(AtomicBool::new(false));
    let engine = Engine::open(dir.path(), options(&no_space)).expect("open");
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let kept = bucket
        .create_collection("_default", "kept", None)
        .await
        .expect("kept")
        .collection_id("_default.kept")
        .expect("id");
    bucket
        .update_doc_in(
            kept,
            create("a", r#"{"v":1}"#),
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("write");
    let manifest = bucket.manifest();
    let counts = bucket.doc_counts_in(kept).expect("counts");

    no_space.store(true, Ordering::Release);
    let failed = bucket
        .create_collection("_default", "lost", None)
        .await
        .expect_err("the disk is full");
    assert!(is_no_space(&failed), "{failed:?}");
    let failed = bucket
        .drop_collection("_default", "kept")
        .await
        .expect_err("the disk is full");
    assert!(is_no_space(&failed), "{failed:?}");
    assert_eq!(
        bucket.manifest(),
        manifest,
        "the live manifest is the durable one"
    );
    assert!(bucket.dropped_collections().is_empty());
    assert_eq!(bucket.doc_counts_in(kept).expect("counts"), counts);

    no_space.store(false, Ordering::Release);
    bucket
        .update_doc_in(
            kept,
            create("b", r#"{"v":2}"#),
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("the collection was never dropped");
    let lost = bucket
        .create_collection("_default", "lost", None)
        .await
        .expect("created now")
        .collection_id("_default.lost")
        .expect("id");
    assert_eq!(bucket.doc_counts_in(lost).expect("counts"), (0, 0));
    assert_eq!(bucket.doc_counts_in(kept).expect("counts"), (2, 0));
    drop(bucket);
    drop(engine);
    let engine = Engine::open(dir.path(), options(&no_space)).expect("reopen");
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.manifest().uid(), manifest.uid() + 1);
    assert_eq!(bucket.doc_counts_in(kept).expect("counts"), (2, 0));
}
