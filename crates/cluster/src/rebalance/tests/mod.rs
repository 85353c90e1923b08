//! The planner's tests: deterministic cases here, property tests over random maps in
//! `properties.rs`, the 100-node simulation in `simulation.rs`.

mod properties;
mod simulation;

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::command::BucketSettings;
use crate::map::Durability;
use crate::placement;

fn settings(vbuckets: u16, replicas: u8) -> BucketSettings {
    BucketSettings {
        name: "b".into(),
        vbucket_count: vbuckets,
        replicas,
        durability_min: Durability::None,
        copies: Default::default(),
    }
}

/// Every vbucket alike: the same documents, bytes and traffic.
fn uniform(vbuckets: u16) -> Vec<VbucketLoad> {
    let load = VbucketLoad {
        documents: 1_000,
        disk_bytes: 1_000_000,
        reads_per_sec: 100,
        writes_per_sec: 10,
        view_rows: 1_000,
    };
    vec![load; usize::from(vbuckets)]
}

fn entry(active: Option<NodeId>, replicas: &[NodeId]) -> Vbucket {
    Vbucket {
        active,
        replicas: replicas.to_vec(),
        epoch: 7,
    }
}

fn run(
    bucket: &Bucket,
    nodes: &BTreeSet<NodeId>,
    groups: &BTreeMap<NodeId, String>,
    loads: &[VbucketLoad],
) -> Plan {
    let request = Request {
        bucket,
        nodes,
        groups,
        loads,
        weights: Weights::default(),
    };
    let planned = plan(&request);
    check(&request, &planned);
    planned
}

/// The structural guarantees of a plan (module doc), which hold for every request.
fn check(request: &Request<'_>, planned: &Plan) {
    let bucket = request.bucket;
    let nodes = request.nodes;
    assert_eq!(planned.vbuckets.len(), bucket.vbuckets.len());
    let copies = 1 + usize::from(bucket.replicas).min(nodes.len().saturating_sub(1));
    let group_of = |node: &NodeId| match request.groups.get(node) {
        Some(name) => name.clone(),
        None => format!("node {node}"),
    };
    let groups: BTreeSet<String> = nodes.iter().map(group_of).collect();
    for (vb, (old, new)) in bucket.vbuckets.iter().zip(&planned.vbuckets).enumerate() {
        assert_eq!(new.epoch, old.epoch, "vb {vb}: the epoch is apply's to set");
        let chain: Vec<NodeId> = new.chain().collect();
        let distinct: BTreeSet<NodeId> = chain.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            chain.len(),
            "vb {vb}: a node twice in {new:?}"
        );
        assert!(
            distinct.is_subset(nodes),
            "vb {vb}: {new:?} outside {nodes:?}"
        );
        if old.active.is_none() || nodes.is_empty() {
            // Left as it was, less the nodes that left.
            let surviving: Vec<NodeId> = old.chain().filter(|n| nodes.contains(n)).collect();
            assert_eq!(new.active, None, "vb {vb}");
            assert_eq!(new.replicas, surviving, "vb {vb}");
            continue;
        }
        assert!(new.active.is_some(), "vb {vb} lost its active");
        assert_eq!(chain.len(), copies, "vb {vb}: {new:?}");
        if groups.len() >= copies {
            let used: BTreeSet<String> = chain.iter().map(group_of).collect();
            assert_eq!(used.len(), copies, "vb {vb}: {new:?} shares a group");
        }
    }
    // The moves are exactly the changed entries, and their bytes add up.
    let changed: Vec<usize> = (0..bucket.vbuckets.len())
        .filter(|vb| bucket.vbuckets[*vb] != planned.vbuckets[*vb])
        .collect();
    let moved: Vec<usize> = planned
        .moves
        .iter()
        .map(|step| usize::from(step.vbucket))
        .collect();
    assert_eq!(moved, changed);
    let mut total = 0;
    for step in &planned.moves {
        let vb = usize::from(step.vbucket);
        assert_eq!(step.before, bucket.vbuckets[vb]);
        assert_eq!(step.after, planned.vbuckets[vb]);
        let held: Vec<NodeId> = step.before.chain().collect();
        let copies: Vec<NodeId> = step.after.chain().filter(|n| !held.contains(n)).collect();
        assert_eq!(step.copies, copies);
        let disk = request.loads.get(vb).map_or(0, |load| load.disk_bytes);
        assert_eq!(step.bytes, copies.len() as u64 * disk);
        if let Some(node) = step.promoted {
            assert_eq!(step.after.active, Some(node));
            assert!(step.before.replicas.contains(&node));
        }
        total += step.bytes;
    }
    assert_eq!(planned.bytes_moved, total);
    assert!(
        planned.bytes_moved >= planned.bytes_moved_min(),
        "{planned:?}"
    );
    assert!(!planned.capped);
}

