//! The change stream: each vbucket's `seq` range read from a seqno onwards, and a cursor that
//! merges all of a bucket's vbuckets into one feed ordered by CAS (hybrid logical time), so the
//! merged feed follows write order closely while staying resumable per vbucket.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use settee_storage::Cf;

use crate::bucket::Bucket;
use crate::change_entry::{is_abbreviated, ChangeEntry, HoldsChange, StoredEntry, StreamEntry};
use crate::collections::{Liveness, SystemEventKind};
use crate::error::EngineError;
use crate::keys;
use crate::record::Header;
use crate::seqvec::SeqVector;
use crate::skips::SkippedRecord;

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

impl Bucket {
    /// Up to `limit` entries of collection 0's documents in one vbucket's stream with seqno >
    /// `since`, in seqno order; fewer only when the stream has no more.
    pub fn vbucket_changes(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        self.read_vbucket_changes(0, vbucket, since, limit, None)
    }

    /// [`Bucket::vbucket_changes`] of one collection's documents: other collections' entries
    /// and system events are passed over. [`EngineError::UnknownCollection`] unless the
    /// collection is live.
    pub fn vbucket_changes_in(
        &self,
        collection: u32,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        self.check_live(collection)?;
        self.read_vbucket_changes(collection, vbucket, since, limit, None)
    }

    /// Up to `limit` entries of one vbucket's whole stream with seqno > `since`: every live
    /// collection's documents and purge markers, and the system events (for DCP). Entries of
    /// dropped collections not purged yet, and their create and modify events, are passed
    /// over; drop events stay. Fewer than `limit` only when the stream has no more.
    pub fn vbucket_stream(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
    ) -> Result<Vec<StreamEntry>, EngineError> {
        let mut view = self.collections_view();
        let select = |stored: StoredEntry, seqno: u64| -> Option<StreamEntry> {
            match stored {
                StoredEntry::Change(entry, _) => match view.classify(self, entry.collection) {
                    Liveness::Live => Some(StreamEntry::Change(entry)),
                    Liveness::Dropped => None,
                    Liveness::Unknown => {
                        self.skip(
                            SkippedRecord::ChangeEntry,
                            vbucket,
                            format!("seqno {seqno}").as_bytes(),
                            &"change entry of an unknown collection",
                        );
                        None
                    }
                },
                StoredEntry::Event(event) => {
                    let keep = !event.kind.is_collection_event()
                        || event.kind == SystemEventKind::CollectionDropped
                        || view.classify(self, event.collection_id) == Liveness::Live;
                    keep.then_some(StreamEntry::Event(event))
                }
                // Left for the drop purger like its collection's documents.
                StoredEntry::Purge(marker) => (view.classify(self, marker.collection)
                    == Liveness::Live)
                    .then_some(StreamEntry::Purge(marker)),
            }
        };
        self.read_vbucket(vbucket, since, limit, select, None)
    }

    /// A collection's document entries of one vbucket, resolving abbreviated ones through
    /// `pass` when one is given (see [`Bucket::read_vbucket`]).
    fn read_vbucket_changes(
        &self,
        collection: u32,
        vbucket: u16,
        since: u64,
        limit: usize,
        pass: Option<PassSlot<'_>>,
    ) -> Result<Vec<ChangeEntry>, EngineError> {
        let select = |stored: StoredEntry, _: u64| match stored {
            StoredEntry::Change(entry, _) if entry.collection == collection => Some(entry),
            _ => None,
        };
        self.read_vbucket(vbucket, since, limit, select, pass)
    }

