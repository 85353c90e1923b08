//! The Raft log's application entries and how each changes the map.
//!
//! `ClusterMap::apply` is a pure function: every node applies the same committed commands in
//! the same order and reaches the same map. A command that does not fit the map it meets is
//! rejected as a value ([`Applied::Rejected`]) and changes nothing, not even the revision.

use std::collections::BTreeSet;

use settee_manifest::{ManifestChange, ManifestLimits};

use crate::map::{
    AutoFailover, Bucket, ClusterMap, Copies, Durability, Member, MemberState, NodeId, Role,
    Vbucket, AUTO_FAILOVER_TIMEOUT_MS_MIN, BUCKET_NAME_BYTES_MAX, REPLICAS_MAX, VBUCKETS_MAX,
};
use crate::moves::{MoveState, PlannedMove};

/// One vbucket change of a failover, made on the map whose epoch it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VbucketChange {
    pub bucket: String,
    pub vbucket: u16,
    /// The entry's epoch the plan was made on; the change applies only if it is still current.
    pub expected_epoch: u64,
    /// The new entry (its epoch is set by `apply`).
    pub entry: Vbucket,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    AddMember(Member),
    SetMemberState {
        node: NodeId,
        state: MemberState,
    },
    CreateBucket(Bucket),
    DropBucket {
        name: String,
    },
    /// A scope or collection created or dropped, or a collection's max TTL set, planned on
    /// the map's manifest of bucket `name` with the submitting node's `limits`.
    ChangeManifest {
        name: String,
        change: ManifestChange,
        limits: ManifestLimits,
    },
    /// Marks `node` failed and applies the promotions of `failover::plan`, all or nothing.
    Failover {
        node: NodeId,
        changes: Vec<VbucketChange>,
    },
    SetAutoFailover(AutoFailover),
    SetVoters {
        voters: BTreeSet<NodeId>,
    },
    /// A design document of bucket `name` was written: its `design_rev` rises by one.
    DesignsChanged {
        name: String,
    },
    /// Delta recovery: a failed member serves again, as a replica of its chains, and as the
    /// active of the vbuckets a failover left without one (docs/format/cluster-map.md).
    AddBack {
        node: NodeId,
    },
    /// The planner's moves for the serving set `nodes` (docs/format/cluster-map.md, "A
    /// rebalance in the map").
    StartRebalance {
        nodes: BTreeSet<NodeId>,
        ejected: BTreeSet<NodeId>,
        moves: Vec<PlannedMove>,
    },
    /// A move's source reports it copying (a new attempt) or ready.
    MoveState {
        move_id: u64,
        attempt: u32,
        state: MoveState,
    },
    /// A ready move's vbucket takes its new chain, if its entry is still at `expected_epoch`.
    TakeOver {
        move_id: u64,
        expected_epoch: u64,
    },
    StopRebalance,
    /// The `aborted` moves are aborted and the rebalance leaves the map.
    EndRebalance {
        aborted: Vec<u64>,
    },
}

/// What applying a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Accepted; the map is now at this revision.
    Revision(u64),
    /// Not applied; the map is unchanged.
    Rejected(String),
}

