//! Starting, stopping and reporting a rebalance (the management door's `/controller/
//! rebalance`, `/controller/stopRebalance` and `/pools/default/rebalanceProgress`,
//! settee-kv `mgmt/rebalance.rs`). Starting plans every bucket with the planner
//! (`settee_cluster::rebalance::plan`) for the serving set that remains and commits the moves
//! to the map (`StartRebalance`); the nodes then execute them (`cluster_moves.rs`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use settee_cluster::command::{Applied, Command};
use settee_cluster::map::{ClusterMap, MemberState, NodeId};
use settee_cluster::moves::PlannedMove;
use settee_cluster::node::ClusterNode;
use settee_cluster::rebalance::{self, Request, Weights};
use settee_kv::mgmt::buckets::BucketRefusal;

use crate::cluster::member_name;

/// The id of the member `name` names: its id or its `/_membership` name.
pub fn member_named(map: &ClusterMap, name: &str) -> Option<NodeId> {
    map.members
        .values()
        .find(|member| {
            name == member.id.to_string() || name == member_name(member.id, &member.cluster_addr)
        })
        .map(|member| member.id)
}

/// The serving set after the change and the nodes that leave, as ns_server checks them:
/// `known` must hold every serving member (failed-over ones may be named too), `ejected`
/// only known nodes, and someone must be left.
pub fn node_sets(
    map: &ClusterMap,
    known: &[String],
    ejected: &[String],
) -> Result<(BTreeSet<NodeId>, BTreeSet<NodeId>), BucketRefusal> {
    let mismatch = |why: String| BucketRefusal::Invalid("mismatch", why);
    let ids = |names: &[String]| -> Result<BTreeSet<NodeId>, BucketRefusal> {
        names
            .iter()
            .map(|name| {
                member_named(map, name).ok_or_else(|| mismatch(format!("no member {name}")))
            })
            .collect()
    };
    let known = ids(known)?;
    let ejected = ids(ejected)?;
    let serving: BTreeSet<NodeId> = map.active_members().map(|member| member.id).collect();
    if let Some(missing) = serving.difference(&known).next() {
        return Err(mismatch(format!("knownNodes leaves out member {missing}")));
    }
    let retired = |id: &NodeId| {
        map.members
            .get(id)
            .is_some_and(|member| member.state == MemberState::Ejected)
    };
    if let Some(extra) = known.iter().find(|id| retired(id)) {
        return Err(mismatch(format!("node {extra} was ejected")));
    }
    if let Some(unknown) = ejected.difference(&known).next() {
        return Err(mismatch(format!(
            "ejected node {unknown} is not in knownNodes"
        )));
    }
    let nodes: BTreeSet<NodeId> = serving.difference(&ejected).copied().collect();
    if nodes.is_empty() {
        return Err(BucketRefusal::Invalid(
            "noKVNodesLeft",
            "no serving node would be left".into(),
        ));
    }
    Ok((nodes, ejected))
}

/// Every bucket's moves to the serving set `nodes`, each vbucket's copies counted alike (the
/// measured loads are not gathered yet).
pub fn planned_moves(map: &ClusterMap, nodes: &BTreeSet<NodeId>) -> Vec<PlannedMove> {
    let groups = BTreeMap::new();
    let mut moves = Vec::new();
    for bucket in map.buckets.values() {
        let plan = rebalance::plan(&Request {
            bucket,
            nodes,
            groups: &groups,
            loads: &[],
            weights: Weights::default(),
        });
        moves.extend(plan.moves.into_iter().map(|step| PlannedMove {
            bucket: bucket.name.clone(),
            vbucket: step.vbucket,
            expected_epoch: step.before.epoch,
            after: step.after,
        }));
    }
    moves
}

/// Plans and commits a rebalance; the revision it was committed at.
pub async fn start(
    node: &ClusterNode,
    known: &[String],
    ejected: &[String],
) -> Result<u64, BucketRefusal> {
    let map = node.map();
    if map.rebalance.is_some() {
        return Err(BucketRefusal::Exists);
    }
    let (nodes, ejected) = node_sets(&map, known, ejected)?;
    let moves = planned_moves(&map, &nodes);
    tracing::info!(nodes = ?nodes, ejected = ?ejected, moves = moves.len(), "rebalance planned");
    match node
        .submit(Command::StartRebalance {
            nodes,
            ejected,
            moves,
        })
        .await
    {
        Ok(Applied::Revision(revision)) => Ok(revision),
        Ok(Applied::Rejected(reason)) if reason.contains("rebalance is running") => {
            Err(BucketRefusal::Exists)
        }
        Ok(Applied::Rejected(reason)) => Err(BucketRefusal::Invalid("mismatch", reason)),
        Err(error) => Err(BucketRefusal::Unavailable(error.to_string())),
    }
}

