//! Latency histograms with fixed buckets, sharded like [`crate::Counter`].
//!
//! Recording is one bucket search over [`LATENCY_BOUNDS_MICROS`] and two relaxed atomic adds
//! on the calling thread's shard; no lock, no allocation. The buckets are Prometheus's
//! (cumulative `le` buckets are made when the exposition is written), so quantiles read back
//! here are bucket upper bounds: exact enough to tell 1 ms from 10 ms, which is what an
//! operator asks of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::counter::{shard, Padded, SHARDS};

/// Upper bounds of the buckets, in microseconds: 100 µs to 10 s, about 2.5x apart. Above the
/// last one a value goes to the `+Inf` bucket.
pub const LATENCY_BOUNDS_MICROS: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Buckets plus the `+Inf` one.
const SLOTS: usize = LATENCY_BOUNDS_MICROS.len() + 1;

struct Shard {
    buckets: [AtomicU64; SLOTS],
    sum_micros: AtomicU64,
}

/// A latency histogram.
pub struct Histogram {
    shards: Box<[Padded<Shard>; SHARDS]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            shards: Box::new(std::array::from_fn(|_| {
                Padded(Shard {
                    buckets: std::array::from_fn(|_| AtomicU64::new(0)),
                    sum_micros: AtomicU64::new(0),
                })
            })),
        }
    }
}

impl Histogram {
    pub fn record(&self, took: Duration) {
        self.record_micros(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn record_micros(&self, micros: u64) {
        let slot = LATENCY_BOUNDS_MICROS
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(SLOTS - 1);
        let shard = &self.shards[shard()].0;
        shard.buckets[slot].fetch_add(1, Ordering::Relaxed);
        shard.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The counts so far, summed over the shards.
    pub fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for shard in self.shards.iter() {
            for (total, bucket) in snapshot.buckets.iter_mut().zip(shard.0.buckets.iter()) {
                *total = total.wrapping_add(bucket.load(Ordering::Relaxed));
            }
            snapshot.sum_micros = snapshot
                .sum_micros
                .wrapping_add(shard.0.sum_micros.load(Ordering::Relaxed));
        }
        snapshot
    }
}

/// A histogram's counts at one moment: per bucket (not cumulative), the last being `+Inf`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub buckets: [u64; SLOTS],
    pub sum_micros: u64,
}

impl Snapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_micros as f64 / 1e6
    }

    /// Adds another snapshot's counts (a histogram per label merged into a total).
    pub fn add(&mut self, other: &Snapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.sum_micros += other.sum_micros;
    }

    /// `(upper bound in seconds, cumulative count)` per bucket, `+Inf` as `f64::INFINITY`:
    /// Prometheus's `le` buckets.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut running = 0;
        self.buckets
            .iter()
            .enumerate()
            .map(|(slot, count)| {
                running += count;
                let bound = LATENCY_BOUNDS_MICROS
                    .get(slot)
                    .map_or(f64::INFINITY, |micros| *micros as f64 / 1e6);
                (bound, running)
            })
            .collect()
    }

    /// The upper bound, in seconds, of the bucket holding the `quantile` (0..=1) of the
    /// values; `None` when empty. Values past the last bound report the last bound.
    pub fn quantile_seconds(&self, quantile: f64) -> Option<f64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut running = 0;
        let last = LATENCY_BOUNDS_MICROS[LATENCY_BOUNDS_MICROS.len() - 1];
        for (slot, bucket) in self.buckets.iter().enumerate() {
            running += bucket;
            if running >= rank {
                let micros = LATENCY_BOUNDS_MICROS.get(slot).copied().unwrap_or(last);
                return Some(micros as f64 / 1e6);
            }
        }
        Some(last as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_buckets_and_quantiles_read_bounds() {
        let histogram = Histogram::default();
        for _ in 0..90 {
            histogram.record(Duration::from_micros(80));
        }
        for _ in 0..9 {
            histogram.record(Duration::from_millis(3));
        }
        histogram.record(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 100);
        assert_eq!(snapshot.buckets[0], 90);
        assert_eq!(snapshot.buckets[5], 9);
        assert_eq!(snapshot.buckets[SLOTS - 1], 1);
        assert_eq!(snapshot.sum_micros, 90 * 80 + 9 * 3_000 + 60_000_000);
        assert_eq!(snapshot.quantile_seconds(0.5), Some(0.0001));
        assert_eq!(snapshot.quantile_seconds(0.95), Some(0.005));
        assert_eq!(snapshot.quantile_seconds(1.0), Some(10.0));
        let cumulative = snapshot.cumulative();
        assert_eq!(cumulative[0], (0.0001, 90));
        assert_eq!(cumulative[5], (0.005, 99));
        assert_eq!(cumulative[SLOTS - 1], (f64::INFINITY, 100));
        assert_eq!(Snapshot::default().quantile_seconds(0.5), None);
    }

    #[test]
    fn a_value_on_a_bound_belongs_to_that_bucket() {
        let histogram = Histogram::default();
        histogram.record_micros(1_000);
        histogram.record_micros(1_001);
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.buckets[3], 1);
        assert_eq!(snapshot.buckets[4], 1);
    }
}
