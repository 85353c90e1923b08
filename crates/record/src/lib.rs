//! What the engine stores of one document, and the small values around it, as bytes: the
//! document record (its revision tree, bodies, attachments, CAS, flags and expiry; its
//! encoding in docs/format/document.md), sequence vectors (the opaque `update_seq` strings),
//! keys with their collection, the hybrid logical clock that makes CAS values, the virtual
//! extended attributes of sub-document lookups, and the purge marker a purged document leaves
//! in its vbucket's change stream. Pure data: no storage, no I/O, so that the
//! engine, replicas and exports share one definition of the formats.
#![deny(clippy::unwrap_used)]

pub mod clock;
pub mod doc_key;
pub mod old_rev;
pub mod purge_marker;
pub mod record;
pub mod seqvec;
pub mod vattr;
pub mod xattrs;

/// Bytes that do not decode as what they should be (a record, a header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);
