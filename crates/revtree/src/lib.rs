//! CouchDB revision trees: the history of one document as a forest of revision ids.
//!
//! Every write to a CouchDB document names a new revision `pos-hash` ([`RevId`]) whose parent is
//! an existing leaf. Replication copies whole histories across databases, so one document can
//! end up with several leaves (conflicts), each live or deleted, and with several roots once old
//! ancestors are stemmed away. [`RevTree`] stores that forest and answers the questions the
//! document engine and the HTTP door ask: which leaf wins ([`RevTree::winner`]), what the
//! conflicts are, what `_revisions` shows, what `_revs_diff` reports as missing.
//!
//! Key types: [`RevId`] (a revision id), [`Leaf`] (a leaf and its deleted flag), [`RevTree`] (the
//! forest), [`EditError`] (why an interactive edit was refused) and [`DecodeError`].
//!
//! Where to start reading: `tree.rs` holds the representation and the read-only queries;
//! `edit.rs` the two ways a tree grows (`edit` for `new_edits=true`, `merge_path` for
//! replication); `prune.rs` the two ways it shrinks (`stem`, `purge`); `codec.rs` the byte
//! format described in `docs/format/revtree.md`.
//!
//! The crate is pure: no I/O, no clock, no randomness, so every rule is tested directly.
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod codec;
mod edit;
mod prune;
mod rev_id;
mod tree;

pub use codec::{DecodeError, FORMAT_VERSION};
pub use edit::EditError;
pub use rev_id::{Leaf, RevId, REV_HASH_BYTES_MAX, REV_POS_MAX};
pub use tree::RevTree;

/// CouchDB's default `_revs_limit`: how many revisions each root-to-leaf path keeps after
/// stemming unless the database is configured otherwise.
pub const REVS_LIMIT_DEFAULT: usize = 1000;
