//! Compaction: attachment bodies no leaf references any more are deleted; referenced ones stay.
use bytes::Bytes;
use settee_engine::{md5_of, AttachmentInput, DocUpdate, Engine, EngineOptions, UpdateOutcome};

fn update(parent: Option<settee_engine::RevId>, attachments: Vec<AttachmentInput>) -> DocUpdate {
    DocUpdate {
        key: b"doc".to_vec(),
        parent,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from_static(b"{\"v\":1}"),
        attachments,
    }
}

#[tokio::test]
async fn compaction_drops_unreferenced_attachment_bodies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("c", 4).await.expect("create");
    let bucket = engine.bucket("c").expect("bucket");
    let old = Bytes::from_static(b"old attachment body");
    let kept = Bytes::from_static(b"kept attachment body");
    let first = bucket
        .update_doc(
            update(
                None,
                vec![
                    AttachmentInput::Data {
                        name: "old".into(),
                        content_type: "text/plain".into(),
                        data: old.clone(),
                        encoding: Default::default(),
                        revpos: None,
                    },
                    AttachmentInput::Data {
                        name: "kept".into(),
                        content_type: "text/plain".into(),
                        data: kept.clone(),
                        encoding: Default::default(),
                        revpos: None,
                    },
                ],
            ),
            true,
        )
        .await
        .expect("first");
    let UpdateOutcome::Saved { rev, .. } = first else {
        panic!("{first:?}")
    };
    // The next revision keeps "kept" as a stub and drops "old".
    let second = bucket
        .update_doc(
            update(
                Some(rev),
                vec![AttachmentInput::Stub {
                    name: "kept".into(),
                    revpos: None,
                }],
            ),
            true,
        )
        .await
        .expect("second");
    assert!(matches!(second, UpdateOutcome::Saved { .. }));
    assert_eq!(
        bucket.get_attachment(b"doc", &md5_of(&old)).expect("get"),
        Some(old.clone())
    );
    bucket.compact().await.expect("compact");
    assert_eq!(
        bucket.get_attachment(b"doc", &md5_of(&old)).expect("get"),
        None
    );
    assert_eq!(
        bucket.get_attachment(b"doc", &md5_of(&kept)).expect("get"),
        Some(kept)
    );
}
