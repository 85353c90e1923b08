//! Issue 18: one record that does not decode must not stop any reader of the others. Undecodable
//! bytes are written straight into a document record and a change entry through the storage
//! layer (key layout: docs/format/keys.md); every kind of scan must skip them, count them, and
//! an admin's purge must remove them.
use bytes::Bytes;
use settee_engine::record::DocRecord;
use settee_engine::{
    Bucket, DocUpdate, Engine, EngineError, EngineOptions, RevId, ScanRange, SeqVector,
    UpdateOutcome,
};
use settee_storage::{Batch, Cf};

const GOOD_DOCS: usize = 20;

fn doc_key(bucket: &Bucket, key: &[u8]) -> Vec<u8> {
    let mut out = bucket.id().to_be_bytes().to_vec();
    out.extend_from_slice(&bucket.vbucket_of(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn seq_key(bucket: &Bucket, key: &[u8], seqno: u64) -> Vec<u8> {
    let mut out = bucket.id().to_be_bytes().to_vec();
    out.extend_from_slice(&bucket.vbucket_of(key).to_be_bytes());
    out.extend_from_slice(&seqno.to_be_bytes());
    out
}

fn update(key: &str) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from(format!("{{\"key\":\"{key}\"}}")),
        attachments: Vec::new(),
    }
}

fn seqno_of(outcome: &UpdateOutcome) -> u64 {
    match outcome {
        UpdateOutcome::Saved { seqno, .. } => *seqno,
        other => panic!("not saved: {other:?}"),
    }
}

fn scanned_keys(bucket: &Bucket, descending: bool) -> Vec<Vec<u8>> {
    bucket
        .scan_docs(ScanRange {
            descending,
            ..Default::default()
        })
        .map(|item| item.expect("scan").0)
        .collect()
}

fn changed_keys(bucket: &Bucket) -> Vec<Vec<u8>> {
    bucket
        .changes(SeqVector::zero(bucket.vbuckets()))
        .map(|item| item.expect("changes").key)
        .collect()
}

fn vbucket_changed_keys(bucket: &Bucket) -> usize {
    (0..bucket.vbuckets())
        .map(|vbucket| {
            bucket
                .vbucket_changes(vbucket, 0, 1000)
                .expect("vbucket changes")
                .len()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scan_skips_records_that_do_not_decode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("db", 4).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let updates = (0..GOOD_DOCS).map(|index| update(&format!("good{index:02}")));
    let updates = updates
        .chain([update("garbage"), update("emptytree"), update("lostentry")])
        .collect();
    let outcomes = bucket.update_docs(updates, true).await.expect("save");
    let empty_seqno = seqno_of(&outcomes[GOOD_DOCS + 1]);
    let lost_seqno = seqno_of(&outcomes[GOOD_DOCS + 2]);

    // "garbage": its record does not decode at all (its change entry is intact).
    // "emptytree": what 0.1.0 stored for `_revisions.start` 2^32 -- a record with an empty
    // tree (its header decodes) and a change entry naming revision "0-".
    // "lostentry": a sound record whose change entry does not decode.
    let empty_tree = DocRecord {
        cas: 7,
        seqno: empty_seqno,
        expiry: 0,
        item_flags: 0,
        tree: Default::default(),
        leaves: Vec::new(),
        xattrs: Bytes::new(),
        index: Bytes::new(),
    };
    let mut entry = vec![1u8, 1];
    entry.extend_from_slice(&7u64.to_be_bytes());
    entry.push(b"emptytree".len() as u8);
    entry.extend_from_slice(b"emptytree");
    entry.extend_from_slice(b"0-");
    let mut batch = Batch::new();
    batch.put(Cf::Doc, doc_key(&bucket, b"garbage"), vec![1u8, 0, 0]);
    batch.put(Cf::Doc, doc_key(&bucket, b"emptytree"), empty_tree.encode());
    batch.put(Cf::Seq, seq_key(&bucket, b"emptytree", empty_seqno), entry);
    batch.put(
        Cf::Seq,
        seq_key(&bucket, b"lostentry", lost_seqno),
        vec![0xffu8],
    );
    engine
        .store()
        .commit(batch)
        .await
        .expect("write bad records");

    for key in [&b"garbage"[..], b"emptytree"] {
        assert!(matches!(
            bucket.read_record(key),
            Err(EngineError::CorruptDocument(_))
        ));
        assert_eq!(bucket.read_record_or_skip(key).expect("read"), None);
    }

    let names = |names: &[&str]| -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = (0..GOOD_DOCS)
            .map(|index| format!("good{index:02}").into_bytes())
            .chain(names.iter().map(|name| name.as_bytes().to_vec()))
            .collect();
        keys.sort();
        keys
    };
    // Documents: every sound record, in both directions.
    let documents = names(&["lostentry"]);
    assert_eq!(scanned_keys(&bucket, false), documents);
    let mut reversed = documents.clone();
    reversed.reverse();
    assert_eq!(scanned_keys(&bucket, true), reversed);
    // Changes: every entry that decodes (the garbage record's entry does; its readers skip
    // the record when they read it).
    let mut changed = changed_keys(&bucket);
    changed.sort();
    assert_eq!(changed, names(&["garbage"]));
    assert_eq!(vbucket_changed_keys(&bucket), GOOD_DOCS + 1);
    let skipped = bucket.skip_stats().corrupt_records_skipped;
    assert!(skipped >= 6, "{skipped} skips counted");
    let (total, per_bucket) = engine.skip_stats();
    assert!(total.corrupt_records_skipped >= skipped);
    assert_eq!(per_bucket.len(), 1);

    // Maintenance walks every record too.
    bucket.compact().await.expect("compaction goes on");
    bucket.purge_expired().await.expect("expiry goes on");
    assert_eq!(scanned_keys(&bucket, false), documents);

    // An admin removes the undecodable records with _purge, naming any revision...
    let any = RevId::new(4_294_967_296, "aa");
    for key in [&b"emptytree"[..], b"garbage"] {
        let purged = bucket.purge(key, std::slice::from_ref(&any)).await;
        assert_eq!(purged.expect("purge"), vec![any.clone()]);
        assert_eq!(bucket.read_record(key).expect("read"), None);
    }
    // ...and any write of the document with the lost entry gives it a new one.
    let lost = bucket
        .read_record(b"lostentry")
        .expect("read")
        .expect("doc");
    let parent = lost.winner().map(|leaf| leaf.rev.clone());
    let outcome = bucket
        .update_doc(
            DocUpdate {
                parent,
                ..update("lostentry")
            },
            true,
        )
        .await
        .expect("edit");
    seqno_of(&outcome);
    let before = bucket.skip_stats().corrupt_records_skipped;
    assert_eq!(scanned_keys(&bucket, false), documents);
    let mut changed = changed_keys(&bucket);
    changed.sort();
    assert_eq!(changed, documents);
    assert_eq!(bucket.skip_stats().corrupt_records_skipped, before);
}

/// What 0.1.0 stored as an empty tree is now a revision like any other, and the engine refuses
/// histories it cannot store instead of storing the document without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generations_past_u32_are_stored_and_bad_histories_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("db", 4).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let replicated = |history: Vec<RevId>| DocUpdate {
        history,
        ..update("x")
    };
    let high = RevId::new(4_294_967_296, "aa");
    let outcome = bucket
        .update_doc(replicated(vec![high.clone()]), false)
        .await
        .expect("write");
    assert!(matches!(outcome, UpdateOutcome::Saved { ref rev, .. } if *rev == high));
    let record = bucket.read_record(b"x").expect("read").expect("doc");
    assert_eq!(record.winner().map(|leaf| leaf.rev.clone()), Some(high));
    assert_eq!(changed_keys(&bucket), vec![b"x".to_vec()]);

    for history in [
        vec![RevId::new(0, "a")],
        vec![RevId::new(2, "")],
        vec![RevId::new(3, "b"), RevId::new(1, "a")],
        vec![RevId::new(0, "b"), RevId::new(u64::MAX, "a")],
    ] {
        let outcome = bucket
            .update_doc(
                DocUpdate {
                    history,
                    ..update("y")
                },
                false,
            )
            .await
            .expect("write");
        assert!(matches!(outcome, UpdateOutcome::Invalid(_)), "{outcome:?}");
    }
    assert_eq!(bucket.read_record(b"y").expect("read"), None);

    // The largest generation cannot be edited: a clear refusal, never a wrapped revision.
    let last = RevId::new(u64::MAX, "z");
    bucket
        .update_doc(replicated(vec![last.clone()]), false)
        .await
        .expect("write");
    let outcome = bucket
        .update_doc(
            DocUpdate {
                parent: Some(last),
                ..update("x")
            },
            true,
        )
        .await
        .expect("edit");
    assert!(matches!(outcome, UpdateOutcome::Invalid(_)), "{outcome:?}");
}

