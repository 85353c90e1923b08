//! The pure part of sync writes (docs/format/replica.md, "Sync writes on the active"): one
//! bucket's replica chains, the seqno each replica acknowledged per vbucket, which replicas
//! stream, and from these the majority rule. No I/O, no clock: [`crate::Tracker`] wraps it.

use std::collections::{BTreeMap, BTreeSet};

/// A cluster node's id (settee-cluster's `NodeId`).
pub type NodeId = u64;

/// One vbucket's replicas as this active node sees them.
#[derive(Clone, Debug, Default)]
struct Vbucket {
    /// The replica nodes of the chain that are active members (order irrelevant).
    chain: Vec<NodeId>,
    /// Highest seqno each chain replica acknowledged.
    acked: BTreeMap<NodeId, u64>,
    /// Sync-replication streams open per node (a reconnecting consumer may briefly hold two).
    streaming: BTreeMap<NodeId, u32>,
    /// Chain replicas that have not opened a stream since they entered the chain (a new
    /// bucket's, an added-back node's): expected soon, unlike a replica whose stream ended.
    awaited: BTreeSet<NodeId>,
    /// The seqno each node streaming the vbucket last acknowledged on its current stream,
    /// in the chain or not (a rebalance's copy catching up, rebalance.md).
    latest: BTreeMap<NodeId, u64>,
}

/// One bucket's chains and acknowledgements.
#[derive(Clone, Debug)]
pub struct Chains {
    /// The bucket's configured replica count (the chain's length minus the active).
    replicas: u8,
    vbuckets: Vec<Vbucket>,
}

/// Nodes that must hold a write for it to be durable in a chain of `replicas + 1` nodes:
/// Couchbase's `floor(n / 2) + 1`, the active included.
pub fn majority(replicas: u8) -> usize {
    // floor((replicas + 1) / 2) == ceil(replicas / 2).
    usize::from(replicas).div_ceil(2) + 1
}

impl Chains {
    /// A bucket of `vbuckets` vbuckets with no replicas: the active alone is a majority.
    pub fn new(vbuckets: u16) -> Chains {
        Chains {
            replicas: 0,
            vbuckets: vec![Vbucket::default(); usize::from(vbuckets)],
        }
    }

    pub fn replicas(&self) -> u8 {
        self.replicas
    }

    pub fn vbucket_count(&self) -> usize {
        self.vbuckets.len()
    }

    /// Sets the configured replica count and each vbucket's chain (its replica nodes that are
    /// active members). Acknowledgements of nodes that left a chain are forgotten; those of
    /// nodes still in it are kept. Streams are kept as they are: they end by themselves.
    pub fn set_topology(&mut self, replicas: u8, chains: &[Vec<NodeId>]) {
        self.replicas = replicas;
        for (vb, slot) in self.vbuckets.iter_mut().enumerate() {
            let chain = chains.get(vb).cloned().unwrap_or_default();
            slot.acked.retain(|node, _| chain.contains(node));
            slot.awaited.retain(|node| chain.contains(node));
            for node in &chain {
                if slot.chain.contains(node) {
                    continue;
                }
                // A node entering the chain while it streams (a rebalance's copy taking its
                // place) holds what it last acknowledged: it acknowledges again only when that
                // rises, which a quiet vbucket may not do before a waiting write times out.
                if let Some(seqno) = slot.latest.get(node).copied() {
                    let held = slot.acked.entry(*node).or_insert(0);
                    *held = (*held).max(seqno);
                }
                if !slot.streaming.contains_key(node) {
                    slot.awaited.insert(*node);
                }
            }
            slot.chain = chain;
        }
    }

