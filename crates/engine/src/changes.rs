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
use crate::skips::SkippedRecord;

const VERSION: u8 = 1;
/// Same layout as [`VERSION`], but the key field holds only a prefix of the id (keys.md).
const VERSION_ABBREVIATED: u8 = 2;
const FLAG_DELETED: u8 = 1;
/// Entries read from one vbucket per refill.
const CHUNK: usize = 256;
/// A cursor resolves a vbucket's abbreviated entries with one pass over its `doc` range (and
/// drains that vbucket before the others) when it has at least this many entries to read...
const PASS_BACKLOG_MIN: u64 = CHUNK as u64;
/// ...and they are at least 1/PASS_SHARE of the vbucket's documents: below that, a seek per
/// entry reads fewer blocks than a pass over all of them.
const PASS_SHARE: u64 = 16;
/// Ids one pass holds at most (the lowest seqnos; a further pass reads on from there).
const PASS_IDS_MAX: usize = 1 << 18;

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
        self.read_vbucket_changes(vbucket, since, limit, None)
    }

    /// [`Bucket::vbucket_changes`], resolving abbreviated entries through `pass` (built or
    /// rebuilt here when it does not cover them) when one is given, with a seek each otherwise
    /// and for any entry the pass does not know.
    fn read_vbucket_changes(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
        mut pass: Option<PassSlot<'_>>,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        let (_, upper) = keys::vb_range(self.id, vbucket);
        let mut out: Vec<ChangeEntry> = Vec::new();
        // The next read starts here: just past the last key read, whether or not that entry
        // decoded, so a bad entry is passed over instead of read again.
        let mut lower = keys::seq_key(self.id, vbucket, since.saturating_add(1));
        while out.len() < limit {
            let wanted = limit - out.len();
            let mut read = 0;
            let mut abbreviated = Vec::new();
            for item in self.store.scan(Cf::Seq, &lower, &upper, false).take(wanted) {
                let (key, value) = item?;
                read += 1;
                lower = key.to_vec();
                lower.push(0);
                // One entry that does not decode must not end the feed of all the others.
                let decoded = keys::seqno_of_seq_key(&key)
                    .and_then(|seqno| ChangeEntry::decode(vbucket, seqno, &value));
                let Some((entry, short)) = decoded else {
                    let at = keys::seqno_of_seq_key(&key).map_or_else(
                        || key[keys::PREFIX_LEN.min(key.len())..].to_vec(),
                        |seqno| format!("seqno {seqno}").into_bytes(),
                    );
                    self.skip(
                        SkippedRecord::ChangeEntry,
                        vbucket,
                        &at,
                        &"change entry does not decode",
                    );
                    continue;
                };
                if short {
                    abbreviated.push(out.len());
                }
                out.push(entry);
            }
            if let Some(pass) = pass.as_mut() {
                abbreviated = self.resolve_by_pass(vbucket, &mut out, abbreviated, pass)?;
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

    /// Resolves the abbreviated entries at `indexes` (in seqno order) from `pass`, first
    /// (re)building it from the first seqno it does not cover. Returns the indexes it could not
    /// resolve: documents that moved on since, or entries abbreviated after the pass ran.
    fn resolve_by_pass(
        &self,
        vbucket: u16,
        entries: &mut [ChangeEntry],
        indexes: Vec<usize>,
        slot: &mut PassSlot<'_>,
    ) -> Result<Vec<usize>, EngineError> {
        let mut unresolved = Vec::new();
        for index in indexes {
            let seqno = entries[index].seqno;
            let covered = slot
                .pass
                .as_ref()
                .is_some_and(|pass| pass.vbucket == vbucket && pass.covers(seqno));
            if !covered {
                *slot.pass = Some(IdPass::read(self, vbucket, seqno - 1, slot.max)?);
                *slot.made += 1;
            }
            let id = slot.pass.as_ref().and_then(|pass| pass.id_of(seqno));
            match id {
                Some(id) if id.starts_with(&entries[index].key) => {
                    entries[index].key = id.to_vec();
                }
                _ => unresolved.push(index),
            }
        }
        *slot.missed += unresolved.len() as u64;
        Ok(unresolved)
    }

    /// Whether the first entry of `vbucket`'s stream after `since` is abbreviated: a read from
    /// there starts in the part compaction has rewritten.
    fn first_entry_abbreviated(&self, vbucket: u16, since: u64) -> Result<bool, EngineError> {
        let lower = keys::seq_key(self.id, vbucket, since.saturating_add(1));
        let (_, upper) = keys::vb_range(self.id, vbucket);
        match self.store.scan(Cf::Seq, &lower, &upper, false).next() {
            Some(item) => Ok(item?.1.first() == Some(&VERSION_ABBREVIATED)),
            None => Ok(false),
        }
    }

    /// Replaces each abbreviated entry's id prefix (at `indexes` of `entries`) by the id of the
    /// document in `vbucket` that starts with it and holds the entry's seqno. An entry no
    /// document holds any more (written over since the `seq` read) is removed: its document's
    /// later entry follows in the stream.
    pub(crate) fn resolve_abbreviated(
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

    /// Documents (live and deleted) stored in `vbucket`.
    fn vbucket_docs(&self, vbucket: u16) -> u64 {
        let (live, deleted) = self.vbucket_doc_counts(vbucket);
        live + deleted
    }

    /// A cursor over the whole bucket's changes after `since`.
    pub fn changes(&self, since: SeqVector) -> ChangeCursor<'_> {
        ChangeCursor::new(self, since)
    }
}

/// One vbucket's document ids by seqno, read in one pass over its `doc` range, so that a long
/// read of compacted (abbreviated) entries resolves them without a seek each. Holds every
/// document whose seqno was in `(after, upto]` when it was read, at most [`PASS_IDS_MAX`].
struct IdPass {
    vbucket: u16,
    after: u64,
    upto: u64,
    /// Sorted by seqno.
    ids: Vec<(u64, Vec<u8>)>,
}

impl IdPass {
    fn read(bucket: &Bucket, vbucket: u16, after: u64, max: usize) -> Result<IdPass, EngineError> {
        let mut lowest = LowestSeqnos::new(after, max);
        let bad = scan_doc_seqnos(&bucket.store, bucket.id, vbucket, |id, seqno| {
            if lowest.wants(seqno) {
                lowest.push(seqno, id.to_vec());
            }
        })?;
        for (id, error) in bad {
            bucket.skip(SkippedRecord::Document, vbucket, &id, &error);
        }
        let (ids, _, upto) = lowest.finish();
        Ok(IdPass {
            vbucket,
            after,
            upto,
            ids,
        })
    }

    fn covers(&self, seqno: u64) -> bool {
        seqno > self.after && seqno <= self.upto
    }

    fn id_of(&self, seqno: u64) -> Option<&[u8]> {
        let at = self
            .ids
            .binary_search_by_key(&seqno, |(held, _)| *held)
            .ok()?;
        Some(&self.ids[at].1)
    }
}

/// Visits every document of `vbucket` in id order with its id and the seqno its record holds:
/// one pass over the vbucket's `doc` range. Records whose header does not decode are passed
/// over and returned (id, reason), for the caller to count as skipped.
pub(crate) fn scan_doc_seqnos(
    store: &settee_storage::Store,
    bucket_id: u32,
    vbucket: u16,
    mut visit: impl FnMut(&[u8], u64),
) -> Result<Vec<(Vec<u8>, EngineError)>, EngineError> {
    let (lower, upper) = keys::vb_range(bucket_id, vbucket);
    let mut bad = Vec::new();
    store.seek_each(Cf::Doc, &[(lower, upper)], |_, key, value| {
        let id = key.get(keys::PREFIX_LEN..).unwrap_or_default();
        match Header::decode(value) {
            Ok(header) => visit(id, header.seqno),
            Err(error) => bad.push((id.to_vec(), error)),
        }
        false
    })?;
    Ok(bad)
}

/// Items pushed with a seqno above `after`, of which it keeps the `max` with the lowest seqnos,
/// holding at most twice that many at any time however many are pushed.
pub(crate) struct LowestSeqnos<T> {
    after: u64,
    max: usize,
    /// Nothing above this seqno can be kept any more.
    upto: u64,
    items: Vec<(u64, T)>,
}

impl<T> LowestSeqnos<T> {
    pub(crate) fn new(after: u64, max: usize) -> LowestSeqnos<T> {
        LowestSeqnos {
            after,
            max,
            upto: u64::MAX,
            items: Vec::new(),
        }
    }

    /// Whether an item at `seqno` would be kept now (callers skip building the others).
    pub(crate) fn wants(&self, seqno: u64) -> bool {
        seqno > self.after && seqno <= self.upto
    }

    pub(crate) fn push(&mut self, seqno: u64, item: T) {
        if !self.wants(seqno) {
            return;
        }
        self.items.push((seqno, item));
        if self.items.len() >= 2 * self.max {
            self.trim();
        }
    }

    fn trim(&mut self) {
        self.items.sort_unstable_by_key(|(seqno, _)| *seqno);
        self.items.truncate(self.max);
        self.upto = self.items.last().map_or(self.after, |(seqno, _)| *seqno);
    }

    /// The kept items in seqno order, whether they are all that were pushed above `after`, and
    /// the highest seqno they account for (`u64::MAX` when they are all).
    pub(crate) fn finish(mut self) -> (Vec<(u64, T)>, bool, u64) {
        if self.items.len() > self.max {
            self.trim();
        } else {
            self.items.sort_unstable_by_key(|(seqno, _)| *seqno);
        }
        let complete = self.upto == u64::MAX;
        (self.items, complete, self.upto)
    }
}

/// Where a cursor keeps its current pass, and how large one may be.
struct PassSlot<'p> {
    pass: &'p mut Option<IdPass>,
    max: usize,
    made: &'p mut u64,
    missed: &'p mut u64,
}

struct VbFeed {
    buffer: VecDeque<ChangeEntry>,
    exhausted: bool,
    read_up_to: u64,
}

/// Merges every vbucket's stream by CAS. After each entry it yields, [`ChangeCursor::position`]
/// is a valid resume point: every vbucket's entries up to its component have been yielded.
///
/// A vbucket whose read starts among compacted (abbreviated) entries and is long (see
/// [`PASS_SHARE`]) is not merged: the cursor yields all of it first, one such vbucket at a time,
/// resolving its ids with one pass over its `doc` range instead of a seek per entry, and keeps
/// only that vbucket's ids in memory.
pub struct ChangeCursor<'a> {
    bucket: &'a Bucket,
    position: SeqVector,
    feeds: Vec<VbFeed>,
    heap: BinaryHeap<Reverse<(u64, u16)>>,
    started: bool,
    high_at_start: SeqVector,
    /// Vbuckets to yield whole before the merge, in order; the first is being yielded.
    drains: VecDeque<u16>,
    pass: Option<IdPass>,
    pass_ids_max: usize,
    passes: u64,
    missed: u64,
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
            drains: VecDeque::new(),
            pass: None,
            pass_ids_max: PASS_IDS_MAX,
            passes: 0,
            missed: 0,
        }
    }

    /// Caps the ids one pass holds (tests use small caps to make a vbucket take several).
    #[doc(hidden)]
    pub fn with_pass_ids_max(mut self, max: usize) -> ChangeCursor<'a> {
        self.pass_ids_max = max.max(1);
        self
    }

    /// How many passes over a vbucket's `doc` range this cursor has made to resolve ids.
    pub fn id_passes(&self) -> u64 {
        self.passes
    }

    /// How many abbreviated entries of a drained vbucket its pass did not resolve (they took a
    /// seek each: documents written or compacted after the pass read them).
    pub fn pass_misses(&self) -> u64 {
        self.missed
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

    /// Whether `vbucket` is read by draining it with a pass (see the type's documentation).
    fn wants_pass(&self, vbucket: u16) -> Result<bool, EngineError> {
        let since = self.feeds[vbucket as usize].read_up_to;
        let backlog = self.high_at_start.get(vbucket).saturating_sub(since);
        if backlog < PASS_BACKLOG_MIN
            || backlog.saturating_mul(PASS_SHARE) < self.bucket.vbucket_docs(vbucket)
        {
            return Ok(false);
        }
        self.bucket.first_entry_abbreviated(vbucket, since)
    }

    /// Reads the next chunk of `vbucket` into its buffer if that is empty; a merged vbucket's
    /// first buffered entry goes on the heap.
    fn refill(&mut self, vbucket: u16) -> Result<(), EngineError> {
        let draining = self.drains.front() == Some(&vbucket);
        let bucket = self.bucket;
        let feed = &mut self.feeds[vbucket as usize];
        if feed.exhausted || !feed.buffer.is_empty() {
            return Ok(());
        }
        let pass = draining.then_some(PassSlot {
            pass: &mut self.pass,
            max: self.pass_ids_max,
            made: &mut self.passes,
            missed: &mut self.missed,
        });
        let entries = bucket.read_vbucket_changes(vbucket, feed.read_up_to, CHUNK, pass)?;
        if entries.len() < CHUNK {
            feed.exhausted = true;
        }
        if let Some(last) = entries.last() {
            feed.read_up_to = last.seqno;
        }
        if let (Some(first), false) = (entries.first(), draining) {
            self.heap.push(Reverse((first.cas, vbucket)));
        }
        feed.buffer.extend(entries);
        Ok(())
    }

    fn next_entry(&mut self) -> Result<Option<ChangeEntry>, EngineError> {
        if !self.started {
            self.started = true;
            for vbucket in 0..self.bucket.vbuckets {
                if self.wants_pass(vbucket)? {
                    self.drains.push_back(vbucket);
                } else {
                    self.refill(vbucket)?;
                }
            }
        }
        while let Some(&vbucket) = self.drains.front() {
            self.refill(vbucket)?;
            if let Some(entry) = self.feeds[vbucket as usize].buffer.pop_front() {
                self.position.set(vbucket, entry.seqno);
                return Ok(Some(entry));
            }
            self.drains.pop_front();
            self.pass = None;
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
