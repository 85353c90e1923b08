//! `Store::range_bytes`: what a key range takes on disk, before and after a flush.
use settee_storage::{Batch, Cf, Store, StoreOptions};

#[test]
fn unflushed_writes_count_until_flushed_and_live_never_exceeds_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &StoreOptions::default()).expect("open");
    let mut batch = Batch::new();
    for index in 0..2000u32 {
        batch.put(Cf::Seq, format!("k{index:05}"), vec![7u8; 100]);
    }
    store.commit_blocking(batch).expect("commit");
    let before = store.range_bytes(Cf::Seq, b"k", b"l").expect("bytes");
    assert_eq!(before.files, 0, "{before:?}");
    assert_eq!(before.unflushed, 2000 * (6 + 100), "{before:?}");
    assert_eq!(before.unflushed_entries, 2000, "{before:?}");
    // The log holds each entry's trailer too: live data is less than the file.
    assert_eq!(before.active(), 2000 * (6 + 100), "{before:?}");
    assert_eq!(before.file(), 2000 * (6 + 100 + 8), "{before:?}");
    assert_eq!(
        store
            .range_bytes(Cf::Seq, b"a", b"b")
            .expect("bytes")
            .unflushed,
        0,
        "other ranges"
    );

    store.flush().expect("flush");
    let flushed = store.range_bytes(Cf::Seq, b"k", b"l").expect("bytes");
    assert_eq!(flushed.unflushed, 0, "{flushed:?}");
    assert!(flushed.files > 0, "{flushed:?}");
    assert!(flushed.files_live <= flushed.files, "{flushed:?}");

    // Overwrite everything: the old versions are garbage until compacted.
    let mut batch = Batch::new();
    for index in 0..2000u32 {
        batch.put(Cf::Seq, format!("k{index:05}"), vec![8u8; 100]);
    }
    store.commit_blocking(batch).expect("commit");
    store.flush().expect("flush");
    let overwritten = store.range_bytes(Cf::Seq, b"k", b"l").expect("bytes");
    assert!(
        overwritten.files_live <= overwritten.files,
        "{overwritten:?}"
    );
    store.compact(Cf::Seq, b"k", b"l");
    let compacted = store.range_bytes(Cf::Seq, b"k", b"l").expect("bytes");
    assert!(
        compacted.files < overwritten.files,
        "{compacted:?} {overwritten:?}"
    );
    assert!(compacted.files_live <= compacted.files, "{compacted:?}");
    // Index and filter blocks are in the file and are not live data.
    assert!(compacted.active() < compacted.file(), "{compacted:?}");
    assert!(compacted.active() > 0, "{compacted:?}");
}