/// A scan refills each vbucket's buffer a bounded number of records (and bytes) at a time: a
/// refill that meets only records that do not decode must read on, not take the vbucket out of
/// the merge with every sound document after them; one of large documents takes a few.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_bad_records_longer_than_a_refill_does_not_end_its_vbucket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("db", 1).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let large = |key: &str| DocUpdate {
        body: Bytes::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(100 << 10))),
        ..update(key)
    };
    let updates = (0..5)
        .map(|index| large(&format!("big{index}")))
        .chain((0..5).map(|index| update(&format!("good{index}"))))
        .collect();
    bucket.update_docs(updates, true).await.expect("save");
    let mut batch = Batch::new();
    for index in 0..300 {
        let key = format!("bad{index:03}");
        batch.put(Cf::Doc, doc_key(&bucket, key.as_bytes()), vec![1u8, 0, 0]);
    }
    engine
        .store()
        .commit(batch)
        .await
        .expect("write bad records");
    let mut expected: Vec<Vec<u8>> = (0..5)
        .map(|index| format!("big{index}").into_bytes())
        .chain((0..5).map(|index| format!("good{index}").into_bytes()))
        .collect();
    assert_eq!(scanned_keys(&bucket, false), expected);
    expected.reverse();
    assert_eq!(scanned_keys(&bucket, true), expected);
}
