//! Old revision bodies (docs/format/document.md, "Old revision bodies"): a revision that stops
//! being a leaf keeps its body and attachments until compaction, stemming or a purge.
use std::collections::HashSet;

use bytes::Bytes;
use settee_engine::{
    md5_of, AttachmentInput, Bucket, DocKey, DocUpdate, Engine, EngineOptions, RevId, UpdateOutcome,
};

fn update(
    parent: Option<RevId>,
    body: &'static [u8],
    attachments: Vec<AttachmentInput>,
) -> DocUpdate {
    DocUpdate {
        key: b"doc".to_vec(),
        parent,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from_static(body),
        attachments,
    }
}

async fn save(bucket: &Bucket, update: DocUpdate) -> RevId {
    match bucket.update_doc(update, true).await.expect("update") {
        UpdateOutcome::Saved { rev, .. } => rev,
        other => panic!("{other:?}"),
    }
}

fn doc() -> DocKey<'static> {
    DocKey::new(0, b"doc")
}

fn revision(bucket: &Bucket, rev: &RevId) -> Option<settee_engine::Leaf> {
    let record = bucket.read_record(doc()).expect("read").expect("record");
    bucket.revision(doc(), &record, rev).expect("revision")
}

/// Three revisions: "1" with attachment "a", "2" without it, "3".
async fn three_revisions(bucket: &Bucket, att: &Bytes) -> Vec<RevId> {
    let first = save(
        bucket,
        update(
            None,
            b"{\"v\":1}",
            vec![AttachmentInput::Data {
                name: "a".into(),
                content_type: "text/plain".into(),
                data: att.clone(),
                encoding: Default::default(),
                revpos: None,
            }],
        ),
    )
    .await;
    let second = save(
        bucket,
        update(Some(first.clone()), b"{\"v\":2}", Vec::new()),
    )
    .await;
    let third = save(
        bucket,
        update(Some(second.clone()), b"{\"v\":3}", Vec::new()),
    )
    .await;
    vec![first, second, third]
}

#[tokio::test]
async fn old_revisions_are_kept_until_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let att = Bytes::from_static(b"attachment of the first revision");
    let revs = {
        let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
        engine.create_bucket("c", 4).await.expect("create");
        let bucket = engine.bucket("c").expect("bucket");
        three_revisions(&bucket, &att).await
    };
    // Kept durably: the entries are there after a reopen.
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("reopen");
    let bucket = engine.bucket("c").expect("bucket");
    let first = revision(&bucket, &revs[0]).expect("first revision kept");
    assert_eq!(first.body.as_ref(), b"{\"v\":1}");
    assert_eq!(first.attachments.len(), 1);
    assert_eq!(first.attachments[0].md5, md5_of(&att));
    assert_eq!(
        revision(&bucket, &revs[1]).expect("second").body.as_ref(),
        b"{\"v\":2}"
    );
    // The current leaf still comes from the record.
    assert_eq!(
        revision(&bucket, &revs[2]).expect("third").body.as_ref(),
        b"{\"v\":3}"
    );
    assert_eq!(
        bucket.kept_revisions(doc()).expect("kept"),
        HashSet::from([revs[0].clone(), revs[1].clone()])
    );
    // A revision the tree does not hold is never read from an entry.
    assert_eq!(revision(&bucket, &RevId::new(2, "ffff")), None);
    // The first revision's attachment body outlives it being a leaf.
    assert_eq!(
        bucket.get_attachment(doc(), &md5_of(&att)).expect("att"),
        Some(att.clone())
    );

    let report = bucket.compact().await.expect("compact");
    assert_eq!(report.old_revisions_removed, 2);
    assert_eq!(revision(&bucket, &revs[0]), None);
    assert_eq!(revision(&bucket, &revs[1]), None);
    assert!(bucket.kept_revisions(doc()).expect("kept").is_empty());
    assert_eq!(
        revision(&bucket, &revs[2]).expect("leaf").body.as_ref(),
        b"{\"v\":3}"
    );
    // With no old revision left to reference it, the attachment body goes too.
    assert_eq!(
        bucket.get_attachment(doc(), &md5_of(&att)).expect("att"),
        None
    );
}

