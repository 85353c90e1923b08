//! Background and administrative work on a bucket: compaction (including attachment garbage
//! collection), purge, and the expiry purger.

use std::collections::HashSet;

use settee_revtree::RevId;
use settee_storage::{Batch, Cf};

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::change_entry::{ChangeEntry, StoredEntry};
use crate::changes::{scan_doc_seqnos, LowestSeqnos};
use crate::collections::Liveness;
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::keys;

/// Purge log entries kept per collection (partitions.md).
pub const PURGE_LOG_KEEP: u64 = 10_000;
use crate::kv::KvMutation;
use crate::record::DocRecord;
use crate::skips::SkippedRecord;

/// Attachment keys deleted per batch during compaction.
const GC_BATCH: usize = 1024;
/// Documents whose change entries compaction rewrites per batch (their key locks are held
/// while the batch commits).
const ABBREVIATE_BATCH: usize = 256;
/// Documents one pass over a vbucket's `doc` range plans at most (a larger vbucket takes
/// further passes, each continuing from the highest seqno planned).
const ABBREVIATE_WINDOW: usize = 1 << 18;

/// A bucket's bytes on disk, as CouchDB's `sizes` report them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskSizes {
    /// Everything the bucket's data takes on disk, garbage included.
    pub file: u64,
    /// The live part of `file` (what a compaction would leave), dropped collections excluded.
    pub active: u64,
    /// The part of `file` dropped collections hold until the purger removes it.
    pub pending_purge: u64,
}

/// What one compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Attachment bodies no leaf revision referenced, deleted.
    pub attachment_bodies_removed: u64,
    /// Change entries rewritten to name their document by a (new) id prefix.
    pub change_entries_abbreviated: u64,
    /// Old revision bodies (no longer leaves) deleted.
    pub old_revisions_removed: u64,
    /// Purge markers old enough and acknowledged by every replica, deleted (replica.md).
    pub purge_markers_removed: u64,
}

impl Bucket {
    /// Compacts the bucket: removes attachment bodies no leaf references, abbreviates change
    /// entries, deletes purge markers that have aged out, then asks RocksDB to rewrite the
    /// bucket's ranges so overwritten and deleted entries leave the disk, and flushes every
    /// memtable so no write-ahead log is kept for data already in SST files.
    pub async fn compact(&self) -> Result<CompactionReport, EngineError> {
        use std::sync::atomic::Ordering;
        if self.compacting.swap(true, Ordering::AcqRel) {
            // Already running: CouchDB also answers a second request without starting another.
            return Ok(CompactionReport::default());
        }
        let result = self.compact_now().await;
        self.compacting.store(false, Ordering::Release);
        result
    }

    /// [`Bucket::compact`] for a caller that answers before the work is done (`POST
    /// /db/_compact` answers 202): `compact_running` is true from this call on, not from the
    /// first poll of the returned future, so a client polling `GET /db` right after the 202
    /// never sees a compaction as finished before it began.
    pub fn start_compaction(
        self: std::sync::Arc<Self>,
    ) -> impl std::future::Future<Output = Result<CompactionReport, EngineError>> + Send + 'static
    {
        use std::sync::atomic::Ordering;
        let started = !self.compacting.swap(true, Ordering::AcqRel);
        async move {
            if !started {
                return Ok(CompactionReport::default());
            }
            let result = self.compact_now().await;
            self.compacting.store(false, Ordering::Release);
            result
        }
    }

