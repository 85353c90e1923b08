//! Group commit and poisoning, observed through the public API.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use settee_storage::{Batch, Cf, Store, StoreError, StoreHealth, StoreOptions};

fn put(key: &str, value: &str) -> Batch {
    let mut batch = Batch::new();
    batch.put(Cf::Doc, key.as_bytes(), value.as_bytes());
    batch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_share_fsyncs_and_all_land() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store =
        std::sync::Arc::new(Store::open(dir.path(), &StoreOptions::default()).expect("open"));
    let mut tasks = Vec::new();
    for i in 0..400 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.commit(put(&format!("k{i:04}"), "v")).await
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("commit");
    }
    let stats = store.commit_stats();
    assert_eq!(stats.batches, 400);
    assert!(stats.groups <= stats.batches);
    assert!(stats.groups >= 1);
    let count = store.scan(Cf::Doc, b"k", b"l", false).count();
    assert_eq!(count, 400);
}

#[test]
fn committed_data_survives_reopen_and_ranges_scan_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).expect("open");
        let mut batch = Batch::new();
        for key in ["a1", "a2", "a3", "b1"] {
            batch.put(Cf::Seq, key, key);
        }
        store.commit_blocking(batch).expect("commit");
        let mut batch = Batch::new();
        batch.delete(Cf::Seq, "a2");
        store.commit_blocking(batch).expect("commit");
    }
    let store = Store::open(dir.path(), &StoreOptions::default()).expect("reopen");
    let forward: Vec<_> = store
        .scan(Cf::Seq, b"a", b"b", false)
        .map(|entry| entry.expect("entry").0.to_vec())
        .collect();
    assert_eq!(forward, vec![b"a1".to_vec(), b"a3".to_vec()]);
    let last = store.last_in_range(Cf::Seq, b"a", b"b").expect("scan");
    assert_eq!(last.map(|entry| entry.0.to_vec()), Some(b"a3".to_vec()));
    let mut batch = Batch::new();
    batch.delete_range(Cf::Seq, "a", "b");
    store.commit_blocking(batch).expect("commit");
    assert_eq!(store.scan(Cf::Seq, b"", b"\xff", false).count(), 1);
    assert_eq!(
        store.get(Cf::Seq, b"b1").expect("get"),
        Some(b"b1".to_vec())
    );
    assert_eq!(store.get(Cf::Seq, b"a1").expect("get"), None);
}

#[test]
fn a_failed_commit_poisons_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = StoreOptions {
        fail_commits_after: Some(2),
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), &options).expect("open");
    store.commit_blocking(put("a", "1")).expect("first");
    store.commit_blocking(put("b", "2")).expect("second");
    let third = store.commit_blocking(put("c", "3"));
    assert!(matches!(third, Err(StoreError::Poisoned(_))), "{third:?}");
    let fourth = store.commit_blocking(put("d", "4"));
    assert!(matches!(fourth, Err(StoreError::Poisoned(_))), "{fourth:?}");
    assert_eq!(store.get(Cf::Doc, b"c").expect("get"), None);
    assert_eq!(store.get(Cf::Doc, b"a").expect("get"), Some(b"1".to_vec()));
}

/// A full disk fails the writes of that moment without poisoning: the store reports it, a
/// batch staged before the failure is refused unwritten (it may build on the failed one), the
/// row cache forgets nothing it should keep, and writes succeed again once space is back.
#[test]
fn a_full_disk_fails_writes_until_space_is_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_space = Arc::new(AtomicBool::new(false));
    let options = StoreOptions {
        no_space: Some(no_space.clone()),
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), &options).expect("open");
    store.commit_blocking(put("a", "1")).expect("first");
    assert_eq!(store.get(Cf::Doc, b"a").expect("get"), Some(b"1".to_vec()));
    let staged_in = store.epoch();

    no_space.store(true, Ordering::Release);
    let failed = store.commit_blocking(put("a", "2"));
    assert!(matches!(failed, Err(StoreError::NoSpace)), "{failed:?}");
    assert!(!failed.expect_err("failed").to_string().contains('/'));
    assert_eq!(store.health(), StoreHealth::NoSpace);
    assert_ne!(store.epoch(), staged_in);
    assert_eq!(store.get(Cf::Doc, b"a").expect("get"), Some(b"1".to_vec()));
    let unsynced = store.write_unsynced({
        let mut batch = Batch::new();
        batch.put(Cf::View, "v", "1");
        batch
    });
    assert!(matches!(unsynced, Err(StoreError::NoSpace)), "{unsynced:?}");

    no_space.store(false, Ordering::Release);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let stale = runtime.block_on(store.commit_in_epoch(put("b", "1"), staged_in));
    assert!(matches!(stale, Err(StoreError::NoSpace)), "{stale:?}");
    assert_eq!(store.get(Cf::Doc, b"b").expect("get"), None);
    runtime
        .block_on(store.commit_in_epoch(put("b", "2"), store.epoch()))
        .expect("writes succeed again");
    assert_eq!(store.health(), StoreHealth::Ok);
    assert_eq!(store.get(Cf::Doc, b"b").expect("get"), Some(b"2".to_vec()));
    assert_eq!(store.get(Cf::Doc, b"a").expect("get"), Some(b"1".to_vec()));
}

/// With no write to notice it, the committer's probe sees the end of a full disk.
#[test]
fn an_idle_store_notices_space_is_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_space = Arc::new(AtomicBool::new(true));
    let options = StoreOptions {
        no_space: Some(no_space.clone()),
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), &options).expect("open");
    assert!(store.commit_blocking(put("a", "1")).is_err());
    assert_eq!(store.health(), StoreHealth::NoSpace);
    no_space.store(false, Ordering::Release);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.health() != StoreHealth::Ok {
        assert!(std::time::Instant::now() < deadline, "never noticed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Compaction leaves nothing on disk for a range whose every key was deleted, even when the
/// deletion markers sit in a lone file that RocksDB could just move to the last level.
#[test]
fn compaction_drops_deletion_markers_of_a_lone_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &StoreOptions::default()).expect("open");
    let mut batch = Batch::new();
    for index in 0..1000u32 {
        batch.put(Cf::Seq, format!("k{index:05}"), vec![7u8; 100]);
    }
    store.commit_blocking(batch).expect("commit");
    let mut batch = Batch::new();
    for index in 0..1000u32 {
        batch.delete(Cf::Seq, format!("k{index:05}"));
    }
    store.commit_blocking(batch).expect("commit");
    // One file holding only deletion markers (the flush drops the values they shadow).
    store.flush().expect("flush");
    assert!(store.size_on_disk(Cf::Seq, b"k", b"l") > 0);
    store.compact(Cf::Seq, b"k", b"l");
    assert_eq!(store.scan(Cf::Seq, b"k", b"l", false).count(), 0);
    assert_eq!(
        store.size_on_disk(Cf::Seq, b"k", b"l"),
        0,
        "bytes left on disk"
    );
}
