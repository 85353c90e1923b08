//! The serving lease of a cluster node (docs/format/cluster-map.md, "The serving lease").
//!
//! A cluster node may act as the active of its vbuckets only while it can show recent
//! contact with the cluster's leadership: otherwise a failover may already have promoted a
//! replica elsewhere, and a read here would be stale and a write lost. The cluster glue
//! extends the lease as contact is proven; the engine refuses front-door writes to an active
//! vbucket without it ([`crate::EngineError::NotMyVbucket`]) and the doors refuse reads.
//!
//! A single node never enforces it. Checking is one relaxed load there and one clock read
//! plus a load on a cluster node.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug)]
pub struct Lease {
    /// The instant the deadlines are counted from.
    base: Instant,
    /// Whether the node needs a lease at all (a cluster node).
    enforced: AtomicBool,
    /// The lease holds before this many microseconds after `base` (0: never held).
    until_us: AtomicU64,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            base: Instant::now(),
            enforced: AtomicBool::new(false),
            until_us: AtomicU64::new(0),
        }
    }
}

impl Lease {
    /// From now on the node serves only under a lease, and holds none yet.
    pub fn enforce(&self) {
        self.until_us.store(0, Ordering::Release);
        self.enforced.store(true, Ordering::Release);
    }

    pub fn is_enforced(&self) -> bool {
        self.enforced.load(Ordering::Relaxed)
    }

    /// Whether the node may act as an active now.
    pub fn holds(&self) -> bool {
        !self.enforced.load(Ordering::Relaxed) || self.holds_at(Instant::now())
    }

    fn holds_at(&self, now: Instant) -> bool {
        self.micros(now) < self.until_us.load(Ordering::Acquire)
    }

    fn micros(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// The lease holds until `until` (never shortened: an older proof arriving late does
    /// not take back a newer one).
    pub fn extend_to(&self, until: Instant) {
        self.until_us
            .fetch_max(self.micros(until).max(1), Ordering::AcqRel);
    }

    /// When the lease runs out, if it holds at all.
    pub fn until(&self) -> Option<Instant> {
        let until = self.until_us.load(Ordering::Acquire);
        (until > 0).then(|| self.base + std::time::Duration::from_micros(until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lease_holds_only_where_enforced_and_until_it_runs_out() {
        let lease = Lease::default();
        assert!(lease.holds(), "a single node never needs one");
        lease.enforce();
        assert!(!lease.holds(), "a cluster node starts without one");
        let now = Instant::now();
        lease.extend_to(now + Duration::from_secs(60));
        assert!(lease.holds());
        // An older proof does not shorten it.
        lease.extend_to(now);
        assert!(lease.holds_at(now + Duration::from_secs(59)));
        assert!(!lease.holds_at(now + Duration::from_secs(61)));
        // Enforcing again (a restart of the cluster glue) drops it.
        lease.enforce();
        assert!(!lease.holds());
    }
}
