//! The change stream newest first (`Bucket::changes_descending`) holds the same entries as the
//! forward stream, in decreasing CAS order, each with the forward feed's resume point just
//! after it: before and after compaction abbreviates the entries, from the start and from a
//! `since` in the middle, and the forward feed resumed from any row's position yields exactly
//! the entries newer than that row.

use std::collections::HashMap;

use bytes::Bytes;
use settee_engine::{Bucket, ChangeEntry, DocUpdate, Engine, EngineOptions, SeqVector};

const DOCS: usize = 700;

fn update(key: String, parent: Option<settee_engine::RevId>, deleted: bool) -> DocUpdate {
    DocUpdate {
        key: key.into_bytes(),
        parent,
        history: Vec::new(),
        deleted,
        body: Bytes::from_static(b"{\"v\":1}"),
        attachments: Vec::new(),
    }
}

/// The forward stream after `since`.
fn forward(bucket: &Bucket, since: &SeqVector) -> Vec<ChangeEntry> {
    bucket
        .changes(since.clone())
        .collect::<Result<_, _>>()
        .expect("forward")
}

/// The forward feed's resume point just after `entry`: in each vbucket, the newest of the
/// entries ordered at or before it (by CAS, then vbucket), else `since`.
fn resume_point(all: &[ChangeEntry], entry: &ChangeEntry, since: &SeqVector) -> SeqVector {
    let mut point = since.clone();
    for other in all {
        if (other.cas, other.vbucket) <= (entry.cas, entry.vbucket)
            && other.seqno > point.get(other.vbucket)
        {
            point.set(other.vbucket, other.seqno);
        }
    }
    point
}

fn check(bucket: &Bucket, since: &SeqVector) {
    let mut expected = forward(bucket, since);
    expected.sort_by_key(|entry| std::cmp::Reverse((entry.cas, entry.vbucket)));
    let mut cursor = bucket.changes_descending(since.clone());
    let mut got = Vec::new();
    while let Some(entry) = cursor.next() {
        let entry = entry.expect("descending");
        got.push((entry.clone(), cursor.position().clone()));
    }
    assert_eq!(got.len(), expected.len());
    for ((entry, position), wanted) in got.iter().zip(&expected) {
        assert_eq!(entry, wanted);
        assert_eq!(
            position,
            &resume_point(&expected, entry, since),
            "{entry:?}"
        );
    }
    // Following the feed forward from a row's position yields exactly the newer entries.
    for (index, (_, position)) in got.iter().enumerate().step_by(97) {
        let newer: Vec<_> = forward(bucket, position)
            .into_iter()
            .map(|entry| (entry.vbucket, entry.seqno))
            .collect();
        let mut wanted: Vec<_> = got[..index]
            .iter()
            .map(|(entry, _)| (entry.vbucket, entry.seqno))
            .collect();
        let mut newer_sorted = newer.clone();
        newer_sorted.sort_unstable();
        wanted.sort_unstable();
        assert_eq!(newer_sorted, wanted, "resumed from row {index}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_first_with_the_forward_resume_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("db", 8).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let mut revs = HashMap::new();
    for index in 0..DOCS {
        let key = format!("doc-{index:05}");
        let outcome = bucket
            .update_doc(update(key.clone(), None, false), true)
            .await
            .expect("save");
        if let settee_engine::UpdateOutcome::Saved { rev, .. } = outcome {
            revs.insert(key, rev);
        }
    }
    // Updates and deletions move documents to later seqnos.
    for index in (0..DOCS).step_by(7) {
        let key = format!("doc-{index:05}");
        let parent = revs.get(&key).cloned();
        bucket
            .update_doc(update(key, parent, index % 2 == 0), true)
            .await
            .expect("update");
    }
    let zero = SeqVector::zero(bucket.vbuckets());
    check(&bucket, &zero);
    let all = forward(&bucket, &zero);
    let middle = resume_point(&all, &all[all.len() / 2], &zero);
    check(&bucket, &middle);
    check(&bucket, &bucket.high_seqnos());
    // Compaction abbreviates the entries to id prefixes: they read back whole.
    bucket.compact().await.expect("compact");
    check(&bucket, &zero);
    check(&bucket, &middle);
}

/// A scattered feed reads only the vbuckets its node answers for: `only` leaves the others
/// at `since` and yields the rest in the same order, with the same positions for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_marked_vbuckets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("db", 8).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    for index in 0..200 {
        bucket
            .update_doc(update(format!("doc-{index:05}"), None, false), true)
            .await
            .expect("save");
    }
    let zero = SeqVector::zero(bucket.vbuckets());
    let only: Vec<bool> = (0..8).map(|vbucket| vbucket % 3 == 1).collect();
    let mut expected: Vec<ChangeEntry> = forward(&bucket, &zero)
        .into_iter()
        .filter(|entry| only[usize::from(entry.vbucket)])
        .collect();
    expected.sort_by_key(|entry| std::cmp::Reverse((entry.cas, entry.vbucket)));
    let mut cursor = bucket.changes_descending(zero.clone()).only(&only);
    let mut got = Vec::new();
    while let Some(entry) = cursor.next() {
        let entry = entry.expect("descending");
        let position = cursor.position().clone();
        for vbucket in (0..8u16).filter(|vbucket| !only[usize::from(*vbucket)]) {
            assert_eq!(position.get(vbucket), 0, "vbucket {vbucket} is not read");
        }
        assert_eq!(position, resume_point(&expected, &entry, &zero));
        got.push(entry);
    }
    assert!(!expected.is_empty());
    assert_eq!(got, expected);
}
