//! A simple model of per-vbucket seqnos under the committed maps, to check that failover never
//! loses a majority-acknowledged write.
//!
//! Each node keeps, per vbucket, the seqno it persisted, the highest seqno it knows a majority
//! acknowledged, the epoch of the active it follows and the epoch it is fenced at. A node that
//! believes (by its own applied map) that it is a vbucket's active writes the next seqno and
//! streams it to the replicas of its chain it can reach; a replica takes it unless it is fenced
//! at that epoch or follows a newer one, and then holds the active's prefix (rolling back what
//! it had beyond it). A write is majority-acknowledged when a majority of the active's chain
//! holds it; the model records the highest such seqno per vbucket: the truth the checks hold
//! promotions to. The orchestrator learns nothing from the model but what `fence_and_report`
//! answers, over the simulated network.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use settee_cluster::failover::ReplicaSeqno;
use settee_cluster::map::{ClusterMap, NodeId};
use settee_cluster::orchestrator::SeqnoSource;

use crate::sim::network::SimNetwork;

#[derive(Clone, Copy, Debug, Default)]
pub struct Copy {
    pub persisted: u64,
    pub majority_acked: u64,
    pub following: u64,
    pub fenced: Option<u64>,
}

pub type VbKey = (String, u16);

#[derive(Default)]
pub struct Model {
    pub copies: BTreeMap<VbKey, BTreeMap<NodeId, Copy>>,
    /// The truth: the highest seqno per vbucket a majority of its chain acknowledged.
    pub acked: BTreeMap<VbKey, u64>,
    pub writes: u64,
    pub acknowledged_writes: u64,
}

impl Model {
    pub fn copy(&mut self, key: &VbKey, node: NodeId) -> &mut Copy {
        self.copies
            .entry(key.clone())
            .or_default()
            .entry(node)
            .or_default()
    }

    /// `active` writes one seqno to `key` under its own map `map`; `reachable` says which
    /// replicas it can stream to (running, connected, and the dice allowed it).
    pub fn write(
        &mut self,
        map: &ClusterMap,
        key: &VbKey,
        active: NodeId,
        mut reachable: impl FnMut(NodeId) -> bool,
    ) {
        let Some(entry) = map
            .buckets
            .get(&key.0)
            .and_then(|b| b.vbuckets.get(usize::from(key.1)))
        else {
            return;
        };
        if entry.active != Some(active) {
            return;
        }
        let epoch = entry.epoch;
        let own = *self.copy(key, active);
        if own.following > epoch || own.fenced.is_some_and(|fenced| fenced >= epoch) {
            return; // a newer epoch has reached this node: it is no longer the active.
        }
        let seqno = own.persisted + 1;
        {
            let own = self.copy(key, active);
            own.persisted = seqno;
            own.following = epoch;
        }
        self.writes += 1;
        let known = own.majority_acked;
        let mut holders = 1;
        for replica in &entry.replicas {
            if !reachable(*replica) {
                continue;
            }
            let copy = self.copy(key, *replica);
            if copy.following > epoch || copy.fenced.is_some_and(|fenced| fenced >= epoch) {
                continue;
            }
            copy.persisted = seqno;
            copy.following = epoch;
            copy.majority_acked = copy.majority_acked.max(known);
            holders += 1;
        }
        let chain = entry.chain().count();
        if holders > chain / 2 {
            self.acknowledged_writes += 1;
            let acked = self.acked.entry(key.clone()).or_default();
            *acked = (*acked).max(seqno);
            let own = self.copy(key, active);
            own.majority_acked = own.majority_acked.max(seqno);
        }
    }
}

/// The orchestrator's view of the replicas: asked over the simulated network from `asker`.
pub struct SimSeqnos {
    pub asker: NodeId,
    pub model: Arc<Mutex<Model>>,
    pub net: SimNetwork,
}

impl SeqnoSource for SimSeqnos {
    fn fence_and_report(
        &self,
        node: NodeId,
        bucket: &str,
        vbuckets: Vec<(u16, u64)>,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<ReplicaSeqno>>> + Send>> {
        let (asker, model, net, bucket) = (
            self.asker,
            self.model.clone(),
            self.net.clone(),
            bucket.to_owned(),
        );
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            {
                let state = net.0.lock();
                if !state.nodes.contains_key(&node) || !state.connected(asker, node) {
                    return None;
                }
            }
            let mut model = model.lock();
            let answers = vbuckets
                .iter()
                .map(|(vb, epoch)| {
                    let copy = model.copy(&(bucket.clone(), *vb), node);
                    copy.fenced = Some(copy.fenced.map_or(*epoch, |fenced| fenced.max(*epoch)));
                    ReplicaSeqno {
                        persisted: copy.persisted,
                        majority_acked: copy.majority_acked,
                    }
                })
                .collect();
            Some(answers)
        })
    }
}
