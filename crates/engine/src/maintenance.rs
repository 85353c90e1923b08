//! Background and administrative work on a bucket: compaction (including attachment garbage
//! collection), purge, and the expiry purger.

use std::collections::HashSet;

use settee_revtree::RevId;
use settee_storage::{Batch, Cf};

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::changes::ChangeEntry;
use crate::error::EngineError;
use crate::keys;
use crate::kv::KvMutation;
use crate::record::{DocRecord, Header};

/// Attachment keys deleted per batch during compaction.
const GC_BATCH: usize = 1024;
/// Documents whose change entries compaction rewrites per batch (their key locks are held
/// while the batch commits).
const ABBREVIATE_BATCH: usize = 256;

/// What one compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Attachment bodies no leaf revision referenced, deleted.
    pub attachment_bodies_removed: u64,
    /// Change entries rewritten to name their document by a (new) id prefix.
    pub change_entries_abbreviated: u64,
}

impl Bucket {
    /// Compacts the bucket: removes attachment bodies no leaf references, abbreviates change
    /// entries, then asks RocksDB to rewrite the bucket's ranges so overwritten and deleted
    /// entries leave the disk.
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

    async fn compact_now(&self) -> Result<CompactionReport, EngineError> {
        let mut batch = Batch::new();
        let (lower, upper) = keys::bucket_range(self.id);
        let mut referenced: Option<(Vec<u8>, HashSet<[u8; 16]>)> = None;
        let mut stale = Vec::new();
        for item in self.store.scan(Cf::Att, &lower, &upper, false) {
            let (raw_key, _) = item?;
            let Some((key, md5)) = keys::parse_att_key(&raw_key) else {
                continue;
            };
            if referenced.as_ref().is_none_or(|(cached, _)| cached != key) {
                let digests = match self.read_record(key)? {
                    Some(record) => record
                        .leaves
                        .iter()
                        .flat_map(|leaf| leaf.attachments.iter().map(|meta| meta.md5))
                        .collect(),
                    None => HashSet::new(),
                };
                referenced = Some((key.to_vec(), digests));
            }
            if referenced
                .as_ref()
                .is_some_and(|(_, digests)| !digests.contains(&md5))
            {
                stale.push(raw_key.to_vec());
            }
        }
        for chunk in stale.chunks(GC_BATCH) {
            for key in chunk {
                batch.delete(Cf::Att, key.clone());
            }
            self.store.commit(std::mem::take(&mut batch)).await?;
        }
        let change_entries_abbreviated = self.abbreviate_change_entries().await?;
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            for cf in [Cf::Doc, Cf::Seq, Cf::Att, Cf::Exp, Cf::Local] {
                store.compact(cf, &lower, &upper);
            }
        })
        .await
        .map_err(|error| EngineError::Invalid(format!("compaction task: {error}")))?;
        Ok(CompactionReport {
            attachment_bodies_removed: stale.len() as u64,
            change_entries_abbreviated,
        })
    }

    /// Rewrites change entries to name their documents by the shortest id prefix that tells
    /// each apart from its neighbours in id order (version 2 entries, docs/format/keys.md).
    /// Returns how many entries it rewrote.
    async fn abbreviate_change_entries(&self) -> Result<u64, EngineError> {
        let mut rewritten = 0;
        for vbucket in 0..self.vbuckets {
            let (lower, upper) = keys::vb_range(self.id, vbucket);
            let mut resume = lower;
            let mut before: Option<Vec<u8>> = None;
            loop {
                // Up to one more document than the batch: the last one is only the batch's
                // right neighbour, and opens the next batch.
                let mut docs: Vec<(Vec<u8>, u64)> = Vec::with_capacity(ABBREVIATE_BATCH + 1);
                let mut bad = None;
                self.store.seek_each(
                    Cf::Doc,
                    &[(resume.clone(), upper.clone())],
                    |_, key, value| {
                        match Header::decode(value) {
                            Ok(header) => {
                                docs.push((key[keys::PREFIX_LEN..].to_vec(), header.seqno))
                            }
                            Err(error) => bad = Some(error),
                        }
                        bad.is_some() || docs.len() > ABBREVIATE_BATCH
                    },
                )?;
                if let Some(error) = bad {
                    return Err(error);
                }
                let more = docs.len() > ABBREVIATE_BATCH;
                let done = if more { docs.len() - 1 } else { docs.len() };
                let mut plan = Vec::with_capacity(done);
                for index in 0..done {
                    let id = &docs[index].0;
                    let shared_before = before.as_deref().map_or(0, |left| shared_len(left, id));
                    let shared_after = docs
                        .get(index + 1)
                        .map_or(0, |(right, _)| shared_len(id, right));
                    plan.push((index, shared_before.max(shared_after) + 1));
                    before = Some(id.clone());
                }
                rewritten += self.rewrite_change_entries(vbucket, &docs, &plan).await?;
                if !more {
                    break;
                }
                resume = keys::doc_key(self.id, vbucket, &docs[done].0);
            }
        }
        Ok(rewritten)
    }

    /// Under the documents' key locks, re-encodes each planned document's change entry with its
    /// id cut to the planned length, if it still has the entry the scan saw (a write since then
    /// replaced it, and seqnos are never reused) and the stored bytes differ.
    async fn rewrite_change_entries(
        &self,
        vbucket: u16,
        docs: &[(Vec<u8>, u64)],
        plan: &[(usize, usize)],
    ) -> Result<u64, EngineError> {
        let _guards = self
            .lock_keys(plan.iter().map(|&(index, _)| docs[index].0.as_slice()))
            .await;
        let seq_keys: Vec<Vec<u8>> = plan
            .iter()
            .map(|&(index, _)| keys::seq_key(self.id, vbucket, docs[index].1))
            .collect();
        let stored = self.store.multi_get(Cf::Seq, &seq_keys)?;
        let mut batch = Batch::new();
        let mut rewritten = 0;
        for ((&(index, prefix_len), seq_key), stored) in plan.iter().zip(seq_keys).zip(stored) {
            let Some(stored) = stored else { continue };
            let (id, seqno) = &docs[index];
            let (mut entry, _) = ChangeEntry::decode(vbucket, *seqno, &stored)
                .ok_or_else(|| EngineError::Corrupt("change entry".into()))?;
            entry.key = id.clone();
            let wanted = entry.encode_abbreviated(prefix_len);
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
    /// disappears entirely, from changes too. Returns the revisions purged.
    pub async fn purge(&self, key: &[u8], revs: &[RevId]) -> Result<Vec<RevId>, EngineError> {
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let Some(mut record) = self.read_record(key)? else {
            return Ok(Vec::new());
        };
        let previous = Previous::of(&record);
        let purged = record.tree.purge(revs);
        if purged.is_empty() {
            return Ok(purged);
        }
        record.normalise_leaves();
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key),
            key: key.to_vec(),
            previous: Some(previous),
            record: (!record.leaves.is_empty()).then_some(record),
            new_attachments: Vec::new(),
            macro_nonce: None,
        }];
        let _purging = self.purge_lock.lock().await;
        let next = self.purge_seq() + 1;
        let mut counter = Batch::new();
        counter.put(
            Cf::Meta,
            keys::meta::bucket_purge_seq(self.id),
            next.to_be_bytes().to_vec(),
        );
        self.commit_writes_with(&mut writes, counter).await?;
        self.purge_seq
            .store(next, std::sync::atomic::Ordering::Release);
        Ok(purged)
    }

    /// Deletes every document of this bucket whose expiry has passed; returns how many.
    pub async fn purge_expired(&self) -> Result<usize, EngineError> {
        let now = self.now_secs();
        let mut due: Vec<Vec<u8>> = Vec::new();
        for vbucket in 0..self.vbuckets {
            let lower = keys::exp_key(self.id, vbucket, 1, b"");
            let upper = keys::exp_key(self.id, vbucket, now.saturating_add(1), b"");
            for item in self.store.scan(Cf::Exp, &lower, &upper, false) {
                let (raw_key, _) = item?;
                if let Some((_, key)) = keys::parse_exp_key(&raw_key) {
                    due.push(key.to_vec());
                }
            }
        }
        let mut expired = 0;
        for key in due {
            if self.expire_one(&key).await? {
                expired += 1;
            }
        }
        Ok(expired)
    }

    /// Turns an expired document into a deletion (a new tombstone revision), re-checking under
    /// the key lock that it is still expired.
    async fn expire_one(&self, key: &[u8]) -> Result<bool, EngineError> {
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let Some(record) = self.read_record(key)? else {
            return Ok(false);
        };
        if record.expiry == 0 || !self.is_expired(record.expiry) {
            return Ok(false);
        }
        if record.is_deleted() {
            return Ok(false);
        }
        let mut tombstone: DocRecord = record.clone();
        let parent = tombstone.winner().map(|leaf| leaf.rev.clone());
        let rev = RevId {
            pos: parent.as_ref().map_or(1, |parent| parent.pos + 1),
            hash: crate::update::revision_hash(parent.as_ref(), true, b"{}", &[]),
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
            vbucket: self.vbucket_of(key),
            key: key.to_vec(),
            previous: Some(Previous::of(&record)),
            record: Some(tombstone),
            new_attachments: Vec::new(),
            macro_nonce: None,
        }];
        self.commit_writes(&mut writes).await?;
        Ok(true)
    }

    /// Convenience for the KV door and tests: set expiry on a live document.
    pub async fn touch(
        &self,
        key: &[u8],
        expiry: u32,
    ) -> Result<crate::kv::KvOutcome, EngineError> {
        self.kv_mutate(key, KvMutation::Touch { expiry }).await
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

/// How many leading bytes `left` and `right` share.
fn shared_len(left: &[u8], right: &[u8]) -> usize {
    left.iter()
        .zip(right)
        .take_while(|(left, right)| left == right)
        .count()
}
