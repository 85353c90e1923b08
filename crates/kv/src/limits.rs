//! The KV door's limits on connections (issue 18): how many may be open, how long one may stay
//! silent before authenticating, in the middle of a frame or idle, how many reply bytes one
//! connection, and all of them together, may hold unsent, and how long its unsent replies may
//! wait for a client that does not read them. Each is a setting with Couchbase's
//! default where Couchbase has one.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Couchbase Server's `max_connections` (user connections per node).
pub const MAX_CONNECTIONS_DEFAULT: usize = 60_000;
/// kv_engine disconnects a connection that has not authenticated within 5 minutes
/// (`FrontEndThread::tryDisconnectUnauthenticatedConnections`).
pub const AUTH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// A frame begun and then left unfinished, no byte arriving for this long, closes the
/// connection (CouchDB's 30 s for incomplete HTTP headers; kv_engine has no such timer, but a
/// partial frame holds a buffer sized for the whole announced frame).
pub const PARTIAL_FRAME_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// kv_engine closes a connection whose send queue has not shrunk for 360 s
/// (`Connection::shutdownIfSendQueueStuck`, "Send buffer stuck for too long"): a client that
/// stops reading would otherwise keep its connection, and the replies it holds, forever.
pub const SEND_QUEUE_STUCK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(360);
/// kv_engine's `max_send_queue_size`: replies a connection may have queued before the server
/// stops executing its commands until the socket drains.
pub const OUTPUT_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Unsent reply bytes of all connections together before each is held to
/// [`OUTPUT_BYTES_MIN`].
pub const NODE_OUTPUT_BYTES_MAX_DEFAULT: usize = 256 << 20;
/// What a connection may hold unsent while the node is over its total: the connections
/// holding the most stop reading first, light ones still get their few replies.
pub const OUTPUT_BYTES_MIN: usize = 64 << 10;
/// Refusals are logged at most this often, with the count since the last line.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
pub struct KvLimits {
    /// Most connections open at once; more are closed right after accept, as kv_engine does.
    pub max_connections: usize,
    /// A connection that has not authenticated by then is closed; `None`: never.
    pub auth_timeout: Option<Duration>,
    /// A partial frame with no byte arriving for this long closes the connection.
    pub partial_frame_timeout: Option<Duration>,
    /// A connection with nothing in flight and nothing arriving for this long is closed;
    /// `None` (the default): never, as kv_engine (SDKs keep idle connections for later).
    pub idle_timeout: Option<Duration>,
    /// A connection whose socket takes none of its unsent replies for this long is closed;
    /// `None`: never.
    pub send_queue_stuck_timeout: Option<Duration>,
    /// Reply bytes one connection may hold unsent before it stops reading requests.
    pub output_bytes_max: usize,
    /// Unsent reply bytes of the whole door before every connection is held to
    /// [`OUTPUT_BYTES_MIN`].
    pub node_output_bytes_max: usize,
}

impl Default for KvLimits {
    fn default() -> Self {
        KvLimits {
            max_connections: MAX_CONNECTIONS_DEFAULT,
            auth_timeout: Some(AUTH_TIMEOUT_DEFAULT),
            partial_frame_timeout: Some(PARTIAL_FRAME_TIMEOUT_DEFAULT),
            idle_timeout: None,
            send_queue_stuck_timeout: Some(SEND_QUEUE_STUCK_TIMEOUT_DEFAULT),
            output_bytes_max: OUTPUT_BYTES_MAX_DEFAULT,
            node_output_bytes_max: NODE_OUTPUT_BYTES_MAX_DEFAULT,
        }
    }
}

/// The door's open connections, counted so a connection over the maximum is refused.
pub(crate) struct Slots {
    open: Arc<AtomicUsize>,
    max: usize,
    refused: RefusalLog,
}

/// One open connection's place, given back when the connection ends (on either lane).
pub(crate) struct Slot {
    open: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    pub(crate) fn new(max: usize) -> Slots {
        Slots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
            refused: RefusalLog::new("kv"),
        }
    }

    /// A slot for a new connection, or `None` (logged, rate-limited) when the door is full.
    pub(crate) fn take(&self) -> Option<Slot> {
        let before = self.open.fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            open: self.open.clone(),
        };
        if before >= self.max {
            drop(slot);
            self.refused.refused(self.max);
            return None;
        }
        Some(slot)
    }
}

/// Counts refused connections and logs them at most once per [`REFUSAL_LOG_EVERY`], so a
/// flood of connections cannot flood the log.
pub struct RefusalLog {
    door: &'static str,
    started: Instant,
    /// Milliseconds since `started` of the last line logged.
    last_logged_ms: AtomicU64,
    since_logged: AtomicU64,
}

impl RefusalLog {
    pub fn new(door: &'static str) -> RefusalLog {
        RefusalLog {
            door,
            started: Instant::now(),
            last_logged_ms: AtomicU64::new(0),
            since_logged: AtomicU64::new(0),
        }
    }

    pub fn refused(&self, max: usize) {
        self.since_logged.fetch_add(1, Ordering::Relaxed);
        let now_ms = self.started.elapsed().as_millis() as u64;
        let last = self.last_logged_ms.load(Ordering::Relaxed);
        let due = last == 0 || now_ms.saturating_sub(last) >= REFUSAL_LOG_EVERY.as_millis() as u64;
        if due
            && self
                .last_logged_ms
                .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let refused = self.since_logged.swap(0, Ordering::Relaxed);
            tracing::warn!(
                door = self.door,
                max_connections = max,
                refused,
                "connection limit reached: new connections are refused"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_refuse_past_the_maximum_and_come_back_when_dropped() {
        let slots = Slots::new(2);
        let first = slots.take().expect("first");
        let second = slots.take().expect("second");
        assert!(slots.take().is_none());
        assert!(slots.take().is_none());
        drop(first);
        let third = slots.take().expect("a slot given back is reused");
        assert!(slots.take().is_none());
        drop((second, third));
        assert_eq!(slots.open.load(Ordering::Acquire), 0);
    }
}
