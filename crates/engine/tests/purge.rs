//! Purge: leaves removed for good, counted in purge_seq across restarts.
use bytes::Bytes;
use settee_engine::{Engine, EngineOptions, SeqVector};

/// Purge removes a conflicting leaf for good, counts in purge_seq (also after a restart), and
/// a document left with no leaf leaves the change stream.
#[tokio::test]
async fn purge_counts_and_survives_restart() {
    use settee_engine::{DocUpdate, RevId, UpdateOutcome};
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
        engine.create_bucket("p", 4).await.expect("create");
        let bucket = engine.bucket("p").expect("bucket");
        let replicated = |hash: &str| DocUpdate {
            key: b"doc".to_vec(),
            parent: None,
            history: vec![RevId {
                pos: 1,
                hash: hash.into(),
            }],
            deleted: false,
            body: Bytes::from_static(b"{}"),
            attachments: Vec::new(),
        };
        for hash in ["aaa", "bbb"] {
            let outcome = bucket
                .update_doc(replicated(hash), false)
                .await
                .expect("write");
            assert!(matches!(outcome, UpdateOutcome::Saved { .. }));
        }
        let loser = RevId {
            pos: 1,
            hash: "aaa".into(),
        };
        assert_eq!(
            bucket
                .purge(b"doc", std::slice::from_ref(&loser))
                .await
                .expect("purge"),
            vec![loser]
        );
        assert_eq!(bucket.purge_seq(), 1);
        let record = bucket.read_record(b"doc").expect("read").expect("doc");
        assert_eq!(record.leaves.len(), 1);
        let winner = RevId {
            pos: 1,
            hash: "bbb".into(),
        };
        assert_eq!(
            bucket.purge(b"doc", &[winner]).await.expect("purge").len(),
            1
        );
        assert!(bucket.read_record(b"doc").expect("read").is_none());
        assert_eq!(bucket.changes(SeqVector::zero(4)).count(), 0);
        assert_eq!(bucket.doc_counts(), (0, 0));
    }
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("reopen");
    assert_eq!(engine.bucket("p").expect("bucket").purge_seq(), 2);
}

/// Every purge leaves a purge log entry naming the document (partitions.md), read back in
/// purge order; asking from before the oldest kept entry says the log does not reach back.
#[tokio::test]
async fn purges_are_logged_in_order_for_indexes() {
    use settee_engine::{DocUpdate, UpdateOutcome};
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("p", 4).await.expect("create");
    let bucket = engine.bucket("p").expect("bucket");
    for key in ["a", "b", "c"] {
        let update = DocUpdate {
            key: key.as_bytes().to_vec(),
            parent: None,
            history: Vec::new(),
            deleted: false,
            body: Bytes::from_static(b"{}"),
            attachments: Vec::new(),
        };
        let UpdateOutcome::Saved { rev, .. } =
            bucket.update_doc(update, true).await.expect("write")
        else {
            panic!("saved");
        };
        if key != "b" {
            assert_eq!(
                bucket
                    .purge(key.as_bytes(), &[rev])
                    .await
                    .expect("purge")
                    .len(),
                1
            );
        }
    }
    assert_eq!(bucket.purge_seq(), 2);
    let logged = bucket.purged_since(0, 0, 2).expect("read");
    assert_eq!(logged, Some(vec![b"a".to_vec(), b"c".to_vec()]));
    assert_eq!(
        bucket.purged_since(0, 1, 2).expect("read"),
        Some(vec![b"c".to_vec()])
    );
    assert_eq!(
        bucket.purged_since(0, 2, 2).expect("read"),
        Some(Vec::new())
    );
    // Asked for more than was logged: the log cannot vouch for it.
    assert_eq!(bucket.purged_since(0, 0, 3).expect("read"), None);
}
