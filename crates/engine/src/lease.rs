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
use std::time::{Duration, Instant};

use tokio::sync::Notify;

#[derive(Debug)]
pub struct Lease {
    /// The instant the deadlines are counted from.
    base: Instant,
    /// Whether the node needs a lease at all (a cluster node).
    enforced: AtomicBool,
    /// The lease holds before this many microseconds after `base` (0: never held).
    until_us: AtomicU64,
    /// Wakes `wait_held` callers when the lease is extended.
    extended: Notify,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            base: Instant::now(),
            enforced: AtomicBool::new(false),
            until_us: AtomicU64::new(0),
            extended: Notify::new(),
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
        let until = self.micros(until).max(1);
        if self.until_us.fetch_max(until, Ordering::AcqRel) < until {
            self.extended.notify_waiters();
        }
    }

    /// Whether the node holds the lease now or comes to hold it within `within`: a node that
    /// has just started, or just learned a new map, gets its lease a moment later, and a
    /// request arriving in that moment waits for it rather than being refused.
    pub async fn wait_held(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let extended = self.extended.notified();
            tokio::pin!(extended);
            extended.as_mut().enable();
            if self.holds() {
                return true;
            }
            if tokio::time::timeout_at(deadline, extended).await.is_err() {
                return self.holds();
            }
        }
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
    use std::sync::Arc;

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

    #[tokio::test]
    async fn a_waiter_gets_the_lease_given_meanwhile_and_none_given_too_late() {
        let lease = Arc::new(Lease::default());
        lease.enforce();
        assert!(!lease.wait_held(Duration::from_millis(20)).await);
        let giver = Arc::clone(&lease);
        let given = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            giver.extend_to(Instant::now() + Duration::from_secs(60));
        });
        assert!(lease.wait_held(Duration::from_secs(30)).await);
        given.await.expect("giver");
        // Held already: answered at once.
        assert!(lease.wait_held(Duration::ZERO).await);
    }
}
