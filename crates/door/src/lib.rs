//! What the HTTP door and the KV door share of connection handling (issue 18): each counts its
//! open connections against its maximum, and a connection over it is refused and logged at
//! most once per [`REFUSAL_LOG_EVERY`], with the count since the last line, so a flood of
//! connections cannot flood the log. How a refusal is answered is each door's own business.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Refusals are logged at most this often.
pub const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// A door's open connections, against its maximum.
pub struct Slots {
    open: Arc<AtomicUsize>,
    max: usize,
    refusals: RefusalLog,
}

/// One open connection's place, given back when dropped.
pub struct Slot {
    open: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    /// `door` names the door in the log ("http", "kv").
    pub fn new(door: &'static str, max: usize) -> Slots {
        Slots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
            refusals: RefusalLog::new(door),
        }
    }

    /// A place for a new connection, or `None` (logged, rate-limited) when the door is full.
    pub fn take(&self) -> Option<Slot> {
        let before = self.open.fetch_add(1, Ordering::AcqRel);
        let slot = Slot {
            open: self.open.clone(),
        };
        if before >= self.max {
            drop(slot);
            self.refusals.refused(self.max);
            return None;
        }
        Some(slot)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// Counts refused connections and logs them at most once per [`REFUSAL_LOG_EVERY`].
struct RefusalLog {
    door: &'static str,
    started: Instant,
    /// Milliseconds since `started` of the last line logged; 0: none yet.
    last_logged_ms: AtomicU64,
    since_logged: AtomicU64,
}

impl RefusalLog {
    fn new(door: &'static str) -> RefusalLog {
        RefusalLog {
            door,
            started: Instant::now(),
            last_logged_ms: AtomicU64::new(0),
            since_logged: AtomicU64::new(0),
        }
    }

    fn refused(&self, max: usize) {
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
        let slots = Slots::new("test", 2);
        let first = slots.take().expect("first");
        let second = slots.take().expect("second");
        assert!(slots.take().is_none());
        assert!(slots.take().is_none());
        assert_eq!(slots.open(), 2);
        drop(first);
        let third = slots.take().expect("a slot given back is reused");
        assert!(slots.take().is_none());
        drop((second, third));
        assert_eq!(slots.open(), 0);
    }

    #[test]
    fn refusals_are_counted_between_log_lines() {
        let log = RefusalLog::new("test");
        log.refused(1);
        // The first refusal is logged at once; the next ones wait for the interval.
        assert_eq!(log.since_logged.load(Ordering::Relaxed), 0);
        log.refused(1);
        log.refused(1);
        assert_eq!(log.since_logged.load(Ordering::Relaxed), 2);
    }
}

/// The TLS relay's preface (`settee-tls` relay.rs writes it, the KV door's relayed listener
/// reads it): the addresses of the connection the relay accepted, so the door counts failed
/// logins by the real client and names the host the client reached in its cluster configs.
///
/// ```text
/// +--------+------------------------------------------+
/// | length | "<peer ip> <local ip>" (ASCII, <= 96 B)  |
/// +--------+------------------------------------------+
///   1 byte   `length` bytes
/// ```
pub mod relay_preface {
    use std::net::IpAddr;

    /// Longest text: two IPv6 addresses and a space fit well within it.
    pub const TEXT_BYTES_MAX: usize = 96;

    /// The preface for a connection from `peer` accepted on `local`.
    pub fn encode(peer: IpAddr, local: IpAddr) -> Vec<u8> {
        let text = format!("{peer} {local}");
        let mut preface = Vec::with_capacity(text.len() + 1);
        // Two addresses' text is at most 2 x 45 + 1 bytes: always within one length byte.
        preface.push(text.len().min(TEXT_BYTES_MAX) as u8);
        preface.extend_from_slice(&text.as_bytes()[..text.len().min(TEXT_BYTES_MAX)]);
        preface
    }

    /// `(peer, local)` from the text after the length byte; `None` if it is not two addresses.
    pub fn decode(text: &[u8]) -> Option<(IpAddr, IpAddr)> {
        let text = std::str::from_utf8(text).ok()?;
        let (peer, local) = text.split_once(' ')?;
        Some((peer.parse().ok()?, local.parse().ok()?))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn addresses_round_trip_and_garbage_is_refused() {
            let peer: IpAddr = "2001:db8::1".parse().expect("v6");
            let local: IpAddr = "10.0.0.7".parse().expect("v4");
            let preface = encode(peer, local);
            assert_eq!(usize::from(preface[0]), preface.len() - 1);
            assert_eq!(decode(&preface[1..]), Some((peer, local)));
            assert_eq!(decode(b"1.2.3.4"), None);
            assert_eq!(decode(b"1.2.3.4 nonsense"), None);
            assert_eq!(decode(&[0xff, 0x20, 0x31]), None);
        }
    }
}
