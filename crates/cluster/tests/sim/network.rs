//! The simulated network: every message takes a random delay on tokio's paused clock, may be
//! dropped, and never crosses a partition or reaches a crashed node. One seeded generator
//! decides it all, so a seed replays the same deliveries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;
use settee_cluster::map::NodeId;
use settee_cluster::network::{Request, SendFuture, Transport, TransportError};
use settee_cluster::node::ClusterNode;

pub struct NetState {
    pub rng: StdRng,
    /// Running nodes; a crashed node is absent.
    pub nodes: BTreeMap<NodeId, Arc<ClusterNode>>,
    /// Side of the partition per node; nodes on different sides cannot talk. Empty: none.
    pub sides: BTreeMap<NodeId, u8>,
    /// Chance that one leg of a message (request or response) is lost.
    pub drop_rate: f64,
    pub delay_ms_max: u64,
    pub messages: u64,
}

impl NetState {
    pub fn connected(&self, a: NodeId, b: NodeId) -> bool {
        self.sides.get(&a).copied().unwrap_or(0) == self.sides.get(&b).copied().unwrap_or(0)
    }

    /// One leg's delay and whether it is lost.
    fn roll(&mut self) -> (Duration, bool) {
        self.messages += 1;
        let delay = self.rng.gen_range(1..=self.delay_ms_max.max(1));
        let lost = self.drop_rate > 0.0 && self.rng.gen_bool(self.drop_rate);
        (Duration::from_millis(delay), lost)
    }
}

#[derive(Clone)]
pub struct SimNetwork(pub Arc<Mutex<NetState>>);

impl Transport for SimNetwork {
    fn send(&self, from: NodeId, target: NodeId, _addr: &str, request: Request) -> SendFuture {
        let net = self.0.clone();
        Box::pin(async move {
            let (delay, lost) = net.lock().roll();
            tokio::time::sleep(delay).await;
            let node = {
                let state = net.lock();
                if lost || !state.connected(from, target) || !state.nodes.contains_key(&from) {
                    return Err(TransportError::Unreachable(target));
                }
                state.nodes.get(&target).cloned()
            };
            let Some(node) = node else {
                return Err(TransportError::Unreachable(target));
            };
            let vote = matches!(request, Request::Vote(_)).then(|| format!("{request:?}"));
            let asked = tokio::time::Instant::now();
            let response = node.handle(request).await;
            if let Some(vote) = vote.filter(|_| std::env::var_os("SIM_TRACE_VOTES").is_some()) {
                eprintln!(
                    "{:?} {from}->{target} took {:?}: {vote} => {response:?}",
                    asked,
                    asked.elapsed()
                );
            }
            drop(node);
            let (delay, lost) = net.lock().roll();
            tokio::time::sleep(delay).await;
            let state = net.lock();
            if lost || !state.connected(from, target) || !state.nodes.contains_key(&from) {
                return Err(TransportError::Timeout(target));
            }
            Ok(response)
        })
    }
}
