//! The planner's working copy of a bucket's vbucket map, over the surviving nodes' indexes, and
//! the repair that makes every chain whole before balancing starts.
//!
//! Repair keeps every copy it can: a copy on a surviving node stays where it is (moving it
//! would cost its bytes), unless the group rule or the replica count leaves no room for it. A
//! vbucket whose active was on an ejected node gets its first kept replica as active (a
//! promotion: nothing is copied). Only then are the missing copies created, the heaviest
//! vbuckets first, each on the node it loads least (the least `cost . load`, which lowers the
//! variance most) among those that may hold it.

use std::collections::{BTreeMap, BTreeSet};

use super::load::{add, dot, CostModel, Vector, DIMENSIONS};
use crate::map::{Bucket, NodeId, Vbucket};

/// One vbucket's chain, in node indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Chain {
    pub active: Option<usize>,
    pub replicas: Vec<usize>,
    /// Without an active before the plan (a failover found no replica it could promote
    /// without losing a write), or no node left at all. The planner does not overrule a
    /// failover: such a vbucket keeps its surviving copies where they are, gets no new one
    /// and is never moved.
    pub pinned: bool,
}

impl Chain {
    pub fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.active.into_iter().chain(self.replicas.iter().copied())
    }
}

pub(super) struct Layout {
    /// The nodes after the change, in id order; a node's index is its place here.
    pub nodes: Vec<NodeId>,
    /// Each node's server group (a node given none is a group of its own).
    group_of: Vec<usize>,
    /// Copies of one vbucket that may share a group: 1 when there are at least as many groups
    /// as copies, else as few as the groups allow evenly (`ceil(copies / groups)`).
    group_cap: usize,
    /// There are at least as many groups as copies: the rule is kept strictly, copies that
    /// break it are dropped and made again elsewhere. With fewer groups it is a preference:
    /// new copies follow it where they can, no copy moves only for it, no step breaks it more.
    pub groups_strict: bool,
    /// Copies each vbucket with an active has: the active and
    /// `min(configured replicas, nodes - 1)` replicas (as `placement` places them).
    pub chain_len: usize,
    pub chains: Vec<Chain>,
}

impl Layout {
    /// The chains of `bucket` with every copy on an ejected node removed, the copies the group
    /// rule or the replica count has no room for dropped, and lost actives replaced by their
    /// first kept replica. Missing copies are not made yet ([`Layout::fill`]).
    pub fn keep(
        bucket: &Bucket,
        nodes: &BTreeSet<NodeId>,
        groups: &BTreeMap<NodeId, String>,
    ) -> Layout {
        let nodes: Vec<NodeId> = nodes.iter().copied().collect();
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut group_of = Vec::with_capacity(nodes.len());
        for (index, node) in nodes.iter().enumerate() {
            // A group is numbered by the index of its first node (an unnamed node's group is
            // itself), so two groups never share a number.
            let group = match groups.get(node) {
                Some(name) => *names.entry(name.as_str()).or_insert(index),
                None => index,
            };
            group_of.push(group);
        }
        let group_count = group_of
            .iter()
            .enumerate()
            .filter(|(index, group)| *index == **group)
            .count();
        let chain_len = if nodes.is_empty() {
            0
        } else {
            1 + usize::from(bucket.replicas).min(nodes.len() - 1)
        };
        let group_cap = if group_count >= chain_len {
            1
        } else {
            chain_len.div_ceil(group_count)
        };
        let mut layout = Layout {
            nodes,
            group_of,
            group_cap,
            groups_strict: group_count >= chain_len,
            chain_len,
            chains: Vec::with_capacity(bucket.vbuckets.len()),
        };
        for entry in &bucket.vbuckets {
            let chain = layout.kept(entry);
            layout.chains.push(chain);
        }
        layout
    }

    pub fn index_of(&self, node: NodeId) -> Option<usize> {
        self.nodes.binary_search(&node).ok()
    }

    pub fn group_of(&self, node: usize) -> usize {
        self.group_of[node]
    }

