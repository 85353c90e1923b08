//! Per-opcode latency histograms and the slow-operation log.
//!
//! Every request is timed from the moment its frame is decoded until its reply is encoded
//! (for queued requests: until the future finishes). Each connection records into its own
//! histograms, with no lock on the request path, and merges them into the node's totals at
//! most once a second and when it closes. A request slower than the threshold is logged with
//! its opcode and key, so "which op on which document was slow" has an answer.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use settee_kv_codec::opcode;

/// Histograms track 1 µs .. 100 s with 2 significant digits (~1% error).
const HIGHEST_MICROS: u64 = 100_000_000;
const SIGNIFICANT_DIGITS: u8 = 2;
/// Longest key shown in the slow-operation log.
const LOGGED_KEY_BYTES: usize = 64;
const MERGE_EVERY: Duration = Duration::from_secs(1);

/// Latency histograms by opcode, in microseconds.
pub(crate) struct Timings {
    by_opcode: Vec<Option<Histogram<u64>>>,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            by_opcode: (0..=u8::MAX).map(|_| None).collect(),
        }
    }
}

impl Timings {
    fn record(&mut self, opcode: u8, micros: u64) {
        let histogram = self.by_opcode[opcode as usize].get_or_insert_with(|| {
            Histogram::new_with_max(HIGHEST_MICROS, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid")
        });
        histogram.saturating_record(micros.max(1));
    }

    fn merge_into(&mut self, total: &mut Timings) {
        for (mine, theirs) in self.by_opcode.iter_mut().zip(total.by_opcode.iter_mut()) {
            if let Some(mine) = mine.as_mut() {
                match theirs {
                    Some(theirs) => {
                        let _ = theirs.add(&*mine);
                    }
                    None => *theirs = Some(mine.clone()),
                }
                mine.reset();
            }
        }
    }

    /// `{"GET": {"count", "p50_us", "p99_us", "p999_us", "max_us"}, ...}` for every opcode seen.
    pub(crate) fn report(&self) -> serde_json::Value {
        let mut report = serde_json::Map::new();
        for (code, histogram) in self.by_opcode.iter().enumerate() {
            let Some(histogram) = histogram.as_ref().filter(|h| !h.is_empty()) else {
                continue;
            };
            report.insert(
                opcode::name(code as u8).to_string(),
                serde_json::json!({
                    "count": histogram.len(),
                    "p50_us": histogram.value_at_quantile(0.50),
                    "p99_us": histogram.value_at_quantile(0.99),
                    "p999_us": histogram.value_at_quantile(0.999),
                    "max_us": histogram.max(),
                }),
            );
        }
        serde_json::Value::Object(report)
    }
}

/// The node's totals and the slow-operation threshold.
pub(crate) struct NodeTimings {
    total: Mutex<Timings>,
    slow_after: Duration,
}

impl NodeTimings {
    pub(crate) fn new(slow_after: Duration) -> NodeTimings {
        NodeTimings {
            total: Mutex::new(Timings::default()),
            slow_after,
        }
    }

    pub(crate) fn report(&self) -> serde_json::Value {
        self.total.lock().report()
    }

    /// Per opcode seen, its latencies in the buckets of Prometheus's histograms (for
    /// `GET /metrics`): each bucket counts the recorded values up to its bound, at the
    /// histogram's precision; the sum is the count times the mean.
    pub(crate) fn snapshots(&self) -> Vec<(u8, settee_metrics::Snapshot)> {
        let total = self.total.lock();
        total
            .by_opcode
            .iter()
            .enumerate()
            .filter_map(|(code, histogram)| {
                let histogram = histogram.as_ref().filter(|h| !h.is_empty())?;
                let mut snapshot = settee_metrics::Snapshot::default();
                let mut below = 0;
                for (slot, bound) in settee_metrics::LATENCY_BOUNDS_MICROS.iter().enumerate() {
                    let upto = histogram.count_between(0, *bound).min(histogram.len());
                    snapshot.buckets[slot] = upto.saturating_sub(below);
                    below = upto.max(below);
                }
                let last = snapshot.buckets.len() - 1;
                snapshot.buckets[last] = histogram.len().saturating_sub(below);
                snapshot.sum_micros = (histogram.mean() * histogram.len() as f64) as u64;
                Some((code as u8, snapshot))
            })
            .collect()
    }

    /// Records straight into the totals (queued requests, which finish off the connection's
    /// task; they wait for an fsync anyway, so the lock is no cost worth avoiding).
    pub(crate) fn record(&self, opcode: u8, key: &[u8], started: Instant) {
        let took = started.elapsed();
        self.total.lock().record(opcode, took.as_micros() as u64);
        self.log_if_slow(opcode, key, took);
    }

    pub(crate) fn log_if_slow(&self, opcode: u8, key: &[u8], took: Duration) {
        if took >= self.slow_after {
            let shown = &key[..key.len().min(LOGGED_KEY_BYTES)];
            tracing::warn!(
                op = opcode::name(opcode),
                key = %String::from_utf8_lossy(shown),
                micros = took.as_micros() as u64,
                "slow operation"
            );
        }
    }
}

/// One connection's recorder.
pub(crate) struct ConnTimings {
    local: Timings,
    last_merge: Instant,
}

impl ConnTimings {
    pub(crate) fn new() -> ConnTimings {
        ConnTimings {
            local: Timings::default(),
            last_merge: Instant::now(),
        }
    }

    /// Records one request that started at `started` and ended now.
    pub(crate) fn record(&mut self, node: &NodeTimings, opcode: u8, key: &[u8], started: Instant) {
        let now = Instant::now();
        let took = now.saturating_duration_since(started);
        self.local.record(opcode, took.as_micros() as u64);
        node.log_if_slow(opcode, key, took);
        if now.saturating_duration_since(self.last_merge) >= MERGE_EVERY {
            self.merge(node);
            self.last_merge = now;
        }
    }

    /// Records a request timed elsewhere (answered on another thread, which logged it if it
    /// was slow).
    pub(crate) fn record_took(&mut self, node: &NodeTimings, opcode: u8, took: Duration) {
        self.local.record(opcode, took.as_micros() as u64);
        let now = Instant::now();
        if now.saturating_duration_since(self.last_merge) >= MERGE_EVERY {
            self.merge(node);
            self.last_merge = now;
        }
    }

    pub(crate) fn merge(&mut self, node: &NodeTimings) {
        self.local.merge_into(&mut node.total.lock());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_merge_into_per_opcode_totals() {
        let node = NodeTimings::new(Duration::from_secs(60));
        let mut first = ConnTimings::new();
        let mut second = ConnTimings::new();
        let started = Instant::now();
        for _ in 0..10 {
            first.record(&node, opcode::GET, b"k", started);
        }
        second.record(&node, opcode::SET, b"k", started);
        second.record(&node, opcode::GET, b"k", started);
        assert_eq!(node.report(), serde_json::json!({}));
        node.record(opcode::DELETE, b"k", started);
        assert_eq!(node.report()["DELETE"]["count"], 1);
        first.merge(&node);
        second.merge(&node);
        // Merging twice adds nothing: the local histograms were emptied.
        first.merge(&node);
        let report = node.report();
        assert_eq!(report["GET"]["count"], 11);
        assert_eq!(report["SET"]["count"], 1);
        assert!(report.get("APPEND").is_none());
    }
}
