//! The serving lease, kept (docs/format/cluster-map.md, "The serving lease"): every
//! [`TICK`], the lease of the engine is extended to when the node's last proof of contact
//! with the leadership (`ClusterNode::lease_basis`) plus three quarters of the auto-failover
//! timeout runs out — but only once this node has followed the map revision that proof
//! carried, so a node that missed a failover learns it before it serves again. The engine
//! and both doors refuse to act as an active without it (`settee_engine::lease`).

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::node::{ClusterNode, LeaseBasis};
use settee_engine::Engine;
use tokio::sync::watch;

/// How often the lease is looked at: well inside the shortest lease (750 ms at the 1 s
/// minimum timeout).
const TICK: Duration = Duration::from_millis(50);

/// Until when `basis` lets a node serve, with the map's auto-failover timeout: a failover
/// needs the leader to miss the node for the whole timeout, counted from no earlier than
/// `basis.since`.
pub fn lease_end(basis: LeaseBasis, timeout_ms: u32) -> std::time::Instant {
    basis.since.into_std() + Duration::from_millis(u64::from(timeout_ms) * 3 / 4)
}

/// Keeps the engine's lease until `shutdown`. The lease must already be enforced (before the
/// doors open), so nothing is served before the first proof.
pub fn keep(
    node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    mut followed: watch::Receiver<u64>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::pin!(shutdown);
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // A newly followed map may be what the last proof waited for: looked at at once.
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ticks.tick() => {}
                changed = followed.changed() => if changed.is_err() { return },
            }
            let Some(basis) = node.lease_basis() else {
                continue;
            };
            if *followed.borrow() >= basis.revision {
                let timeout_ms = node.map().auto_failover.timeout_ms;
                engine.lease().extend_to(lease_end(basis, timeout_ms));
            }
        }
    })
}
