//! Which replica takes over each vbucket of a failed node (pure).
//!
//! For every vbucket whose active is the failed node, the orchestrator first asks the chain's
//! other members for their persisted seqno, and each one, as it answers, stops accepting the
//! old active's stream under the current epoch (it is fenced). Then [`plan`] decides:
//!
//! - Candidates are the replicas that answered and are active members.
//! - The candidates must meet every majority of the chain (the failed node counted as not
//!   answering). A write acknowledged by a majority is then on some candidate, and since the
//!   fenced candidates accept nothing more from the old active, no later acknowledgement can
//!   slip past the decision.
//! - The candidate with the highest persisted seqno is promoted (ties: the first in chain
//!   order); its history holds every other candidate's, replicas being prefixes of the
//!   active's stream.
//! - It must also hold the highest seqno any candidate knows to be majority-acknowledged.
//!
//! If any rule fails the vbucket is left without an active, and the plan says why: losing a
//! majority-acknowledged write is never traded for availability. The failed node stays in the
//! chain (docs/format/cluster-map.md explains why).

use std::collections::BTreeMap;

use crate::command::VbucketChange;
use crate::map::{ClusterMap, NodeId, Vbucket};

/// What one replica answered for one vbucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSeqno {
    /// The highest seqno it has persisted.
    pub persisted: u64,
    /// The highest seqno it knows was acknowledged by a majority of the chain.
    pub majority_acked: u64,
}

/// Answers per vbucket (bucket name, vbucket) per replica node; a node that did not answer is
/// absent.
pub type Reports = BTreeMap<(String, u16), BTreeMap<NodeId, ReplicaSeqno>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Promote {
        node: NodeId,
        seqno: u64,
    },
    /// No replica answered (or the bucket has none).
    NoReplica,
    /// Too few replicas answered to be sure no majority-acknowledged write is elsewhere.
    MajorityUnreachable {
        answered: usize,
        needed: usize,
    },
    /// The best replica misses a write known to be majority-acknowledged.
    MissesAcknowledgedWrite {
        best: u64,
        acknowledged: u64,
    },
}

/// The decision for one vbucket whose active `entry.active` failed.
pub fn decide_vbucket(
    entry: &Vbucket,
    answers: &BTreeMap<NodeId, ReplicaSeqno>,
    is_candidate: impl Fn(NodeId) -> bool,
) -> Decision {
    let chain_len = entry.chain().count();
    let majority = chain_len / 2 + 1;
    // Every majority meets a set of this size among the other chain members.
    let needed = chain_len - majority + 1;
    let candidates: Vec<(NodeId, ReplicaSeqno)> = entry
        .replicas
        .iter()
        .filter(|node| is_candidate(**node))
        .filter_map(|node| answers.get(node).map(|answer| (*node, *answer)))
        .collect();
    if candidates.is_empty() {
        return Decision::NoReplica;
    }
    if candidates.len() < needed {
        return Decision::MajorityUnreachable {
            answered: candidates.len(),
            needed,
        };
    }
    let acknowledged = candidates
        .iter()
        .map(|(_, answer)| answer.majority_acked)
        .max()
        .unwrap_or(0);
    let mut best = candidates[0];
    for candidate in &candidates[1..] {
        if candidate.1.persisted > best.1.persisted {
            best = *candidate;
        }
    }
    if best.1.persisted < acknowledged {
        return Decision::MissesAcknowledgedWrite {
            best: best.1.persisted,
            acknowledged,
        };
    }
    Decision::Promote {
        node: best.0,
        seqno: best.1.persisted,
    }
}

/// The failover of `failed`: the changes for the `Failover` command and each vbucket's decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub changes: Vec<VbucketChange>,
    pub decisions: Vec<((String, u16), Decision)>,
}

/// Plans the failover of `failed` on `map` from the replicas' `reports`.
pub fn plan(map: &ClusterMap, failed: NodeId, reports: &Reports) -> Plan {
    let mut plan = Plan::default();
    let no_answers = BTreeMap::new();
    for (name, bucket) in &map.buckets {
        for (vb, entry) in bucket.vbuckets.iter().enumerate() {
            if entry.active != Some(failed) {
                continue;
            }
            let Ok(vb) = u16::try_from(vb) else { continue };
            let key = (name.clone(), vb);
            let answers = reports.get(&key).unwrap_or(&no_answers);
            let decision = decide_vbucket(entry, answers, |node| {
                node != failed && map.is_active_member(node)
            });
            let mut replicas: Vec<NodeId> = entry.replicas.clone();
            let active = match decision {
                Decision::Promote { node, .. } => {
                    replicas.retain(|replica| *replica != node);
                    Some(node)
                }
                _ => None,
            };
            replicas.push(failed);
            plan.changes.push(VbucketChange {
                bucket: name.clone(),
                vbucket: vb,
                expected_epoch: entry.epoch,
                entry: Vbucket {
                    active,
                    replicas,
                    epoch: 0,
                },
            });
            plan.decisions.push((key, decision));
        }
    }
    plan
}

#[cfg(test)]
mod tests;
