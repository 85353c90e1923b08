//! Which members vote in the Raft group (pure). DESIGN.md: the group stays small at 100 nodes,
//! so at most [`VOTERS_MAX`] members vote and the rest follow as learners.

use std::collections::BTreeSet;

use crate::map::{ClusterMap, NodeId};

/// Five voters survive two failures; more would slow every commit for little gain.
pub const VOTERS_MAX: usize = 5;

/// The voters the group should have: an odd number, `min(VOTERS_MAX, active members)` rounded
/// down to odd, always including `leader`. Current voters that are still active members are
/// kept first (a membership change costs a joint-consensus round), then active learners join in
/// id order; if there are too many, the highest ids (never the leader) leave.
pub fn choose(map: &ClusterMap, current: &BTreeSet<NodeId>, leader: NodeId) -> BTreeSet<NodeId> {
    let active: BTreeSet<NodeId> = map.active_members().map(|member| member.id).collect();
    let mut target = active.len().clamp(1, VOTERS_MAX);
    if target.is_multiple_of(2) {
        target -= 1;
    }
    let mut voters: BTreeSet<NodeId> = BTreeSet::from([leader]);
    for node in current.iter().filter(|node| active.contains(node)) {
        voters.insert(*node);
    }
    for node in &active {
        if voters.len() >= target {
            break;
        }
        voters.insert(*node);
    }
    while voters.len() > target {
        let Some(highest) = voters.iter().rev().find(|node| **node != leader).copied() else {
            break;
        };
        voters.remove(&highest);
    }
    voters
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::map::{Member, MemberState};

    fn map_of(states: &[(NodeId, MemberState)]) -> ClusterMap {
        let mut map = ClusterMap::default();
        for (id, state) in states {
            let mut member = Member::joining(*id, "", "", "");
            member.state = *state;
            map.members.insert(*id, member);
        }
        map
    }

    fn state() -> impl Strategy<Value = MemberState> {
        prop_oneof![
            3 => Just(MemberState::Active),
            1 => Just(MemberState::Failed),
            1 => Just(MemberState::Ejected),
        ]
    }

    proptest! {
        #[test]
        fn voters_are_few_odd_active_and_keep_the_leader(
            members in proptest::collection::btree_map(1u64..200, state(), 1..100),
            current in proptest::collection::btree_set(1u64..200, 0..8),
            leader_pick in any::<prop::sample::Index>(),
        ) {
            let members: Vec<(NodeId, MemberState)> = members.into_iter().collect();
            let map = map_of(&members);
            let leader = members[leader_pick.index(members.len())].0;
            let voters = choose(&map, &current, leader);
            let active = map.active_members().count();
            prop_assert!(voters.contains(&leader));
            prop_assert!(voters.len() <= VOTERS_MAX);
            prop_assert!(voters.len() % 2 == 1);
            let mut expected = active.clamp(1, VOTERS_MAX);
            if expected.is_multiple_of(2) {
                expected -= 1;
            }
            prop_assert_eq!(voters.len(), expected);
            for voter in &voters {
                prop_assert!(*voter == leader || map.is_active_member(*voter));
            }
            // Choosing again from the result changes nothing: the set is stable.
            prop_assert_eq!(choose(&map, &voters, leader), voters.clone());
        }
    }

    #[test]
    fn a_failed_voter_is_replaced_by_a_learner() {
        let map = map_of(&[
            (1, MemberState::Active),
            (2, MemberState::Failed),
            (3, MemberState::Active),
            (4, MemberState::Active),
        ]);
        assert_eq!(
            choose(&map, &BTreeSet::from([1, 2, 3]), 1),
            BTreeSet::from([1, 3, 4])
        );
    }
}
