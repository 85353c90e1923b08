//! Reading one document: its record, its winner alone (no revision tree decoded), the
//! variants for readers of many documents that skip a record that does not decode, and the
//! document as a view's map function is given it (CouchDB passes `_attachments` stubs,
//! `_conflicts` and `_deleted_conflicts`), read without decoding the whole record when the
//! document has none of them.

use bytes::Bytes;
use settee_storage::Cf;

use crate::bucket::{corrupt_document, Bucket};
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::record::{DocRecord, Header};

impl Bucket {
    /// Reads a document's record as stored (deleted and expired ones included). A record that
    /// does not decode is [`EngineError::CorruptDocument`]; a collection that is not live is
    /// [`EngineError::UnknownCollection`].
    pub fn read_record<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<DocRecord>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        match self.store.get(Cf::Doc, &self.doc_storage_key(key))? {
            Some(raw) => DocRecord::decode(&raw).map(Some).map_err(corrupt_document),
            None => Ok(None),
        }
    }

    /// The winner's header and body bytes, without decoding the revision tree.
    pub fn read_winner<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<(Header, Bytes)>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        match self.store.get(Cf::Doc, &self.doc_storage_key(key))? {
            Some(raw) => {
                let header = Header::decode(&raw).map_err(corrupt_document)?;
                let body = Bytes::copy_from_slice(header.body(&raw).map_err(corrupt_document)?);
                Ok(Some((header, body)))
            }
            None => Ok(None),
        }
    }

    /// [`Bucket::read_record`] for readers of many documents: a record that does not decode is
    /// skipped (counted, logged once) and reads as absent, so the reader goes on with the rest.
    pub fn read_record_or_skip<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<DocRecord>, EngineError> {
        let key = key.into();
        match self.read_record(key) {
            Err(EngineError::CorruptDocument(reason)) => {
                self.skip_corrupt_document(key.key, &reason);
                Ok(None)
            }
            other => other,
        }
    }

    /// [`Bucket::read_winner`] for readers of many documents, like
    /// [`Bucket::read_record_or_skip`].
    pub fn read_winner_or_skip<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<(Header, Bytes)>, EngineError> {
        let key = key.into();
        match self.read_winner(key) {
            Err(EngineError::CorruptDocument(reason)) => {
                self.skip_corrupt_document(key.key, &reason);
                Ok(None)
            }
            other => other,
        }
    }

    /// What a view's map function is given of a document: the winner's header and body, and
    /// the whole record too when the winner has attachments or other leaves exist (for
    /// `_attachments`, `_conflicts` and `_deleted_conflicts`); most documents have neither
    /// and are not decoded further. A record that does not decode reads as absent (counted,
    /// as [`Bucket::read_winner_or_skip`] does).
    pub fn read_for_map<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
    ) -> Result<Option<(Header, Bytes, Option<DocRecord>)>, EngineError> {
        let key = key.into();
        self.check_live(key.collection)?;
        let Some(raw) = self.store.get(Cf::Doc, &self.doc_storage_key(key))? else {
            return Ok(None);
        };
        let read = || -> Result<(Header, Bytes, Option<DocRecord>), settee_record::Corrupt> {
            let header = Header::decode(&raw)?;
            let body = Bytes::copy_from_slice(header.body(&raw)?);
            let (attachments, other_leaves) = header.extras(&raw)?;
            let record = if attachments || other_leaves {
                Some(DocRecord::decode(&raw)?)
            } else {
                None
            };
            Ok((header, body, record))
        };
        match read() {
            Ok(read) => Ok(Some(read)),
            Err(corrupt) => {
                self.skip_corrupt_document(key.key, &corrupt.0);
                Ok(None)
            }
        }
    }
}
