//! Records that readers walking many documents leave out, so that one bad record never stops a
//! scan, a feed, an index build or a replication of the others (issue 18): a stored record that
//! does not decode (corrupt, or written by a version with a bug, such as 0.1.0's empty trees),
//! or a document past the [`crate::DocLimits`] an older version did not enforce.
//!
//! Each skip is counted per bucket and for the whole engine (`GET /settee/stats` on the
//! management port shows them), and logged once per record with its bucket, vbucket and key:
//! a scan that meets the same record again counts it again but does not log it again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Records remembered as already logged, per bucket; past this many, further ones are counted
/// but logged only in one summary line, so a badly damaged bucket cannot flood the log or fill
/// memory.
const LOGGED_RECORDS_MAX: usize = 4096;

/// What kind of stored record was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkippedRecord {
    /// A document record (CF `doc`) that does not decode.
    Document,
    /// A change-stream entry (CF `seq`) that does not decode.
    ChangeEntry,
    /// A document that decodes but is larger or deeper than the document limits.
    OverLimit,
}

impl SkippedRecord {
    fn name(self) -> &'static str {
        match self {
            SkippedRecord::Document => "document record that does not decode",
            SkippedRecord::ChangeEntry => "change entry that does not decode",
            SkippedRecord::OverLimit => "document past the document limits",
        }
    }

    fn remedy(self) -> &'static str {
        match self {
            SkippedRecord::Document => "an admin can remove it with _purge",
            SkippedRecord::ChangeEntry => "the next write of its document replaces it",
            SkippedRecord::OverLimit => "it can still be read alone, and rewritten or deleted",
        }
    }
}

/// Counts of skipped records, for one bucket or the whole engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SkipStats {
    /// Reads that left out a record (document or change entry) that does not decode.
    pub corrupt_records_skipped: u64,
    /// Reads that left out a document larger or deeper than the document limits.
    pub over_limit_documents_skipped: u64,
}

/// Monotonic counters; shared between a bucket and the engine's total.
#[derive(Debug, Default)]
pub(crate) struct SkipCounters {
    corrupt: AtomicU64,
    over_limit: AtomicU64,
}

impl SkipCounters {
    fn add(&self, kind: SkippedRecord) {
        let counter = match kind {
            SkippedRecord::Document | SkippedRecord::ChangeEntry => &self.corrupt,
            SkippedRecord::OverLimit => &self.over_limit,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> SkipStats {
        SkipStats {
            corrupt_records_skipped: self.corrupt.load(Ordering::Relaxed),
            over_limit_documents_skipped: self.over_limit.load(Ordering::Relaxed),
        }
    }
}

/// One bucket's skips: its counters, the engine's total, and the records already logged.
#[derive(Debug)]
pub(crate) struct Skips {
    bucket: SkipCounters,
    total: Arc<SkipCounters>,
    /// Records logged so far, by (kind, vbucket, key); a mutex taken only when a record is
    /// skipped, which is rare.
    logged: Mutex<HashSet<(SkippedRecord, u16, Vec<u8>)>>,
}

impl Skips {
    pub(crate) fn new(total: Arc<SkipCounters>) -> Skips {
        Skips {
            bucket: SkipCounters::default(),
            total,
            logged: Mutex::new(HashSet::new()),
        }
    }

    /// Counts one skip and logs it the first time this record is met.
    pub(crate) fn record(
        &self,
        bucket: &str,
        kind: SkippedRecord,
        vbucket: u16,
        key: &[u8],
        reason: &dyn std::fmt::Display,
    ) {
        self.bucket.add(kind);
        self.total.add(kind);
        let mut logged = self.logged.lock();
        if logged.len() >= LOGGED_RECORDS_MAX {
            return;
        }
        if logged.insert((kind, vbucket, key.to_vec())) {
            let key = String::from_utf8_lossy(key);
            tracing::warn!(
                bucket,
                vbucket,
                %key,
                %reason,
                "skipping a {}; readers of many documents leave it out ({})",
                kind.name(),
                kind.remedy()
            );
            if logged.len() == LOGGED_RECORDS_MAX {
                tracing::warn!(
                    bucket,
                    "{LOGGED_RECORDS_MAX} bad records logged; further ones are only counted \
                     (GET /settee/stats)"
                );
            }
        }
    }

    pub(crate) fn stats(&self) -> SkipStats {
        self.bucket.stats()
    }
}
