//! Reads across a whole bucket: `_all_docs`-style key-ordered scans merged from every vbucket.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use settee_storage::Cf;

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;
use crate::record::{DocRecord, Header};
use crate::skips::SkippedRecord;

/// Records read from one vbucket per refill, at most.
const CHUNK: usize = 128;
/// The bytes of records a scan holds across its vbuckets: each refill stops at its share (at
/// least [`REFILL_BYTES_MIN`], and always takes one record), so a scan over large documents
/// holds about one per vbucket, not `CHUNK` (issue 18: 600 clients that stopped reading an
/// `_all_docs` of 2 KB documents held 4.8 MB of the node's memory each, mostly these buffers).
const SCAN_BYTES_MAX: usize = 1 << 20;
const REFILL_BYTES_MIN: usize = 4 << 10;

/// Which keys a [`DocScan`] visits: documents of one collection (0: `_default._default`).
/// Bounds are raw document keys; `end` is inclusive when `inclusive_end` is set. With
/// `descending`, `start` is the high end, as in CouchDB.
#[derive(Clone, Debug, Default)]
pub struct ScanRange {
    pub collection: u32,
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
    pub inclusive_end: bool,
    pub descending: bool,
}

struct VbScan {
    buffer: VecDeque<(Vec<u8>, DocRecord)>,
    /// Next read starts here (forward: inclusive lower bound; descending: exclusive upper).
    resume: Vec<u8>,
    exhausted: bool,
}

/// Yields `(key, record)` in key order (raw bytes), live and deleted documents alike; callers
/// filter. Memory stays bounded by `vbuckets * CHUNK` records and about [`SCAN_BYTES_MAX`]
/// bytes (one record per vbucket past that). A record that does not decode is
/// skipped (counted and logged once, `skips.rs`), never the end of the scan.
pub struct DocScan<'a> {
    bucket: &'a Bucket,
    range: ScanRange,
    scans: Vec<VbScan>,
    forward_heap: BinaryHeap<Reverse<(Vec<u8>, u16)>>,
    reverse_heap: BinaryHeap<(Vec<u8>, u16)>,
    started: bool,
    /// Bytes of records one refill reads at most (after its first record).
    refill_bytes: usize,
    /// Why the scan cannot run (its collection is not live), yielded first.
    refused: Option<EngineError>,
}

impl Bucket {
    /// Scans one collection's documents (`range.collection`); a collection that is not live
    /// yields [`EngineError::UnknownCollection`] and nothing else.
    pub fn scan_docs(&self, range: ScanRange) -> DocScan<'_> {
        let refused = self.check_live(range.collection).err();
        let scans = (0..self.vbuckets)
            .map(|vbucket| {
                let (lower, upper) = keys::coll_range(self.id, vbucket, range.collection);
                VbScan {
                    buffer: VecDeque::new(),
                    resume: if range.descending { upper } else { lower },
                    exhausted: false,
                }
            })
            .collect();
        DocScan {
            bucket: self,
            range,
            scans,
            forward_heap: BinaryHeap::new(),
            reverse_heap: BinaryHeap::new(),
            started: false,
            refill_bytes: (SCAN_BYTES_MAX / usize::from(self.vbuckets.max(1)))
                .max(REFILL_BYTES_MIN),
            refused,
        }
    }

    /// [`Bucket::count_live_docs`] over the vbuckets `only` marks (a node answering for its
    /// active vbuckets in a cluster).
    pub fn count_live_docs_only(
        &self,
        range: ScanRange,
        only: &[bool],
    ) -> Result<u64, EngineError> {
        self.count_live_in(range, |vbucket| {
            only.get(usize::from(vbucket)) == Some(&true)
        })
    }

    /// Live (not deleted) documents in `range`, counted by walking every vbucket's keys and
    /// reading only record headers: what precedes a `startkey` in `_all_docs` (its `offset`).
    /// Records that do not decode are not counted.
    pub fn count_live_docs(&self, range: ScanRange) -> Result<u64, EngineError> {
        self.count_live_in(range, |_| true)
    }

    fn count_live_in(
        &self,
        range: ScanRange,
        counted: impl Fn(u16) -> bool,
    ) -> Result<u64, EngineError> {
        let mut scan = self.scan_docs(range);
        if let Some(refused) = scan.refused.take() {
            return Err(refused);
        }
        let mut count = 0;
        for vbucket in (0..self.vbuckets).filter(|vbucket| counted(*vbucket)) {
            let (lower, upper) = scan.bounds(vbucket);
            if lower >= upper {
                continue;
            }
            for item in self.store.scan(Cf::Doc, &lower, &upper, false) {
                let (_, value) = item?;
                if Header::decode(&value).is_ok_and(|header| !header.deleted) {
                    count += 1;
                }
            }
        }
        Ok(count)
    }
}

