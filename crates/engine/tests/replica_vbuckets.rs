//! Replica vbuckets (docs/format/replica.md): roles survive a reopen; a vbucket that is not
//! active refuses front-door writes on the CouchDB path, the KV path and sub-document
//! mutations; a takeover's pause refuses an active vbucket's KV writes as unavailable and
//! holds its CouchDB-door writes until it is resumed (they are then written) or the role
//! changes (they are then refused); `apply_replica` stores the active's records byte for byte
//! with their seqnos, counts them once however often a seqno is re-sent, survives a reopen,
//! and a reset empties the vbucket.

mod support;

use std::sync::Arc;

use support::replica_items;

use bytes::Bytes;
use settee_engine::subdoc::MutateIn;
use settee_engine::{
    AttachmentInput, DocUpdate, Engine, EngineError, EngineOptions, FailoverEntry, KvMutation,
    ReplicaBatch, ReplicaDoc, ReplicaItem, RevId, StoreMode, VbRole, Writer,
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

/// A KV SET of `{}`.
fn store() -> KvMutation {
    KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::from_static(b"{}"),
        json: true,
        item_flags: 0,
        expiry: 0,
        cas: 0,
    }
}

#[tokio::test]
async fn a_takeover_pause_refuses_kv_writes_and_holds_couchdb_writes_until_resumed_or_moved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    engine.create_bucket("db", VBUCKETS).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let (paused, other) = (key_in(1, 0), key_in(2, 0));
    let kv_write = |key: String| {
        let bucket = bucket.clone();
        tokio::spawn(async move {
            bucket
                .kv_mutate(key.as_bytes(), store(), &Writer::system())
                .await
        })
    };
    assert!(bucket.pause_writes(1));
    assert!(bucket.writes_paused(1));
    assert_eq!(bucket.vbucket_role(1), VbRole::Active, "still the active");
    // A KV write is refused at once as temporarily unavailable (the SDKs retry it).
    let refused = kv_write(paused.clone()).await.expect("task");
    assert!(
        matches!(refused, Err(EngineError::Unavailable(_))),
        "{refused:?}"
    );
    // A CouchDB-door write waits the pause out; other vbuckets write on.
    let held = bucket.clone();
    let key = paused.clone();
    let waiting =
        tokio::spawn(async move { held.update_docs(vec![update(&key, "{}")], true).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "held by the pause");
    kv_write(other.clone())
        .await
        .expect("task")
        .expect("another vbucket");
    bucket.resume_writes(1);
    waiting.await.expect("task").expect("written once resumed");
    // A pause that ends with a role change (the new map's takeover): the held write is not
    // this node's any more, and the pause is gone with the role.
    assert!(bucket.pause_writes(1));
    let held = bucket.clone();
    let key = paused.clone();
    let waiting =
        tokio::spawn(async move { held.update_docs(vec![update(&key, "{}")], true).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "held by the pause");
    bucket
        .set_vbucket_role(1, VbRole::Replica)
        .await
        .expect("role");
    let refused = waiting.await.expect("task");
    assert!(
        matches!(refused, Err(EngineError::NotMyVbucket { .. })),
        "{refused:?}"
    );
    assert!(!bucket.writes_paused(1));
    assert!(!bucket.pause_writes(1), "only an active vbucket pauses");
    bucket
        .set_vbucket_role(1, VbRole::Active)
        .await
        .expect("role");
    kv_write(paused)
        .await
        .expect("task")
        .expect("active again, not paused");
}

#[tokio::test]
async fn roles_persist_and_non_active_vbuckets_refuse_front_door_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let engine = open(dir.path());
        engine.create_bucket("db", VBUCKETS).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        assert!((0..VBUCKETS).all(|vb| bucket.vbucket_role(vb) == VbRole::Active));
        bucket
            .set_vbucket_role(1, VbRole::Replica)
            .await
            .expect("role");
        bucket
            .set_vbucket_role(2, VbRole::Dead)
            .await
            .expect("role");
        bucket
            .set_vbucket_role(3, VbRole::Replica)
            .await
            .expect("role");
        bucket
            .set_vbucket_role(3, VbRole::Active)
            .await
            .expect("role back");
    }
    let engine = open(dir.path());
    let bucket = engine.bucket("db").expect("bucket");
    let roles: Vec<VbRole> = (0..VBUCKETS).map(|vb| bucket.vbucket_role(vb)).collect();
    assert_eq!(
        roles,
        [
            VbRole::Active,
            VbRole::Replica,
            VbRole::Dead,
            VbRole::Active
        ]
    );
    // Back to active leaves no record (a lone node's directory keeps none).
    let prefix_holds = |vb: u16| {
        let mut key = b"bucket/vbrole/".to_vec();
        key.extend_from_slice(&bucket.id().to_be_bytes());
        key.extend_from_slice(&vb.to_be_bytes());
        engine.store().get(Cf::Meta, &key).expect("get").is_some()
    };
    assert!(prefix_holds(1) && !prefix_holds(3));

    for vbucket in [1, 2] {
        let key = key_in(vbucket, 0);
        let refused = bucket.update_docs(vec![update(&key, "{}")], true).await;
        assert!(
            matches!(refused, Err(EngineError::NotMyVbucket { vbucket: vb }) if vb == vbucket),
            "{refused:?}"
        );
        let refused = bucket
            .kv_mutate(key.as_bytes(), store(), &Writer::system())
            .await;
        assert!(matches!(refused, Err(EngineError::NotMyVbucket { .. })));
        let refused = bucket
            .mutate_in(key.as_bytes(), MutateIn::default(), &Writer::system())
            .await;
        assert!(matches!(refused, Err(EngineError::NotMyVbucket { .. })));
    }
    // A bulk write touching a replica vbucket writes nothing.
    let mixed = vec![update(&key_in(0, 1), "{}"), update(&key_in(1, 1), "{}")];
    assert!(bucket.update_docs(mixed, true).await.is_err());
    assert_eq!(bucket.doc_counts(), (0, 0));
    // The active vbuckets still take writes.
    let saved = bucket
        .update_docs(vec![update(&key_in(0, 2), "{}")], true)
        .await;
    assert_eq!(saved.expect("saved").len(), 1);
    assert_eq!(bucket.doc_counts(), (1, 0));
}

