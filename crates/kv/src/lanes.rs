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
//!
//! The bulk lane is one single-threaded runtime per core, and a moving connection goes to the
//! one serving the fewest connections: its task then always runs on the same thread. On one
//! multi-threaded runtime, every wake-up from the heavy pool could land the task on the other
//! worker, and the woken worker spent its time looking for work to steal; one unordered
//! connection's CPU-heavy mix ran ~7% faster on pinned threads (BENCHMARKS.md, issue 4).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

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

/// The bulk lane's threads, each running a single-threaded runtime until the node's KV state
/// goes away (then its tasks are dropped without being waited for).
pub(crate) struct BulkLane {
    threads: Vec<LaneThread>,
    pub(crate) config: BulkLaneConfig,
    moved: AtomicU64,
}

struct LaneThread {
    handle: Handle,
    /// Connections this thread serves now.
    connections: Arc<AtomicUsize>,
    /// Dropped (or sent) to end the thread.
    _stop: oneshot::Sender<()>,
}

/// A connection's place on one of the bulk lane's threads, given back when dropped.
pub(crate) struct Seat {
    connections: Arc<AtomicUsize>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BulkLane {
    pub(crate) fn new(config: BulkLaneConfig) -> std::io::Result<BulkLane> {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores)
            .map(LaneThread::start)
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(BulkLane {
            threads,
            config,
            moved: AtomicU64::new(0),
        })
    }

    /// The runtime of the thread serving the fewest connections, and a seat on it for one
    /// more; the seat goes with the connection's task.
    pub(crate) fn seat(&self) -> Option<(Handle, Seat)> {
        let thread = self
            .threads
            .iter()
            .min_by_key(|thread| thread.connections.load(Ordering::Relaxed))?;
        thread.connections.fetch_add(1, Ordering::Relaxed);
        let seat = Seat {
            connections: thread.connections.clone(),
        };
        Some((thread.handle.clone(), seat))
    }

    pub(crate) fn count_move(&self) {
        self.moved.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Connections each of the lane's threads serves now.
    pub(crate) fn connections(&self) -> Vec<usize> {
        self.threads
            .iter()
            .map(|thread| thread.connections.load(Ordering::Relaxed))
            .collect()
    }
}

impl LaneThread {
    fn start(index: usize) -> std::io::Result<LaneThread> {
        let name = format!("settee-kv-bulk-{index}");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(name.clone())
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new().name(name).spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            });
            // Dropping the runtime here, off any async thread, drops the tasks it still has.
        })?;
        Ok(LaneThread {
            handle,
            connections: Arc::new(AtomicUsize::new(0)),
            _stop: stop,
        })
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
    fn connections_go_to_the_least_busy_thread_and_stay_on_it() {
        let lane = BulkLane::new(BulkLaneConfig::default()).expect("lane");
        let threads = lane.threads.len();
        // Each thread takes one connection before any takes a second.
        let seats: Vec<(Handle, Seat)> = (0..threads + 1)
            .map(|_| lane.seat().expect("seat"))
            .collect();
        let mut counts = lane.connections();
        counts.sort_unstable();
        let mut expected = vec![1; threads];
        expected[threads - 1] = 2;
        assert_eq!(counts, expected);
        // A connection's task runs on its thread, every time it is polled.
        let (handle, _) = &seats[0];
        let names: Vec<String> = (0..3)
            .map(|_| {
                let (sent, received) = std::sync::mpsc::channel();
                handle.spawn(async move {
                    tokio::task::yield_now().await;
                    let name = std::thread::current().name().map(str::to_owned);
                    let _ = sent.send(name.unwrap_or_default());
                });
                received.recv_timeout(Duration::from_secs(5)).expect("ran")
            })
            .collect();
        assert!(names[0].starts_with("settee-kv-bulk-"), "{names:?}");
        assert!(names.iter().all(|name| *name == names[0]), "{names:?}");
        // A seat given back makes its thread the least busy again.
        drop(seats);
        assert_eq!(lane.connections(), vec![0; threads]);
    }

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
