//! Per-document write locks: a writer holds the keys it read until its batch is durable, so a
//! read-modify-write of one document cannot interleave with another of the same document.
//!
//! Keys are locked exactly, not by hash stripe. With stripes, a 1,000-document `_bulk_docs`
//! locked ~60% of 1,024 stripes and any two such batches shared one, so concurrent bulk writers
//! of disjoint documents ran one after another through each other's fsync wait. Here only
//! writers of the same document wait for each other.
//!
//! A writer locks its keys in sorted order (two writers sharing several keys cannot deadlock);
//! the guard releases them when dropped, including when the waiting future is cancelled.
//!
//! Split out of settee-engine, which holds one [`KeyLocks`] per bucket.
#![deny(clippy::unwrap_used)]

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Shards of the lock table, each with its own mutex, so writers rarely contend on the table.
const SHARDS: usize = 64;

struct Shard {
    /// Keys held right now -> whether someone is waiting for that key.
    held: Mutex<HashMap<Vec<u8>, bool>>,
    /// Woken when a key someone waits for is released; waiters then look again.
    released: Notify,
}

pub struct KeyLocks {
    shards: Vec<Shard>,
}

/// Holds a set of keys until dropped.
pub struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    keys: Vec<Vec<u8>>,
}

fn shard_of(key: &[u8]) -> usize {
    crc32fast::hash(key) as usize % SHARDS
}

impl Default for KeyLocks {
    fn default() -> KeyLocks {
        KeyLocks::new()
    }
}

impl KeyLocks {
    pub fn new() -> KeyLocks {
        KeyLocks {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    held: Mutex::new(HashMap::new()),
                    released: Notify::new(),
                })
                .collect(),
        }
    }

    /// Locks every key of `keys` (duplicates allowed), waiting for writers that hold any of them.
    pub async fn lock<'a, 'k>(&'a self, keys: impl Iterator<Item = &'k [u8]>) -> KeyGuard<'a> {
        let mut wanted: Vec<&[u8]> = keys.collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut guard = KeyGuard {
            locks: self,
            keys: Vec::with_capacity(wanted.len()),
        };
        for key in wanted {
            self.lock_one(key).await;
            guard.keys.push(key.to_vec());
        }
        guard
    }

    /// Takes `key` if it is free; otherwise marks it as waited for.
    fn try_take(&self, shard: &Shard, key: &[u8]) -> bool {
        let mut held = shard.held.lock();
        match held.get_mut(key) {
            None => {
                held.insert(key.to_vec(), false);
                true
            }
            Some(waited) => {
                *waited = true;
                false
            }
        }
    }

    async fn lock_one(&self, key: &[u8]) {
        let shard = &self.shards[shard_of(key)];
        if self.try_take(shard, key) {
            return;
        }
        loop {
            // Registered before looking, so a release between the look and the wait still
            // wakes this waiter (the releaser sees the waited-for mark set under the lock).
            let released = shard.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.try_take(shard, key) {
                return;
            }
            released.await;
        }
    }

    fn unlock(&self, key: Vec<u8>) {
        let shard = &self.shards[shard_of(&key)];
        let waited = shard.held.lock().remove(&key);
        if waited == Some(true) {
            shard.released.notify_waiters();
        }
    }

    /// Keys held right now (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.held.lock().len())
            .sum()
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        for key in self.keys.drain(..) {
            self.locks.unlock(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn disjoint_keys_do_not_wait_and_shared_keys_do() {
        let locks = KeyLocks::new();
        let first = locks.lock([b"a".as_slice(), b"b", b"a"].into_iter()).await;
        assert_eq!(locks.held(), 2);
        // Disjoint keys: immediately.
        let other = tokio::time::timeout(
            Duration::from_secs(5),
            locks.lock([b"c".as_slice(), b"d"].into_iter()),
        )
        .await
        .expect("disjoint keys must not wait");
        drop(other);
        // A shared key: waits until the first guard is dropped.
        let waiting = locks.lock([b"b".as_slice(), b"z"].into_iter());
        tokio::pin!(waiting);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), waiting.as_mut())
                .await
                .is_err(),
            "a held key must make the second writer wait"
        );
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released keys must wake the waiter");
        assert_eq!(locks.held(), 2);
        drop(second);
        assert_eq!(locks.held(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_releases_what_it_took() {
        let locks = KeyLocks::new();
        let holder = locks.lock([b"m".as_slice()].into_iter()).await;
        // Takes "a", then waits for "m"; cancelled by the timeout.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(20),
            locks.lock([b"a".as_slice(), b"m"].into_iter()),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(locks.held(), 1, "only the holder's key stays locked");
        drop(holder);
        let all = locks.lock([b"a".as_slice(), b"m"].into_iter()).await;
        assert_eq!(locks.held(), 2);
        drop(all);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_writers_of_overlapping_keys_all_finish_and_exclude_each_other() {
        let locks = Arc::new(KeyLocks::new());
        let inside: Arc<Vec<std::sync::atomic::AtomicU32>> =
            Arc::new((0..8).map(|_| Default::default()).collect());
        let mut tasks = Vec::new();
        for writer in 0..16u32 {
            let (locks, inside) = (locks.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..200u32 {
                    // Each writer takes two or three of 8 keys, in varying order.
                    let picks: Vec<usize> = vec![
                        ((writer + round) % 8) as usize,
                        ((writer * 3 + round * 5) % 8) as usize,
                        ((writer * 7 + round) % 8) as usize,
                    ];
                    let names: Vec<Vec<u8>> =
                        picks.iter().map(|pick| vec![b'k', *pick as u8]).collect();
                    let guard = locks.lock(names.iter().map(Vec::as_slice)).await;
                    let mut distinct = picks.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    for pick in &distinct {
                        let before =
                            inside[*pick].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(before, 0, "two writers held key {pick} at once");
                    }
                    tokio::task::yield_now().await;
                    for pick in &distinct {
                        inside[*pick].fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    drop(guard);
                }
            }));
        }
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("no deadlock")
                .expect("writer");
        }
        assert_eq!(locks.held(), 0);
    }
}
