//! The access epoch: a node-wide counter that moves whenever something that decides who may do
//! what may have changed.
//!
//! It moves when a bucket's security object is written, when a bucket is created or dropped,
//! and after every committed write to a bucket named in [`crate::EngineOptions::access_buckets`]
//! (CouchDB's `_users`: accounts, passwords, roles). The front doors cache what they decided
//! about a user (verified credentials, a connection's rights on its bucket) stamped with the
//! epoch they read *before* deciding, and decide again when it has moved: one atomic load per
//! request instead of re-reading documents, and a revocation takes effect on the very next
//! request on every door.
//!
//! The epoch moves after the change is durable and visible and before the writer is answered,
//! so a client that saw its change acknowledged never meets a decision older than it.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct AccessEpoch(AtomicU64);

impl AccessEpoch {
    /// The current epoch. Read it before reading what a decision depends on.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn advance(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_the_epoch() {
        let epoch = AccessEpoch::default();
        let before = epoch.get();
        epoch.advance();
        assert_ne!(epoch.get(), before);
    }
}
