//! What a change entry of a vbucket stream carries to a DCP consumer: the document as it is at
//! that seqno (winner's body, xattrs and Couchbase metadata), read from its `doc` record
//! without decoding the revision tree (docs/format/dcp.md).

use bytes::Bytes;
use settee_storage::Cf;

use crate::bucket::{corrupt_document, Bucket};
use crate::change_entry::ChangeEntry;
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::record::Header;

/// A document at the seqno of its change entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamItem {
    pub cas: u64,
    /// The winning revision's generation (Couchbase's rev seqno).
    pub rev_seqno: u64,
    pub deleted: bool,
    pub json: bool,
    pub item_flags: u32,
    /// Absolute Unix seconds, 0 = none.
    pub expiry: u32,
    pub body: Bytes,
    /// The extended attributes as stored: a JSON object, empty when there are none.
    pub xattrs: Bytes,
}

impl Bucket {
    /// The document `entry` names, if its record still holds `entry`'s seqno: `None` when it
    /// was written again (its newer entry follows in the stream), purged, its collection
    /// dropped, or its record does not decode (skipped and counted).
    pub fn stream_item(&self, entry: &ChangeEntry) -> Result<Option<StreamItem>, EngineError> {
        let key = DocKey::new(entry.collection, &entry.key);
        match self.read_stream_item(key, entry) {
            Err(EngineError::UnknownCollection { .. }) => Ok(None),
            Err(EngineError::CorruptDocument(reason)) => {
                self.skip_corrupt_document(&entry.key, &reason);
                Ok(None)
            }
            other => other,
        }
    }

    fn read_stream_item(
        &self,
        key: DocKey<'_>,
        entry: &ChangeEntry,
    ) -> Result<Option<StreamItem>, EngineError> {
        self.check_live(key.collection)?;
        let read = self
            .store
            .get_with(Cf::Doc, &self.doc_storage_key(key), |raw| {
                let header = Header::decode(raw).map_err(corrupt_document)?;
                if header.seqno != entry.seqno {
                    return Ok(None);
                }
                Ok(Some(StreamItem {
                    cas: header.cas,
                    rev_seqno: entry.rev.pos,
                    deleted: header.deleted,
                    json: header.json,
                    item_flags: header.item_flags,
                    expiry: header.expiry,
                    body: Bytes::copy_from_slice(header.body(raw).map_err(corrupt_document)?),
                    xattrs: Bytes::copy_from_slice(header.xattrs(raw).map_err(corrupt_document)?),
                }))
            })?;
        read.transpose().map(Option::flatten)
    }
}
