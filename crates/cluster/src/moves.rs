//! A rebalance in the map (docs/format/cluster-map.md, "A rebalance in the map"): the moves
//! the planner chose, each with its state, and how the rebalance commands change them. Pure,
//! as every apply: `command.rs` calls these with the map and the new revision.

use std::collections::BTreeSet;

use crate::map::{ClusterMap, NodeId, Vbucket};

/// Moves a rebalance holds at most (a move id keeps its index in 20 bits).
pub const MOVES_MAX: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebalance {
    /// The revision StartRebalance was applied at.
    pub id: u64,
    pub stopping: bool,
    /// The serving set after it.
    pub nodes: BTreeSet<NodeId>,
    pub ejected: BTreeSet<NodeId>,
    pub moves: Vec<MoveEntry>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MoveState {
    Planned,
    Copying,
    Ready,
    Done,
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveEntry {
    pub id: u64,
    pub bucket: String,
    pub vbucket: u16,
    /// The entry's epoch the plan was made on.
    pub expected_epoch: u64,
    /// The chain the move leads to (its epoch unused).
    pub after: Vbucket,
    /// The vbucket's active when the move was planned.
    pub source: Option<NodeId>,
    /// The nodes that receive the vbucket's files.
    pub copies: Vec<NodeId>,
    /// 0 before the first attempt.
    pub attempt: u32,
    pub state: MoveState,
}

impl MoveEntry {
    pub fn is_finished(&self) -> bool {
        matches!(self.state, MoveState::Done | MoveState::Aborted)
    }
}

/// One move a StartRebalance asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMove {
    pub bucket: String,
    pub vbucket: u16,
    pub expected_epoch: u64,
    pub after: Vbucket,
}

/// The id of a rebalance's `index`th move.
pub fn move_id(rebalance: u64, index: usize) -> u64 {
    (rebalance << 20) | index as u64
}

impl ClusterMap {
    pub(crate) fn start_rebalance(
        &mut self,
        nodes: &BTreeSet<NodeId>,
        ejected: &BTreeSet<NodeId>,
        planned: &[PlannedMove],
        revision: u64,
    ) -> Result<(), String> {
        if self.rebalance.is_some() {
            return Err("a rebalance is running".into());
        }
        if planned.len() > MOVES_MAX {
            return Err(format!("{} moves is more than {MOVES_MAX}", planned.len()));
        }
        if let Some(node) = nodes.iter().find(|node| !self.is_active_member(**node)) {
            return Err(format!("node {node} is not an active member"));
        }
        if let Some(node) = ejected.iter().find(|node| !self.members.contains_key(node)) {
            return Err(format!("node {node} is not a member"));
        }
        let mut moves = Vec::with_capacity(planned.len());
        let mut seen = BTreeSet::new();
        for (index, step) in planned.iter().enumerate() {
            let entry = self
                .buckets
                .get(&step.bucket)
                .and_then(|bucket| bucket.vbuckets.get(usize::from(step.vbucket)))
                .ok_or_else(|| format!("no vbucket {} {}", step.bucket, step.vbucket))?;
            if !seen.insert((step.bucket.as_str(), step.vbucket)) {
                return Err(format!("{} vb {} moves twice", step.bucket, step.vbucket));
            }
            if entry.epoch != step.expected_epoch {
                return Err(format!(
                    "{} vb {} moved on (epoch {}, plan made on {})",
                    step.bucket, step.vbucket, entry.epoch, step.expected_epoch
                ));
            }
            let chain: Vec<NodeId> = step.after.chain().collect();
            let distinct: BTreeSet<NodeId> = chain.iter().copied().collect();
            if step.after.active.is_none() || distinct.len() != chain.len() {
                return Err(
                    "a move leads to a chain without an active or with a node twice".into(),
                );
            }
            if let Some(node) = chain.iter().find(|node| !nodes.contains(node)) {
                return Err(format!("a move leads to node {node}, outside the node set"));
            }
            let held: Vec<NodeId> = entry.chain().collect();
            moves.push(MoveEntry {
                id: move_id(revision, index),
                bucket: step.bucket.clone(),
                vbucket: step.vbucket,
                expected_epoch: step.expected_epoch,
                after: step.after.clone(),
                source: entry.active,
                copies: chain
                    .into_iter()
                    .filter(|node| !held.contains(node))
                    .collect(),
                attempt: 0,
                state: MoveState::Planned,
            });
        }
        self.rebalance = Some(Rebalance {
            id: revision,
            stopping: false,
            nodes: nodes.clone(),
            ejected: ejected.clone(),
            moves,
        });
        Ok(())
    }

    pub(crate) fn move_state(
        &mut self,
        move_id: u64,
        attempt: u32,
        state: MoveState,
    ) -> Result<(), String> {
        let entry = self.move_mut(move_id)?;
        if entry.is_finished() {
            return Err(format!("move {move_id} is over"));
        }
        match state {
            MoveState::Copying if attempt > entry.attempt => {}
            MoveState::Ready if attempt == entry.attempt && entry.state == MoveState::Copying => {}
            _ => {
                return Err(format!(
                    "move {move_id} is {:?} at attempt {}: not {state:?} at {attempt}",
                    entry.state, entry.attempt
                ))
            }
        }
        entry.attempt = attempt;
        entry.state = state;
        Ok(())
    }

    pub(crate) fn take_over(
        &mut self,
        move_id: u64,
        expected_epoch: u64,
        revision: u64,
    ) -> Result<(), String> {
        let step = self.move_mut(move_id)?.clone();
        if step.state != MoveState::Ready {
            return Err(format!("move {move_id} is {:?}, not ready", step.state));
        }
        let entry = self
            .buckets
            .get_mut(&step.bucket)
            .and_then(|bucket| bucket.vbuckets.get_mut(usize::from(step.vbucket)))
            .ok_or_else(|| format!("no vbucket {} {}", step.bucket, step.vbucket))?;
        if entry.epoch != expected_epoch || expected_epoch != step.expected_epoch {
            return Err(format!(
                "{} vb {} moved on (epoch {}, the takeover expects {expected_epoch})",
                step.bucket, step.vbucket, entry.epoch
            ));
        }
        *entry = Vbucket {
            epoch: revision,
            ..step.after.clone()
        };
        self.move_mut(move_id)?.state = MoveState::Done;
        Ok(())
    }

    pub(crate) fn stop_rebalance(&mut self) -> Result<(), String> {
        match &mut self.rebalance {
            Some(rebalance) => {
                rebalance.stopping = true;
                Ok(())
            }
            None => Err("no rebalance is running".into()),
        }
    }

    pub(crate) fn end_rebalance(&mut self, aborted: &[u64]) -> Result<(), String> {
        let Some(rebalance) = &self.rebalance else {
            return Err("no rebalance is running".into());
        };
        if let Some(open) = rebalance
            .moves
            .iter()
            .find(|step| !step.is_finished() && !aborted.contains(&step.id))
        {
            return Err(format!("move {} is {:?}", open.id, open.state));
        }
        if let Some(unknown) = aborted
            .iter()
            .find(|id| !rebalance.moves.iter().any(|step| step.id == **id))
        {
            return Err(format!("no move {unknown}"));
        }
        if aborted.iter().any(|id| {
            rebalance
                .moves
                .iter()
                .any(|step| step.id == *id && step.state == MoveState::Done)
        }) {
            return Err("a move that is done cannot be aborted".into());
        }
        let Some(rebalance) = self.rebalance.take() else {
            return Err("no rebalance is running".into());
        };
        let every_move_done = aborted.is_empty()
            && rebalance
                .moves
                .iter()
                .all(|step| step.state == MoveState::Done);
        if !rebalance.stopping && every_move_done {
            for node in &rebalance.ejected {
                if let Some(member) = self.members.get_mut(node) {
                    member.state = crate::map::MemberState::Ejected;
                }
            }
        }
        Ok(())
    }

    /// In a Failover's apply: every move of a vbucket whose entry it changed, not yet done,
    /// is aborted (its expected epoch is no longer current).
    pub(crate) fn abort_moves_of(&mut self, changed: &[(String, u16)]) {
        if let Some(rebalance) = &mut self.rebalance {
            for step in &mut rebalance.moves {
                let hit = changed
                    .iter()
                    .any(|(bucket, vb)| *bucket == step.bucket && *vb == step.vbucket);
                if hit && step.state != MoveState::Done {
                    step.state = MoveState::Aborted;
                }
            }
        }
    }

    fn move_mut(&mut self, move_id: u64) -> Result<&mut MoveEntry, String> {
        self.rebalance
            .as_mut()
            .and_then(|rebalance| rebalance.moves.iter_mut().find(|step| step.id == move_id))
            .ok_or_else(|| format!("no move {move_id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Applied, BucketSettings, Command, VbucketChange};
    use crate::map::{Copies, Durability, Member, MemberState};

    fn applied(map: &mut ClusterMap, command: Command) -> u64 {
        match map.apply(&command) {
            Applied::Revision(revision) => {
                assert_eq!(map.check(), Ok(()), "after {command:?}");
                revision
            }
            other => panic!("{command:?}: {other:?}"),
        }
    }

    fn rejected(map: &mut ClusterMap, command: Command) -> String {
        let before = map.clone();
        match map.apply(&command) {
            Applied::Rejected(reason) => {
                assert_eq!(*map, before, "a rejection changes nothing");
                reason
            }
            other => panic!("{command:?} was accepted: {other:?}"),
        }
    }

    /// Nodes 1 and 2 hold bucket "b" (4 vbuckets, 1 replica); node 3 joined since.
    fn map_before_rebalance() -> ClusterMap {
        let mut map = ClusterMap::default();
        for id in 1..=3 {
            let member = Member::joining(id, format!("10.0.0.{id}:4000"), "h:1", "k:1");
            applied(&mut map, Command::AddMember(member));
        }
        let settings = BucketSettings {
            name: "b".into(),
            vbucket_count: 4,
            replicas: 1,
            durability_min: Durability::None,
            copies: Copies::Replicas,
        };
        let bucket = crate::placement::place(&settings, &[1, 2]);
        applied(&mut map, Command::CreateBucket(bucket));
        map
    }

    fn to_node_3(map: &ClusterMap, vb: u16) -> PlannedMove {
        let entry = &map.buckets["b"].vbuckets[usize::from(vb)];
        PlannedMove {
            bucket: "b".into(),
            vbucket: vb,
            expected_epoch: entry.epoch,
            after: Vbucket {
                active: Some(3),
                replicas: entry.active.into_iter().collect(),
                epoch: 0,
            },
        }
    }

    fn start(map: &mut ClusterMap, moves: Vec<PlannedMove>, ejected: &[NodeId]) -> u64 {
        applied(
            map,
            Command::StartRebalance {
                nodes: [1, 2, 3].into(),
                ejected: ejected.iter().copied().collect(),
                moves,
            },
        )
    }

    #[test]
    fn a_move_copies_then_takes_over_under_its_epoch() {
        let mut map = map_before_rebalance();
        let plan = vec![to_node_3(&map, 0), to_node_3(&map, 1)];
        let id = start(&mut map, plan.clone(), &[]);
        let rebalance = map.rebalance.clone().expect("running");
        assert_eq!(rebalance.id, id);
        let first = &rebalance.moves[0];
        assert_eq!(
            (first.id, first.state, first.attempt),
            (move_id(id, 0), MoveState::Planned, 0)
        );
        assert_eq!(first.copies, vec![3]);
        assert_eq!(first.source, map.buckets["b"].vbuckets[0].active);
        // One rebalance at a time.
        rejected(
            &mut map,
            Command::StartRebalance {
                nodes: [1, 2, 3].into(),
                ejected: Default::default(),
                moves: plan,
            },
        );
        let state = |state, attempt| Command::MoveState {
            move_id: first.id,
            attempt,
            state,
        };
        // Not ready before copying; then copying at attempt 1, ready at that attempt only.
        rejected(&mut map, state(MoveState::Ready, 0));
        applied(&mut map, state(MoveState::Copying, 1));
        rejected(&mut map, state(MoveState::Copying, 1));
        rejected(&mut map, state(MoveState::Ready, 2));
        let take_over = Command::TakeOver {
            move_id: first.id,
            expected_epoch: first.expected_epoch,
        };
        rejected(&mut map, take_over.clone());
        applied(&mut map, state(MoveState::Ready, 1));
        let revision = applied(&mut map, take_over.clone());
        let entry = &map.buckets["b"].vbuckets[0];
        assert_eq!(
            (entry.active, entry.replicas.clone(), entry.epoch),
            (Some(3), first.source.into_iter().collect(), revision)
        );
        rejected(&mut map, take_over);
        rejected(&mut map, state(MoveState::Copying, 2));
        // The other move is still open: the rebalance cannot end but by aborting it.
        rejected(&mut map, Command::EndRebalance { aborted: vec![] });
        rejected(
            &mut map,
            Command::EndRebalance {
                aborted: vec![first.id],
            },
        );
        let second = rebalance.moves[1].id;
        applied(
            &mut map,
            Command::EndRebalance {
                aborted: vec![second],
            },
        );
        assert_eq!(map.rebalance, None);
    }

    #[test]
    fn plans_made_on_another_map_are_refused() {
        let mut map = map_before_rebalance();
        let mut stale = to_node_3(&map, 2);
        stale.expected_epoch -= 1;
        let mut outside = to_node_3(&map, 2);
        outside.after.replicas = vec![9];
        let mut twice = vec![to_node_3(&map, 1), to_node_3(&map, 1)];
        for moves in [vec![stale], vec![outside], std::mem::take(&mut twice)] {
            rejected(
                &mut map,
                Command::StartRebalance {
                    nodes: [1, 2, 3].into(),
                    ejected: Default::default(),
                    moves,
                },
            );
        }
        rejected(
            &mut map,
            Command::StartRebalance {
                nodes: [1, 2, 3, 4].into(),
                ejected: Default::default(),
                moves: vec![],
            },
        );
        rejected(&mut map, Command::StopRebalance);
        rejected(&mut map, Command::EndRebalance { aborted: vec![] });
    }

    #[test]
    fn a_failover_aborts_the_moves_of_the_vbuckets_it_changes() {
        let mut map = map_before_rebalance();
        let plan: Vec<PlannedMove> = (0..4).map(|vb| to_node_3(&map, vb)).collect();
        start(&mut map, plan, &[]);
        let failed = map.buckets["b"].vbuckets[0].active.expect("active");
        let changes: Vec<VbucketChange> = map.buckets["b"]
            .vbuckets
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.active == Some(failed))
            .map(|(vb, entry)| VbucketChange {
                bucket: "b".into(),
                vbucket: vb as u16,
                expected_epoch: entry.epoch,
                entry: Vbucket {
                    active: entry.replicas.first().copied(),
                    replicas: entry.active.into_iter().collect(),
                    epoch: 0,
                },
            })
            .collect();
        let moved: Vec<u16> = changes.iter().map(|change| change.vbucket).collect();
        applied(
            &mut map,
            Command::Failover {
                node: failed,
                changes,
            },
        );
        let rebalance = map.rebalance.clone().expect("running");
        for step in &rebalance.moves {
            let aborted = step.state == MoveState::Aborted;
            assert_eq!(aborted, moved.contains(&step.vbucket), "{step:?}");
        }
        let first = rebalance.moves[0].id;
        rejected(
            &mut map,
            Command::MoveState {
                move_id: first,
                attempt: 1,
                state: MoveState::Copying,
            },
        );
    }

    #[test]
    fn ejected_members_leave_only_when_every_move_is_done() {
        let mut map = map_before_rebalance();
        // Nothing to move: the rebalance ends at once and ejects node 3.
        start(&mut map, vec![], &[3]);
        applied(&mut map, Command::EndRebalance { aborted: vec![] });
        assert_eq!(map.members[&3].state, MemberState::Ejected);
        // A stopped rebalance ejects nobody.
        let mut map = map_before_rebalance();
        start(&mut map, vec![], &[3]);
        applied(&mut map, Command::StopRebalance);
        applied(&mut map, Command::EndRebalance { aborted: vec![] });
        assert_eq!(map.members[&3].state, MemberState::Active);
        // Nor does one with an aborted move.
        let mut map = map_before_rebalance();
        let plan = vec![to_node_3(&map, 0)];
        start(&mut map, plan, &[3]);
        let id = map.rebalance.as_ref().expect("running").moves[0].id;
        applied(&mut map, Command::EndRebalance { aborted: vec![id] });
        assert_eq!(map.members[&3].state, MemberState::Active);
    }
}