#[tokio::test]
async fn stemming_drops_the_stemmed_revisions_bodies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("c", 4).await.expect("create");
    let bucket = engine.bucket("c").expect("bucket");
    let att = Bytes::from_static(b"stemmed attachment");
    let revs = three_revisions(&bucket, &att).await;
    bucket.set_revs_limit(2).await.expect("revs_limit");
    let fourth = save(
        &bucket,
        update(Some(revs[2].clone()), b"{\"v\":4}", Vec::new()),
    )
    .await;
    // The tree keeps 3 and 4: 1 and 2 are stemmed, their entries gone; 3 became an old revision.
    assert_eq!(
        bucket.kept_revisions(doc()).expect("kept"),
        HashSet::from([revs[2].clone()])
    );
    assert_eq!(
        revision(&bucket, &revs[2]).expect("third").body.as_ref(),
        b"{\"v\":3}"
    );
    assert_eq!(revision(&bucket, &revs[0]), None);
    assert_eq!(
        revision(&bucket, &fourth).expect("leaf").body.as_ref(),
        b"{\"v\":4}"
    );
}

#[tokio::test]
async fn purge_drops_old_revisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("c", 4).await.expect("create");
    let bucket = engine.bucket("c").expect("bucket");
    let att = Bytes::from_static(b"purged attachment");
    let revs = three_revisions(&bucket, &att).await;
    assert_eq!(bucket.kept_revisions(doc()).expect("kept").len(), 2);
    let purged = bucket
        .purge(doc(), &[revs[2].clone()])
        .await
        .expect("purge");
    assert_eq!(purged, vec![revs[2].clone()]);
    assert!(bucket.read_record(doc()).expect("read").is_none());
    assert!(bucket.kept_revisions(doc()).expect("kept").is_empty());
    assert_eq!(
        bucket.get_attachment(doc(), &md5_of(&att)).expect("att"),
        None
    );
    // A new document under the same id starts without old revisions.
    let fresh = save(&bucket, update(None, b"{\"v\":9}", Vec::new())).await;
    assert!(bucket.kept_revisions(doc()).expect("kept").is_empty());
    assert_eq!(
        revision(&bucket, &fresh).expect("leaf").body.as_ref(),
        b"{\"v\":9}"
    );
}

#[tokio::test]
async fn purging_one_branch_drops_only_its_revisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    engine.create_bucket("c", 4).await.expect("create");
    let bucket = engine.bucket("c").expect("bucket");
    let first = save(&bucket, update(None, b"{\"v\":1}", Vec::new())).await;
    let second = save(
        &bucket,
        update(Some(first.clone()), b"{\"v\":2}", Vec::new()),
    )
    .await;
    let third = save(
        &bucket,
        update(Some(second.clone()), b"{\"v\":3}", Vec::new()),
    )
    .await;
    // A conflicting branch from 1, replicated in.
    let other = RevId::new(2, "0000000000000000000000000000000a");
    let outcome = bucket
        .update_doc(
            DocUpdate {
                key: b"doc".to_vec(),
                parent: None,
                history: vec![other.clone(), first.clone()],
                deleted: false,
                body: Bytes::from_static(b"{\"v\":\"other\"}"),
                attachments: Vec::new(),
            },
            false,
        )
        .await
        .expect("replicated");
    assert!(
        matches!(outcome, UpdateOutcome::Saved { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        bucket.kept_revisions(doc()).expect("kept"),
        HashSet::from([first.clone(), second.clone()])
    );
    // Purging 3 removes 3 and 2 (1 is shared with the other branch).
    bucket.purge(doc(), &[third]).await.expect("purge");
    assert_eq!(
        bucket.kept_revisions(doc()).expect("kept"),
        HashSet::from([first.clone()])
    );
    assert_eq!(
        revision(&bucket, &first).expect("first").body.as_ref(),
        b"{\"v\":1}"
    );
}