    /// Up to `limit` entries of `vbucket`'s stream after `since` that `select` keeps, in seqno
    /// order; fewer only when the stream has no more. Abbreviated ids are resolved through
    /// `pass` (built or rebuilt here when it does not cover them) when one is given, with a
    /// seek each otherwise and for any entry the pass does not know. An entry that does not
    /// decode is skipped (counted), never the end of the feed.
    fn read_vbucket<T: HoldsChange>(
        &self,
        vbucket: u16,
        since: u64,
        limit: usize,
        mut select: impl FnMut(StoredEntry, u64) -> Option<T>,
        mut pass: Option<PassSlot<'_>>,
    ) -> Result<Vec<T>, EngineError> {
        let (_, upper) = keys::vb_range(self.id, vbucket);
        let mut out: Vec<T> = Vec::new();
        // The next read starts here: just past the last key read, whether or not that entry
        // decoded or was kept, so nothing is read twice.
        let mut lower = keys::seq_key(self.id, vbucket, since.saturating_add(1));
        while out.len() < limit {
            let mut ended = true;
            let mut abbreviated = Vec::new();
            for item in self.store.scan(Cf::Seq, &lower, &upper, false) {
                let (key, value) = item?;
                lower = key.to_vec();
                lower.push(0);
                let seqno = keys::seqno_of_seq_key(&key);
                let decoded = seqno.and_then(|seqno| StoredEntry::decode(vbucket, seqno, &value));
                let (Some(seqno), Some(stored)) = (seqno, decoded) else {
                    let at = seqno.map_or_else(
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
                let short = matches!(stored, StoredEntry::Change(_, true));
                if let Some(kept) = select(stored, seqno) {
                    if short {
                        abbreviated.push(out.len());
                    }
                    out.push(kept);
                }
                if out.len() == limit {
                    ended = false;
                    break;
                }
            }
            if let Some(pass) = pass.as_mut() {
                abbreviated = self.resolve_by_pass(vbucket, &mut out, abbreviated, pass)?;
            }
            if !abbreviated.is_empty() {
                self.resolve_abbreviated(vbucket, &mut out, &abbreviated)?;
            }
            if ended {
                break;
            }
        }
        Ok(out)
    }

    /// Resolves the abbreviated entries at `indexes` (in seqno order) from `pass`, first
    /// (re)building it from the first seqno it does not cover. Returns the indexes it could not
    /// resolve: documents that moved on since, or entries abbreviated after the pass ran.
    fn resolve_by_pass<T: HoldsChange>(
        &self,
        vbucket: u16,
        entries: &mut [T],
        indexes: Vec<usize>,
        slot: &mut PassSlot<'_>,
    ) -> Result<Vec<usize>, EngineError> {
        let mut unresolved = Vec::new();
        for index in indexes {
            let Some(entry) = entries[index].change_mut() else {
                continue;
            };
            let (seqno, collection) = (entry.seqno, entry.collection);
            let covered = slot.pass.as_ref().is_some_and(|pass| {
                pass.vbucket == vbucket && pass.collection == collection && pass.covers(seqno)
            });
            if !covered {
                *slot.pass = Some(IdPass::read(
                    self,
                    vbucket,
                    collection,
                    seqno - 1,
                    slot.max,
                )?);
                *slot.made += 1;
            }
            let id = slot.pass.as_ref().and_then(|pass| pass.id_of(seqno));
            match id {
                Some(id) if id.starts_with(&entry.key) => {
                    entry.key = id.to_vec();
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
            Some(item) => Ok(is_abbreviated(&item?.1)),
            None => Ok(false),
        }
    }

    /// Replaces each abbreviated entry's id prefix (at `indexes` of `entries`) by the id of the
    /// document of its collection in `vbucket` that starts with it and holds the entry's
    /// seqno. An entry no document holds any more (written over since the `seq` read) is
    /// removed: its document's later entry follows in the stream.
    pub(crate) fn resolve_abbreviated<T: HoldsChange>(
        &self,
        vbucket: u16,
        entries: &mut Vec<T>,
        indexes: &[usize],
    ) -> Result<(), EngineError> {
        let wanted: Vec<(usize, u64, Vec<u8>, Vec<u8>)> = indexes
            .iter()
            .filter_map(|&index| {
                let entry = entries[index].change()?;
                let lower = keys::doc_key(self.id, vbucket, entry.collection, &entry.key);
                let upper = keys::prefix_end(&lower);
                Some((index, entry.seqno, lower, upper))
            })
            .collect();
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = wanted
            .iter()
            .map(|(_, _, lower, upper)| (lower.clone(), upper.clone()))
            .collect();
        let mut ids: Vec<Option<Vec<u8>>> = vec![None; wanted.len()];
        self.store
            .seek_each(Cf::Doc, &ranges, |range, key, value| {
                let holds =
                    Header::decode(value).is_ok_and(|header| header.seqno == wanted[range].1);
                if holds {
                    ids[range] = Some(keys::key_of_doc_key(key).to_vec());
                }
                holds
            })?;
        let mut gone = vec![false; entries.len()];
        for (id, (index, ..)) in ids.into_iter().zip(&wanted) {
            match (id, entries[*index].change_mut()) {
                (Some(id), Some(entry)) => entry.key = id,
                _ => gone[*index] = true,
            }
        }
        let mut position = 0;
        entries.retain(|_| {
            position += 1;
            !gone[position - 1]
        });
        Ok(())
    }

    /// A cursor over collection 0's changes after `since`, every vbucket merged.
    pub fn changes(&self, since: SeqVector) -> ChangeCursor<'_> {
        ChangeCursor::new(self, 0, since)
    }

    /// A cursor over one collection's changes after `since` ([`Bucket::changes`] of any
    /// collection). [`EngineError::UnknownCollection`] unless the collection is live.
    pub fn changes_in(
        &self,
        collection: u32,
        since: SeqVector,
    ) -> Result<ChangeCursor<'_>, EngineError> {
        self.check_live(collection)?;
        Ok(ChangeCursor::new(self, collection, since))
    }
}

/// One vbucket's document ids of one collection by seqno, read in one pass over its `doc`
/// range, so that a long read of compacted (abbreviated) entries resolves them without a seek
/// each. Holds every document whose seqno was in `(after, upto]` when it was read, at most
/// [`PASS_IDS_MAX`].
struct IdPass {
    vbucket: u16,
    collection: u32,
    after: u64,
    upto: u64,
    /// Sorted by seqno.
    ids: Vec<(u64, Vec<u8>)>,
}

impl IdPass {
    fn read(
        bucket: &Bucket,
        vbucket: u16,
        collection: u32,
        after: u64,
        max: usize,
    ) -> Result<IdPass, EngineError> {
        let mut lowest = LowestSeqnos::new(after, max);
        let bad = scan_doc_seqnos(
            &bucket.store,
            bucket.id,
            vbucket,
            collection,
            |id, seqno| {
                if lowest.wants(seqno) {
                    lowest.push(seqno, id.to_vec());
                }
            },
        )?;
        for (id, error) in bad {
            bucket.skip(SkippedRecord::Document, vbucket, &id, &error);
        }
        let (ids, _, upto) = lowest.finish();
        Ok(IdPass {
            vbucket,
            collection,
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

/// Visits every document of one collection in `vbucket` in id order with its id and the seqno
/// its record holds: one pass over the collection's `doc` range. Records whose header does not
/// decode are passed over and returned (id, reason), for the caller to count as skipped.
pub(crate) fn scan_doc_seqnos(
    store: &settee_storage::Store,
    bucket_id: u32,
    vbucket: u16,
    collection: u32,
    mut visit: impl FnMut(&[u8], u64),
) -> Result<Vec<(Vec<u8>, EngineError)>, EngineError> {
    let (lower, upper) = keys::coll_range(bucket_id, vbucket, collection);
    let mut bad = Vec::new();
    store.seek_each(Cf::Doc, &[(lower, upper)], |_, key, value| {
        let id = keys::key_of_doc_key(key);
        match Header::decode(value) {
            Ok(header) => visit(id, header.seqno),
            Err(error) => bad.push((id.to_vec(), error.into())),
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
    /// The collection whose documents' entries the cursor yields.
    collection: u32,
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
    fn new(bucket: &'a Bucket, collection: u32, since: SeqVector) -> ChangeCursor<'a> {
        let feeds = (0..bucket.vbuckets)
            .map(|vbucket| VbFeed {
                buffer: VecDeque::new(),
                exhausted: false,
                read_up_to: since.get(vbucket),
            })
            .collect();
        // The collection's own high seqnos: a feed's end position does not move with other
        // collections' writes (and is the bucket's for a bucket without collections).
        let high_at_start = bucket
            .high_seqnos_in(collection)
            .unwrap_or_else(|_| bucket.high_seqnos());
        ChangeCursor {
            bucket,
            collection,
            high_at_start,
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

    /// Reads only the vbuckets `only` marks: the others' components of the position stay as
    /// `since` gave them, the end position included.
    pub fn only(mut self, only: &[bool]) -> ChangeCursor<'a> {
        for (vbucket, feed) in self.feeds.iter_mut().enumerate() {
            if only.get(vbucket) != Some(&true) {
                feed.exhausted = true;
                let vbucket = vbucket as u16;
                self.high_at_start.set(vbucket, self.position.get(vbucket));
            }
        }
        self
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
    /// superseded by later writes, up to the collection's high seqnos seen when the cursor
    /// started.
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
            || backlog.saturating_mul(PASS_SHARE)
                < self
                    .bucket
                    .collection_vbucket_docs(self.collection, vbucket)
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
        let entries =
            bucket.read_vbucket_changes(self.collection, vbucket, feed.read_up_to, CHUNK, pass)?;
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
