//! What a vbucket costs the node that holds it, and how spread the cost is over the nodes.
//!
//! Measures come in different units (bytes, documents, operations per second), so each is
//! first taken as a share of the bucket's total of that measure, then the shares are weighed
//! ([`Weights`]). A node's load is the sum of the costs of the copies it holds, the active copy
//! of a vbucket costing more than a replica (module doc of `rebalance`). The load has two
//! dimensions the planner balances each in its own right: *space* (disk bytes, a capacity)
//! and *work* (everything else, rates and what they scale with); the load as one number is
//! their sum. When the bucket measured nothing at all, the planner falls back to counting
//! copies, actives and replicas as the two dimensions, so both counts are balanced, as
//! `placement` balances them.

use std::collections::{BTreeMap, BTreeSet};

use crate::map::{NodeId, Vbucket};

/// What one vbucket measured (the active's statistics over the last interval).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VbucketLoad {
    pub documents: u64,
    /// On disk: the documents and their view and Mango index rows, what a move transfers.
    pub disk_bytes: u64,
    pub reads_per_sec: u64,
    pub writes_per_sec: u64,
    pub view_rows: u64,
}

/// How much each measure weighs in a node's load (only their ratios matter).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    pub disk_bytes: f64,
    pub documents: f64,
    pub view_rows: f64,
    pub reads: f64,
    pub writes: f64,
    /// The part of a write's cost a replica pays: it applies the mutation and its index rows,
    /// but parses no request and tracks no durability.
    pub replica_write_share: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            disk_bytes: 3.0,
            documents: 1.0,
            view_rows: 1.0,
            reads: 2.0,
            writes: 2.0,
            replica_write_share: 0.5,
        }
    }
}

/// Dimensions of a load: space and work when measured, actives and replicas when counting.
pub(super) const DIMENSIONS: usize = 2;
const SPACE: usize = 0;
const WORK: usize = 1;
pub(super) type Vector = [f64; DIMENSIONS];

/// The cost of each vbucket's active and of one of its replicas.
#[derive(Clone, Debug)]
pub(super) struct CostModel {
    pub active: Vec<Vector>,
    pub replica: Vec<Vector>,
    /// Nothing was measured: copies are counted instead.
    pub counting: bool,
}

impl CostModel {
    /// Costs for `count` vbuckets; a vbucket past the end of `loads` measured nothing.
    pub fn new(count: usize, loads: &[VbucketLoad], weights: &Weights) -> CostModel {
        let load = |vb: usize| loads.get(vb).copied().unwrap_or_default();
        let measures = |l: VbucketLoad| {
            [
                l.disk_bytes,
                l.documents,
                l.view_rows,
                l.reads_per_sec,
                l.writes_per_sec,
            ]
        };
        let mut totals = [0f64; 5];
        for vb in 0..count {
            for (total, value) in totals.iter_mut().zip(measures(load(vb))) {
                *total += value as f64;
            }
        }
        if totals.iter().all(|total| *total == 0.0) {
            return CostModel {
                active: vec![[1.0, 0.0]; count],
                replica: vec![[0.0, 1.0]; count],
                counting: true,
            };
        }
        let w = weights;
        // Per measure: its weight on an active, on a replica, and its dimension.
        let roles = [
            (w.disk_bytes, w.disk_bytes, SPACE),
            (w.documents, w.documents, WORK),
            (w.view_rows, 0.0, WORK),
            (w.reads, 0.0, WORK),
            (w.writes, w.writes * w.replica_write_share, WORK),
        ];
        let mut model = CostModel {
            active: Vec::with_capacity(count),
            replica: Vec::with_capacity(count),
            counting: false,
        };
        for vb in 0..count {
            let (mut active, mut replica) = ([0.0; DIMENSIONS], [0.0; DIMENSIONS]);
            for ((value, total), (on_active, on_replica, dimension)) in
                measures(load(vb)).iter().zip(totals).zip(roles)
            {
                if total > 0.0 {
                    let share = *value as f64 / total;
                    active[dimension] += on_active * share;
                    replica[dimension] += on_replica * share;
                }
            }
            model.active.push(active);
            model.replica.push(replica);
        }
        model
    }
}
/// The load of every node holding a copy in `vbuckets`, in its two parts: space and work, or
/// actives and replicas when nothing was measured (module doc).
pub fn node_loads(
    vbuckets: &[Vbucket],
    loads: &[VbucketLoad],
    weights: &Weights,
) -> BTreeMap<NodeId, [f64; 2]> {
    let model = CostModel::new(vbuckets.len(), loads, weights);
    loads_of(vbuckets, &model)
}

pub(super) fn loads_of(vbuckets: &[Vbucket], model: &CostModel) -> BTreeMap<NodeId, Vector> {
    let mut by_node = BTreeMap::new();
    for (vb, entry) in vbuckets.iter().enumerate() {
        if let Some(node) = entry.active {
            add(
                by_node.entry(node).or_insert([0.0; DIMENSIONS]),
                model.active[vb],
            );
        }
        for node in &entry.replicas {
            add(
                by_node.entry(*node).or_insert([0.0; DIMENSIONS]),
                model.replica[vb],
            );
        }
    }
    by_node
}

pub(super) fn add(to: &mut Vector, delta: Vector) {
    for (value, change) in to.iter_mut().zip(delta) {
        *value += change;
    }
}

pub(super) fn dot(a: Vector, b: Vector) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// How evenly a map spreads load over a set of nodes (a node holding nothing counts as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Balance {
    /// The load as one number: the sum of its parts.
    pub load: Spread,
    /// Space and work (actives and replicas when nothing was measured).
    pub parts: [Spread; 2],
}

impl Balance {
    pub fn over(loads: &BTreeMap<NodeId, [f64; 2]>, nodes: &BTreeSet<NodeId>) -> Balance {
        let of = |node: &NodeId| loads.get(node).copied().unwrap_or([0.0; 2]);
        let values =
            |part: fn([f64; 2]) -> f64| -> Vec<f64> { nodes.iter().map(|n| part(of(n))).collect() };
        Balance {
            load: Spread::of(&values(|load| load[0] + load[1])),
            parts: [
                Spread::of(&values(|load| load[0])),
                Spread::of(&values(|load| load[1])),
            ],
        }
    }

    /// The sum of the parts' variances: what the planner lowers.
    pub fn imbalance(&self) -> f64 {
        self.parts.iter().map(|part| part.variance).sum()
    }
}

/// How spread one number is over a set of nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub nodes: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// The population variance.
    pub variance: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let count = values.len() as f64;
        let mean = values.iter().sum::<f64>() / count;
        let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / count;
        Spread {
            nodes: values.len(),
            mean,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            variance,
        }
    }

    /// The variance of load / mean load: comparable across clusters of any size and units.
    pub fn relative_variance(&self) -> f64 {
        if self.mean > 0.0 {
            self.variance / (self.mean * self.mean)
        } else {
            0.0
        }
    }

    pub fn max_over_mean(&self) -> f64 {
        if self.mean > 0.0 {
            self.max / self.mean
        } else {
            0.0
        }
    }
}