    async fn compact_now(&self) -> Result<CompactionReport, EngineError> {
        let mut batch = Batch::new();
        let (lower, upper) = keys::bucket_range(self.id);
        // The digests the current document's leaves reference; `None` keeps every body of a
        // document whose record does not decode (its references are unknown).
        let mut referenced: Option<(DocumentId, Option<Digests>)> = None;
        let mut stale = Vec::new();
        let mut old_revisions = Vec::new();
        // Both key forms are in the bucket's range; collections that are not live are left to
        // the drop purger.
        let mut view = self.collections_view();
        for item in self.store.scan(Cf::Att, &lower, &upper, false) {
            let (raw_key, _) = item?;
            if let Some((_, cid, _, _)) = keys::parse_old_rev_key(&raw_key) {
                // CouchDB's compaction keeps only leaves' bodies.
                if view.classify(self, cid) == Liveness::Live {
                    old_revisions.push(raw_key.to_vec());
                }
                continue;
            }
            let Some((_, cid, key, md5)) = keys::parse_att_key(&raw_key) else {
                continue;
            };
            if view.classify(self, cid) != Liveness::Live {
                continue;
            }
            let document = DocKey::new(cid, key);
            if referenced
                .as_ref()
                .is_none_or(|((held_cid, held), _)| *held_cid != cid || held != key)
            {
                let digests = match self.read_record(document) {
                    Ok(Some(record)) => Some(
                        record
                            .leaves
                            .iter()
                            .flat_map(|leaf| leaf.attachments.iter().map(|meta| meta.md5))
                            .collect(),
                    ),
                    Ok(None) => Some(HashSet::new()),
                    Err(EngineError::CorruptDocument(reason)) => {
                        self.skip_corrupt_document(key, &reason);
                        None
                    }
                    Err(error) => return Err(error),
                };
                referenced = Some(((cid, key.to_vec()), digests));
            }
            if referenced.as_ref().is_some_and(|(_, digests)| {
                digests
                    .as_ref()
                    .is_some_and(|digests| !digests.contains(&md5))
            }) {
                stale.push(raw_key.to_vec());
            }
        }
        for chunk in old_revisions.chunks(GC_BATCH) {
            for key in chunk {
                batch.delete(Cf::Att, key.clone());
            }
            self.store.commit(std::mem::take(&mut batch)).await?;
        }
        // Old revisions a write kept after the scan passed them stay until the next
        // compaction, and so do the attachment bodies they reference.
        let stale = self.unreferenced_by_old_revisions(stale)?;
        for chunk in stale.chunks(GC_BATCH) {
            for key in chunk {
                batch.delete(Cf::Att, key.clone());
            }
            self.store.commit(std::mem::take(&mut batch)).await?;
        }
        let change_entries_abbreviated = self.abbreviate_change_entries().await?;
        let purge_markers_removed = self.age_out_purge_markers().await?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            for cf in [Cf::Doc, Cf::Seq, Cf::Att, Cf::Exp, Cf::Local] {
                store.compact(cf, &lower, &upper);
            }
            // Compacting a range flushes only its own family's memtable; `meta` (written with
            // every batch) and `view` would otherwise keep the write-ahead log alive.
            store.flush()
        })
        .await
        .map_err(|error| EngineError::Invalid(format!("compaction task: {error}")))??;
        Ok(CompactionReport {
            attachment_bodies_removed: stale.len() as u64,
            change_entries_abbreviated,
            old_revisions_removed: old_revisions.len() as u64,
            purge_markers_removed,
        })
    }

    /// Rewrites change entries to name their documents by the shortest id prefix that tells
    /// each apart from its neighbours in id order (version 2 entries, docs/format/keys.md).
    /// Returns how many entries it rewrote.
    ///
    /// The prefix lengths come from one pass over a vbucket's `doc` range (id order); the
    /// entries are then rewritten in seqno order, so each batch's reads of the `seq` range hit
    /// a few neighbouring blocks instead of one block per entry.
    async fn abbreviate_change_entries(&self) -> Result<u64, EngineError> {
        let mut rewritten = 0;
        let collections = self.manifest().collection_ids();
        for vbucket in 0..self.vbuckets {
            for &cid in &collections {
                rewritten += self.abbreviate_collection(vbucket, cid).await?;
            }
        }
        Ok(rewritten)
    }

    /// [`Bucket::abbreviate_change_entries`] of one collection in one vbucket: prefixes are
    /// planned against the neighbours in the collection's own `doc` sub-range, where readers
    /// resolve them.
    async fn abbreviate_collection(&self, vbucket: u16, cid: u32) -> Result<u64, EngineError> {
        let mut rewritten = 0;
        let mut after = 0;
        loop {
            let (store, bucket_id) = (self.store.clone(), self.id);
            let (plan, complete, bad) = tokio::task::spawn_blocking(move || {
                abbreviation_plan(&store, bucket_id, vbucket, cid, after, ABBREVIATE_WINDOW)
            })
            .await
            .map_err(|error| EngineError::Invalid(format!("compaction task: {error}")))??;
            for (id, error) in bad {
                self.skip(SkippedRecord::Document, vbucket, &id, &error);
            }
            for batch in plan.chunks(ABBREVIATE_BATCH) {
                rewritten += self.rewrite_change_entries(vbucket, cid, batch).await?;
            }
            match plan.last() {
                Some(last) if !complete => after = last.seqno,
                _ => break,
            }
        }
        Ok(rewritten)
    }

    /// Under the documents' key locks, re-encodes each planned document's change entry with its
    /// id cut to the planned length, if it still has the entry the plan saw (a write since then
    /// replaced it, and seqnos are never reused) and the stored bytes differ.
    async fn rewrite_change_entries(
        &self,
        vbucket: u16,
        cid: u32,
        plan: &[Abbreviation],
    ) -> Result<u64, EngineError> {
        let _guards = self
            .lock_keys(plan.iter().map(|planned| DocKey::new(cid, &planned.id)))
            .await;
        let seq_keys: Vec<Vec<u8>> = plan
            .iter()
            .map(|planned| keys::seq_key(self.id, vbucket, planned.seqno))
            .collect();
        let stored = self.store.multi_get(Cf::Seq, &seq_keys)?;
        let mut batch = Batch::new();
        let mut rewritten = 0;
        for ((planned, seq_key), stored) in plan.iter().zip(seq_keys).zip(stored) {
            let Some(stored) = stored else { continue };
            // An entry that does not decode is left as it is (feeds skip it).
            let Some((mut entry, _)) = ChangeEntry::decode(vbucket, planned.seqno, &stored) else {
                continue;
            };
            if entry.collection != cid {
                continue;
            }
            entry.key = planned.id.clone();
            let wanted = entry.encode_abbreviated(planned.prefix_len);
            if wanted != stored {
                batch.put(Cf::Seq, seq_key, wanted);
                rewritten += 1;
            }
        }
        if rewritten > 0 {
            // Not fsynced: an abbreviated entry says what the whole one said, so losing it in a
            // crash loses nothing (a later synced write makes it durable with the WAL anyway).
            self.store.write_unsynced(batch)?;
        }
        Ok(rewritten)
    }

    /// Removes leaf revisions for good (CouchDB `_purge`). A document left with no leaf
    /// disappears entirely, from changes too: its entry gives way to a purge marker at a new
    /// seqno, which feeds skip and replicas apply (replica.md). Returns the revisions purged.
    ///
    /// A document whose stored record does not decode (issue 18: nothing can tell its leaves)
    /// is removed whole when at least one revision is named, whatever revisions they are: the
    /// documented way for an admin to get rid of it. They are returned as purged.
    pub async fn purge<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        revs: &[RevId],
    ) -> Result<Vec<RevId>, EngineError> {
        let key = key.into();
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let mut record = match self.read_record(key) {
            Ok(Some(record)) => record,
            Ok(None) => return Ok(Vec::new()),
            Err(EngineError::CorruptDocument(_)) if revs.is_empty() => return Ok(Vec::new()),
            Err(EngineError::CorruptDocument(reason)) => {
                tracing::warn!(
                    bucket = %self.name,
                    collection = key.collection,
                    key = %String::from_utf8_lossy(key.key),
                    %reason,
                    "purging a document whose record does not decode"
                );
                self.remove_undecodable(key).await?;
                return Ok(revs.to_vec());
            }
            Err(error) => return Err(error),
        };
        let previous = Previous::of(&record);
        let before = record.tree.clone();
        let purged = record.tree.purge(revs);
        if purged.is_empty() {
            return Ok(purged);
        }
        record.normalise_leaves();
        let old_revisions = crate::old_revs::OldRevisions {
            keep: Vec::new(),
            drop: before
                .revs()
                .filter(|rev| !record.tree.contains(rev))
                .cloned()
                .collect(),
        };
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key.key),
            collection: key.collection,
            key: key.key.to_vec(),
            previous: Some(previous),
            record: (!record.leaves.is_empty()).then_some(record),
            new_attachments: Vec::new(),
            macro_nonce: None,
            apply_max_ttl: false,
            old_revisions,
        }];
        self.commit_purge(key.collection, &mut writes).await?;
        Ok(purged)
    }

    /// Commits a purge's writes with the collection's purge sequence raised by one, in the same
    /// batch; `purge_lock` is held across the commit so the stored value never goes backwards.
    async fn commit_purge(&self, cid: u32, writes: &mut [PlannedWrite]) -> Result<(), EngineError> {
        let _purging = self.purge_lock.lock().await;
        let next = self.purge_seq_of(cid) + 1;
        let mut counter = Batch::new();
        let key = if cid == 0 {
            keys::meta::bucket_purge_seq(self.id)
        } else {
            keys::meta::collection_purge_seq(self.id, cid)
        };
        counter.put(Cf::Meta, key, next.to_be_bytes().to_vec());
        // The purge log (partitions.md): what indexes catch up from, the last
        // PURGE_LOG_KEEP purges of the collection.
        // A purge is one document's write.
        if let Some(write) = writes.first() {
            counter.put(
                Cf::Meta,
                keys::meta::purge_log(self.id, cid, next),
                write.key.clone(),
            );
        }
        if let Some(old) = next.checked_sub(PURGE_LOG_KEEP) {
            counter.delete(Cf::Meta, keys::meta::purge_log(self.id, cid, old));
        }
        self.commit_writes_with(writes, counter).await?;
        if cid == 0 {
            self.purge_seq
                .store(next, std::sync::atomic::Ordering::Release);
        } else {
            self.collection_purge_seqs.lock().insert(cid, next);
        }
        Ok(())
    }

    /// The documents purged from collection `cid` after purge sequence `after`, up to
    /// `until`, in purge order (partitions.md); `None` when the log no longer reaches back to
    /// `after` (an index that far behind rebuilds).
    pub fn purged_since(
        &self,
        cid: u32,
        after: u64,
        until: u64,
    ) -> Result<Option<Vec<Vec<u8>>>, EngineError> {
        if after >= until {
            return Ok(Some(Vec::new()));
        }
        let lower = keys::meta::purge_log(self.id, cid, after + 1);
        let upper = keys::meta::purge_log(self.id, cid, until + 1);
        let mut expected = after + 1;
        let mut purged = Vec::new();
        for item in self.store.scan(Cf::Meta, &lower, &upper, false) {
            let (key, doc_key) = item?;
            let at = key
                .len()
                .checked_sub(8)
                .and_then(|start| key.get(start..))
                .and_then(|bytes| bytes.try_into().ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| EngineError::Corrupt("purge log key".into()))?;
            if at != expected {
                return Ok(None);
            }
            expected += 1;
            purged.push(doc_key.into_vec());
        }
        Ok((expected == until + 1).then_some(purged))
    }

    fn purge_seq_of(&self, cid: u32) -> u64 {
        if cid == 0 {
            self.purge_seq()
        } else {
            self.collection_purge_seqs
                .lock()
                .get(&cid)
                .copied()
                .unwrap_or(0)
        }
    }

    /// How many purges collection `cid` has seen (CouchDB `purge_seq` of its database).
    pub fn purge_seq_in(&self, cid: u32) -> Result<u64, EngineError> {
        self.check_live(cid)?;
        Ok(self.purge_seq_of(cid))
    }

    /// Removes the record of `key`, which does not decode, with its change entry, expiry entry
    /// and attachment bodies, as one purge. Callers hold the key lock. When the record's header
    /// decodes (0.1.0's empty trees) it names the change entry and the counts to adjust;
    /// otherwise a scan of the vbucket's change stream finds the entry naming `key` (an expiry
    /// entry, unknown then, stays: it only costs the expiry purger a lookup that finds nothing).
    async fn remove_undecodable(&self, key: DocKey<'_>) -> Result<(), EngineError> {
        let vbucket = self.vbucket_of(key.key);
        let raw = self
            .store
            .get(Cf::Doc, &self.doc_storage_key(key))?
            .unwrap_or_default();
        let previous = crate::record::Header::decode(&raw)
            .ok()
            .map(|header| Previous {
                seqno: header.seqno,
                expiry: header.expiry,
                deleted: header.deleted,
                record_bytes: raw.len() as u64,
            });
        let mut previous = previous;
        if previous.is_none() {
            // The change entry says the seqno and the deleted flag the record would have.
            let (lower, upper) = keys::vb_range(self.id, vbucket);
            for item in self.store.scan(Cf::Seq, &lower, &upper, false) {
                let (seq_key, value) = item?;
                let entry = keys::seqno_of_seq_key(&seq_key)
                    .and_then(|seqno| StoredEntry::decode(vbucket, seqno, &value));
                let Some(StoredEntry::Change(entry, false)) = entry else {
                    continue;
                };
                if entry.key == key.key && entry.collection == key.collection {
                    previous = Some(Previous {
                        seqno: entry.seqno,
                        expiry: 0,
                        deleted: entry.deleted,
                        record_bytes: raw.len() as u64,
                    });
                }
            }
        }
        let mut writes = [PlannedWrite {
            vbucket,
            collection: key.collection,
            key: key.key.to_vec(),
            previous,
            record: None,
            new_attachments: Vec::new(),
            macro_nonce: None,
            apply_max_ttl: false,
            old_revisions: Default::default(),
        }];
        self.commit_purge(key.collection, &mut writes).await
    }

    /// Deletes every document of this bucket's live collections whose expiry has passed;
    /// returns how many.
    pub async fn purge_expired(&self) -> Result<usize, EngineError> {
        let now = self.now_secs();
        let mut due: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut view = self.collections_view();
        // A replica's expiry tombstones come from its active (replica.md).
        for vbucket in (0..self.vbuckets).filter(|vb| self.check_active(*vb).is_ok()) {
            self.collect_expired(vbucket, 0, now, &mut due)?;
            // The long range, from collection to collection: a seek finds the next collection
            // with entries, its due entries are read, then the seek steps past it.
            let (mut lower, upper) = keys::long_range(self.id, vbucket);
            loop {
                let next = match self.store.scan(Cf::Exp, &lower, &upper, false).next() {
                    Some(item) => item?.0,
                    None => break,
                };
                let Some((_, cid, _)) = keys::split_prefix(&next) else {
                    // A damaged key: step over it.
                    lower = next.to_vec();
                    lower.push(0);
                    continue;
                };
                if view.classify(self, cid) == Liveness::Live {
                    self.collect_expired(vbucket, cid, now, &mut due)?;
                }
                lower = keys::coll_range(self.id, vbucket, cid).1;
            }
        }
        let mut expired = 0;
        for (cid, key) in due {
            match self.expire_one(DocKey::new(cid, &key)).await {
                Ok(true) => expired += 1,
                Ok(false) => {}
                // Dropped since the scan: its data goes with the collection.
                Err(EngineError::UnknownCollection { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(expired)
    }

    /// Adds collection `cid`'s documents in `vbucket` whose expiry is at or before `now`.
    fn collect_expired(
        &self,
        vbucket: u16,
        cid: u32,
        now: u32,
        due: &mut Vec<(u32, Vec<u8>)>,
    ) -> Result<(), EngineError> {
        let lower = keys::exp_key(self.id, vbucket, cid, 1, b"");
        let upper = keys::exp_key(self.id, vbucket, cid, now.saturating_add(1), b"");
        for item in self.store.scan(Cf::Exp, &lower, &upper, false) {
            let (raw_key, _) = item?;
            if let Some((_, key)) = keys::parse_exp_key(&raw_key) {
                due.push((cid, key.to_vec()));
            }
        }
        Ok(())
    }

    /// Turns an expired document into a deletion (a new tombstone revision), re-checking under
    /// the key lock that it is still expired.
    async fn expire_one(&self, key: DocKey<'_>) -> Result<bool, EngineError> {
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let record = match self.read_record_or_skip(key)? {
            Some(record) => record,
            // Absent, or a record that does not decode (counted and left to an admin).
            None => return Ok(false),
        };
        if record.expiry == 0 || !self.is_expired(record.expiry) {
            return Ok(false);
        }
        if record.is_deleted() {
            return Ok(false);
        }
        let mut tombstone: DocRecord = record.clone();
        let parent = tombstone.winner().map(|leaf| leaf.rev.clone());
        // A winner at the largest generation cannot get a tombstone child: left as it is.
        let Some(pos) = RevId::next_pos(parent.as_ref()) else {
            return Ok(false);
        };
        let rev = RevId {
            pos,
            hash: crate::update::couch_revision_hash(parent.as_ref(), true, b"{}", &[]),
        };
        if tombstone
            .tree
            .edit(parent.as_ref(), rev.clone(), true)
            .is_err()
        {
            return Ok(false);
        }
        if let Some(parent) = &parent {
            tombstone.leaves.retain(|leaf| &leaf.rev != parent);
        }
        tombstone.leaves.push(crate::record::Leaf {
            rev,
            deleted: true,
            json: true,
            body: bytes::Bytes::from_static(b"{}"),
            attachments: Vec::new(),
        });
        tombstone.expiry = 0;
        crate::update::finish(&mut tombstone, self.revs_limit());
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key.key),
            collection: key.collection,
            key: key.key.to_vec(),
            previous: Some(Previous::of(&record)),
            record: Some(tombstone),
            new_attachments: Vec::new(),
            macro_nonce: None,
            apply_max_ttl: false,
            old_revisions: Default::default(),
        }];
        self.commit_writes(&mut writes).await?;
        Ok(true)
    }

    /// Convenience for the KV door and tests: set expiry on a live document.
    pub async fn touch<'k>(
        &self,
        key: impl Into<DocKey<'k>>,
        expiry: u32,
    ) -> Result<crate::kv::KvOutcome, EngineError> {
        self.kv_mutate(key, KvMutation::Touch { expiry }, &crate::Writer::system())
            .await
    }

    /// CouchDB's `sizes.file` and `sizes.active`: the bytes this bucket takes on disk (its
    /// ranges' SST files, plus its writes not flushed yet, which are in the write-ahead log)
    /// and the live part of them. Approximate; `active <= file` always.
    pub fn disk_sizes(&self) -> Result<DiskSizes, EngineError> {
        // The bucket's range holds both key forms (every collection).
        let (lower, upper) = keys::bucket_range(self.id);
        let mut sizes = DiskSizes::default();
        for cf in [Cf::Doc, Cf::Seq, Cf::Att, Cf::Exp, Cf::Local] {
            let bytes = self.store.range_bytes(cf, &lower, &upper)?;
            sizes.file += bytes.file();
            sizes.active += bytes.active();
        }
        for cid in self.dropped_collections().keys() {
            for vbucket in 0..self.vbuckets {
                let (lower, upper) = keys::coll_range(self.id, vbucket, *cid);
                for cf in [Cf::Doc, Cf::Att, Cf::Exp, Cf::Local] {
                    sizes.pending_purge += self.store.range_file_bytes(cf, &lower, &upper)?;
                }
            }
        }
        sizes.pending_purge = sizes.pending_purge.min(sizes.file);
        sizes.active = sizes
            .active
            .saturating_sub(sizes.pending_purge)
            .min(sizes.file);
        Ok(sizes)
    }

    /// Bytes this bucket occupies on disk (flushed data only; approximate).
    pub fn size_on_disk(&self) -> u64 {
        let (lower, upper) = keys::bucket_range(self.id);
        [Cf::Doc, Cf::Seq, Cf::Att, Cf::Exp, Cf::Local]
            .iter()
            .map(|cf| self.store.size_on_disk(*cf, &lower, &upper))
            .sum()
    }
}

