//! Counters and gauges that many threads bump without sharing a cache line.
//!
//! A [`Counter`] is [`SHARDS`] atomics, each on its own cache line; a thread always adds to
//! the same shard (chosen once, round robin, when the thread first counts), and a reader sums
//! them. Two request threads counting the same event therefore never contend for one line,
//! which a single `AtomicU64` under load on every core would make them do.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// Shards per counter: enough that the threads of a large machine rarely share one.
pub const SHARDS: usize = 16;

/// One atomic alone on a cache line (64 bytes on x86-64 and most arm64; 128 would cover
/// adjacent-line prefetch too, at twice the memory per counter).
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub(crate) T);

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The shard of the calling thread.
pub(crate) fn shard() -> usize {
    SHARD.with(|cell| {
        let mut index = cell.get();
        if index == usize::MAX {
            index = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
            cell.set(index);
        }
        index
    })
}

/// A monotonically increasing count.
pub struct Counter {
    shards: [Padded<AtomicU64>; SHARDS],
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            shards: std::array::from_fn(|_| Padded(AtomicU64::new(0))),
        }
    }
}

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.shards[shard()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far (a sum over the shards; concurrent adds may or may not be in it).
    pub fn get(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.0.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }
}

/// A value that goes up and down (open connections). One atomic: gauges change per
/// connection, not per request.
#[derive(Default)]
pub struct Gauge {
    value: AtomicI64,
}

impl Gauge {
    pub fn add(&self, delta: i64) {
        self.value.fetch_add(delta, Ordering::Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    /// Adds one until the returned guard is dropped.
    pub fn hold(&self) -> GaugeHold<'_> {
        self.add(1);
        GaugeHold { gauge: self }
    }
}

/// One unit of a [`Gauge`], given back when dropped.
pub struct GaugeHold<'a> {
    gauge: &'a Gauge,
}

impl Drop for GaugeHold<'_> {
    fn drop(&mut self) {
        self.gauge.add(-1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let counter = std::sync::Arc::new(Counter::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        counter.inc();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("counting thread");
        }
        counter.add(5);
        assert_eq!(counter.get(), 80_005);
    }

    #[test]
    fn a_held_gauge_unit_is_given_back() {
        let gauge = Gauge::default();
        let first = gauge.hold();
        let second = gauge.hold();
        assert_eq!(gauge.get(), 2);
        drop(first);
        assert_eq!(gauge.get(), 1);
        drop(second);
        assert_eq!(gauge.get(), 0);
    }
}