fn ids(nodes: &[NodeId]) -> BTreeSet<NodeId> {
    nodes.iter().copied().collect()
}

fn holding(planned: &Plan, node: NodeId) -> (usize, usize) {
    let actives = planned
        .vbuckets
        .iter()
        .filter(|e| e.active == Some(node))
        .count();
    let replicas = planned
        .vbuckets
        .iter()
        .filter(|e| e.replicas.contains(&node))
        .count();
    (actives, replicas)
}

#[test]
fn rebalance_in_two_to_three_moves_copies_only_to_the_new_node() {
    let bucket = placement::place(&settings(64, 1), &[1, 2]);
    let loads = uniform(64);
    let planned = run(&bucket, &ids(&[1, 2, 3]), &BTreeMap::new(), &loads);
    for node in [1, 2, 3] {
        let (actives, replicas) = holding(&planned, node);
        assert!(
            (21..=22).contains(&actives),
            "node {node}: {actives} actives"
        );
        assert!((42..=43).contains(&(actives + replicas)), "node {node}");
    }
    for step in &planned.moves {
        assert!(step.copies.iter().all(|node| *node == 3), "{step:?}");
    }
    // Node 3 gets its third of the 128 copies; nothing else is copied.
    let (actives, replicas) = holding(&planned, 3);
    assert_eq!(planned.bytes_moved, (actives + replicas) as u64 * 1_000_000);
    assert_eq!(planned.bytes_required, 0);
    assert!(planned.bytes_filling >= 42 * 1_000_000);
}

#[test]
fn rebalance_out_three_to_two_promotes_and_copies_what_the_leaving_node_held() {
    let bucket = placement::place(&settings(48, 1), &[1, 2, 3]);
    let loads = uniform(48);
    let planned = run(&bucket, &ids(&[1, 2]), &BTreeMap::new(), &loads);
    // Every copy node 3 held is made again, once; a vbucket it was active for keeps its
    // surviving replica as the active.
    assert_eq!(planned.bytes_moved, planned.bytes_required);
    assert_eq!(planned.bytes_required, 32 * 1_000_000);
    for (old, step) in bucket.vbuckets.iter().zip(&planned.vbuckets) {
        if old.active == Some(3) {
            assert_eq!(
                step.active,
                old.replicas.first().copied(),
                "{old:?} -> {step:?}"
            );
        }
    }
    for node in [1, 2] {
        assert_eq!(holding(&planned, node), (24, 24));
    }
}

#[test]
fn a_swap_hands_the_leaving_node_s_copies_to_the_new_one() {
    let bucket = placement::place(&settings(48, 2), &[1, 2, 3]);
    let loads = uniform(48);
    let planned = run(&bucket, &ids(&[1, 2, 4]), &BTreeMap::new(), &loads);
    // Every chain held all three nodes: node 4 takes node 3's place in each, and nothing else
    // moves.
    assert_eq!(planned.bytes_moved, 48 * 1_000_000);
    assert_eq!(planned.bytes_moved, planned.bytes_required);
    for step in &planned.moves {
        assert_eq!(step.copies, vec![4]);
        assert_eq!(step.dropped, vec![3]);
    }
    for node in [1, 2, 4] {
        assert_eq!(holding(&planned, node), (16, 32));
    }
}

