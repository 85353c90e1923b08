//! A change feed resumed from the position it reported must never skip a change, even while
//! writes are waiting for their fsync when the position is taken.
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{DocUpdate, Engine, EngineOptions, SeqVector};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resumed_feeds_see_every_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("open"));
    engine.create_bucket("r", 4).await.expect("create");
    let bucket = engine.bucket("r").expect("bucket");
    let done = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..8 {
        let bucket = bucket.clone();
        writers.push(tokio::spawn(async move {
            let mut keys = Vec::new();
            for i in 0..150 {
                let key = format!("w{writer}-{i}");
                let update = DocUpdate {
                    key: key.clone().into_bytes(),
                    parent: None,
                    history: Vec::new(),
                    deleted: false,
                    body: Bytes::from_static(b"{}"),
                    attachments: Vec::new(),
                };
                bucket.update_doc(update, true).await.expect("write");
                keys.push(key);
            }
            keys
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (bucket, done) = (bucket.clone(), done.clone());
        readers.push(tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            let mut position = SeqVector::zero(4);
            loop {
                let finished = done.load(Ordering::Acquire);
                let mut cursor = bucket.changes(position.clone());
                for entry in cursor.by_ref() {
                    seen.insert(String::from_utf8(entry.expect("entry").key).expect("utf8"));
                }
                position = cursor.end_position();
                if finished {
                    return seen;
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut written = BTreeSet::new();
    for writer in writers {
        written.extend(writer.await.expect("writer"));
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let seen = reader.await.expect("reader");
        let skipped: Vec<_> = written.difference(&seen).take(5).collect();
        assert!(skipped.is_empty(), "a resumed feed skipped {skipped:?}");
    }
}