impl ClusterMap {
    /// Applies `command`: on acceptance the revision rises by one and every vbucket entry the
    /// command changed takes the new revision as its epoch.
    pub fn apply(&mut self, command: &Command) -> Applied {
        let revision = self.revision + 1;
        let result = match command {
            Command::AddMember(member) => self.add_member(member),
            Command::SetMemberState { node, state } => match self.members.get_mut(node) {
                Some(member) if member.state == MemberState::Ejected => {
                    Err(format!("node {node} was ejected"))
                }
                Some(member) => {
                    member.state = *state;
                    Ok(())
                }
                None => Err(format!("node {node} is not a member")),
            },
            Command::CreateBucket(bucket) => self.create_bucket(bucket, revision),
            Command::DropBucket { name } => match self.buckets.remove(name) {
                Some(_) => Ok(()),
                None => Err(format!("no bucket {name}")),
            },
            Command::ChangeManifest {
                name,
                change,
                limits,
            } => match self.buckets.get_mut(name) {
                Some(bucket) => match bucket.manifest.plan(change, *limits) {
                    Ok(planned) => {
                        bucket.manifest = planned.manifest;
                        Ok(())
                    }
                    Err(error) => Err(error.to_string()),
                },
                None => Err(format!("no bucket {name}")),
            },
            Command::Failover { node, changes } => self.failover(*node, changes, revision),
            Command::SetAutoFailover(settings) => {
                if settings.timeout_ms < AUTO_FAILOVER_TIMEOUT_MS_MIN {
                    Err(format!("timeout {} ms is below 1 s", settings.timeout_ms))
                } else {
                    self.auto_failover = *settings;
                    Ok(())
                }
            }
            Command::AddBack { node } => self.add_back(*node, revision),
            Command::StartRebalance {
                nodes,
                ejected,
                moves,
            } => self.start_rebalance(nodes, ejected, moves, revision),
            Command::MoveState {
                move_id,
                attempt,
                state,
            } => self.move_state(*move_id, *attempt, *state),
            Command::TakeOver {
                move_id,
                expected_epoch,
            } => self.take_over(*move_id, *expected_epoch, revision),
            Command::StopRebalance => self.stop_rebalance(),
            Command::EndRebalance { aborted } => self.end_rebalance(aborted),
            Command::DesignsChanged { name } => match self.buckets.get_mut(name) {
                Some(bucket) => {
                    bucket.design_rev += 1;
                    Ok(())
                }
                None => Err(format!("no bucket {name}")),
            },
            Command::SetVoters { voters } => {
                if let Some(stranger) = voters.iter().find(|id| !self.members.contains_key(id)) {
                    Err(format!("voter {stranger} is not a member"))
                } else {
                    for member in self.members.values_mut() {
                        member.role = if voters.contains(&member.id) {
                            Role::Voter
                        } else {
                            Role::Learner
                        };
                    }
                    Ok(())
                }
            }
        };
        match result {
            Ok(()) => {
                if matches!(
                    command,
                    Command::AddMember(_)
                        | Command::SetMemberState { .. }
                        | Command::CreateBucket(_)
                        | Command::AddBack { .. }
                        | Command::TakeOver { .. }
                        | Command::EndRebalance { .. }
                ) {
                    self.fit_every_member_copies(revision);
                }
                self.revision = revision;
                Applied::Revision(revision)
            }
            Err(reason) => Applied::Rejected(reason),
        }
    }

    fn add_member(&mut self, member: &Member) -> Result<(), String> {
        if self.members.contains_key(&member.id) {
            return Err(format!("node id {} is already a member", member.id));
        }
        self.members.insert(
            member.id,
            Member {
                state: MemberState::Active,
                role: Role::Learner,
                ..member.clone()
            },
        );
        Ok(())
    }

    fn create_bucket(&mut self, bucket: &Bucket, revision: u64) -> Result<(), String> {
        if bucket.name.is_empty() || bucket.name.len() > BUCKET_NAME_BYTES_MAX {
            return Err("bucket name must have 1 to 100 bytes".into());
        }
        if self.buckets.contains_key(&bucket.name) {
            return Err(format!("bucket {} exists", bucket.name));
        }
        if bucket.vbucket_count == 0 || bucket.vbucket_count > VBUCKETS_MAX {
            return Err(format!("{} vbuckets is out of range", bucket.vbucket_count));
        }
        let every_member = bucket.copies == Copies::EveryMember;
        if bucket.replicas > REPLICAS_MAX && !every_member {
            return Err(format!("{} replicas is more than 3", bucket.replicas));
        }
        if bucket.vbuckets.len() != usize::from(bucket.vbucket_count) {
            return Err("the vbucket map does not match the vbucket count".into());
        }
        let mut created = bucket.clone();
        for entry in &mut created.vbuckets {
            let chain: Vec<NodeId> = entry.chain().collect();
            let distinct: BTreeSet<NodeId> = chain.iter().copied().collect();
            let too_long = entry.replicas.len() > usize::from(bucket.replicas) && !every_member;
            if distinct.len() != chain.len() || too_long {
                return Err("a vbucket's chain repeats a node or is too long".into());
            }
            if chain.iter().any(|node| !self.is_active_member(*node)) {
                return Err("a vbucket is placed on a node that is not an active member".into());
            }
            entry.epoch = revision;
        }
        self.buckets.insert(created.name.clone(), created);
        Ok(())
    }

