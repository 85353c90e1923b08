//! Where a new bucket's vbuckets go (pure).
//!
//! Actives go round-robin over the active members in id order, so every node holds the same
//! number of actives within one. Each round of `n` vbuckets shifts the replica chain by a
//! different offset, so a node's replicas are spread over the other nodes (a failover then
//! promotes on many nodes, not one neighbour). A chain never repeats a node; with fewer nodes
//! than `replicas + 1`, each vbucket gets as many replicas as fit (`n - 1`), as Couchbase does,
//! and the bucket keeps its configured replica count for when nodes are added.

use crate::command::BucketSettings;
use crate::map::{Bucket, NodeId, Vbucket};

/// The bucket `settings` describe, placed on `nodes` (active members; order does not matter).
/// With no node at all, every vbucket is left without an active.
pub fn place(settings: &BucketSettings, nodes: &[NodeId]) -> Bucket {
    let mut nodes = nodes.to_vec();
    nodes.sort_unstable();
    nodes.dedup();
    let count = nodes.len();
    let replicas = usize::from(settings.replicas).min(count.saturating_sub(1));
    let vbuckets = (0..usize::from(settings.vbucket_count))
        .map(|vb| {
            if count == 0 {
                return Vbucket {
                    active: None,
                    replicas: Vec::new(),
                    epoch: 0,
                };
            }
            let active = vb % count;
            let round = vb / count;
            // Offsets 1 ..= count - replicas keep the chain clear of the active.
            let offset = 1 + round % (count - replicas).max(1);
            Vbucket {
                active: Some(nodes[active]),
                replicas: (0..replicas)
                    .map(|k| nodes[(active + offset + k) % count])
                    .collect(),
                epoch: 0,
            }
        })
        .collect();
    Bucket {
        name: settings.name.clone(),
        vbucket_count: settings.vbucket_count,
        replicas: settings.replicas,
        durability_min: settings.durability_min,
        manifest: Default::default(),
        design_rev: 0,
        copies: settings.copies,
        vbuckets,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;
    use crate::map::Durability;

    fn settings(vbuckets: u16, replicas: u8) -> BucketSettings {
        BucketSettings {
            name: "b".into(),
            vbucket_count: vbuckets,
            replicas,
            durability_min: Durability::None,
            copies: Default::default(),
        }
    }

    proptest! {
        #[test]
        fn placement_is_balanced_and_chains_are_distinct(
            nodes in proptest::collection::btree_set(0u64..1000, 1..40),
            vbuckets in 1u16..=1024,
            replicas in 0u8..=3,
        ) {
            let nodes: Vec<NodeId> = nodes.into_iter().collect();
            let bucket = place(&settings(vbuckets, replicas), &nodes);
            prop_assert_eq!(bucket.vbuckets.len(), usize::from(vbuckets));
            let fit = usize::from(replicas).min(nodes.len() - 1);
            let mut actives: BTreeMap<NodeId, usize> = nodes.iter().map(|n| (*n, 0)).collect();
            let mut copies: BTreeMap<NodeId, usize> = nodes.iter().map(|n| (*n, 0)).collect();
            for entry in &bucket.vbuckets {
                let chain: Vec<NodeId> = entry.chain().collect();
                let distinct: BTreeSet<NodeId> = chain.iter().copied().collect();
                prop_assert_eq!(distinct.len(), chain.len());
                prop_assert_eq!(entry.replicas.len(), fit);
                prop_assert!(chain.iter().all(|node| nodes.contains(node)));
                *actives.entry(entry.active.unwrap_or(u64::MAX)).or_default() += 1;
                for replica in &entry.replicas {
                    *copies.entry(*replica).or_default() += 1;
                }
            }
            prop_assert!(!actives.contains_key(&u64::MAX));
            let (low, high) = (actives.values().min(), actives.values().max());
            prop_assert!(high.zip(low).is_some_and(|(high, low)| high - low <= 1));
            let (low, high) = (copies.values().min(), copies.values().max());
            prop_assert!(high.zip(low).is_some_and(|(high, low)| high - low <= fit));
        }
    }

    #[test]
    fn fewer_nodes_than_copies_get_as_many_replicas_as_fit() {
        let bucket = place(&settings(4, 3), &[7, 9]);
        for entry in &bucket.vbuckets {
            assert_eq!(entry.replicas.len(), 1);
            assert_ne!(entry.active, entry.replicas.first().copied());
        }
        assert_eq!(bucket.replicas, 3);
        let alone = place(&settings(4, 2), &[7]);
        assert!(alone
            .vbuckets
            .iter()
            .all(|e| e.active == Some(7) && e.replicas.is_empty()));
    }

    #[test]
    fn a_node_s_replicas_are_spread_over_several_nodes() {
        let bucket = place(&settings(1024, 1), &[1, 2, 3, 4]);
        let partners: BTreeSet<NodeId> = bucket
            .vbuckets
            .iter()
            .filter(|entry| entry.active == Some(1))
            .flat_map(|entry| entry.replicas.clone())
            .collect();
        assert_eq!(partners, BTreeSet::from([2, 3, 4]));
    }
}