impl DocScan<'_> {
    /// Visits only the vbuckets `only` marks (missing ones are not visited).
    pub fn only(mut self, only: &[bool]) -> Self {
        for (vbucket, scan) in self.scans.iter_mut().enumerate() {
            if only.get(vbucket) != Some(&true) {
                scan.exhausted = true;
            }
        }
        self
    }

    fn bounds(&self, vbucket: u16) -> (Vec<u8>, Vec<u8>) {
        let (id, cid) = (self.bucket.id, self.range.collection);
        let (vb_lower, vb_upper) = keys::coll_range(id, vbucket, cid);
        let (low, high) = if self.range.descending {
            (&self.range.end, &self.range.start)
        } else {
            (&self.range.start, &self.range.end)
        };
        let high_inclusive = if self.range.descending {
            true
        } else {
            self.range.inclusive_end
        };
        let low_inclusive = if self.range.descending {
            self.range.inclusive_end
        } else {
            true
        };
        let lower = match low {
            Some(key) => {
                let mut bound = keys::doc_key(id, vbucket, cid, key);
                if !low_inclusive {
                    bound.push(0);
                }
                bound
            }
            None => vb_lower,
        };
        let upper = match high {
            Some(key) => {
                let mut bound = keys::doc_key(id, vbucket, cid, key);
                if high_inclusive {
                    bound.push(0);
                }
                bound
            }
            None => vb_upper,
        };
        (lower, upper)
    }

    fn refill(&mut self, vbucket: u16) -> Result<(), EngineError> {
        let (mut lower, mut upper) = self.bounds(vbucket);
        let descending = self.range.descending;
        let scan = &mut self.scans[vbucket as usize];
        if scan.exhausted || !scan.buffer.is_empty() {
            return Ok(());
        }
        if descending {
            upper = upper.min(scan.resume.clone());
            scan.resume = upper.clone();
        } else {
            lower = lower.max(scan.resume.clone());
            scan.resume = lower.clone();
        }
        if lower >= upper {
            scan.exhausted = true;
            return Ok(());
        }
        // Records that do not decode are skipped: read on until one does or the range ends,
        // or this vbucket would leave the merge early.
        while scan.buffer.is_empty() && !scan.exhausted {
            let lower = if descending { &lower } else { &scan.resume };
            let upper = if descending { &scan.resume } else { &upper };
            let (mut read, mut bytes) = (0, 0);
            let mut entries = self.bucket.store.scan(Cf::Doc, lower, upper, descending);
            while read < CHUNK && bytes < self.refill_bytes {
                let Some(item) = entries.next() else {
                    scan.exhausted = true;
                    break;
                };
                let (raw_key, value) = item?;
                read += 1;
                bytes += value.len();
                scan.resume = if descending {
                    raw_key.to_vec()
                } else {
                    let mut next = raw_key.to_vec();
                    next.push(0);
                    next
                };
                let key = keys::key_of_doc_key(&raw_key);
                match DocRecord::decode(&value) {
                    Ok(record) => scan.buffer.push_back((key.to_vec(), record)),
                    // One record that does not decode must not end the scan of all the others.
                    Err(error) => self
                        .bucket
                        .skip(SkippedRecord::Document, vbucket, key, &error),
                }
            }
        }
        if let Some((key, _)) = scan.buffer.front() {
            if descending {
                self.reverse_heap.push((key.clone(), vbucket));
            } else {
                self.forward_heap.push(Reverse((key.clone(), vbucket)));
            }
        }
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<(Vec<u8>, DocRecord)>, EngineError> {
        if let Some(refused) = self.refused.take() {
            self.started = true;
            self.scans.clear();
            return Err(refused);
        }
        if !self.started {
            self.started = true;
            for vbucket in 0..self.bucket.vbuckets {
                self.refill(vbucket)?;
            }
        }
        let vbucket = if self.range.descending {
            self.reverse_heap.pop().map(|(_, vbucket)| vbucket)
        } else {
            self.forward_heap.pop().map(|Reverse((_, vbucket))| vbucket)
        };
        let Some(vbucket) = vbucket else {
            return Ok(None);
        };
        let scan = &mut self.scans[vbucket as usize];
        let Some(item) = scan.buffer.pop_front() else {
            return Ok(None);
        };
        match scan.buffer.front() {
            Some((key, _)) if self.range.descending => {
                self.reverse_heap.push((key.clone(), vbucket))
            }
            Some((key, _)) => self.forward_heap.push(Reverse((key.clone(), vbucket))),
            None => self.refill(vbucket)?,
        }
        Ok(Some(item))
    }
}

impl Iterator for DocScan<'_> {
    type Item = Result<(Vec<u8>, DocRecord), EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}