    fn failover(
        &mut self,
        node: NodeId,
        changes: &[VbucketChange],
        revision: u64,
    ) -> Result<(), String> {
        if !self.is_active_member(node) {
            return Err(format!("node {node} is not an active member"));
        }
        // Check everything before changing anything: a failover applies whole or not at all.
        for change in changes {
            let current = self
                .buckets
                .get(&change.bucket)
                .and_then(|bucket| bucket.vbuckets.get(usize::from(change.vbucket)))
                .ok_or_else(|| format!("no vbucket {} {}", change.bucket, change.vbucket))?;
            if current.epoch != change.expected_epoch {
                return Err(format!(
                    "{} vb {} moved on (epoch {}, plan made on {})",
                    change.bucket, change.vbucket, current.epoch, change.expected_epoch
                ));
            }
            if change.entry.active == Some(node) {
                return Err("a failover cannot promote the failed node".into());
            }
            if let Some(active) = change.entry.active {
                if !self.is_active_member(active) {
                    return Err(format!("node {active} is not an active member"));
                }
            }
            let old: BTreeSet<NodeId> = current.chain().collect();
            let new: Vec<NodeId> = change.entry.chain().collect();
            let distinct: BTreeSet<NodeId> = new.iter().copied().collect();
            if distinct != old || distinct.len() != new.len() {
                return Err("a failover may reorder a chain, not change its nodes".into());
            }
        }
        // The plan must move every active the node holds now, not only those it held when the
        // plan was made (a promotion onto it may have been committed in between).
        let planned: BTreeSet<(&str, u16)> = changes
            .iter()
            .map(|change| (change.bucket.as_str(), change.vbucket))
            .collect();
        for (name, bucket) in &self.buckets {
            for (vb, entry) in bucket.vbuckets.iter().enumerate() {
                let key = (name.as_str(), u16::try_from(vb).unwrap_or(u16::MAX));
                if entry.active == Some(node) && !planned.contains(&key) {
                    return Err(format!(
                        "the plan leaves node {node} active for {name} vb {vb}"
                    ));
                }
            }
        }
        if let Some(member) = self.members.get_mut(&node) {
            member.state = MemberState::Failed;
        }
        let changed: Vec<(String, u16)> = changes
            .iter()
            .map(|change| (change.bucket.clone(), change.vbucket))
            .collect();
        self.abort_moves_of(&changed);
        for change in changes {
            if let Some(entry) = self
                .buckets
                .get_mut(&change.bucket)
                .and_then(|bucket| bucket.vbuckets.get_mut(usize::from(change.vbucket)))
            {
                *entry = Vbucket {
                    epoch: revision,
                    ..change.entry.clone()
                };
            }
        }
        Ok(())
    }
}

impl ClusterMap {
    /// Keeps every bucket with copies on every member whole (cluster-map.md, "Accounts on every
    /// member"): each active member missing from an entry joins its replicas, each ejected one
    /// leaves them, and `replicas` counts the other active members. Changed entries take
    /// `revision` as their epoch.
    fn fit_every_member_copies(&mut self, revision: u64) {
        let active: Vec<NodeId> = self.active_members().map(|member| member.id).collect();
        let ejected: BTreeSet<NodeId> = self
            .members
            .values()
            .filter(|member| member.state == MemberState::Ejected)
            .map(|member| member.id)
            .collect();
        let others = u8::try_from(active.len().saturating_sub(1)).unwrap_or(u8::MAX);
        for bucket in self.buckets.values_mut() {
            if bucket.copies != Copies::EveryMember {
                continue;
            }
            bucket.replicas = others;
            for entry in &mut bucket.vbuckets {
                let before = entry.replicas.len();
                entry.replicas.retain(|node| !ejected.contains(node));
                let mut changed = entry.replicas.len() != before;
                for node in &active {
                    if !entry.chain().any(|held| held == *node) {
                        entry.replicas.push(*node);
                        changed = true;
                    }
                }
                if changed {
                    entry.epoch = revision;
                }
            }
        }
    }

    fn add_back(&mut self, node: NodeId, revision: u64) -> Result<(), String> {
        match self.members.get_mut(&node) {
            Some(member) if member.state == MemberState::Failed => {
                member.state = MemberState::Active;
            }
            Some(member) => {
                let state = if member.state == MemberState::Active {
                    "active"
                } else {
                    "ejected"
                };
                return Err(format!("node {node} is {state}, not failed over"));
            }
            None => return Err(format!("node {node} is not a member")),
        }
        for entry in self
            .buckets
            .values_mut()
            .flat_map(|b| b.vbuckets.iter_mut())
        {
            if entry.active.is_none() && entry.replicas.contains(&node) {
                entry.replicas.retain(|replica| *replica != node);
                entry.active = Some(node);
                entry.epoch = revision;
            }
        }
        Ok(())
    }
}