/// The attachment digests a document's leaves reference.
type Digests = HashSet<[u8; 16]>;

/// A document's collection and key.
type DocumentId = (u32, Vec<u8>);

/// Records passed over because they do not decode: (id, why).
type Skipped = Vec<(Vec<u8>, EngineError)>;

/// One document's change entry as compaction wants it.
struct Abbreviation {
    seqno: u64,
    id: Vec<u8>,
    prefix_len: usize,
}

/// Reads `vbucket`'s `doc` range once and plans the change entries of the documents with a
/// seqno above `after`: each id cut one byte past the longest prefix it shares with its
/// neighbours in id order. Returns at most `window` of them, the lowest seqnos, in seqno order,
/// whether that is all of them, and the records passed over because they do not decode.
fn abbreviation_plan(
    store: &settee_storage::Store,
    bucket_id: u32,
    vbucket: u16,
    cid: u32,
    after: u64,
    window: usize,
) -> Result<(Vec<Abbreviation>, bool, Skipped), EngineError> {
    let mut lowest = LowestSeqnos::new(after, window);
    // The document before the one waiting for its right neighbour, and that one.
    let mut before: Option<Vec<u8>> = None;
    let mut waiting: Option<(Vec<u8>, u64)> = None;
    let settle = |lowest: &mut LowestSeqnos<(Vec<u8>, usize)>,
                  id: &[u8],
                  seqno: u64,
                  left: Option<&[u8]>,
                  right: Option<&[u8]>| {
        if lowest.wants(seqno) {
            let shared = left
                .map_or(0, |left| shared_len(left, id))
                .max(right.map_or(0, |right| shared_len(id, right)));
            lowest.push(seqno, (id.to_vec(), shared + 1));
        }
    };
    let bad = scan_doc_seqnos(store, bucket_id, vbucket, cid, |id, seqno| {
        if let Some((left_id, left_seqno)) = waiting.take() {
            settle(
                &mut lowest,
                &left_id,
                left_seqno,
                before.as_deref(),
                Some(id),
            );
            before = Some(left_id);
        }
        waiting = Some((id.to_vec(), seqno));
    })?;
    if let Some((id, seqno)) = waiting {
        settle(&mut lowest, &id, seqno, before.as_deref(), None);
    }
    let (planned, complete, _) = lowest.finish();
    let plan = planned
        .into_iter()
        .map(|(seqno, (id, prefix_len))| Abbreviation {
            seqno,
            id,
            prefix_len,
        })
        .collect();
    Ok((plan, complete, bad))
}

