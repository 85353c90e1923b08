//! The access epoch moves with every change that may decide access, and only with those.
mod support;

use bytes::Bytes;
use settee_engine::{Engine, EngineOptions, KvMutation, StoreMode, USERS_BUCKET};

fn store(value: &'static [u8]) -> KvMutation {
    KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::from_static(value),
        json: true,
        item_flags: 0,
        expiry: 0,
        cas: 0,
    }
}

#[tokio::test]
async fn the_epoch_moves_with_users_security_and_buckets_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    let epoch = || engine.access_epoch().get();

    let before = epoch();
    engine.create_bucket(USERS_BUCKET, 2).await.expect("create");
    engine.create_bucket("data", 2).await.expect("create");
    assert_ne!(epoch(), before, "creating a bucket moves it");

    let accounts = || engine.access_epoch().accounts();
    let users = engine.bucket(USERS_BUCKET).expect("users");
    let data = engine.bucket("data").expect("data");
    let (before, accounts_before) = (epoch(), accounts());
    data.kv_mutate(b"doc", store(b"{}"), &settee_engine::Writer::system())
        .await
        .expect("write");
    assert_eq!(epoch(), before, "an ordinary write does not move it");

    users
        .kv_mutate(
            b"org.couchdb.user:bob",
            store(b"{}"),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("write");
    let after_user = epoch();
    assert_ne!(after_user, before, "a write to _users moves it");
    assert_ne!(accounts(), accounts_before, "and the accounts' epoch");

    let accounts_before = accounts();
    data.set_security(serde_json::json!({"members": {"names": ["bob"]}}))
        .await
        .expect("security");
    let after_security = epoch();
    assert_ne!(after_security, after_user, "a _security write moves it");

    assert!(engine.delete_bucket("data").await.expect("delete"));
    assert_ne!(epoch(), after_security, "dropping a bucket moves it");
    assert_eq!(
        accounts(),
        accounts_before,
        "neither moves the accounts' epoch"
    );
}

/// A replica batch applied to, and a rollback of, an accounts bucket move the accounts epoch
/// as a front-door write does (cluster-map.md, "Accounts on every member"): a node's cached
/// logins follow accounts changed through another node. Other buckets' replica batches do not.
#[tokio::test]
async fn replicated_account_changes_move_the_accounts_epoch() {
    use settee_engine::{ReplicaBatch, VbRole};
    let (active_dir, replica_dir) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let active = Engine::open(active_dir.path(), EngineOptions::default()).expect("open");
    let replica = Engine::open(replica_dir.path(), EngineOptions::default()).expect("open");
    let accounts = || replica.access_epoch().accounts();
    for name in [USERS_BUCKET, "data"] {
        active.create_bucket(name, 1).await.expect("create");
        replica.create_bucket(name, 1).await.expect("create");
        let source = active.bucket(name).expect("bucket");
        source
            .kv_mutate(
                b"org.couchdb.user:bob",
                store(b"{}"),
                &settee_engine::Writer::system(),
            )
            .await
            .expect("write");
        let items = support::replica_items(&source, 0, 0);
        let high = source.high_seqnos().get(0);
        let target = replica.bucket(name).expect("bucket");
        target
            .set_vbucket_role(0, VbRole::Replica)
            .await
            .expect("role");
        let before = accounts();
        let batch = ReplicaBatch {
            items,
            high_seqno: high,
            snapshot: (0, high),
        };
        assert_eq!(target.apply_replica(0, batch).await.expect("apply"), 1);
        let moved = accounts() != before;
        assert_eq!(moved, name == USERS_BUCKET, "a replica batch of {name}");
        let before = accounts();
        target.reset_replica(0).await.expect("reset");
        let moved = accounts() != before;
        assert_eq!(moved, name == USERS_BUCKET, "a rollback of {name}");
    }
}
