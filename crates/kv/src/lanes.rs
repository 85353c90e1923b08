//! Two lanes for connections, so a busy connection cannot make others wait for a thread.
//!
//! Every connection starts on the main runtime, whose worker threads also answer everyone's
//! cheap requests. A connection that pipelines (several requests arrive with each read) and
//! whose task stays busy for most of a measuring window — a client with hundreds of requests in
//! flight, say — is moved, between two requests, to the bulk lane: a runtime of its own with its own worker threads. The operating system then shares
//! the cores between the lanes' threads, and a light connection's request, arriving on a
//! main-lane thread that was asleep, is answered at once instead of after the busy
//! connection's current batch. Measured (BENCHMARKS.md, issue 4): a light client's GET p99
//! under a heavy sub-document hammer in the same process went from ~8x to ~1.2x its unloaded
//! value when the hammer ran in a separate server process, which is what this reproduces
//! inside one process.
//!
//! A move happens at a quiet point: the connection stops reading, finishes and writes every
//! reply it owes, then its socket, session and unread input continue on the bulk lane. Moves
//! go one way; a connection on the bulk lane stays there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When a connection moves to the bulk lane.
#[derive(Clone, Copy, Debug)]
pub struct BulkLaneConfig {
    /// Length of one measuring window.
    pub window: Duration,
    /// Share of a window the connection's task spent working (not waiting for the network or
    /// for queued requests) at or above which it moves.
    pub busy_share: f64,
    /// Fewest requests per read, on average over the window, for a move. A client with one
    /// request in flight keeps its task busy half the time on loopback (the reply's `write`
    /// runs the receiver's network stack), yet it is exactly the light client the main lane
    /// is for.
    pub requests_per_read: f64,
}

impl Default for BulkLaneConfig {
    fn default() -> Self {
        BulkLaneConfig {
            window: Duration::from_millis(100),
            busy_share: 0.5,
            requests_per_read: 4.0,
        }
    }
}

/// The bulk lane's runtime, shut down without waiting when the node's KV state goes away.
pub(crate) struct BulkLane {
    runtime: Option<tokio::runtime::Runtime>,
    pub(crate) config: BulkLaneConfig,
    moved: AtomicU64,
}

impl BulkLane {
    pub(crate) fn new(config: BulkLaneConfig) -> std::io::Result<BulkLane> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, usize::from))
            .thread_name("settee-kv-bulk")
            .enable_all()
            .build()?;
        Ok(BulkLane {
            runtime: Some(runtime),
            config,
            moved: AtomicU64::new(0),
        })
    }

    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref().map(|runtime| runtime.handle())
    }

    pub(crate) fn count_move(&self) {
        self.moved.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }
}

impl Drop for BulkLane {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Dropping a runtime blocks, which is not allowed on an async thread.
            runtime.shutdown_background();
        }
    }
}

/// A connection's busy time in the current window.
pub(crate) struct BusyMeter {
    config: BulkLaneConfig,
    window_started: Instant,
    busy: Duration,
    reads: u64,
    requests: u64,
}

impl BusyMeter {
    pub(crate) fn new(config: BulkLaneConfig) -> BusyMeter {
        BusyMeter {
            config,
            window_started: Instant::now(),
            busy: Duration::ZERO,
            reads: 0,
            requests: 0,
        }
    }

    /// Adds a stretch of work that began at `since` and handled `requests` requests from one
    /// read; true once a whole window was busy and pipelined enough.
    pub(crate) fn worked_since(&mut self, since: Instant, requests: usize) -> bool {
        self.worked(since, Instant::now(), requests)
    }

    fn worked(&mut self, since: Instant, now: Instant, requests: usize) -> bool {
        self.busy += now.saturating_duration_since(since);
        self.reads += 1;
        self.requests += requests as u64;
        let elapsed = now.saturating_duration_since(self.window_started);
        if elapsed < self.config.window {
            return false;
        }
        let busy_enough = self.busy.as_secs_f64() >= self.config.busy_share * elapsed.as_secs_f64();
        let pipelined = self.requests as f64 >= self.config.requests_per_read * self.reads as f64;
        self.window_started = now;
        self.busy = Duration::ZERO;
        self.reads = 0;
        self.requests = 0;
        busy_enough && pipelined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_pipelining_connection_moves_and_others_stay() {
        let config = BulkLaneConfig {
            window: Duration::from_millis(20),
            busy_share: 0.5,
            requests_per_read: 4.0,
        };
        let ms = |n: u64| Duration::from_millis(n);
        // 1 ms of work in every 10 ms, 50 requests per read: 10% busy, never moves.
        let mut idle = BusyMeter::new(config);
        let start = idle.window_started;
        for step in 0..10 {
            let began = start + ms(10 * step);
            assert!(!idle.worked(began, began + ms(1), 50), "step {step}");
        }
        // Busy 80% of the time but one request per read (a ping-pong client): stays.
        let mut ping_pong = BusyMeter::new(config);
        let start = ping_pong.window_started;
        for step in 0..10 {
            let began = start + ms(10 * step);
            assert!(!ping_pong.worked(began, began + ms(8), 1), "step {step}");
        }
        // Busy 80% of the time with 50 requests per read: moves once a window has passed.
        let mut heavy = BusyMeter::new(config);
        let start = heavy.window_started;
        let verdicts: Vec<bool> = (0..4)
            .map(|step| {
                let began = start + ms(10 * step);
                heavy.worked(began, began + ms(8), 50)
            })
            .collect();
        assert!(verdicts.contains(&true), "{verdicts:?}");
        // The thresholds are inclusive: half a window busy at 4 requests per read moves.
        let mut edge = BusyMeter::new(config);
        let at = edge.window_started;
        assert!(edge.worked(at + ms(10), at + ms(20), 4));
        let mut less_busy = BusyMeter::new(config);
        let at = less_busy.window_started;
        assert!(!less_busy.worked(at + ms(11), at + ms(20), 4));
        let mut fewer = BusyMeter::new(config);
        let at = fewer.window_started;
        assert!(!fewer.worked(at + ms(10), at + ms(20), 3));
    }
}