/// Stops the running rebalance (none running: nothing to do).
pub async fn stop(node: &ClusterNode) -> Result<(), BucketRefusal> {
    let running = node
        .map()
        .rebalance
        .as_ref()
        .is_some_and(|rebalance| !rebalance.stopping);
    if !running {
        return Ok(());
    }
    match node.submit(Command::StopRebalance).await {
        Ok(_) => Ok(()),
        Err(error) => Err(BucketRefusal::Unavailable(error.to_string())),
    }
}

/// `rebalanceProgress`: per member taking part, the share of its moves that are finished.
pub fn progress(map: &ClusterMap) -> Value {
    let Some(rebalance) = &map.rebalance else {
        return json!({"status": "none"});
    };
    let mut shares: BTreeMap<NodeId, (usize, usize)> = BTreeMap::new();
    for step in &rebalance.moves {
        let nodes = step.source.into_iter().chain(step.copies.iter().copied());
        for node in nodes {
            let (finished, all) = shares.entry(node).or_default();
            *all += 1;
            *finished += usize::from(step.is_finished());
        }
    }
    let mut body = Map::new();
    body.insert("status".into(), json!("running"));
    body.insert("stopping".into(), json!(rebalance.stopping));
    for (id, member) in &map.members {
        if !rebalance.nodes.contains(id) && !rebalance.ejected.contains(id) {
            continue;
        }
        let (finished, all) = shares.get(id).copied().unwrap_or_default();
        let share = if all == 0 {
            1.0
        } else {
            finished as f64 / all as f64
        };
        body.insert(
            member_name(*id, &member.cluster_addr),
            json!({"progress": share}),
        );
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_cluster::command::BucketSettings;
    use settee_cluster::map::{Copies, Durability, Member};
    use settee_cluster::placement;

    /// Members 1, 2 and 3; bucket "db" (16 vbuckets, 1 replica) placed on 1 and 2.
    fn map() -> ClusterMap {
        let mut map = ClusterMap::default();
        for id in [1, 2, 3] {
            let member = Member::joining(id, format!("127.0.0.1:{id}"), "", "");
            assert!(matches!(
                map.apply(&Command::AddMember(member)),
                Applied::Revision(_)
            ));
        }
        let settings = BucketSettings {
            name: "db".into(),
            vbucket_count: 16,
            replicas: 1,
            durability_min: Durability::None,
            copies: Copies::Replicas,
        };
        let bucket = placement::place(&settings, &[1, 2]);
        assert!(matches!(
            map.apply(&Command::CreateBucket(bucket)),
            Applied::Revision(_)
        ));
        map
    }

    fn names(ids: &[NodeId]) -> Vec<String> {
        ids.iter()
            .map(|id| member_name(*id, &format!("127.0.0.1:{id}")))
            .collect()
    }

    #[test]
    fn known_nodes_must_be_the_serving_members_and_someone_must_stay() {
        let map = map();
        let sets = node_sets(&map, &names(&[1, 2, 3]), &names(&[1]));
        assert_eq!(sets, Ok(([2, 3].into(), [1].into())));
        // Ids are names too.
        let sets = node_sets(&map, &["1".into(), "2".into(), "3".into()], &[]);
        assert_eq!(sets, Ok(([1, 2, 3].into(), BTreeSet::new())));
        let refused = |known: &[NodeId], ejected: &[NodeId]| match node_sets(
            &map,
            &names(known),
            &names(ejected),
        ) {
            Err(BucketRefusal::Invalid(key, _)) => key,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(&[1, 2], &[]), "mismatch");
        assert_eq!(refused(&[1, 2, 3], &[4]), "mismatch");
        assert_eq!(refused(&[1, 2, 3], &[1, 2, 3]), "noKVNodesLeft");
    }

    #[test]
    fn the_plan_fills_a_new_node_and_progress_counts_finished_moves() {
        let mut map = map();
        let nodes: BTreeSet<NodeId> = [1, 2, 3].into();
        let moves = planned_moves(&map, &nodes);
        assert!(!moves.is_empty());
        assert!(moves.iter().all(|step| step.bucket == "db"));
        let to_three = moves
            .iter()
            .filter(|step| step.after.chain().any(|node| node == 3))
            .count();
        assert!(
            to_three >= 16 * 2 / 3 - 1,
            "{to_three} of {} moves",
            moves.len()
        );
        assert_eq!(progress(&map), json!({"status": "none"}));
        let start = Command::StartRebalance {
            nodes,
            ejected: BTreeSet::new(),
            moves,
        };
        assert!(matches!(map.apply(&start), Applied::Revision(_)));
        let shown = progress(&map);
        assert_eq!(shown["status"], "running");
        assert_eq!(shown[names(&[3])[0].as_str()]["progress"], json!(0.0));
        // Every move finished: every node's share is 1.
        if let Some(rebalance) = &mut map.rebalance {
            for step in &mut rebalance.moves {
                step.state = settee_cluster::moves::MoveState::Done;
            }
        }
        let shown = progress(&map);
        for name in names(&[1, 2, 3]) {
            assert_eq!(shown[name.as_str()]["progress"], json!(1.0), "{shown}");
        }
    }
}
