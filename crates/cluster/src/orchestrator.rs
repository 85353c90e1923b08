//! What the Raft leader (the orchestrator) does next (pure), and the seam through which it asks
//! replicas for their seqnos.
//!
//! [`decide`] looks at the committed map, the failure detector's verdict and the Raft
//! membership and returns at most one [`Action`] per tick, the most urgent first:
//! 1. fail over a silent node (availability first);
//! 2. make every map member a Raft learner (a join whose `add_learner` was lost with a leader);
//! 3. bring the voters to [`voters::choose`]'s set;
//! 4. record the voters in the map, so the map says who votes.
//!
//! `node.rs` executes the action; every map change it proposes was planned on a map whose
//! epochs it names, so a plan that raced another change is rejected, not misapplied.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use crate::failover::ReplicaSeqno;
use crate::map::{ClusterMap, MemberState, NodeId, Role};
use crate::voters;

/// Asks a replica for its persisted seqnos and fences it against the current active.
///
/// For each `(vbucket, epoch)` the replica stops accepting the stream of any active of that
/// epoch or an older one, then answers what it has persisted and the highest seqno it knows
/// was majority-acknowledged. `None`: the node did not answer. The data plane (DCP replicas,
/// issue 20 point 2) implements it; the simulation implements it on its model of seqnos.
pub trait SeqnoSource: Send + Sync + 'static {
    fn fence_and_report(
        &self,
        node: NodeId,
        bucket: &str,
        vbuckets: Vec<(u16, u64)>,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<ReplicaSeqno>>> + Send>>;
}

/// The seqno source of a node whose buckets have no replicas yet (before the data plane runs
/// DCP replicas): nobody answers, so a failover promotes nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoReplicas;

impl SeqnoSource for NoReplicas {
    fn fence_and_report(
        &self,
        _node: NodeId,
        _bucket: &str,
        _vbuckets: Vec<(u16, u64)>,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<ReplicaSeqno>>> + Send>> {
        Box::pin(async { None })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    FailOver(NodeId),
    AddLearner(NodeId),
    ChangeVoters(BTreeSet<NodeId>),
    RecordVoters(BTreeSet<NodeId>),
}

/// What the leader sees at one tick.
pub struct Observation<'a> {
    pub map: &'a ClusterMap,
    pub leader: NodeId,
    /// Silent for the auto-failover timeout, longest first (`Detector::silent`).
    pub silent: &'a [NodeId],
    /// Every node of the Raft membership, voters and learners.
    pub raft_nodes: &'a BTreeSet<NodeId>,
    pub raft_voters: &'a BTreeSet<NodeId>,
}

pub fn decide(seen: &Observation) -> Option<Action> {
    let map = seen.map;
    if map.auto_failover.enabled {
        let active = map.active_members().count();
        let silent: Vec<NodeId> = seen
            .silent
            .iter()
            .copied()
            .filter(|node| *node != seen.leader && map.is_active_member(*node))
            .collect();
        // With half the members silent or more, the fault may as well be on this side; an
        // operator decides (Couchbase refuses such an auto-failover too).
        if let Some(first) = silent.first() {
            if silent.len() * 2 < active {
                return Some(Action::FailOver(*first));
            }
        }
    }
    if let Some(member) = map.members.values().find(|member| {
        member.state != MemberState::Ejected && !seen.raft_nodes.contains(&member.id)
    }) {
        return Some(Action::AddLearner(member.id));
    }
    // Voters are chosen once the leader itself is in the map (the bootstrap adds it first).
    if !map.members.contains_key(&seen.leader) {
        return None;
    }
    let wanted = voters::choose(map, seen.raft_voters, seen.leader);
    if wanted != *seen.raft_voters && wanted.iter().all(|node| seen.raft_nodes.contains(node)) {
        return Some(Action::ChangeVoters(wanted));
    }
    let recorded: BTreeSet<NodeId> = map
        .members
        .values()
        .filter(|member| member.role == Role::Voter)
        .map(|member| member.id)
        .collect();
    if recorded != *seen.raft_voters
        && seen
            .raft_voters
            .iter()
            .all(|node| map.members.contains_key(node))
    {
        return Some(Action::RecordVoters(seen.raft_voters.clone()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::Member;

    fn map_of(ids: &[NodeId], voters: &[NodeId]) -> ClusterMap {
        let mut map = ClusterMap::default();
        for id in ids {
            let mut member = Member::joining(*id, "", "", "");
            if voters.contains(id) {
                member.role = Role::Voter;
            }
            map.members.insert(*id, member);
        }
        map
    }

    fn observe<'a>(
        map: &'a ClusterMap,
        silent: &'a [NodeId],
        nodes: &'a BTreeSet<NodeId>,
        voters: &'a BTreeSet<NodeId>,
    ) -> Option<Action> {
        decide(&Observation {
            map,
            leader: 1,
            silent,
            raft_nodes: nodes,
            raft_voters: voters,
        })
    }

    #[test]
    fn a_silent_node_is_failed_over_first_but_never_the_leader_or_half_the_cluster() {
        let map = map_of(&[1, 2, 3], &[1, 2, 3]);
        let all = BTreeSet::from([1, 2, 3]);
        assert_eq!(observe(&map, &[3], &all, &all), Some(Action::FailOver(3)));
        assert_eq!(observe(&map, &[1], &all, &all), None);
        assert_eq!(observe(&map, &[2, 3], &all, &all), None);
        let mut off = map.clone();
        off.auto_failover.enabled = false;
        assert_eq!(observe(&off, &[3], &all, &all), None);
    }

    #[test]
    fn members_become_learners_then_voters_then_the_map_records_it() {
        let map = map_of(&[1, 2, 3], &[1]);
        let one = BTreeSet::from([1]);
        let two = BTreeSet::from([1, 2]);
        assert_eq!(observe(&map, &[], &two, &one), Some(Action::AddLearner(3)));
        let all = BTreeSet::from([1, 2, 3]);
        assert_eq!(
            observe(&map, &[], &all, &one),
            Some(Action::ChangeVoters(all.clone()))
        );
        assert_eq!(
            observe(&map, &[], &all, &all),
            Some(Action::RecordVoters(all.clone()))
        );
        let recorded = map_of(&[1, 2, 3], &[1, 2, 3]);
        assert_eq!(observe(&recorded, &[], &all, &all), None);
    }
}
