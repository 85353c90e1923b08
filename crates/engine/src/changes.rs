//! The change stream: each vbucket's `seq` range read from a seqno onwards, and a cursor that
//! merges all of a bucket's vbuckets into one feed ordered by CAS (hybrid logical time), so the
//! merged feed follows write order closely while staying resumable per vbucket.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use settee_revtree::RevId;
use settee_storage::Cf;

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;
use crate::record::{DocRecord, Header};
use crate::seqvec::SeqVector;

const VERSION: u8 = 1;
/// Same layout as [`VERSION`], but the key field holds only a prefix of the id (keys.md).
const VERSION_ABBREVIATED: u8 = 2;
const FLAG_DELETED: u8 = 1;
/// Entries read from one vbucket per refill.
const CHUNK: usize = 256;

/// One entry of a vbucket's change stream (value layout in `docs/format/keys.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeEntry {
    pub vbucket: u16,
    pub seqno: u64,
    pub cas: u64,
    pub deleted: bool,
    pub key: Vec<u8>,
    /// The winning revision.
    pub rev: RevId,
}

impl ChangeEntry {
    pub(crate) fn of_record(vbucket: u16, key: &[u8], record: &DocRecord) -> ChangeEntry {
        let winner = record.winner();
        ChangeEntry {
            vbucket,
            seqno: record.seqno,
            cas: record.cas,
            deleted: record.is_deleted(),
            key: key.to_vec(),
            rev: winner.map(|leaf| leaf.rev.clone()).unwrap_or(RevId {
                pos: 0,
                hash: String::new(),
            }),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        self.encode_abbreviated(self.key.len())
    }

    /// The stored form with the id cut to its first `prefix_len` bytes: an abbreviated entry
    /// (version 2), or a whole one when the prefix would not be shorter than the id.
    pub(crate) fn encode_abbreviated(&self, prefix_len: usize) -> Vec<u8> {
        let stored = &self.key[..prefix_len.min(self.key.len())];
        let rev = self.rev.to_string();
        let mut out = Vec::with_capacity(11 + stored.len() + rev.len());
        out.push(if stored.len() < self.key.len() {
            VERSION_ABBREVIATED
        } else {
            VERSION
        });
        out.push(if self.deleted { FLAG_DELETED } else { 0 });
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.push(stored.len() as u8);
        out.extend_from_slice(stored);
        out.extend_from_slice(rev.as_bytes());
        out
    }

    /// Decodes a stored entry. The flag says whether `key` is only a prefix of the id, to be
    /// resolved against the `doc` column family ([`Bucket::vbucket_changes`] does that).
    pub(crate) fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<(ChangeEntry, bool)> {
        let abbreviated = match *raw.first()? {
            VERSION => false,
            VERSION_ABBREVIATED => true,
            _ => return None,
        };
        let flags = *raw.get(1)?;
        let cas = u64::from_be_bytes(raw.get(2..10)?.try_into().ok()?);
        let key_len = *raw.get(10)? as usize;
        let key = raw.get(11..11 + key_len)?.to_vec();
        let rev = RevId::parse(std::str::from_utf8(raw.get(11 + key_len..)?).ok()?)?;
        let entry = ChangeEntry {
            vbucket,
            seqno,
            cas,
            deleted: flags & FLAG_DELETED != 0,
            key,
            rev,
        };
        Some((entry, abbreviated))
    }
}

impl Bucket {
    /// Up to `limit` entries of one vbucket's stream with seqno > `since`, in seqno order;
    /// fewer only when the stream has no more.
    pub fn vbucket_changes(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        let (_, upper) = keys::vb_range(self.id, vbucket);
        let mut out: Vec<ChangeEntry> = Vec::new();
        let mut from = since;
        while out.len() < limit {
            let wanted = limit - out.len();
            let lower = keys::seq_key(self.id, vbucket, from.saturating_add(1));
            let mut read = 0;
            let mut abbreviated = Vec::new();
            for item in self.store.scan(Cf::Seq, &lower, &upper, false).take(wanted) {
                let (key, value) = item?;
                let seqno = keys::seqno_of_seq_key(&key)
                    .ok_or_else(|| EngineError::Corrupt("seq key".into()))?;
                let (entry, short) = ChangeEntry::decode(vbucket, seqno, &value)
                    .ok_or_else(|| EngineError::Corrupt("change entry".into()))?;
                if short {
                    abbreviated.push(out.len());
                }
                from = seqno;
                read += 1;
                out.push(entry);
            }
            if !abbreviated.is_empty() {
                self.resolve_abbreviated(vbucket, &mut out, &abbreviated)?;
            }
            if read < wanted {
                break;
            }
        }
        Ok(out)
    }