#[tokio::test]
async fn applied_records_equal_the_actives_and_resent_seqnos_change_nothing() {
    let (active_dir, replica_dir) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let active = open(active_dir.path());
    active.create_bucket("db", VBUCKETS).await.expect("create");
    let source = active.bucket("db").expect("bucket");
    let vbucket = 2;
    let keys: Vec<String> = (0..6).map(|index| key_in(vbucket, index)).collect();
    for key in &keys {
        let outcome = source
            .update_docs(vec![update(key, r#"{"v":1}"#)], true)
            .await;
        outcome.expect("write");
    }
    // Conflicts, an attachment, a deletion and a document written twice.
    let conflict = |rev: &str, body: &str| DocUpdate {
        history: vec![RevId::parse(rev).expect("rev")],
        ..update(&keys[0], body)
    };
    let conflicts = vec![
        conflict("1-aaaa", r#"{"side":"a"}"#),
        conflict("1-bbbb", r#"{"side":"b"}"#),
    ];
    source
        .update_docs(conflicts, false)
        .await
        .expect("conflicts");
    let mut attached = update(&keys[1], "{}");
    let current = source
        .read_record(keys[1].as_bytes())
        .expect("read")
        .expect("doc");
    attached.parent = current.winner().map(|leaf| leaf.rev.clone());
    attached.attachments = vec![AttachmentInput::Data {
        name: "a.txt".into(),
        content_type: "text/plain".into(),
        data: Bytes::from_static(b"attachment body"),
        encoding: Default::default(),
        revpos: None,
    }];
    source
        .update_docs(vec![attached], true)
        .await
        .expect("attachment");
    let current = source
        .read_record(keys[2].as_bytes())
        .expect("read")
        .expect("doc");
    let deletion = DocUpdate {
        parent: current.winner().map(|leaf| leaf.rev.clone()),
        deleted: true,
        ..update(&keys[2], "{}")
    };
    source
        .update_docs(vec![deletion], true)
        .await
        .expect("delete");
    let items = replica_items(&source, vbucket, 0);
    let high = source.high_seqnos().get(vbucket);

    {
        let replica = open(replica_dir.path());
        replica.create_bucket("db", VBUCKETS).await.expect("create");
        let bucket = replica.bucket("db").expect("bucket");
        // A batch reaches its last item's seqno (a whole snapshot: the active's high seqno).
        let batch = |items: Vec<ReplicaItem>| ReplicaBatch {
            high_seqno: items.last().map_or(high, ReplicaItem::seqno),
            items,
            snapshot: (0, high),
        };
        // Applying to an active vbucket is refused.
        assert!(bucket
            .apply_replica(vbucket, batch(items.clone()))
            .await
            .is_err());
        bucket
            .set_vbucket_role(vbucket, VbRole::Replica)
            .await
            .expect("role");
        let (first, rest) = items.split_at(3);
        assert_eq!(
            bucket
                .apply_replica(vbucket, batch(first.to_vec()))
                .await
                .expect("apply"),
            3
        );
        // Everything again: the first three are re-sent seqnos and are skipped.
        let applied = bucket
            .apply_replica(vbucket, batch(items.clone()))
            .await
            .expect("apply");
        assert_eq!(applied, rest.len());
        assert_eq!(
            bucket
                .apply_replica(vbucket, batch(items.clone()))
                .await
                .expect("again"),
            0
        );
        // A record that does not match its message is refused.
        if let Some(ReplicaItem::Doc(doc)) = items.last() {
            let forged = ReplicaItem::Doc(ReplicaDoc {
                seqno: high + 1,
                ..doc.clone()
            });
            let refused = ReplicaBatch {
                items: vec![forged],
                high_seqno: high + 1,
                snapshot: (0, high + 1),
            };
            assert!(bucket.apply_replica(vbucket, refused).await.is_err());
        }
        let log = [FailoverEntry { uuid: 99, seqno: 0 }];
        bucket.set_failover_log(vbucket, &log).await.expect("log");
    }
    // After a reopen the replica holds what the active holds, byte for byte.
    let replica = open(replica_dir.path());
    let bucket = replica.bucket("db").expect("bucket");
    assert_eq!(bucket.vbucket_role(vbucket), VbRole::Replica);
    assert_eq!(bucket.vbucket_uuid(vbucket), 99);
    assert_eq!(bucket.high_seqnos().get(vbucket), high);
    assert_eq!(
        bucket.replica_snapshot(vbucket).expect("snapshot"),
        (0, high)
    );
    assert_eq!(bucket.doc_counts(), source.doc_counts());
    assert_eq!(bucket.record_bytes(), source.record_bytes());
    assert_eq!(bucket.vb_state(vbucket), source.vb_state(vbucket));
    assert_eq!(replica_items(&bucket, vbucket, 0), items);
    for key in &keys {
        assert_eq!(
            bucket.read_record(key.as_bytes()).expect("read"),
            source.read_record(key.as_bytes()).expect("read"),
        );
    }
    let record = bucket
        .read_record(keys[1].as_bytes())
        .expect("read")
        .expect("doc");
    let md5 = record.leaves[0].attachments[0].md5;
    let body = bucket
        .get_attachment(keys[1].as_bytes(), &md5)
        .expect("att");
    assert_eq!(body.as_deref(), Some(b"attachment body".as_slice()));

    // A rollback to 0 empties the vbucket.
    bucket.reset_replica(vbucket).await.expect("reset");
    assert_eq!(bucket.high_seqnos().get(vbucket), 0);
    assert_eq!(bucket.doc_counts(), (0, 0));
    assert!(bucket
        .vbucket_stream(vbucket, 0, 100)
        .expect("stream")
        .is_empty());
    assert!(bucket
        .read_record(keys[0].as_bytes())
        .expect("read")
        .is_none());
}
