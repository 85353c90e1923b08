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
//!
//! A narrower counter, [`AccessEpoch::accounts`], moves only with the access buckets (their
//! writes, their creation and removal): what depends on accounts alone (verified passwords)
//! need not be re-derived when some database's `_security` changes or a database is created.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct AccessEpoch {
    all: AtomicU64,
    accounts: AtomicU64,
    designs: AtomicU64,
}

impl AccessEpoch {
    /// The current epoch. Read it before reading what a decision depends on.
    pub fn get(&self) -> u64 {
        self.all.load(Ordering::Acquire)
    }

    /// The epoch of the access buckets' contents alone (accounts, passwords, roles).
    pub fn accounts(&self) -> u64 {
        self.accounts.load(Ordering::Acquire)
    }

    /// Moves after every committed write of a design document, in any bucket: what is
    /// derived from design documents (validation functions) is derived again. Read it, with
    /// [`AccessEpoch::get`] (buckets created and dropped), before reading design documents.
    pub fn designs(&self) -> u64 {
        self.designs.load(Ordering::Acquire)
    }

    pub(crate) fn advance_designs(&self) {
        self.designs.fetch_add(1, Ordering::AcqRel);
    }

    /// Something other than accounts changed (a security object, a bucket).
    pub(crate) fn advance(&self) {
        self.all.fetch_add(1, Ordering::AcqRel);
    }

    /// Accounts changed (a write to an access bucket, or one created or dropped).
    pub(crate) fn advance_accounts(&self) {
        self.accounts.fetch_add(1, Ordering::AcqRel);
        self.all.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_move_both_epochs_and_the_rest_only_one() {
        let epoch = AccessEpoch::default();
        let (all, accounts) = (epoch.get(), epoch.accounts());
        epoch.advance();
        assert_ne!(epoch.get(), all);
        assert_eq!(epoch.accounts(), accounts);
        let all = epoch.get();
        epoch.advance_accounts();
        assert_ne!(epoch.get(), all);
        assert_ne!(epoch.accounts(), accounts);
    }
}