    /// Replaces each abbreviated entry's id prefix (at `indexes` of `entries`) by the id of the
    /// document in `vbucket` that starts with it and holds the entry's seqno. An entry no
    /// document holds any more (written over since the `seq` read) is removed: its document's
    /// later entry follows in the stream.
    fn resolve_abbreviated(
        &self,
        vbucket: u16,
        entries: &mut Vec<ChangeEntry>,
        indexes: &[usize],
    ) -> Result<(), EngineError> {
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = indexes
            .iter()
            .map(|&index| {
                let lower = keys::doc_key(self.id, vbucket, &entries[index].key);
                let upper = keys::prefix_end(&lower);
                (lower, upper)
            })
            .collect();
        let mut ids: Vec<Option<Vec<u8>>> = vec![None; indexes.len()];
        self.store
            .seek_each(Cf::Doc, &ranges, |range, key, value| {
                let holds = Header::decode(value)
                    .is_ok_and(|header| header.seqno == entries[indexes[range]].seqno);
                if holds {
                    ids[range] = Some(key[keys::PREFIX_LEN..].to_vec());
                }
                holds
            })?;
        let mut gone = vec![false; entries.len()];
        for (id, &index) in ids.into_iter().zip(indexes) {
            match id {
                Some(id) => entries[index].key = id,
                None => gone[index] = true,
            }
        }
        let mut position = 0;
        entries.retain(|_| {
            position += 1;
            !gone[position - 1]
        });
        Ok(())
    }

    /// A cursor over the whole bucket's changes after `since`.
    pub fn changes(&self, since: SeqVector) -> ChangeCursor<'_> {
        ChangeCursor::new(self, since)
    }
}

struct VbFeed {
    buffer: VecDeque<ChangeEntry>,
    exhausted: bool,
    read_up_to: u64,
}

/// Merges every vbucket's stream by CAS. After each entry it yields, [`ChangeCursor::position`]
/// is a valid resume point: every vbucket's entries up to its component have been yielded.
pub struct ChangeCursor<'a> {
    bucket: &'a Bucket,
    position: SeqVector,
    feeds: Vec<VbFeed>,
    heap: BinaryHeap<Reverse<(u64, u16)>>,
    started: bool,
    high_at_start: SeqVector,
}

impl<'a> ChangeCursor<'a> {
    fn new(bucket: &'a Bucket, since: SeqVector) -> ChangeCursor<'a> {
        let feeds = (0..bucket.vbuckets)
            .map(|vbucket| VbFeed {
                buffer: VecDeque::new(),
                exhausted: false,
                read_up_to: since.get(vbucket),
            })
            .collect();
        ChangeCursor {
            bucket,
            high_at_start: bucket.high_seqnos(),
            position: since,
            feeds,
            heap: BinaryHeap::new(),
            started: false,
        }
    }

    /// Where the feed stands: the resume point after everything yielded so far.
    pub fn position(&self) -> &SeqVector {
        &self.position
    }

    /// The resume point once the cursor is exhausted: also covers seqnos whose entries were
    /// superseded by later writes, up to the high seqnos seen when the cursor started.
    pub fn end_position(&self) -> SeqVector {
        let mut end = self.position.clone();
        end.max_with(&self.high_at_start);
        end
    }

    fn refill(&mut self, vbucket: u16) -> Result<(), EngineError> {
        let feed = &mut self.feeds[vbucket as usize];
        if feed.exhausted || !feed.buffer.is_empty() {
            return Ok(());
        }
        let entries = self
            .bucket
            .vbucket_changes(vbucket, feed.read_up_to, CHUNK)?;
        if entries.len() < CHUNK {
            feed.exhausted = true;
        }
        if let Some(last) = entries.last() {
            feed.read_up_to = last.seqno;
        }
        if let Some(first) = entries.first() {
            self.heap.push(Reverse((first.cas, vbucket)));
        }
        feed.buffer.extend(entries);
        Ok(())
    }

    fn next_entry(&mut self) -> Result<Option<ChangeEntry>, EngineError> {
        if !self.started {
            self.started = true;
            for vbucket in 0..self.bucket.vbuckets {
                self.refill(vbucket)?;
            }
        }
        let Some(Reverse((_, vbucket))) = self.heap.pop() else {
            return Ok(None);
        };
        let feed = &mut self.feeds[vbucket as usize];
        let Some(entry) = feed.buffer.pop_front() else {
            return Ok(None);
        };
        match feed.buffer.front() {
            Some(next) => self.heap.push(Reverse((next.cas, vbucket))),
            None => self.refill(vbucket)?,
        }
        self.position.set(vbucket, entry.seqno);
        Ok(Some(entry))
    }
}

impl Iterator for ChangeCursor<'_> {
    type Item = Result<ChangeEntry, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}
