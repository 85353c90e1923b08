//! One collection of a bucket as a unit of reads and writes: what the CouchDB door calls a
//! database, and what a view or Mango index covers. A [`Keyspace`] forwards to the bucket's
//! per-collection operations with its collection id, so a caller cannot mix collection 0's
//! operations into another collection's request by forgetting an argument.

use std::sync::Arc;

use bytes::Bytes;
use settee_revtree::RevId;

use crate::bucket::Bucket;
use crate::change_entry::ChangeEntry;
use crate::changes::ChangeCursor;
use crate::changes_descending::DescendingCursor;
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::local::LocalOutcome;
use crate::read::{DocScan, ScanRange};
use crate::record::{DocRecord, Header};
use crate::seqvec::SeqVector;
use crate::update::{DocUpdate, UpdateOutcome};
use crate::validate::Writer;

/// A bucket and one of its collections (0: `_default._default`). Cheap to clone.
#[derive(Clone)]
pub struct Keyspace {
    bucket: Arc<Bucket>,
    collection: u32,
}

impl Keyspace {
    pub fn new(bucket: Arc<Bucket>, collection: u32) -> Keyspace {
        Keyspace { bucket, collection }
    }

    /// The bucket's `_default._default`.
    pub fn default_of(bucket: Arc<Bucket>) -> Keyspace {
        Keyspace::new(bucket, 0)
    }

    pub fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    pub fn collection(&self) -> u32 {
        self.collection
    }

    /// The CouchDB door's database name (`docs/format/collections.md`): the bucket's name for
    /// `_default._default`, `bucket$scope$collection` otherwise; a collection dropped since
    /// this keyspace was made keeps the bucket's name with its id.
    pub fn name(&self) -> String {
        self.bucket.door_name(self.collection)
    }

    /// Whether the collection is still in the bucket's live manifest.
    pub fn is_live(&self) -> bool {
        self.bucket.is_collection_live(self.collection)
    }

    pub fn key<'k>(&self, key: &'k [u8]) -> DocKey<'k> {
        DocKey::new(self.collection, key)
    }

    /// The collection's `_local` documents, sorted: `(key, generation)`.
    pub fn local_docs(&self) -> Result<Vec<(Vec<u8>, u64)>, EngineError> {
        self.bucket.local_docs_in(self.collection)
    }

    pub fn read_record(&self, key: &[u8]) -> Result<Option<DocRecord>, EngineError> {
        self.bucket.read_record(self.key(key))
    }

    pub fn read_record_or_skip(&self, key: &[u8]) -> Result<Option<DocRecord>, EngineError> {
        self.bucket.read_record_or_skip(self.key(key))
    }

    pub fn read_winner(&self, key: &[u8]) -> Result<Option<(Header, Bytes)>, EngineError> {
        self.bucket.read_winner(self.key(key))
    }

    pub fn read_winner_or_skip(&self, key: &[u8]) -> Result<Option<(Header, Bytes)>, EngineError> {
        self.bucket.read_winner_or_skip(self.key(key))
    }

    /// [`Bucket::read_for_map`] in this collection.
    pub fn read_for_map(
        &self,
        key: &[u8],
    ) -> Result<Option<(Header, Bytes, Option<DocRecord>)>, EngineError> {
        self.bucket.read_for_map(self.key(key))
    }

    /// CouchDB updates by `writer` (validated as theirs; see [`Bucket::update_docs_in`]).
    pub async fn update_docs(
        &self,
        updates: Vec<DocUpdate>,
        new_edits: bool,
        writer: &Writer,
    ) -> Result<Vec<UpdateOutcome>, EngineError> {
        self.bucket
            .update_docs_in(self.collection, updates, new_edits, writer)
            .await
    }

    pub async fn update_doc(
        &self,
        update: DocUpdate,
        new_edits: bool,
        writer: &Writer,
    ) -> Result<UpdateOutcome, EngineError> {
        self.bucket
            .update_doc_in(self.collection, update, new_edits, writer)
            .await
    }

    /// The collection's documents in key order within `range` (its `collection` is set here).
    pub fn scan_docs(&self, range: ScanRange) -> DocScan<'_> {
        self.bucket.scan_docs(ScanRange {
            collection: self.collection,
            ..range
        })
    }

    pub fn get_local(&self, key: &[u8]) -> Result<Option<(u64, Bytes)>, EngineError> {
        self.bucket.get_local(self.key(key))
    }

    pub async fn put_local(
        &self,
        key: &[u8],
        generation: Option<u64>,
        body: Option<Bytes>,
    ) -> Result<LocalOutcome, EngineError> {
        self.bucket.put_local(self.key(key), generation, body).await
    }

    pub fn get_attachment(&self, key: &[u8], md5: &[u8; 16]) -> Result<Option<Bytes>, EngineError> {
        self.bucket.get_attachment(self.key(key), md5)
    }

    pub async fn purge(&self, key: &[u8], revs: &[RevId]) -> Result<Vec<RevId>, EngineError> {
        self.bucket.purge(self.key(key), revs).await
    }

    pub fn changes(&self, since: SeqVector) -> Result<ChangeCursor<'_>, EngineError> {
        self.bucket.changes_in(self.collection, since)
    }

    pub fn changes_descending(
        &self,
        since: SeqVector,
    ) -> Result<DescendingCursor<'_>, EngineError> {
        self.bucket.changes_descending_in(self.collection, since)
    }

    pub fn vbucket_changes(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        self.bucket
            .vbucket_changes_in(self.collection, vbucket, since, limit)
    }

    /// (live documents, deleted documents).
    /// The documents purged after purge sequence `after` up to `until` (`None`: the purge
    /// log no longer reaches back that far; see [`Bucket::purged_since`]).
    pub fn purged_since(
        &self,
        after: u64,
        until: u64,
    ) -> Result<Option<Vec<Vec<u8>>>, EngineError> {
        self.bucket.purged_since(self.collection, after, until)
    }

    pub fn doc_counts(&self) -> Result<(u64, u64), EngineError> {
        self.bucket.doc_counts_in(self.collection)
    }

    /// (live, deleted) documents of the vbuckets `only` marks.
    pub fn doc_counts_only(&self, only: &[bool]) -> Result<(u64, u64), EngineError> {
        self.bucket.doc_counts_only(self.collection, only)
    }

    pub fn record_bytes(&self) -> Result<u64, EngineError> {
        self.bucket.record_bytes_in(self.collection)
    }

    /// The collection's update sequence: per vbucket, its highest durable seqno.
    pub fn high_seqnos(&self) -> Result<SeqVector, EngineError> {
        self.bucket.high_seqnos_in(self.collection)
    }

    pub fn purge_seq(&self) -> Result<u64, EngineError> {
        self.bucket.purge_seq_in(self.collection)
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("bucket", &self.bucket.name())
            .field("collection", &self.collection)
            .finish()
    }
}