    fn kept(&self, entry: &Vbucket) -> Chain {
        let surviving: Vec<usize> = entry
            .chain()
            .filter_map(|node| self.index_of(node))
            .collect();
        if entry.active.is_none() || self.nodes.is_empty() {
            return Chain {
                active: None,
                replicas: surviving,
                pinned: true,
            };
        }
        let mut kept: Vec<usize> = Vec::with_capacity(self.chain_len);
        for node in surviving {
            let room = !self.groups_strict || self.group_allows(&kept, None, node);
            if kept.len() < self.chain_len && room {
                kept.push(node);
            }
        }
        // The old active if it survived, else the first kept replica (a promotion).
        let active = kept.first().copied();
        Chain {
            active,
            replicas: kept.into_iter().skip(1).collect(),
            pinned: false,
        }
    }

    /// Whether `node` may hold a copy beside `held` (a chain's nodes) when the copy comes from
    /// `leaving`, which then no longer holds it.
    pub fn group_allows(&self, held: &[usize], leaving: Option<usize>, node: usize) -> bool {
        let group = self.group_of[node];
        if leaving.is_some_and(|from| self.group_of[from] == group) {
            return true;
        }
        let sharing = held
            .iter()
            .filter(|other| Some(**other) != leaving && self.group_of[**other] == group)
            .count();
        sharing < self.group_cap
    }

    /// Creates every missing copy: heaviest first, each on the node it loads least.
    pub fn fill(&mut self, model: &CostModel) {
        let mut missing: Vec<(usize, bool)> = Vec::new();
        for (vb, chain) in self.chains.iter().enumerate() {
            if chain.pinned {
                continue;
            }
            let held = chain.nodes().count();
            for slot in held..self.chain_len {
                missing.push((vb, slot == 0));
            }
        }
        let cost = |(vb, active): (usize, bool)| {
            let vector = if active {
                model.active[vb]
            } else {
                model.replica[vb]
            };
            vector.iter().sum::<f64>()
        };
        // Largest first places the big pieces while there is room for them (LPT scheduling).
        missing.sort_by(|a, b| cost(*b).total_cmp(&cost(*a)).then(a.cmp(b)));
        let mut loads = self.node_loads(model);
        let mut copies = vec![0usize; self.nodes.len()];
        for chain in &self.chains {
            for node in chain.nodes() {
                copies[node] += 1;
            }
        }
        for (vb, active) in missing {
            let delta = if active {
                model.active[vb]
            } else {
                model.replica[vb]
            };
            let held: Vec<usize> = self.chains[vb].nodes().collect();
            let free = |node: &usize| !held.contains(node);
            let weight = |node: usize| (dot(delta, loads[node]), copies[node], node);
            let target = (0..self.nodes.len())
                .filter(free)
                .filter(|node| self.group_allows(&held, None, *node))
                .min_by(|a, b| compare(weight(*a), weight(*b)))
                // Too few groups for an even spread: any node without a copy will do.
                .or_else(|| {
                    (0..self.nodes.len())
                        .filter(free)
                        .min_by(|a, b| compare(weight(*a), weight(*b)))
                });
            let Some(target) = target else { continue };
            let chain = &mut self.chains[vb];
            if active {
                chain.active = Some(target);
            } else {
                chain.replicas.push(target);
            }
            add(&mut loads[target], delta);
            copies[target] += 1;
        }
    }

    /// Every node's load, summed in vbucket order (so the same chains give the same bits).
    pub fn node_loads(&self, model: &CostModel) -> Vec<Vector> {
        let mut loads = vec![[0.0; DIMENSIONS]; self.nodes.len()];
        for (vb, chain) in self.chains.iter().enumerate() {
            if let Some(node) = chain.active {
                add(&mut loads[node], model.active[vb]);
            }
            for node in &chain.replicas {
                add(&mut loads[*node], model.replica[vb]);
            }
        }
        loads
    }

    /// The chains as map entries, each keeping `old`'s epoch (applying a change sets it).
    pub fn to_vbuckets(&self, old: &[Vbucket]) -> Vec<Vbucket> {
        self.chains
            .iter()
            .zip(old)
            .map(|(chain, entry)| Vbucket {
                active: chain.active.map(|node| self.nodes[node]),
                replicas: chain
                    .replicas
                    .iter()
                    .map(|node| self.nodes[*node])
                    .collect(),
                epoch: entry.epoch,
            })
            .collect()
    }
}

fn compare(a: (f64, usize, usize), b: (f64, usize, usize)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
}
