//! The transfer throttle of a node (docs/format/rebalance.md, section 2, "Throttle"): one token
//! bucket of `rebalance_throttle_mbps` shared by every move on the node. A source takes tokens
//! for a chunk before sending it, a target before writing it; with several moves the chunks go
//! in the order they wait. The rate can be changed at any time (the rebalance settings) and a
//! waiting chunk takes the new rate at once.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Couchbase's default for file-based rebalance, and settee's: 200 MB/s.
pub const THROTTLE_MBPS_DEFAULT: u32 = 200;
/// Bytes in one MB of the setting.
const MB: u64 = 1_000_000;

/// A token bucket of bytes per second, at most one second's worth held.
#[derive(Debug)]
pub struct Throttle {
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes per second; 0 is no limit.
    rate: u64,
    /// Bytes that may go now; negative when a taker went ahead on credit.
    tokens: f64,
    at: Instant,
}

impl Throttle {
    /// A throttle of `mbps` MB/s (0: unthrottled), full.
    pub fn new(mbps: u32) -> Throttle {
        let rate = u64::from(mbps) * MB;
        Throttle {
            state: Mutex::new(Bucket {
                rate,
                tokens: rate as f64,
                at: Instant::now(),
            }),
        }
    }

    pub fn mbps(&self) -> u32 {
        u32::try_from(self.state.lock().rate / MB).unwrap_or(u32::MAX)
    }

    /// Sets the rate from now on.
    pub fn set_mbps(&self, mbps: u32) {
        let mut bucket = self.state.lock();
        bucket.refill(Instant::now());
        bucket.rate = u64::from(mbps) * MB;
        bucket.tokens = bucket.tokens.min(bucket.rate as f64);
    }

    /// Waits until `bytes` may go, and takes them. A taker goes ahead on credit when the
    /// bucket is not empty (a chunk larger than a second's worth still goes), and later takers
    /// wait for the debt to be refilled: over time the bytes taken follow the rate.
    pub async fn take(&self, bytes: u64) {
        loop {
            let wait = {
                let mut bucket = self.state.lock();
                let now = Instant::now();
                bucket.refill(now);
                if bucket.rate == 0 || bucket.tokens > 0.0 {
                    bucket.tokens -= bytes as f64;
                    return;
                }
                // Until the debt is paid back and a byte more.
                Duration::from_secs_f64((1.0 - bucket.tokens) / bucket.rate as f64)
            };
            // Woken again at least every 100 ms, so a raised rate counts for waiting takers.
            tokio::time::sleep(wait.min(Duration::from_millis(100))).await;
        }
    }
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.rate as f64).min(self.rate as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On tokio's paused clock (time moves only when every task waits), so the figures are the
    /// throttle's arithmetic, not this machine's speed.
    #[tokio::test(start_paused = true)]
    async fn takers_follow_the_rate_and_a_new_rate_counts_at_once() {
        let throttle = Throttle::new(10);
        let start = Instant::now();
        // 10 MB/s, full: the first second's worth goes at once, and one chunk more on credit;
        // the other 29 MB take 2.9 s.
        for _ in 0..40 {
            throttle.take(1_000_000).await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!((2.9..2.95).contains(&elapsed), "{elapsed}");
        // At 100 MB/s the next 100 MB (the first paying the debt of the last) take 1 s.
        throttle.set_mbps(100);
        assert_eq!(throttle.mbps(), 100);
        let start = Instant::now();
        for _ in 0..100 {
            throttle.take(1_000_000).await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!((1.0..1.05).contains(&elapsed), "{elapsed}");
    }

    #[tokio::test(start_paused = true)]
    async fn unthrottled_takes_never_wait_and_shared_takers_split_the_rate() {
        let free = Throttle::new(0);
        let start = Instant::now();
        for _ in 0..1_000 {
            free.take(1 << 20).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        // Two moves share one 8 MB/s bucket: of 32 MB in all, 8 go at once, one on credit, and
        // the other 23 take 2.875 s.
        let shared = std::sync::Arc::new(Throttle::new(8));
        let start = Instant::now();
        let movers: Vec<_> = (0..2)
            .map(|_| {
                let shared = shared.clone();
                tokio::spawn(async move {
                    for _ in 0..16 {
                        shared.take(1_000_000).await;
                    }
                })
            })
            .collect();
        for mover in movers {
            mover.await.expect("mover");
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!((2.875..2.93).contains(&elapsed), "{elapsed}");
    }
}
