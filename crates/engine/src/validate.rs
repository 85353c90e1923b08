//! Write validation (CouchDB's `validate_doc_update`), as a hook the engine calls.
//!
//! The engine does not know JavaScript or design documents. It knows that a
//! [`WriteValidator`] may be registered ([`crate::Engine::set_write_validator`]; the views crate
//! registers the one that runs design documents' `validate_doc_update` functions), and it asks
//! it about every document write of a CouchDB update ([`crate::Bucket::update_docs_in`]) and of
//! the KV door, under the key's lock, after the write is planned and before it is staged:
//! every write path of both doors passes here, so none can skip validation. A refused write
//! becomes [`crate::UpdateOutcome::Forbidden`] or [`crate::UpdateOutcome::Unauthorized`] and
//! the others of its batch go on.
//!
//! As in CouchDB, design documents and `_local` documents are not validated by these
//! functions (the doors allow design documents to database admins only), and a keyspace
//! without validation functions pays one cache lookup per batch
//! ([`WriteValidator::active`]).

use std::future::Future;
use std::pin::Pin;

use std::sync::Arc;

use crate::record::{DocRecord, Leaf};
use crate::{Bucket, DocKey, RevId};

/// Who is writing, as the doors authenticated them: CouchDB's `userCtx`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Writer {
    pub name: Option<String>,
    pub roles: Vec<String>,
}

impl Writer {
    /// The node itself (maintenance, internal documents): a server admin without a name.
    pub fn system() -> Writer {
        Writer {
            name: None,
            roles: vec!["_admin".to_string()],
        }
    }
}

/// One planned document write, as a validation function sees it.
#[derive(Debug)]
pub struct ProposedWrite<'a> {
    /// The document id (its key in the collection).
    pub key: &'a [u8],
    /// The revision being written: its id, deleted flag, body and attachments.
    pub new: &'a Leaf,
    /// The new revision's history, newest first (CouchDB's `_revisions`).
    pub history: Vec<RevId>,
    /// The revision it replaces (the parent of an edit, the nearest ancestor a replicated
    /// revision has here); `None` for a new document, and for a deleted one re-created.
    pub old: Option<&'a Leaf>,
}

/// Why a validation function refused a write: what it threw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `throw({forbidden: reason})`: 403.
    Forbidden(String),
    /// `throw({unauthorized: reason})`: 401.
    Unauthorized(String),
    /// Anything else thrown, or the function could not run (CouchDB's `unknown_error`, 500):
    /// a write is never let through because its validation failed to run.
    Failed(String),
}

/// The future of one validation.
pub type Verdict<'a> = Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>>;

/// Decides whether writes may be made; see the module documentation.
pub trait WriteValidator: Send + Sync {
    /// Whether any write to collection `collection` of `bucket` is validated. Called once
    /// per batch on every write path, so it must be cheap when the answer is no.
    fn active(&self, bucket: &Bucket, collection: u32) -> bool;

    /// The verdict on one write by `writer`.
    fn validate<'a>(
        &'a self,
        bucket: &'a Bucket,
        collection: u32,
        writer: &'a Writer,
        write: ProposedWrite<'a>,
    ) -> Verdict<'a>;
}

/// The node's validator, if one is registered.
pub(crate) type ValidatorSlot = parking_lot::RwLock<Option<std::sync::Arc<dyn WriteValidator>>>;

/// Whether `key` names a document validation functions never see.
pub(crate) fn exempt(key: &[u8]) -> bool {
    key.starts_with(b"_design/") || key.starts_with(b"_local/")
}

impl Bucket {
    /// The node's validator when writes to `collection` are validated.
    pub(crate) fn validator_for(&self, collection: u32) -> Option<Arc<dyn WriteValidator>> {
        self.validator
            .read()
            .clone()
            .filter(|validator| validator.active(self, collection))
    }

    /// Asks `validator` about writing revision `new` of `key` over `current`: `history` is
    /// the new revision's ancestry, newest first, and the old document is the nearest
    /// ancestor that is a leaf of `current`.
    pub(crate) async fn validate_leaf(
        &self,
        validator: &dyn WriteValidator,
        key: DocKey<'_>,
        writer: &Writer,
        new: &Leaf,
        history: Vec<RevId>,
        current: Option<&DocRecord>,
    ) -> Result<(), Refusal> {
        if exempt(key.key) {
            return Ok(());
        }
        // A deleted ancestor is no old document: re-creating a deleted document validates
        // with `oldDoc` null, as CouchDB validates it ("reuse existing deleted doc").
        let old = current
            .and_then(|record| history.iter().skip(1).find_map(|rev| record.leaf(rev)))
            .filter(|leaf| !leaf.deleted);
        let write = ProposedWrite {
            key: key.key,
            new,
            history,
            old,
        };
        validator
            .validate(self, key.collection, writer, write)
            .await
    }

    /// [`Bucket::validate_leaf`] for a planned single-document record whose winner is `rev`
    /// (KV and sub-document mutations); `Ok` at once when nothing validates the collection.
    pub(crate) async fn validate_record(
        &self,
        key: DocKey<'_>,
        writer: &Writer,
        record: &DocRecord,
        rev: &RevId,
        current: Option<&DocRecord>,
    ) -> Result<(), Refusal> {
        self.designs_current().await;
        let Some(validator) = self.validator_for(key.collection) else {
            return Ok(());
        };
        let Some(new) = record.leaf(rev) else {
            return Ok(());
        };
        let history = record.tree.path(rev).unwrap_or_else(|| vec![rev.clone()]);
        self.validate_leaf(validator.as_ref(), key, writer, new, history, current)
            .await
    }
}