    /// Records `node`'s acknowledgement of `seqno` in `vb`; never lowers what it had said.
    /// Returns whether anything changed (a node outside the chain changes nothing).
    pub fn ack(&mut self, vb: u16, node: NodeId, seqno: u64) -> bool {
        let Some(slot) = self.vbuckets.get_mut(usize::from(vb)) else {
            return false;
        };
        if slot.streaming.contains_key(&node) {
            slot.latest.insert(node, seqno);
        }
        if !slot.chain.contains(&node) {
            return false;
        }
        let held = slot.acked.entry(node).or_insert(0);
        if seqno > *held {
            *held = seqno;
            return true;
        }
        false
    }

    pub fn stream_opened(&mut self, vb: u16, node: NodeId) {
        if let Some(slot) = self.vbuckets.get_mut(usize::from(vb)) {
            *slot.streaming.entry(node).or_insert(0) += 1;
            slot.awaited.remove(&node);
            slot.latest.remove(&node);
        }
    }

    pub fn stream_closed(&mut self, vb: u16, node: NodeId) {
        if let Some(slot) = self.vbuckets.get_mut(usize::from(vb)) {
            if let Some(count) = slot.streaming.get_mut(&node) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    slot.streaming.remove(&node);
                    slot.latest.remove(&node);
                }
            }
        }
    }

    /// The seqno `node` last acknowledged of `vb` on the stream it has open now, chain
    /// member or not; `None` while it streams nothing or has acknowledged nothing yet.
    pub fn latest_ack(&self, vb: u16, node: NodeId) -> Option<u64> {
        self.vbuckets
            .get(usize::from(vb))
            .and_then(|slot| slot.latest.get(&node).copied())
    }

    /// Whether a majority can be formed for `vb` now: the active plus the chain's replicas
    /// that have a sync-replication stream open here. False for a vbucket out of range.
    pub fn possible(&self, vb: u16) -> bool {
        let Some(slot) = self.vbuckets.get(usize::from(vb)) else {
            return false;
        };
        let streaming = slot
            .chain
            .iter()
            .filter(|node| slot.streaming.contains_key(node))
            .count();
        1 + streaming >= majority(self.replicas)
    }

    /// Whether `vb`'s chain holds no replica: nothing another node holds can be promoted.
    pub fn alone(&self, vb: u16) -> bool {
        self.vbuckets
            .get(usize::from(vb))
            .is_none_or(|slot| slot.chain.is_empty())
    }

    /// Whether a majority for `vb` is not possible now but will be once the chain's replicas
    /// that never streamed yet open their streams (a bucket just created, a node just added
    /// back), as opposed to replicas whose streams ended (a node down).
    pub fn expected(&self, vb: u16) -> bool {
        let Some(slot) = self.vbuckets.get(usize::from(vb)) else {
            return false;
        };
        let streaming_or_awaited = slot
            .chain
            .iter()
            .filter(|node| slot.streaming.contains_key(node) || slot.awaited.contains(node))
            .count();
        !self.possible(vb) && 1 + streaming_or_awaited >= majority(self.replicas)
    }

    /// The lowest seqno of `vb` every replica of its chain acknowledged (0 when one has not
    /// acknowledged yet); `u64::MAX` when the chain is empty (no replica could want anything).
    pub fn oldest_ack(&self, vb: u16) -> u64 {
        let Some(slot) = self.vbuckets.get(usize::from(vb)) else {
            return u64::MAX;
        };
        slot.chain
            .iter()
            .map(|node| slot.acked.get(node).copied().unwrap_or(0))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The highest seqno of `vb` that a majority of its chain holds: the active holds every
    /// seqno it answers for, so this is the `(majority - 1)`-th highest replica
    /// acknowledgement; `u64::MAX` when the active alone is a majority, 0 when the chain has
    /// too few replicas.
    pub fn durable_seqno(&self, vb: u16) -> u64 {
        let needed = majority(self.replicas) - 1;
        if needed == 0 {
            return u64::MAX;
        }
        let Some(slot) = self.vbuckets.get(usize::from(vb)) else {
            return 0;
        };
        let mut acks: Vec<u64> = slot
            .chain
            .iter()
            .map(|node| slot.acked.get(node).copied().unwrap_or(0))
            .collect();
        acks.sort_unstable_by(|a, b| b.cmp(a));
        acks.get(needed - 1).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_counts_the_active_as_couchbase_does() {
        assert_eq!(majority(0), 1);
        assert_eq!(majority(1), 2);
        assert_eq!(majority(2), 2);
        assert_eq!(majority(3), 3);
    }

    #[test]
    fn with_no_replicas_the_active_alone_is_durable_and_possible() {
        let chains = Chains::new(4);
        assert!(chains.possible(3));
        assert_eq!(chains.durable_seqno(3), u64::MAX);
        assert!(!chains.possible(4));
    }

    #[test]
    fn one_replica_must_stream_and_acknowledge() {
        let mut chains = Chains::new(2);
        chains.set_topology(1, &[vec![7], vec![8]]);
        assert!(!chains.possible(0));
        assert_eq!(chains.durable_seqno(0), 0);
        chains.stream_opened(0, 7);
        assert!(chains.possible(0));
        assert!(!chains.possible(1));
        assert!(chains.ack(0, 7, 5));
        assert_eq!(chains.durable_seqno(0), 5);
        // Never backwards; a node outside the chain changes nothing.
        assert!(!chains.ack(0, 7, 3));
        assert!(!chains.ack(0, 8, 9));
        assert_eq!(chains.durable_seqno(0), 5);
        chains.stream_closed(0, 7);
        assert!(!chains.possible(0));
        // What was acknowledged stays acknowledged.
        assert_eq!(chains.durable_seqno(0), 5);
    }

    #[test]
    fn a_streaming_node_outside_the_chain_is_seen_catching_up_on_its_current_stream() {
        let mut chains = Chains::new(1);
        chains.set_topology(1, &[vec![7]]);
        // Node 9 is a rebalance's copy: not in the chain, so its acks make nothing durable.
        assert_eq!(chains.latest_ack(0, 9), None);
        assert!(!chains.ack(0, 9, 4), "no stream open: not recorded");
        assert_eq!(chains.latest_ack(0, 9), None);
        chains.stream_opened(0, 9);
        assert!(!chains.ack(0, 9, 40));
        assert_eq!(chains.latest_ack(0, 9), Some(40));
        assert_eq!(chains.durable_seqno(0), 0);
        // The latest, not the highest: a copy that rolled back reports less.
        chains.ack(0, 9, 3);
        assert_eq!(chains.latest_ack(0, 9), Some(3));
        // A new stream knows nothing until it acknowledges; a closed one is forgotten.
        chains.stream_opened(0, 9);
        assert_eq!(chains.latest_ack(0, 9), None);
        chains.ack(0, 9, 41);
        chains.stream_closed(0, 9);
        assert_eq!(
            chains.latest_ack(0, 9),
            Some(41),
            "one of two streams still open"
        );
        chains.stream_closed(0, 9);
        assert_eq!(chains.latest_ack(0, 9), None);
    }

    #[test]
    fn a_streaming_node_entering_the_chain_brings_what_it_acknowledged() {
        let mut chains = Chains::new(1);
        chains.set_topology(1, &[vec![7]]);
        chains.stream_opened(0, 7);
        chains.ack(0, 7, 10);
        // Node 9, a copy, has persisted up to 12 while outside the chain.
        chains.stream_opened(0, 9);
        chains.ack(0, 9, 12);
        assert_eq!(chains.durable_seqno(0), 10);
        chains.set_topology(1, &[vec![9]]);
        assert_eq!(chains.durable_seqno(0), 12, "no new acknowledgement needed");
        assert!(chains.possible(0));
    }

    #[test]
    fn two_replicas_need_one_and_the_higher_counts() {
        let mut chains = Chains::new(1);
        chains.set_topology(2, &[vec![1, 2]]);
        chains.stream_opened(0, 2);
        assert!(chains.possible(0));
        chains.ack(0, 1, 3);
        chains.ack(0, 2, 9);
        assert_eq!(chains.durable_seqno(0), 9);
    }

    #[test]
    fn three_replicas_need_two_acknowledgements() {
        let mut chains = Chains::new(1);
        chains.set_topology(3, &[vec![1, 2, 3]]);
        chains.stream_opened(0, 1);
        assert!(!chains.possible(0));
        chains.stream_opened(0, 3);
        assert!(chains.possible(0));
        chains.ack(0, 1, 10);
        assert_eq!(chains.durable_seqno(0), 0);
        chains.ack(0, 3, 4);
        assert_eq!(chains.durable_seqno(0), 4);
        chains.ack(0, 2, 8);
        assert_eq!(chains.durable_seqno(0), 8);
    }

    #[test]
    fn a_node_leaving_the_chain_takes_its_acknowledgements_along() {
        let mut chains = Chains::new(1);
        chains.set_topology(1, &[vec![1]]);
        chains.ack(0, 1, 6);
        // The replica failed over: the chain holds no replica any more.
        chains.set_topology(1, &[vec![]]);
        assert_eq!(chains.durable_seqno(0), 0);
        chains.stream_opened(0, 1);
        assert!(!chains.possible(0));
        chains.set_topology(1, &[vec![1]]);
        assert_eq!(chains.durable_seqno(0), 0);
        assert!(chains.possible(0));
    }

    #[test]
    fn a_replica_that_never_streamed_is_expected_one_whose_stream_ended_is_not() {
        let mut chains = Chains::new(1);
        chains.set_topology(1, &[vec![7]]);
        assert!(!chains.possible(0) && chains.expected(0), "a new bucket");
        chains.stream_opened(0, 7);
        assert!(chains.possible(0) && !chains.expected(0));
        chains.stream_closed(0, 7);
        assert!(!chains.possible(0) && !chains.expected(0), "a replica down");
        // A map change keeping the chain does not make a down replica expected again.
        chains.set_topology(1, &[vec![7]]);
        assert!(!chains.expected(0));
        // Failed over and added back: expected again.
        chains.set_topology(1, &[vec![]]);
        chains.set_topology(1, &[vec![7]]);
        assert!(chains.expected(0));
        // Two replicas, one down and one new: a majority (2 of 3) is expected.
        let mut chains = Chains::new(1);
        chains.set_topology(2, &[vec![1]]);
        chains.stream_opened(0, 1);
        chains.stream_closed(0, 1);
        chains.set_topology(2, &[vec![1, 2]]);
        assert!(chains.expected(0));
    }

    #[test]
    fn the_oldest_acknowledgement_waits_for_every_replica_of_the_chain() {
        let mut chains = Chains::new(2);
        assert_eq!(chains.oldest_ack(0), u64::MAX, "no replica");
        chains.set_topology(2, &[vec![1, 2], vec![]]);
        assert_eq!(chains.oldest_ack(0), 0);
        chains.ack(0, 2, 9);
        assert_eq!(chains.oldest_ack(0), 0, "replica 1 has said nothing");
        chains.ack(0, 1, 4);
        assert_eq!(chains.oldest_ack(0), 4);
        assert_eq!(chains.oldest_ack(1), u64::MAX);
        assert_eq!(chains.oldest_ack(7), u64::MAX, "out of range");
    }

    #[test]
    fn a_second_stream_of_one_node_counts_until_both_close() {
        let mut chains = Chains::new(1);
        chains.set_topology(1, &[vec![1]]);
        chains.stream_opened(0, 1);
        chains.stream_opened(0, 1);
        chains.stream_closed(0, 1);
        assert!(chains.possible(0));
        chains.stream_closed(0, 1);
        assert!(!chains.possible(0));
        chains.stream_closed(0, 1);
        assert!(!chains.possible(0));
    }
}
