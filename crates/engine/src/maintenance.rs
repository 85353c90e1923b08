//! Background and administrative work on a bucket: compaction (including attachment garbage
//! collection), purge, and the expiry purger.

use std::collections::HashSet;

use settee_revtree::RevId;
use settee_storage::{Batch, Cf};

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::error::EngineError;
use crate::keys;
use crate::kv::KvMutation;
use crate::record::DocRecord;

/// Attachment keys deleted per batch during compaction.
const GC_BATCH: usize = 1024;

impl Bucket {
    /// Compacts the bucket: removes attachment bodies no leaf references, then asks RocksDB to
    /// rewrite the bucket's ranges so overwritten and deleted entries leave the disk.
    pub async fn compact(&self) -> Result<(), EngineError> {
        use std::sync::atomic::Ordering;
        if self.compacting.swap(true, Ordering::AcqRel) {
            // Already running: CouchDB also answers a second request without starting another.
            return Ok(());
        }
        let result = self.compact_now().await;
        self.compacting.store(false, Ordering::Release);
        result
    }

    async fn compact_now(&self) -> Result<(), EngineError> {
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
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            for cf in [Cf::Doc, Cf::Seq, Cf::Att, Cf::Exp, Cf::Local] {
                store.compact(cf, &lower, &upper);
            }
        })
        .await
        .map_err(|error| EngineError::Invalid(format!("compaction task: {error}")))?;
        Ok(())
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