/// A bucket's settings, before placement gives it a vbucket map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSettings {
    pub name: String,
    pub vbucket_count: u16,
    pub replicas: u8,
    pub durability_min: Durability,
    pub copies: Copies,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: NodeId) -> Member {
        let host = format!("10.0.0.{id}");
        Member::joining(
            id,
            format!("{host}:4000"),
            format!("{host}:5984"),
            format!("{host}:11210"),
        )
    }

    fn map_with_bucket() -> ClusterMap {
        let mut map = ClusterMap::default();
        for id in 1..=3 {
            assert!(matches!(
                map.apply(&Command::AddMember(member(id))),
                Applied::Revision(_)
            ));
        }
        let bucket = Bucket {
            name: "b".into(),
            vbucket_count: 2,
            replicas: 1,
            durability_min: Durability::None,
            manifest: Default::default(),
            design_rev: 0,
            copies: Default::default(),
            vbuckets: vec![
                Vbucket {
                    active: Some(1),
                    replicas: vec![2],
                    epoch: 0,
                },
                Vbucket {
                    active: Some(2),
                    replicas: vec![3],
                    epoch: 0,
                },
            ],
        };
        assert_eq!(
            map.apply(&Command::CreateBucket(bucket)),
            Applied::Revision(4)
        );
        map
    }

    #[test]
    fn every_accepted_command_raises_the_revision_and_stamps_epochs() {
        let map = map_with_bucket();
        assert_eq!(map.revision, 4);
        assert!(map.buckets["b"]
            .vbuckets
            .iter()
            .all(|entry| entry.epoch == 4));
        assert_eq!(map.check(), Ok(()));
    }

    #[test]
    fn a_rejected_command_changes_nothing() {
        let mut map = map_with_bucket();
        let before = map.clone();
        assert!(matches!(
            map.apply(&Command::AddMember(member(2))),
            Applied::Rejected(_)
        ));
        assert!(matches!(
            map.apply(&Command::SetAutoFailover(AutoFailover {
                enabled: true,
                timeout_ms: 999
            })),
            Applied::Rejected(_)
        ));
        assert_eq!(map, before);
    }

    #[test]
    fn a_design_change_raises_the_bucket_design_rev_only() {
        let mut map = map_with_bucket();
        let changed = Command::DesignsChanged { name: "b".into() };
        assert_eq!(map.apply(&changed), Applied::Revision(5));
        assert_eq!(map.apply(&changed), Applied::Revision(6));
        assert_eq!(map.buckets["b"].design_rev, 2);
        assert!(map.buckets["b"]
            .vbuckets
            .iter()
            .all(|entry| entry.epoch == 4));
        let elsewhere = Command::DesignsChanged { name: "c".into() };
        assert!(matches!(map.apply(&elsewhere), Applied::Rejected(_)));
    }

    #[test]
    fn manifest_changes_are_planned_on_the_map_and_refused_with_the_planner_reason() {
        let mut map = map_with_bucket();
        let limits = ManifestLimits {
            scopes_max: 2,
            collections_max: 10,
        };
        let change = |change| Command::ChangeManifest {
            name: "b".into(),
            change,
            limits,
        };
        let scope = |name: &str| ManifestChange::CreateScope { name: name.into() };
        assert_eq!(map.apply(&change(scope("inventory"))), Applied::Revision(5));
        let airline = ManifestChange::CreateCollection {
            scope: "inventory".into(),
            name: "airline".into(),
            max_ttl: Some(60),
        };
        assert_eq!(map.apply(&change(airline.clone())), Applied::Revision(6));
        let manifest = &map.buckets["b"].manifest;
        assert_eq!(manifest.uid(), 2);
        let created = manifest.find("inventory", "airline").expect("created");
        assert_eq!((created.id, created.max_ttl), (8, Some(60)));
        let before = map.clone();
        for (refused, reason) in [
            (airline, "exists"),
            (scope("tenants"), "at most 2 scopes"),
            (scope("_bad"), "_"),
        ] {
            match map.apply(&change(refused)) {
                Applied::Rejected(why) => assert!(why.contains(reason), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        let elsewhere = Command::ChangeManifest {
            name: "nope".into(),
            change: scope("x"),
            limits,
        };
        assert!(matches!(map.apply(&elsewhere), Applied::Rejected(_)));
        assert_eq!(map, before);
    }

    #[test]
    fn a_failover_made_on_an_old_epoch_is_rejected_whole() {
        let mut map = map_with_bucket();
        let promote = VbucketChange {
            bucket: "b".into(),
            vbucket: 0,
            expected_epoch: 4,
            entry: Vbucket {
                active: Some(2),
                replicas: vec![1],
                epoch: 0,
            },
        };
        let stale = VbucketChange {
            vbucket: 1,
            expected_epoch: 3,
            ..promote.clone()
        };
        let before = map.clone();
        let command = Command::Failover {
            node: 1,
            changes: vec![promote.clone(), stale],
        };
        assert!(matches!(map.apply(&command), Applied::Rejected(_)));
        assert_eq!(map, before);
        let command = Command::Failover {
            node: 1,
            changes: vec![promote],
        };
        assert_eq!(map.apply(&command), Applied::Revision(5));
        assert_eq!(map.members[&1].state, MemberState::Failed);
        assert_eq!(map.buckets["b"].vbuckets[0].active, Some(2));
        assert_eq!(map.buckets["b"].vbuckets[0].epoch, 5);
        assert_eq!(map.buckets["b"].vbuckets[1].epoch, 4);
        // The same plan again meets a failed node and a new epoch.
        let again = Command::Failover {
            node: 1,
            changes: vec![],
        };
        assert!(matches!(map.apply(&again), Applied::Rejected(_)));
    }

    #[test]
    fn a_failover_must_move_every_active_the_node_holds_now() {
        let mut map = map_with_bucket();
        // Node 2 is active for vb 1; a plan that only knew of vb 0 is refused.
        let change = VbucketChange {
            bucket: "b".into(),
            vbucket: 1,
            expected_epoch: 4,
            entry: Vbucket {
                active: Some(3),
                replicas: vec![2],
                epoch: 0,
            },
        };
        let partial = Command::Failover {
            node: 2,
            changes: vec![],
        };
        assert!(matches!(map.apply(&partial), Applied::Rejected(_)));
        let whole = Command::Failover {
            node: 2,
            changes: vec![change],
        };
        assert_eq!(map.apply(&whole), Applied::Revision(5));
    }

    #[test]
    fn an_added_back_node_serves_again_and_takes_back_what_nobody_holds() {
        let mut map = map_with_bucket();
        // Not failed over: nothing to add back.
        assert!(matches!(
            map.apply(&Command::AddBack { node: 1 }),
            Applied::Rejected(_)
        ));
        assert!(matches!(
            map.apply(&Command::AddBack { node: 9 }),
            Applied::Rejected(_)
        ));
        // Node 2 fails: vb 1 finds no replica to promote (left without an active, 2 stays in
        // its chain); vb 0 keeps 1 active with the failed 2 in its chain.
        let orphan = VbucketChange {
            bucket: "b".into(),
            vbucket: 1,
            expected_epoch: 4,
            entry: Vbucket {
                active: None,
                replicas: vec![3, 2],
                epoch: 0,
            },
        };
        let failover = Command::Failover {
            node: 2,
            changes: vec![orphan],
        };
        assert_eq!(map.apply(&failover), Applied::Revision(5));
        assert_eq!(
            map.apply(&Command::AddBack { node: 2 }),
            Applied::Revision(6)
        );
        assert_eq!(map.members[&2].state, MemberState::Active);
        assert_eq!(map.buckets["b"].vbuckets[0].replicas, vec![2]);
        assert_eq!(map.buckets["b"].vbuckets[0].epoch, 4);
        let vb1 = &map.buckets["b"].vbuckets[1];
        assert_eq!(
            (vb1.active, vb1.replicas.clone(), vb1.epoch),
            (Some(2), vec![3], 6)
        );
        assert_eq!(map.check(), Ok(()));
        // Once back it cannot be added back again, and an ejected node never comes back.
        let before = map.clone();
        assert!(matches!(
            map.apply(&Command::AddBack { node: 2 }),
            Applied::Rejected(_)
        ));
        assert_eq!(map, before);
    }

    #[test]
    fn a_failover_cannot_bring_in_new_nodes() {
        let mut map = map_with_bucket();
        let change = VbucketChange {
            bucket: "b".into(),
            vbucket: 0,
            expected_epoch: 4,
            entry: Vbucket {
                active: Some(3),
                replicas: vec![1],
                epoch: 0,
            },
        };
        let command = Command::Failover {
            node: 1,
            changes: vec![change],
        };
        assert!(matches!(map.apply(&command), Applied::Rejected(_)));
    }
}

#[cfg(test)]
mod every_member_tests {
    use super::*;

    fn member(id: NodeId) -> Member {
        Member::joining(id, format!("10.0.0.{id}:4000"), "h:1", "k:1")
    }

    fn accounts(vbuckets: u16, active: NodeId) -> Bucket {
        Bucket {
            name: "_users".into(),
            vbucket_count: vbuckets,
            replicas: 0,
            durability_min: Durability::None,
            manifest: Default::default(),
            design_rev: 0,
            copies: Copies::EveryMember,
            vbuckets: (0..vbuckets)
                .map(|_| Vbucket {
                    active: Some(active),
                    replicas: vec![],
                    epoch: 0,
                })
                .collect(),
        }
    }

    fn applied(map: &mut ClusterMap, command: Command) -> u64 {
        match map.apply(&command) {
            Applied::Revision(revision) => {
                assert_eq!(map.check(), Ok(()), "after {command:?}");
                revision
            }
            other => panic!("{command:?}: {other:?}"),
        }
    }

    #[test]
    fn every_active_member_holds_every_vbucket_and_ejected_ones_leave() {
        let mut map = ClusterMap::default();
        applied(&mut map, Command::AddMember(member(1)));
        let created = applied(&mut map, Command::CreateBucket(accounts(4, 1)));
        let users = &map.buckets["_users"];
        assert_eq!(users.replicas, 0);
        assert!(users.vbuckets.iter().all(|entry| entry.replicas.is_empty()));
        // Members that join are appended to every chain, past REPLICAS_MAX.
        let mut last = created;
        for id in 2..=6 {
            last = applied(&mut map, Command::AddMember(member(id)));
        }
        let users = &map.buckets["_users"];
        assert_eq!(users.replicas, 5);
        for entry in &users.vbuckets {
            assert_eq!(entry.active, Some(1));
            assert_eq!(entry.replicas, vec![2, 3, 4, 5, 6]);
            assert_eq!(entry.epoch, last);
        }
        // A failed member stays in the chains (it counted for durable writes); the count of
        // replicas whose acknowledgements count drops.
        applied(
            &mut map,
            Command::SetMemberState {
                node: 3,
                state: MemberState::Failed,
            },
        );
        assert_eq!(map.buckets["_users"].replicas, 4);
        assert_eq!(
            map.buckets["_users"].vbuckets[0].replicas,
            vec![2, 3, 4, 5, 6]
        );
        // An ejected one leaves them.
        let ejected = applied(
            &mut map,
            Command::SetMemberState {
                node: 5,
                state: MemberState::Ejected,
            },
        );
        let entry = &map.buckets["_users"].vbuckets[2];
        assert_eq!(
            (entry.replicas.clone(), entry.epoch),
            (vec![2, 3, 4, 6], ejected)
        );
        // Added back, the failed member serves again from where it is in the chain.
        applied(&mut map, Command::AddBack { node: 3 });
        assert_eq!(map.buckets["_users"].replicas, 4);
        assert_eq!(map.buckets["_users"].vbuckets[1].replicas, vec![2, 3, 4, 6]);
    }

    #[test]
    fn other_buckets_keep_their_replica_count() {
        let mut map = ClusterMap::default();
        for id in 1..=3 {
            applied(&mut map, Command::AddMember(member(id)));
        }
        let settings = BucketSettings {
            name: "b".into(),
            vbucket_count: 8,
            replicas: 1,
            durability_min: Durability::None,
            copies: Copies::Replicas,
        };
        let placed = crate::placement::place(&settings, &[1, 2, 3]);
        applied(&mut map, Command::CreateBucket(placed.clone()));
        // Created on a node that has not seen the other members yet: apply completes it.
        applied(&mut map, Command::CreateBucket(accounts(8, 2)));
        applied(&mut map, Command::AddMember(member(4)));
        assert_eq!(map.buckets["b"].vbuckets, {
            let mut expected = placed.vbuckets;
            for entry in &mut expected {
                entry.epoch = 4;
            }
            expected
        });
        assert_eq!(map.buckets["b"].replicas, 1);
        let users = &map.buckets["_users"];
        assert_eq!(users.replicas, 3);
        assert!(users
            .vbuckets
            .iter()
            .all(|entry| entry.active == Some(2) && entry.replicas == vec![1, 3, 4]));
        // An ordinary bucket with more replicas than REPLICAS_MAX is still refused.
        let too_many = Bucket {
            name: "c".into(),
            replicas: 4,
            copies: Copies::Replicas,
            ..accounts(1, 1)
        };
        assert!(matches!(
            map.apply(&Command::CreateBucket(too_many)),
            Applied::Rejected(_)
        ));
    }
}
