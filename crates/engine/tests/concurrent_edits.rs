//! Concurrent writers of one document must serialise: of many edits made against the same
//! revision at once, exactly one wins and the others get a conflict (no lost update), while
//! bulk writers of different documents all succeed.
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{DocUpdate, Engine, EngineOptions, UpdateOutcome};
use settee_revtree::RevId;

fn update(key: &str, parent: Option<RevId>, body: String) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from(body),
        attachments: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_of_one_revision_at_once_leave_exactly_one_winner() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("open"));
    engine.create_bucket("c", 8).await.expect("create");
    let bucket = engine.bucket("c").expect("bucket");
    let first = bucket
        .update_doc(update("doc", None, "{\"n\":0}".into()), true)
        .await
        .expect("create");
    let UpdateOutcome::Saved { rev, .. } = first else {
        panic!("create failed: {first:?}");
    };
    let mut rev: RevId = rev;
    for round in 0..20 {
        let mut editors = Vec::new();
        for editor in 0..12 {
            let (bucket, parent) = (bucket.clone(), rev.clone());
            // Each editor sends a batch: the contested document and one of its own.
            editors.push(tokio::spawn(async move {
                let body = format!("{{\"round\":{round},\"editor\":{editor}}}");
                let own = format!("own-{round}-{editor}");
                bucket
                    .update_docs(
                        vec![
                            update("doc", Some(parent), body.clone()),
                            update(&own, None, body),
                        ],
                        true,
                    )
                    .await
                    .expect("update")
            }));
        }
        let mut winners = Vec::new();
        for editor in editors {
            let outcomes = editor.await.expect("editor");
            assert!(
                matches!(outcomes[1], UpdateOutcome::Saved { .. }),
                "a document no one else writes must be saved: {:?}",
                outcomes[1]
            );
            match &outcomes[0] {
                UpdateOutcome::Saved { rev, .. } => winners.push(rev.clone()),
                UpdateOutcome::Conflict => {}
                other => panic!("unexpected outcome {other:?}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: edits of one revision must leave one winner, got {winners:?}"
        );
        rev = winners.pop().expect("winner");
        assert_eq!(rev.pos, round + 2);
    }
}
