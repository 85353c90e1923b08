//! The `doc` row cache never answers with an older value than RocksDB holds, whatever
//! mix of writes, deletes, range deletes and concurrent readers.
use std::sync::Arc;

use settee_storage::{Batch, Cf, Store, StoreOptions};

fn store_with_cache(dir: &std::path::Path, row_cache_bytes: usize) -> Store {
    let options = StoreOptions {
        row_cache_bytes,
        ..StoreOptions::default()
    };
    Store::open(dir, &options).expect("open")
}

fn get(store: &Store, key: &[u8]) -> Option<Vec<u8>> {
    store.get(Cf::Doc, key).expect("get")
}

#[test]
fn reads_follow_puts_deletes_and_range_deletes() {
    for row_cache_bytes in [0, 1 << 20] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = store_with_cache(dir.path(), row_cache_bytes);
        let mut batch = Batch::new();
        for key in ["a1", "b1", "b2", "c1"] {
            batch.put(Cf::Doc, key, format!("{key}-v1"));
        }
        store.commit_blocking(batch).expect("commit");
        // Read every key once so that the cache holds them all.
        for key in ["a1", "b1", "b2", "c1"] {
            assert_eq!(
                get(&store, key.as_bytes()),
                Some(format!("{key}-v1").into_bytes())
            );
        }
        let mut batch = Batch::new();
        batch.put(Cf::Doc, "a1", "a1-v2");
        batch.delete(Cf::Doc, "c1");
        batch.delete_range(Cf::Doc, "b", "c");
        store.commit_blocking(batch).expect("commit");
        assert_eq!(get(&store, b"a1"), Some(b"a1-v2".to_vec()));
        assert_eq!(get(&store, b"b1"), None);
        assert_eq!(get(&store, b"b2"), None);
        assert_eq!(get(&store, b"c1"), None);
        // The pinned-read API goes through the same cache.
        let length = store
            .get_with(Cf::Doc, b"a1", |value| value.len())
            .expect("get");
        assert_eq!(length, Some(5));
    }
}

#[test]
fn readers_racing_writers_never_go_back_in_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(store_with_cache(dir.path(), 1 << 20));
    const KEYS: u64 = 8;
    const ROUNDS: u64 = 300;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = [0u64; KEYS as usize];
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    for key in 0..KEYS {
                        let value = get(&store, format!("k{key}").as_bytes())
                            .map(|raw| String::from_utf8(raw).expect("utf8"))
                            .map_or(0, |text| text.parse::<u64>().expect("number"));
                        assert!(value >= seen[key as usize], "key {key} went back in time");
                        seen[key as usize] = value;
                    }
                }
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        let mut batch = Batch::new();
        for key in 0..KEYS {
            batch.put(Cf::Doc, format!("k{key}"), round.to_string());
        }
        store.commit_blocking(batch).expect("commit");
        // Every acknowledged write is visible at once.
        for key in 0..KEYS {
            assert_eq!(
                get(&store, format!("k{key}").as_bytes()),
                Some(round.to_string().into_bytes())
            );
        }
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for reader in readers {
        reader.join().expect("reader");
    }
}