/// How many leading bytes `left` and `right` share.
fn shared_len(left: &[u8], right: &[u8]) -> usize {
    left.iter()
        .zip(right)
        .take_while(|(left, right)| left == right)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DocUpdate, Engine, EngineOptions};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plans_in_windows_add_up_to_one_whole_plan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
        engine.create_bucket("db", 2).await.expect("create");
        let bucket = engine.bucket("db").expect("bucket");
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let updates = (0..400)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                DocUpdate {
                    key: format!("{state:016x}").into_bytes(),
                    parent: None,
                    history: Vec::new(),
                    deleted: false,
                    body: bytes::Bytes::from_static(b"{}"),
                    attachments: Vec::new(),
                }
            })
            .collect();
        bucket.update_docs(updates, true).await.expect("save");
        let summary = |plan: &[Abbreviation]| -> Vec<(u64, Vec<u8>, usize)> {
            plan.iter()
                .map(|planned| (planned.seqno, planned.id.clone(), planned.prefix_len))
                .collect()
        };
        for vbucket in 0..2 {
            let (whole, complete, _) =
                abbreviation_plan(&bucket.store, bucket.id, vbucket, 0, 0, usize::MAX / 4)
                    .expect("plan");
            assert!(complete);
            assert!(
                whole.len() > 150,
                "{} documents in vbucket {vbucket}",
                whole.len()
            );
            assert!(whole.windows(2).all(|pair| pair[0].seqno < pair[1].seqno));
            // Every prefix tells its document apart from all others in the vbucket.
            for planned in &whole {
                let prefix = &planned.id[..planned.prefix_len.min(planned.id.len())];
                let matching = whole.iter().filter(|other| other.id.starts_with(prefix));
                assert_eq!(matching.count(), 1, "{:?}", String::from_utf8_lossy(prefix));
            }
            let mut pieces = Vec::new();
            let mut after = 0;
            loop {
                let (window, complete, _) =
                    abbreviation_plan(&bucket.store, bucket.id, vbucket, 0, after, 7)
                        .expect("plan");
                assert!(window.len() <= 7);
                pieces.extend(summary(&window));
                match window.last() {
                    Some(last) if !complete => after = last.seqno,
                    _ => break,
                }
            }
            assert_eq!(pieces, summary(&whole), "vbucket {vbucket}");
        }
    }
}
