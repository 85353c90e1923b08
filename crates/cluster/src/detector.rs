//! The failure detector (pure): who has been silent for longer than the auto-failover timeout.
//!
//! Every node sends a heartbeat to the Raft leader; the leader records when it heard each one,
//! on whatever clock it is given (milliseconds; tokio's, paused in the simulation). A new
//! leader starts with a clean slate: every member counts as heard when its leadership began,
//! so nobody is failed over for silence that happened under another leader.

use std::collections::{BTreeMap, BTreeSet};

use crate::map::NodeId;

#[derive(Clone, Debug)]
pub struct Detector {
    /// When the detector started (the leadership began), in ms.
    since_ms: u64,
    last_heard_ms: BTreeMap<NodeId, u64>,
    /// The members it watched at the last [`Detector::watch`] (none before the first).
    watched: BTreeSet<NodeId>,
}

impl Detector {
    pub fn new(now_ms: u64) -> Detector {
        Detector {
            since_ms: now_ms,
            last_heard_ms: BTreeMap::new(),
            watched: BTreeSet::new(),
        }
    }

    /// The members to watch from now on: one that was not watched before (added back after
    /// a failover) counts as heard now, so it is not failed over again for a silence from
    /// before it came back (its heartbeats may take a moment to resume after a restart).
    pub fn watch(&mut self, members: impl IntoIterator<Item = NodeId>, now_ms: u64) {
        let members: BTreeSet<NodeId> = members.into_iter().collect();
        let added: Vec<NodeId> = members.difference(&self.watched).copied().collect();
        if !self.watched.is_empty() {
            for node in added {
                self.heard(node, now_ms);
            }
        }
        self.watched = members;
    }

    pub fn heard(&mut self, node: NodeId, now_ms: u64) {
        let last = self.last_heard_ms.entry(node).or_insert(now_ms);
        *last = (*last).max(now_ms);
    }

    /// How long `node` has been silent at `now_ms`.
    pub fn silence_ms(&self, node: NodeId, now_ms: u64) -> u64 {
        let last = self
            .last_heard_ms
            .get(&node)
            .copied()
            .unwrap_or(self.since_ms)
            .max(self.since_ms);
        now_ms.saturating_sub(last)
    }

    /// The nodes among `nodes` silent for at least `timeout_ms`, the longest silent first
    /// (ties by id).
    pub fn silent(
        &self,
        nodes: impl IntoIterator<Item = NodeId>,
        now_ms: u64,
        timeout_ms: u64,
    ) -> Vec<NodeId> {
        let mut silent: Vec<(u64, NodeId)> = nodes
            .into_iter()
            .map(|node| (self.silence_ms(node, now_ms), node))
            .filter(|(silence, _)| *silence >= timeout_ms)
            .collect();
        silent.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        silent.into_iter().map(|(_, node)| node).collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_node_is_silent_only_after_the_timeout() {
        let mut detector = Detector::new(1_000);
        detector.heard(1, 1_500);
        assert!(detector.silent([1, 2], 5_999, 5_000).is_empty());
        assert_eq!(detector.silent([1, 2], 6_000, 5_000), vec![2]);
        assert_eq!(detector.silent([1, 2], 6_500, 5_000), vec![2, 1]);
        detector.heard(2, 6_600);
        assert_eq!(detector.silent([1, 2], 6_600, 5_000), vec![1]);
    }

    #[test]
    fn a_member_added_back_counts_as_heard_when_it_returns() {
        let mut detector = Detector::new(0);
        detector.watch([1, 2, 3], 0);
        detector.heard(1, 900);
        detector.heard(2, 900);
        // 3 is silent and failed over: watched no more.
        assert_eq!(detector.silent([1, 2, 3], 1_000, 1_000), vec![3]);
        detector.watch([1, 2], 1_000);
        // Added back at 5 s before its first heartbeat: not silent for the time it was out.
        detector.watch([1, 2, 3], 5_000);
        detector.heard(1, 5_500);
        detector.heard(2, 5_500);
        assert!(detector.silent([1, 2, 3], 5_500, 1_000).is_empty());
        assert_eq!(detector.silent([1, 2, 3], 6_000, 1_000), vec![3]);
    }

    proptest! {
        /// Whatever the heartbeats, a node is reported exactly when the last one heard from it
        /// (or the start) is at least the timeout ago; a late, older heartbeat never revives it.
        #[test]
        fn silence_is_time_since_the_latest_heartbeat(
            beats in proptest::collection::vec((0u64..5, 0u64..20_000), 0..50),
            now in 0u64..30_000,
            timeout in 1_000u64..10_000,
        ) {
            let mut detector = Detector::new(100);
            for (node, at) in &beats {
                detector.heard(*node, *at);
            }
            let silent = detector.silent(0..5, now, timeout);
            for node in 0..5u64 {
                let last = beats.iter().filter(|(n, _)| *n == node).map(|(_, at)| *at).max();
                let since = last.unwrap_or(100).max(100);
                let expected = now.saturating_sub(since) >= timeout;
                prop_assert_eq!(silent.contains(&node), expected);
            }
        }
    }
}