#[test]
fn a_vbucket_without_an_active_keeps_its_surviving_copies_and_gets_no_new_one() {
    let mut bucket = placement::place(&settings(4, 1), &[1, 2, 3]);
    // vb 0: failed over with no replica (node 3 failed); vb 1: a failover that could not
    // promote replica 2 safely (node 3 failed).
    bucket.vbuckets[0] = entry(None, &[3]);
    bucket.vbuckets[1] = entry(None, &[2, 3]);
    let planned = run(&bucket, &ids(&[1, 2]), &BTreeMap::new(), &uniform(4));
    assert_eq!(planned.vbuckets[0], entry(None, &[]));
    assert_eq!(planned.vbuckets[1], entry(None, &[2]));
    assert_eq!(planned.without_active, vec![0, 1]);
    let dropped: Vec<&Move> = planned.moves.iter().filter(|m| m.vbucket < 2).collect();
    assert_eq!(dropped.len(), 2);
    assert!(dropped.iter().all(|m| m.bytes == 0 && m.dropped == vec![3]));
}

#[test]
fn fewer_nodes_than_copies_keep_as_many_replicas_as_fit() {
    let bucket = placement::place(&settings(32, 3), &[1, 2, 3, 4]);
    let planned = run(&bucket, &ids(&[1, 2]), &BTreeMap::new(), &uniform(32));
    assert!(planned.vbuckets.iter().all(|e| e.replicas.len() == 1));
    // Both nodes held every vbucket already: nothing is copied.
    assert_eq!(planned.bytes_moved, 0);
    let grown = run(
        &bucket,
        &ids(&[1, 2, 3, 4, 5]),
        &BTreeMap::new(),
        &uniform(32),
    );
    assert!(grown.vbuckets.iter().all(|e| e.replicas.len() == 3));
}

#[test]
fn zero_replicas_move_actives_only() {
    let bucket = placement::place(&settings(30, 0), &[1, 2]);
    let planned = run(&bucket, &ids(&[1, 2, 3]), &BTreeMap::new(), &uniform(30));
    for node in [1, 2, 3] {
        assert_eq!(holding(&planned, node), (10, 0));
    }
    assert_eq!(planned.bytes_moved, 10 * 1_000_000);
}

#[test]
fn a_one_node_cluster_grows_its_replicas_when_nodes_join() {
    // Made on one node with 2 replicas configured: none fit until nodes join.
    let bucket = placement::place(&settings(24, 2), &[1]);
    assert!(bucket.vbuckets.iter().all(|e| e.replicas.is_empty()));
    let planned = run(&bucket, &ids(&[1, 2, 3]), &BTreeMap::new(), &uniform(24));
    assert_eq!(planned.bytes_required, 48 * 1_000_000);
    assert_eq!(planned.bytes_moved, planned.bytes_required);
    for node in [1, 2, 3] {
        assert_eq!(holding(&planned, node), (8, 16));
    }
}

#[test]
fn a_bucket_placed_on_no_node_stays_without_actives() {
    let bucket = placement::place(&settings(8, 1), &[]);
    let planned = run(&bucket, &ids(&[1, 2]), &BTreeMap::new(), &uniform(8));
    assert_eq!(planned.without_active.len(), 8);
    assert!(planned.moves.is_empty());
}

#[test]
fn ejecting_every_node_leaves_nothing_anywhere() {
    let bucket = placement::place(&settings(8, 1), &[1, 2]);
    let planned = run(&bucket, &BTreeSet::new(), &BTreeMap::new(), &uniform(8));
    assert!(planned
        .vbuckets
        .iter()
        .all(|e| e.active.is_none() && e.replicas.is_empty()));
}

#[test]
fn a_balanced_map_with_even_loads_is_left_alone() {
    let bucket = placement::place(&settings(1024, 1), &[1, 2, 3, 4]);
    let planned = run(
        &bucket,
        &ids(&[1, 2, 3, 4]),
        &BTreeMap::new(),
        &uniform(1024),
    );
    assert!(planned.moves.is_empty());
    assert_eq!(planned.steps, 0);
}

#[test]
fn a_hot_vbucket_s_node_sheds_other_actives() {
    let bucket = placement::place(&settings(16, 1), &[1, 2]);
    let mut loads = uniform(16);
    // vb 0 (active on node 1) serves as many reads as the other fifteen together.
    loads[0].reads_per_sec = 15 * 100;
    let planned = run(&bucket, &ids(&[1, 2]), &BTreeMap::new(), &loads);
    // Both nodes hold every vbucket: balancing is promotions alone.
    assert_eq!(planned.bytes_moved, 0);
    assert!(planned.moves.iter().all(|m| m.promoted.is_some()));
    assert!(holding(&planned, 1).0 < holding(&planned, 2).0);
    assert!(planned.after.load.variance < planned.before.load.variance);
}

