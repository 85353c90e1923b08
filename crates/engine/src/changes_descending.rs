//! The change stream newest first (`_changes?descending=true`): each vbucket's `seq` range read
//! backwards from its end, a chunk at a time, down to a seqno, and merged by CAS, highest
//! first. A descending feed then holds one chunk per vbucket however long the stream, and its
//! first rows (`limit=1`: the latest change) cost a chunk per vbucket, not the whole stream.
//!
//! Each entry comes with the resume point the forward feed ([`crate::ChangeCursor`]) would
//! give just after it: the entry's own seqno for its vbucket and, for every other vbucket, the
//! newest of its entries not yet yielded here (all older than the entry) — so a client may
//! follow the feed forward from any row's `seq`.

use std::collections::{BinaryHeap, VecDeque};

use settee_storage::Cf;

use crate::bucket::Bucket;
use crate::change_entry::{ChangeEntry, StoredEntry};
use crate::error::EngineError;
use crate::keys;
use crate::seqvec::SeqVector;

/// Entries read from one vbucket per refill.
const CHUNK: usize = 256;

/// One vbucket's stream, read backwards.
struct VbBackward {
    /// Newest first.
    buffer: VecDeque<ChangeEntry>,
    exhausted: bool,
    /// The next read takes seqnos below this one (`None`: from the vbucket's end).
    below: Option<u64>,
    /// Seqnos at or under this one are not read (the feed's `since`).
    floor: u64,
}

/// Yields a bucket's changes after `since`, newest first; see the module documentation.
pub struct DescendingCursor<'a> {
    bucket: &'a Bucket,
    /// The collection whose documents' entries the cursor yields.
    collection: u32,
    feeds: Vec<VbBackward>,
    /// `(cas, vbucket)` of each vbucket's newest unread entry: the greatest is yielded next.
    heap: BinaryHeap<(u64, u16)>,
    /// Per vbucket, the seqno of its newest entry not yet yielded, or its floor when none is
    /// left: the resume point of the entry about to be yielded.
    heads: SeqVector,
    /// The resume point of the entry yielded last.
    position: SeqVector,
    started: bool,
}

impl Bucket {
    /// A cursor over collection 0's changes after `since`, newest first.
    pub fn changes_descending(&self, since: SeqVector) -> DescendingCursor<'_> {
        self.descending_cursor(0, since)
    }

    /// [`Bucket::changes_descending`] of one collection. [`EngineError::UnknownCollection`]
    /// unless the collection is live.
    pub fn changes_descending_in(
        &self,
        collection: u32,
        since: SeqVector,
    ) -> Result<DescendingCursor<'_>, EngineError> {
        self.check_live(collection)?;
        Ok(self.descending_cursor(collection, since))
    }

    fn descending_cursor(&self, collection: u32, since: SeqVector) -> DescendingCursor<'_> {
        let feeds = (0..self.vbuckets)
            .map(|vbucket| VbBackward {
                buffer: VecDeque::new(),
                exhausted: false,
                below: None,
                floor: since.get(vbucket),
            })
            .collect();
        DescendingCursor {
            bucket: self,
            collection,
            feeds,
            heap: BinaryHeap::new(),
            heads: since.clone(),
            position: since,
            started: false,
        }
    }
}

impl<'a> DescendingCursor<'a> {
    /// The cursor over the vbuckets `only` marks (a scattered feed's): the others yield
    /// nothing and stay at `since`.
    pub fn only(mut self, only: &[bool]) -> DescendingCursor<'a> {
        for (vbucket, feed) in self.feeds.iter_mut().enumerate() {
            if only.get(vbucket) != Some(&true) {
                feed.exhausted = true;
            }
        }
        self
    }

    /// The forward feed's resume point just after the entry yielded last (`since` before the
    /// first).
    pub fn position(&self) -> &SeqVector {
        &self.position
    }

    /// Reads the next chunk of `vbucket` (backwards) if its buffer is empty, and puts its
    /// newest entry on the heap.
    fn refill(&mut self, vbucket: u16) -> Result<(), EngineError> {
        let (bucket, collection) = (self.bucket, self.collection);
        let feed = &mut self.feeds[vbucket as usize];
        while feed.buffer.is_empty() && !feed.exhausted {
            let lower = keys::seq_key(bucket.id, vbucket, feed.floor.saturating_add(1));
            let upper = match feed.below {
                Some(below) => keys::seq_key(bucket.id, vbucket, below),
                None => keys::vb_range(bucket.id, vbucket).1,
            };
            if lower >= upper {
                feed.exhausted = true;
                break;
            }
            let mut entries: Vec<ChangeEntry> = Vec::with_capacity(CHUNK);
            let mut abbreviated = Vec::new();
            let mut read = 0;
            for item in bucket.store.scan(Cf::Seq, &lower, &upper, true).take(CHUNK) {
                let (key, value) = item?;
                read += 1;
                let Some(seqno) = keys::seqno_of_seq_key(&key) else {
                    tracing::warn!(vbucket, "skipping a change entry with a corrupt key");
                    continue;
                };
                feed.below = Some(seqno);
                match StoredEntry::decode(vbucket, seqno, &value) {
                    Some(StoredEntry::Change(entry, short)) if entry.collection == collection => {
                        if short {
                            abbreviated.push(entries.len());
                        }
                        entries.push(entry);
                    }
                    // Another collection's entry, or a system event.
                    Some(_) => {}
                    None => tracing::warn!(vbucket, seqno, "skipping a corrupt change entry"),
                }
            }
            if !abbreviated.is_empty() {
                bucket.resolve_abbreviated(vbucket, &mut entries, &abbreviated)?;
            }
            if read < CHUNK {
                feed.exhausted = true;
            }
            feed.buffer.extend(entries);
        }
        match feed.buffer.front() {
            Some(newest) => {
                self.heap.push((newest.cas, vbucket));
                self.heads.set(vbucket, newest.seqno);
            }
            None => self.heads.set(vbucket, feed.floor),
        }
        Ok(())
    }

    fn next_entry(&mut self) -> Result<Option<ChangeEntry>, EngineError> {
        if !self.started {
            self.started = true;
            for vbucket in 0..self.bucket.vbuckets {
                self.refill(vbucket)?;
            }
        }
        let Some((_, vbucket)) = self.heap.pop() else {
            return Ok(None);
        };
        let Some(entry) = self.feeds[vbucket as usize].buffer.pop_front() else {
            return Ok(None);
        };
        // The heads still name this entry for its vbucket: they are its resume point.
        self.position.clone_from(&self.heads);
        self.refill(vbucket)?;
        Ok(Some(entry))
    }
}

impl Iterator for DescendingCursor<'_> {
    type Item = Result<ChangeEntry, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}
