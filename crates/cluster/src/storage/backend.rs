//! Where the Raft group keeps its bytes: a small ordered key-value seam with two
//! implementations. [`StoreBackend`] is settee-storage's `meta` column family under `cluster/`
//! (docs/format/cluster-map.md); [`MemoryBackend`] is an ordered map that a simulation keeps
//! across a node's crash and restart, so the same Raft storage code runs in both.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use settee_storage::{Batch, Cf, Store, StoreError};

/// The prefix of every key the cluster keeps in the `meta` column family.
pub const KEY_PREFIX: &[u8] = b"cluster/";

/// One write of an atomic batch; keys are relative to [`KEY_PREFIX`].
#[derive(Clone, Debug)]
pub enum Write {
    Put(Vec<u8>, Vec<u8>),
    /// Deletes every key `k` with `from <= k < to`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

pub type WriteFuture = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>;

/// An ordered key-value store whose [`Backend::write`] is atomic and durable when it resolves.
pub trait Backend: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Entries with `from <= key < to`, in key order.
    fn scan(&self, from: &[u8], to: &[u8]) -> Result<Vec<Pair>, StoreError>;
    /// The last entry with `from <= key < to`.
    fn last(&self, from: &[u8], to: &[u8]) -> Result<Option<Pair>, StoreError>;
    fn write(&self, writes: Vec<Write>) -> WriteFuture;
}

/// settee-storage's `meta` column family; writes are group-committed and fsynced.
pub struct StoreBackend {
    store: Arc<Store>,
}

impl StoreBackend {
    pub fn new(store: Arc<Store>) -> StoreBackend {
        StoreBackend { store }
    }
}

fn prefixed(key: &[u8]) -> Vec<u8> {
    [KEY_PREFIX, key].concat()
}

impl Backend for StoreBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.get(Cf::Meta, &prefixed(key))
    }

    fn scan(&self, from: &[u8], to: &[u8]) -> Result<Vec<Pair>, StoreError> {
        self.store
            .scan(Cf::Meta, &prefixed(from), &prefixed(to), false)
            .map(|entry| entry.map(|(key, value)| (key[KEY_PREFIX.len()..].to_vec(), value.into())))
            .collect()
    }

    fn last(&self, from: &[u8], to: &[u8]) -> Result<Option<Pair>, StoreError> {
        Ok(self
            .store
            .last_in_range(Cf::Meta, &prefixed(from), &prefixed(to))?
            .map(|(key, value)| (key[KEY_PREFIX.len()..].to_vec(), value.into())))
    }

    fn write(&self, writes: Vec<Write>) -> WriteFuture {
        let mut batch = Batch::new();
        for write in writes {
            match write {
                Write::Put(key, value) => batch.put(Cf::Meta, prefixed(&key), value),
                Write::DeleteRange(from, to) => {
                    batch.delete_range(Cf::Meta, prefixed(&from), prefixed(&to))
                }
            }
        }
        Box::pin(self.store.commit(batch))
    }
}

/// An in-memory ordered map. Cloning shares it: a simulated node's storage outlives the node.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    // One lock for the whole map: writes are whole batches, and the simulation is one thread.
    entries: Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl Backend for MemoryBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.entries.lock().get(key).cloned())
    }

    fn scan(&self, from: &[u8], to: &[u8]) -> Result<Vec<Pair>, StoreError> {
        if from >= to {
            return Ok(Vec::new());
        }
        Ok(self
            .entries
            .lock()
            .range(from.to_vec()..to.to_vec())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect())
    }

    fn last(&self, from: &[u8], to: &[u8]) -> Result<Option<Pair>, StoreError> {
        if from >= to {
            return Ok(None);
        }
        Ok(self
            .entries
            .lock()
            .range(from.to_vec()..to.to_vec())
            .next_back()
            .map(|(key, value)| (key.clone(), value.clone())))
    }

    fn write(&self, writes: Vec<Write>) -> WriteFuture {
        let mut entries = self.entries.lock();
        for write in writes {
            match write {
                Write::Put(key, value) => {
                    entries.insert(key, value);
                }
                Write::DeleteRange(from, to) => {
                    if from < to {
                        let doomed: Vec<Vec<u8>> = entries
                            .range(from..to)
                            .map(|(key, _)| key.clone())
                            .collect();
                        for key in doomed {
                            entries.remove(&key);
                        }
                    }
                }
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
