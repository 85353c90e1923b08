//! Old revision bodies: a revision that stops being a leaf through a CouchDB-door update keeps
//! its body and attachment list in CF `att` until compaction, stemming or a purge removes it
//! (docs/format/document.md, "Old revision bodies"; keys in docs/format/keys.md).

use std::collections::HashSet;

use settee_record::old_rev::{decode_old_revision, encode_old_revision};
use settee_revtree::RevId;
use settee_storage::{Batch, Cf};

use crate::bucket::Bucket;
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::keys;
use crate::keyspace::Keyspace;
use crate::record::{DocRecord, Leaf};

/// What one write does to a document's old revision entries.
#[derive(Debug, Default)]
pub(crate) struct OldRevisions {
    /// Leaves the write turns into inner nodes: their bodies are kept.
    pub keep: Vec<Leaf>,
    /// Revisions the write removes from the tree (stemmed or purged): their entries go.
    pub drop: Vec<RevId>,
}

impl OldRevisions {
    /// The entries to keep and drop when `current` (the record before the write) becomes
    /// `next`. Nothing for a new document.
    pub(crate) fn between(current: Option<&DocRecord>, next: &DocRecord) -> OldRevisions {
        let Some(current) = current else {
            return OldRevisions::default();
        };
        let keep = current
            .leaves
            .iter()
            .filter(|leaf| next.tree.contains(&leaf.rev) && !next.tree.is_leaf(&leaf.rev))
            .cloned()
            .collect();
        let drop = current
            .tree
            .revs()
            .filter(|rev| !next.tree.contains(rev))
            .cloned()
            .collect();
        OldRevisions { keep, drop }
    }

    /// Folds a later write of the same document in one batch into this one.
    pub(crate) fn extend(&mut self, later: OldRevisions) {
        self.keep.retain(|leaf| !later.drop.contains(&leaf.rev));
        self.keep.extend(later.keep);
        self.drop.extend(later.drop);
    }

    /// Stages the puts and deletes in `batch`.
    pub(crate) fn stage(
        &self,
        batch: &mut Batch,
        bucket_id: u32,
        vbucket: u16,
        cid: u32,
        key: &[u8],
    ) {
        for rev in &self.drop {
            let rev = rev.to_string();
            batch.delete(
                Cf::Att,
                keys::old_rev_key(bucket_id, vbucket, cid, key, &rev),
            );
        }
        for leaf in &self.keep {
            let rev = leaf.rev.to_string();
            batch.put(
                Cf::Att,
                keys::old_rev_key(bucket_id, vbucket, cid, key, &rev),
                encode_old_revision(leaf),
            );
        }
    }
}

/// Stages the removal of every old revision entry of document `key` (a purge of the whole
/// document).
pub(crate) fn drop_all(batch: &mut Batch, bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) {
    let lower = keys::old_rev_prefix(bucket_id, vbucket, cid, key);
    let upper = keys::prefix_end(&lower);
    batch.delete_range(Cf::Att, lower, upper);
}

impl Bucket {
    /// The kept body of `rev`, a revision of `doc` that is no longer a leaf, if compaction,
    /// stemming or a purge has not removed it.
    pub fn old_revision(&self, doc: DocKey<'_>, rev: &RevId) -> Result<Option<Leaf>, EngineError> {
        self.check_live(doc.collection)?;
        let key = keys::old_rev_key(
            self.id(),
            self.vbucket_of(doc.key),
            doc.collection,
            doc.key,
            &rev.to_string(),
        );
        match self.store.get(Cf::Att, &key)? {
            Some(raw) => match decode_old_revision(rev.clone(), &raw) {
                Ok(leaf) => Ok(Some(leaf)),
                Err(error) => {
                    self.skip_corrupt_document(doc.key, &error);
                    Ok(None)
                }
            },
            None => Ok(None),
        }
    }

    /// Revision `rev` of the document whose record is `record`: a leaf from the record, else
    /// its kept old body when `rev` is an inner node of the tree.
    pub fn revision(
        &self,
        doc: DocKey<'_>,
        record: &DocRecord,
        rev: &RevId,
    ) -> Result<Option<Leaf>, EngineError> {
        if let Some(leaf) = record.leaf(rev) {
            return Ok(Some(leaf.clone()));
        }
        if !record.tree.contains(rev) {
            return Ok(None);
        }
        self.old_revision(doc, rev)
    }

    /// The attachment keys of `stale` (compaction's candidates: no leaf references them) that
    /// no kept old revision of their document references either.
    pub(crate) fn unreferenced_by_old_revisions(
        &self,
        stale: Vec<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>, EngineError> {
        let mut held: Option<(Vec<u8>, HashSet<[u8; 16]>)> = None;
        let mut out = Vec::with_capacity(stale.len());
        for raw_key in stale {
            let Some((vbucket, cid, key, md5)) = keys::parse_att_key(&raw_key) else {
                continue;
            };
            let lower = keys::old_rev_prefix(self.id(), vbucket, cid, key);
            if held.as_ref().is_none_or(|(prefix, _)| *prefix != lower) {
                let digests = self.old_revision_digests(&lower)?;
                held = Some((lower, digests));
            }
            if held
                .as_ref()
                .is_some_and(|(_, digests)| !digests.contains(&md5))
            {
                out.push(raw_key);
            }
        }
        Ok(out)
    }

    /// The attachment digests the old revisions under `lower` (one document's old revision
    /// prefix) reference.
    fn old_revision_digests(&self, lower: &[u8]) -> Result<HashSet<[u8; 16]>, EngineError> {
        let upper = keys::prefix_end(lower);
        let mut out = HashSet::new();
        for item in self.store.scan(Cf::Att, lower, &upper, false) {
            let (_, value) = item?;
            // The rev id is not needed for the digests.
            if let Ok(leaf) = decode_old_revision(RevId::new(1, "x"), &value) {
                out.extend(leaf.attachments.iter().map(|meta| meta.md5));
            }
        }
        Ok(out)
    }

    /// The revisions of `doc` whose old bodies are kept.
    pub fn kept_revisions(&self, doc: DocKey<'_>) -> Result<HashSet<RevId>, EngineError> {
        self.check_live(doc.collection)?;
        let lower =
            keys::old_rev_prefix(self.id(), self.vbucket_of(doc.key), doc.collection, doc.key);
        let upper = keys::prefix_end(&lower);
        let mut out = HashSet::new();
        for item in self.store.scan(Cf::Att, &lower, &upper, false) {
            let (raw_key, _) = item?;
            let Some(rev) = raw_key
                .get(lower.len()..)
                .and_then(|rev| std::str::from_utf8(rev).ok())
                .and_then(RevId::parse)
            else {
                continue;
            };
            out.insert(rev);
        }
        Ok(out)
    }
}

impl Keyspace {
    /// [`Bucket::revision`] in this keyspace's collection.
    pub fn revision(
        &self,
        key: &[u8],
        record: &DocRecord,
        rev: &RevId,
    ) -> Result<Option<Leaf>, EngineError> {
        self.bucket().revision(self.key(key), record, rev)
    }

    /// [`Bucket::kept_revisions`] in this keyspace's collection.
    pub fn kept_revisions(&self, key: &[u8]) -> Result<HashSet<RevId>, EngineError> {
        self.bucket().kept_revisions(self.key(key))
    }
}
