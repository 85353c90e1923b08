//! A key range read from a snapshot, written into a sorted file with its prefix rewritten, and
//! ingested into another store (docs/format/rebalance.md): the file holds exactly the range as
//! the snapshot saw it (writes after the snapshot are not in it), the target gets it whole
//! beside its own data, and out-of-order keys, an empty range and a missing file are refused
//! or reported without touching anything.
use settee_storage::{write_sst, Batch, Cf, Store, StoreError, StoreOptions};

/// A key of "bucket" `bucket` and "vbucket" `vb`: the shape of keys.md's prefixes.
fn key(bucket: u32, vb: u16, name: &str) -> Vec<u8> {
    let mut key = bucket.to_be_bytes().to_vec();
    key.extend_from_slice(&vb.to_be_bytes());
    key.extend_from_slice(name.as_bytes());
    key
}

fn range(bucket: u32, vb: u16) -> (Vec<u8>, Vec<u8>) {
    (key(bucket, vb, ""), key(bucket, vb + 1, ""))
}

fn scan(store: &Store, cf: Cf, (lower, upper): (Vec<u8>, Vec<u8>)) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .scan(cf, &lower, &upper, false)
        .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan")
}

#[test]
fn a_snapshot_range_moves_whole_into_another_store() {
    let dirs = [(); 3].map(|_| tempfile::tempdir().expect("tempdir"));
    let source = Store::open(dirs[0].path(), &StoreOptions::default()).expect("open");
    let target = Store::open(dirs[1].path(), &StoreOptions::default()).expect("open");
    let mut batch = Batch::new();
    for index in 0..3000u32 {
        let vb = (index % 3) as u16;
        batch.put(
            Cf::Doc,
            key(1, vb, &format!("doc{index:05}")),
            index.to_be_bytes().to_vec(),
        );
    }
    source.commit_blocking(batch).expect("commit");
    source.flush().expect("flush");
    // The target already holds another vbucket of its bucket 9.
    let mut batch = Batch::new();
    batch.put(Cf::Doc, key(9, 0, "mine"), b"kept".to_vec());
    batch.put(Cf::Doc, key(9, 2, "mine"), b"kept".to_vec());
    target.commit_blocking(batch).expect("commit");
    let before_target = scan(&target, Cf::Doc, (key(9, 0, ""), key(10, 0, "")));
    // Read through the target before the ingest: nothing of vbucket 1 yet.
    assert_eq!(
        target.get(Cf::Doc, &key(9, 1, "doc00001")).expect("get"),
        None
    );

    let snapshot = source.snapshot();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = scan(&source, Cf::Doc, range(1, 1))
        .into_iter()
        .map(|(key, value)| {
            let mut moved = 9u32.to_be_bytes().to_vec();
            moved.extend_from_slice(&key[4..]);
            (moved, value)
        })
        .collect();
    assert_eq!(expected.len(), 1000);
    // Written after the snapshot: not in the file.
    let mut batch = Batch::new();
    batch.put(Cf::Doc, key(1, 1, "later"), b"late".to_vec());
    batch.delete(Cf::Doc, key(1, 1, "doc00001"));
    source.commit_blocking(batch).expect("commit");

    let (lower, upper) = range(1, 1);
    let path = dirs[2].path().join("doc.sst");
    let file = write_sst(
        &path,
        snapshot.scan(Cf::Doc, &lower, &upper).map(|entry| {
            entry.map(|(key, value)| {
                let mut moved = 9u32.to_be_bytes().to_vec();
                moved.extend_from_slice(&key[4..]);
                (moved, value.to_vec())
            })
        }),
    )
    .expect("written")
    .expect("a file");
    assert_eq!(file.keys, 1000);
    assert!(file.bytes > 0);
    assert_eq!(file.smallest, expected[0].0);
    assert_eq!(file.largest, expected[999].0);
    drop(snapshot);

    target
        .ingest(Cf::Doc, std::slice::from_ref(&file))
        .expect("ingested");
    assert!(!path.exists(), "the file moved into the store");
    assert_eq!(
        scan(&target, Cf::Doc, range(9, 1)),
        expected,
        "the range, whole"
    );
    assert_eq!(
        target.get(Cf::Doc, &key(9, 1, "doc00001")).expect("get"),
        Some(1u32.to_be_bytes().to_vec()),
        "a point read sees it (no stale cache)"
    );
    let mut after_target = scan(&target, Cf::Doc, (key(9, 0, ""), key(10, 0, "")));
    after_target.retain(|(key, _)| key[4..6] != [0, 1]);
    assert_eq!(after_target, before_target, "the target's own data kept");

    // Ingesting the same (now moved) file again is refused.
    match target.ingest(Cf::Doc, &[file]) {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_out_of_order_or_none_make_no_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.sst");
    let entries = [b"b".to_vec(), b"a".to_vec()].map(|key| Ok((key, b"v".to_vec())));
    match write_sst(&path, entries) {
        Err(StoreError::Invalid(reason)) => assert!(reason.contains("rise"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(!path.exists(), "no partial file is left");
    let repeated = [b"a".to_vec(), b"a".to_vec()].map(|key| Ok((key, b"v".to_vec())));
    assert!(write_sst(&path, repeated).is_err());
    assert!(!path.exists());
    assert_eq!(write_sst(&path, std::iter::empty()).expect("empty"), None);
    assert!(!path.exists(), "an empty range makes no file");
}