#[test]
fn server_groups_get_one_copy_each_when_there_are_enough() {
    // placement knows nothing of groups: nodes 1 and 2 share one, and so do 3 and 4.
    let bucket = placement::place(&settings(64, 1), &[1, 2, 3, 4]);
    let groups: BTreeMap<NodeId, String> = [(1, "a"), (2, "a"), (3, "b"), (4, "b")]
        .into_iter()
        .map(|(node, name)| (node, name.to_string()))
        .collect();
    let planned = run(&bucket, &ids(&[1, 2, 3, 4]), &groups, &uniform(64));
    // Chains inside one group had to move one copy across (check() tests the groups).
    let inside = bucket
        .vbuckets
        .iter()
        .filter(|e| {
            let chain: Vec<NodeId> = e.chain().collect();
            chain.iter().all(|n| *n <= 2) || chain.iter().all(|n| *n >= 3)
        })
        .count() as u64;
    assert_eq!(planned.bytes_required, inside * 1_000_000);
}

#[test]
fn zero_loads_balance_actives_and_replicas_by_count() {
    let bucket = placement::place(&settings(100, 2), &[1, 2, 3, 4, 5]);
    let nodes = ids(&[1, 2, 3, 4, 5, 6, 7]);
    let planned = run(&bucket, &nodes, &BTreeMap::new(), &[]);
    for node in &nodes {
        let (actives, replicas) = holding(&planned, *node);
        assert!((14..=15).contains(&actives), "node {node}: {actives}");
        assert!((28..=29).contains(&replicas), "node {node}: {replicas}");
    }
    assert_eq!(planned.bytes_moved, 0);
}

#[test]
fn a_chain_longer_than_the_replica_count_is_trimmed_without_copying() {
    // A failover appended node 3 to vb 0's chain and AddBack kept it there: three copies for
    // one replica configured.
    let mut bucket = placement::place(&settings(6, 1), &[1, 2, 3]);
    bucket.vbuckets[0] = entry(Some(1), &[2, 3]);
    let planned = run(&bucket, &ids(&[1, 2, 3]), &BTreeMap::new(), &uniform(6));
    assert_eq!(planned.vbuckets[0].replicas.len(), 1);
    let trimmed = &planned.moves[0];
    assert_eq!((trimmed.vbucket, trimmed.bytes), (0, 0));
    assert_eq!(trimmed.dropped.len(), 1);
}

#[test]
fn a_bucket_on_every_member_gets_every_node_and_keeps_its_actives() {
    let mut bucket = placement::place(&settings(8, 0), &[1]);
    bucket.copies = crate::map::Copies::EveryMember;
    for entry in &mut bucket.vbuckets {
        entry.replicas = vec![2, 3];
    }
    // Node 1 (every active) stays, 3 leaves, 4 joins.
    let planned = run_unchecked(&bucket, &ids(&[1, 2, 4]));
    assert!(planned
        .vbuckets
        .iter()
        .all(|entry| entry.active == Some(1) && entry.replicas == vec![2, 4]));
    assert_eq!(planned.moves.len(), 8);
    assert!(planned
        .moves
        .iter()
        .all(|step| step.copies == vec![4] && step.dropped == vec![3]));
    assert_eq!(planned.bytes_moved, 8 * 1_000_000);
    // Node 1 leaves: the first surviving replica takes every active, nothing is copied.
    let planned = run_unchecked(&bucket, &ids(&[2, 3]));
    assert!(planned
        .vbuckets
        .iter()
        .all(|entry| entry.active == Some(2) && entry.replicas == vec![3]));
    assert!(planned.moves.iter().all(|step| step.promoted == Some(2)));
    assert_eq!(planned.bytes_moved, 0);
}

/// `run` without the replica-count checks of ordinary buckets.
fn run_unchecked(bucket: &Bucket, nodes: &BTreeSet<NodeId>) -> Plan {
    plan(&Request {
        bucket,
        nodes,
        groups: &BTreeMap::new(),
        loads: &uniform(bucket.vbucket_count),
        weights: Weights::default(),
    })
}
