//! Whether the store can write, and the epoch of failed writes.
//!
//! A write fails in one of two ways:
//! - **the disk is full** (RocksDB `NoSpace`). RocksDB then refuses every write until its
//!   SstFileManager, which polls the free space, resumes the database by itself: it flushes
//!   every memtable and starts a new write-ahead log, so the failed write, which never reached a
//!   memtable, cannot come back later. Until then every write answers [`StoreError::NoSpace`];
//!   the committer sees the end with the next write that succeeds, or with a probe (an empty
//!   synced write) every [`PROBE_INTERVAL`] when no write comes.
//! - **anything else** (an I/O error, corruption): the store is poisoned until it is reopened,
//!   since the log may or may not hold the write.
//!
//! Callers keep in-memory state derived from the writes they staged (the engine's vbucket high
//! seqnos and document counts). After a failed group that state may include writes that never
//! happened. The *epoch* tells them: every failed group commit bumps it, every batch carries
//! the epoch it was staged in, and the committer refuses a batch from an older epoch (it may
//! have been built on the failed one). A caller that sees the epoch move reloads its state from
//! disk before staging again.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::StoreError;

/// How often the committer probes a store whose disk was full, when no write comes to do it.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// What the store can do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreHealth {
    /// Writes succeed.
    Ok,
    /// The last write found the disk full; writes fail until space is freed, then succeed again
    /// without a restart.
    NoSpace,
    /// A write failed for another reason; writes fail until the node is restarted.
    Failed,
}

const OK: u8 = 0;
const NO_SPACE: u8 = 1;
const FAILED: u8 = 2;

pub(crate) struct Health {
    state: AtomicU8,
    /// Failed writes so far; see the module documentation.
    epoch: AtomicU64,
    /// Written once, when the store is poisoned.
    poison_reason: Mutex<Option<String>>,
}

impl Health {
    pub fn new() -> Health {
        Health {
            state: AtomicU8::new(OK),
            epoch: AtomicU64::new(0),
            poison_reason: Mutex::new(None),
        }
    }

    pub fn get(&self) -> StoreHealth {
        match self.state.load(Ordering::Acquire) {
            OK => StoreHealth::Ok,
            NO_SPACE => StoreHealth::NoSpace,
            _ => StoreHealth::Failed,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The error of a store that refuses writes for good, if it does.
    pub fn poisoned(&self) -> Option<StoreError> {
        (self.state.load(Ordering::Acquire) == FAILED)
            .then(|| StoreError::Poisoned(self.poison_reason.lock().clone().unwrap_or_default()))
    }

    /// What a batch staged before the latest failure is answered.
    pub fn refusal(&self) -> StoreError {
        self.poisoned().unwrap_or(StoreError::NoSpace)
    }

    /// Records a failed group commit and returns what its writers are answered. Only the
    /// committer calls it, between two groups: the epoch moves before anyone is answered (a
    /// writer that sees the failure also sees the new epoch), and never while a group is being
    /// written (a caller reloading its state from disk after seeing the epoch move reads every
    /// group written before).
    pub fn commit_failed(&self, error: StoreError) -> StoreError {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.write_failed(error)
    }

    /// Records a failed write that staged nothing on callers' state (an unsynced write), and
    /// returns what its writer is answered.
    pub fn write_failed(&self, error: StoreError) -> StoreError {
        if let Some(poisoned) = self.poisoned() {
            return poisoned;
        }
        if error.is_retryable() {
            if self.state.swap(NO_SPACE, Ordering::AcqRel) == OK {
                tracing::error!(
                    "the disk holding the data directory is full: writes fail until space is freed"
                );
            }
            return error;
        }
        self.poison(error.to_string());
        StoreError::Poisoned(error.to_string())
    }

    pub fn poison(&self, reason: String) {
        let mut slot = self.poison_reason.lock();
        if slot.is_none() {
            tracing::error!(%reason, "store poisoned: writes fail until the node is restarted");
            *slot = Some(reason);
        }
        self.state.store(FAILED, Ordering::Release);
    }

    /// Records a write that reached the disk: the end of a full-disk episode, if one lasted.
    pub fn write_succeeded(&self) {
        if self
            .state
            .compare_exchange(NO_SPACE, OK, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            tracing::warn!("disk space is available again: writes succeed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_passes_and_moves_the_epoch() {
        let health = Health::new();
        assert_eq!(health.get(), StoreHealth::Ok);
        let answer = health.commit_failed(StoreError::NoSpace);
        assert!(matches!(answer, StoreError::NoSpace));
        assert_eq!(health.get(), StoreHealth::NoSpace);
        assert_eq!(health.epoch(), 1);
        assert!(matches!(health.refusal(), StoreError::NoSpace));
        health.write_succeeded();
        assert_eq!(health.get(), StoreHealth::Ok);
        assert_eq!(health.epoch(), 1);
    }

    #[test]
    fn other_failures_poison_for_good() {
        let health = Health::new();
        let answer = health.commit_failed(StoreError::Engine { kind: "IO error" });
        assert!(matches!(answer, StoreError::Poisoned(_)), "{answer:?}");
        assert_eq!(health.get(), StoreHealth::Failed);
        health.write_succeeded();
        assert_eq!(health.get(), StoreHealth::Failed);
        // A full disk afterwards does not hide the poisoning.
        let answer = health.write_failed(StoreError::NoSpace);
        assert!(matches!(answer, StoreError::Poisoned(_)), "{answer:?}");
        assert_eq!(health.get(), StoreHealth::Failed);
    }
}
