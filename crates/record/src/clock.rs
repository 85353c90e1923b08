//! Time goes through one seam so tests can control it (expiry, CAS).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> u64;

    fn now_secs(&self) -> u32 {
        (self.now_ns() / 1_000_000_000) as u32
    }
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos() as u64)
            .unwrap_or(0)
    }
}

/// A clock tests move by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    ns: AtomicU64,
}

impl ManualClock {
    pub fn new(secs: u32) -> ManualClock {
        ManualClock {
            ns: AtomicU64::new(u64::from(secs) * 1_000_000_000),
        }
    }

    pub fn advance_secs(&self, secs: u32) {
        self.ns
            .fetch_add(u64::from(secs) * 1_000_000_000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::SeqCst)
    }
}

/// Hybrid logical clock for CAS values: wall-clock nanoseconds with the low 16 bits used as a
/// counter, and never smaller than or equal to a value it handed out before (also across
/// restarts, where it is seeded with the highest CAS found on disk).
#[derive(Debug, Default)]
pub struct Hlc {
    last: AtomicU64,
}

impl Hlc {
    pub fn observe(&self, cas: u64) {
        self.last.fetch_max(cas, Ordering::SeqCst);
    }

    pub fn next(&self, clock: &dyn Clock) -> u64 {
        let physical = clock.now_ns() & !0xffff;
        let mut current = self.last.load(Ordering::SeqCst);
        loop {
            let candidate = physical.max(current + 1);
            match self.last.compare_exchange_weak(
                current,
                candidate,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return candidate,
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_is_strictly_increasing_even_when_time_stands_still() {
        let clock = ManualClock::new(1000);
        let hlc = Hlc::default();
        let a = hlc.next(&clock);
        let b = hlc.next(&clock);
        assert!(b > a);
        hlc.observe(b + 100);
        assert!(hlc.next(&clock) > b + 100);
    }
}
