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
use crate::record::DocRecord;
use crate::seqvec::SeqVector;

const VERSION: u8 = 1;
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
        let rev = self.rev.to_string();
        let mut out = Vec::with_capacity(11 + self.key.len() + rev.len());
        out.push(VERSION);
        out.push(if self.deleted { FLAG_DELETED } else { 0 });
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.push(self.key.len() as u8);
        out.extend_from_slice(&self.key);
        out.extend_from_slice(rev.as_bytes());
        out
    }

    pub(crate) fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<ChangeEntry> {
        if *raw.first()? != VERSION {
            return None;
        }
        let flags = *raw.get(1)?;
        let cas = u64::from_be_bytes(raw.get(2..10)?.try_into().ok()?);
        let key_len = *raw.get(10)? as usize;
        let key = raw.get(11..11 + key_len)?.to_vec();
        let rev = RevId::parse(std::str::from_utf8(raw.get(11 + key_len..)?).ok()?)?;
        Some(ChangeEntry {
            vbucket,
            seqno,
            cas,
            deleted: flags & FLAG_DELETED != 0,
            key,
            rev,
        })
    }
}

impl Bucket {
    /// Up to `limit` entries of one vbucket's stream with seqno > `since`, in seqno order.
    pub fn vbucket_changes(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        let lower = keys::seq_key(self.id, vbucket, since.saturating_add(1));
        let (_, upper) = keys::vb_range(self.id, vbucket);
        let mut out = Vec::new();
        for item in self.store.scan(Cf::Seq, &lower, &upper, false).take(limit) {
            let (key, value) = item?;
            let seqno = keys::seqno_of_seq_key(&key)
                .ok_or_else(|| EngineError::Corrupt("seq key".into()))?;
            let entry = ChangeEntry::decode(vbucket, seqno, &value)
                .ok_or_else(|| EngineError::Corrupt("change entry".into()))?;
            out.push(entry);
        }
        Ok(out)
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
