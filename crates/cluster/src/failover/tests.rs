use proptest::prelude::*;

use super::*;

fn answer(persisted: u64, majority_acked: u64) -> ReplicaSeqno {
    ReplicaSeqno {
        persisted,
        majority_acked,
    }
}

fn entry(active: NodeId, replicas: &[NodeId]) -> Vbucket {
    Vbucket {
        active: Some(active),
        replicas: replicas.to_vec(),
        epoch: 3,
    }
}

#[test]
fn the_replica_with_the_highest_seqno_is_promoted() {
    let answers = BTreeMap::from([(2, answer(10, 8)), (3, answer(12, 8))]);
    let decision = decide_vbucket(&entry(1, &[2, 3]), &answers, |_| true);
    assert_eq!(decision, Decision::Promote { node: 3, seqno: 12 });
}

#[test]
fn a_replica_missing_an_acknowledged_write_is_never_promoted() {
    // One replica, chain of two: the lone replica answered but the other said more was
    // acknowledged (it cannot, here: so feed the knowledge through the same answer).
    let answers = BTreeMap::from([(2, answer(5, 9))]);
    let decision = decide_vbucket(&entry(1, &[2]), &answers, |_| true);
    assert_eq!(
        decision,
        Decision::MissesAcknowledgedWrite {
            best: 5,
            acknowledged: 9
        }
    );
}

#[test]
fn without_enough_answers_the_vbucket_stays_without_an_active() {
    // Chain of three: a write may be acknowledged by the failed active and replica 3 alone.
    let answers = BTreeMap::from([(2, answer(10, 0))]);
    let decision = decide_vbucket(&entry(1, &[2, 3]), &answers, |_| true);
    assert_eq!(
        decision,
        Decision::MajorityUnreachable {
            answered: 1,
            needed: 2
        }
    );
    assert_eq!(
        decide_vbucket(&entry(1, &[]), &BTreeMap::new(), |_| true),
        Decision::NoReplica
    );
}

#[test]
fn the_plan_keeps_the_failed_node_in_the_chain_and_names_the_epoch() {
    use crate::map::{Bucket, Durability};
    let mut map = ClusterMap::default();
    map.buckets.insert(
        "b".into(),
        Bucket {
            name: "b".into(),
            vbucket_count: 2,
            replicas: 1,
            durability_min: Durability::None,
            manifest: Default::default(),
            design_rev: 0,
            copies: Default::default(),
            vbuckets: vec![entry(1, &[2]), entry(2, &[1])],
        },
    );
    let reports = Reports::from([(("b".to_owned(), 0), BTreeMap::from([(2, answer(4, 4))]))]);
    // No members in this map: nobody is a candidate, so the vbucket is stranded.
    let stranded = plan(&map, 1, &reports);
    assert_eq!(stranded.decisions[0].1, Decision::NoReplica);
    assert_eq!(
        stranded.changes[0].entry,
        Vbucket {
            active: None,
            replicas: vec![2, 1],
            epoch: 0
        }
    );
    for id in [1, 2] {
        map.members
            .insert(id, crate::map::Member::joining(id, "", "", ""));
    }
    let promoted = plan(&map, 1, &reports);
    assert_eq!(promoted.changes.len(), 1, "vb 1 is not the failed node's");
    assert_eq!(promoted.changes[0].expected_epoch, 3);
    assert_eq!(
        promoted.changes[0].entry,
        Vbucket {
            active: Some(2),
            replicas: vec![1],
            epoch: 0
        }
    );
}

/// A vbucket's history as the model sees it: the chain, what each member persisted (replicas
/// hold prefixes of one stream), and which writes a majority acknowledged.
fn histories() -> impl Strategy<Value = (Vec<u64>, Vec<bool>, u64)> {
    (1usize..=3).prop_flat_map(|replicas| {
        (
            proptest::collection::vec(0u64..50, replicas + 1),
            proptest::collection::vec(any::<bool>(), replicas),
            0u64..50,
        )
    })
}

proptest! {
    /// Whatever answered, a promotion keeps every write a majority of the chain persisted, and
    /// the promoted replica has the highest seqno among those that answered.
    #[test]
    fn a_promotion_keeps_every_majority_acknowledged_write(
        (persisted, answered, reported_ack) in histories()
    ) {
        let chain_len = persisted.len();
        let majority = chain_len / 2 + 1;
        // The highest seqno persisted by a majority of the chain: every write at or below it
        // was (or could have been) acknowledged.
        let mut sorted = persisted.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let truly_acked = sorted[majority - 1];
        let replicas: Vec<NodeId> = (2..=chain_len as u64).collect();
        let vbucket = entry(1, &replicas);
        let answers: BTreeMap<NodeId, ReplicaSeqno> = replicas
            .iter()
            .zip(&answered)
            .zip(&persisted[1..])
            .filter(|((_, answered), _)| **answered)
            // A replica never knows of an acknowledgement beyond the truth.
            .map(|((node, _), persisted)| (*node, answer(*persisted, reported_ack.min(truly_acked))))
            .collect();
        match decide_vbucket(&vbucket, &answers, |_| true) {
            Decision::Promote { node, seqno } => {
                prop_assert!(seqno >= truly_acked);
                prop_assert_eq!(Some(seqno), answers.values().map(|a| a.persisted).max());
                prop_assert!(answers.contains_key(&node));
            }
            Decision::NoReplica => prop_assert!(answers.is_empty()),
            Decision::MajorityUnreachable { answered, needed } => {
                prop_assert_eq!(answered, answers.len());
                prop_assert!(answered < needed);
            }
            Decision::MissesAcknowledgedWrite { best, acknowledged } => prop_assert!(best < acknowledged),
        }
    }
}
