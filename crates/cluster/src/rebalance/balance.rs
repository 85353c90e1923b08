//! Balancing: single steps that lower the variance of load, the cheapest in bytes first.
//!
//! A step is a *relocation* (one copy of a vbucket leaves its node for a node without one:
//! the vbucket's bytes are copied) or a *promotion* (a replica becomes the active and the
//! active a replica: nothing is copied). Moving load `d` (a vector: space, work) from a node
//! at load `a` to one at `b` lowers the sum of squared deviations from the mean by
//! `2 d . (a - b - d)`, so the best target of a copy is the allowed node with the least
//! `d . b` (`targets.rs`). Each round looks at every copy's best relocation and every possible
//! promotion and keeps those that gain more than `2 GAP_SHARE_MIN sum(|d_i| mean_i)`: with one
//! dimension, those that leave the two nodes more than [`GAP_SHARE_MIN`] of the mean apart.
//! Smaller gains are "near-equal plans", not worth bytes. It ranks them by gain per byte moved,
//! a promotion counting as [`PROMOTION_BYTES_SHARE`] of a mean vbucket, and takes the best,
//! then every next one that touches none of the nodes and vbuckets already changed in the
//! round and scores at least [`ROUND_SCORE_SHARE_MIN`] of the best: a step's gain depends on
//! its two nodes' loads alone, so it is still exact. On 3 nodes a round is one step; on 100
//! nodes, ten or so. Balancing stops when a round finds nothing; every step lowers the sum of
//! squares, so it ends. Node loads are summed afresh each round in a fixed order, so planning
//! again on the result finds the same loads to the bit and takes no step.
//!
//! When nothing was measured the loads are counts (actives, replicas): every improving step
//! lowers the sum of squares by at least 2, so any gain counts. One more step is needed there:
//! when a node has two actives more than another that holds replicas of all of them, a
//! promotion would unbalance replicas as much as it balances actives; promoting and moving
//! one of the first node's other replicas to the second (*promote and shift*) changes the
//! active counts alone. With it, the most and the least loaded nodes' actives can always
//! come closer until they are within one (without server groups).

use super::layout::Layout;
use super::load::{CostModel, Vector, DIMENSIONS};
use super::targets::{Aim, Targets};

/// A step must leave its two nodes further apart than this share of the mean load.
const GAP_SHARE_MIN: f64 = 0.005;
/// A round takes, besides its best step, steps on other nodes scoring at least this share of
/// the best (closer to taking one step a round, which always takes the best, but many times
/// faster on many nodes).
const ROUND_SCORE_SHARE_MIN: f64 = 0.5;
/// What a promotion costs, as a share of the bytes of a mean vbucket.
const PROMOTION_BYTES_SHARE: f64 = 0.1;
/// Steps at most, per copy in the map (a bound on time: it has never been reached in the
/// simulation, which stops at a few steps per moved copy).
const STEPS_PER_COPY_MAX: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Relocate {
        vbucket: usize,
        from: usize,
        to: usize,
    },
    Promote {
        vbucket: usize,
        from: usize,
        to: usize,
    },
    /// Counting only: promote `vbucket` to `to`, and relocate the replica of `shifted` the
    /// old active holds to `to`, so only the active counts change.
    PromoteAndShift {
        vbucket: usize,
        from: usize,
        to: usize,
        shifted: usize,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Outcome {
    pub steps: usize,
    pub rounds: usize,
    /// The step limit stopped it before it ran out of improving steps.
    pub capped: bool,
}

/// Balances `layout` by relocations and promotions (`bytes`: each vbucket's disk bytes).
pub(super) fn balance(layout: &mut Layout, model: &CostModel, bytes: &[u64]) -> Outcome {
    let copies: usize = layout.chains.iter().map(|c| c.nodes().count()).sum();
    let steps_max = STEPS_PER_COPY_MAX * copies;
    let movable: Vec<u64> = layout
        .chains
        .iter()
        .zip(bytes)
        .filter(|(chain, _)| !chain.pinned)
        .map(|(_, bytes)| *bytes)
        .collect();
    let mean_bytes = if movable.is_empty() {
        1.0
    } else {
        (movable.iter().map(|b| *b as f64).sum::<f64>() / movable.len() as f64).max(1.0)
    };
    let costs = Costs {
        model,
        bytes,
        promotion_bytes: PROMOTION_BYTES_SHARE * mean_bytes,
        // Per vbucket, a replica's aim and the active's (copies never change cost).
        aims: model
            .replica
            .iter()
            .zip(&model.active)
            .map(|(replica, active)| [Aim::new(*replica), Aim::new(*active)])
            .collect(),
    };
    let mut outcome = Outcome::default();
    let mut node_touched = vec![false; layout.nodes.len()];
    let mut vbucket_touched = vec![false; layout.chains.len()];
    loop {
        let mut steps = candidates(layout, &costs);
        if steps.is_empty() {
            return outcome;
        }
        let round_best = steps
            .iter()
            .map(|(score, _)| *score)
            .fold(f64::MIN, f64::max);
        steps.retain(|(score, _)| *score >= ROUND_SCORE_SHARE_MIN * round_best);
        // Best first; a stable sort keeps ties in the order they were found.
        steps.sort_by(|a, b| b.0.total_cmp(&a.0));
        node_touched.fill(false);
        vbucket_touched.fill(false);
        for (_, step) in steps {
            let (nodes, vbuckets) = step.touches();
            if nodes.iter().any(|node| node_touched[*node])
                || vbuckets.iter().flatten().any(|vb| vbucket_touched[*vb])
            {
                continue;
            }
            if outcome.steps == steps_max {
                outcome.capped = true;
                return outcome;
            }
            apply(layout, step);
            outcome.steps += 1;
            for node in nodes {
                node_touched[node] = true;
            }
            for vbucket in vbuckets.into_iter().flatten() {
                vbucket_touched[vbucket] = true;
            }
        }
        outcome.rounds += 1;
    }
}

struct Costs<'a> {
    model: &'a CostModel,
    bytes: &'a [u64],
    promotion_bytes: f64,
    aims: Vec<[Option<Aim>; 2]>,
}

impl Step {
    /// The two nodes whose loads the step changes, and the vbuckets whose chains it changes.
    fn touches(&self) -> ([usize; 2], [Option<usize>; 2]) {
        match *self {
            Step::Relocate { vbucket, from, to } | Step::Promote { vbucket, from, to } => {
                ([from, to], [Some(vbucket), None])
            }
            Step::PromoteAndShift {
                vbucket,
                from,
                to,
                shifted,
            } => ([from, to], [Some(vbucket), Some(shifted)]),
        }
    }
}

/// Every step worth taking on `layout` as it is, with its gain per byte.
fn candidates(layout: &Layout, costs: &Costs<'_>) -> Vec<(f64, Step)> {
    let loads = layout.node_loads(costs.model);
    if loads.len() < 2 {
        return Vec::new();
    }
    let targets = Targets::new(&loads);
    let mut mean = [0.0; DIMENSIONS];
    for load in &loads {
        for (total, value) in mean.iter_mut().zip(load) {
            *total += value / loads.len() as f64;
        }
    }
    // The least gain that makes moving `delta` worth a step.
    let gain_min = |delta: Vector| -> f64 {
        if costs.model.counting {
            1.0
        } else {
            let size: f64 = (0..DIMENSIONS).map(|d| delta[d].abs() * mean[d]).sum();
            2.0 * size * GAP_SHARE_MIN
        }
    };
    let mut steps: Vec<(f64, Step)> = Vec::new();
    let mut best_score = f64::NEG_INFINITY;
    let mut consider = |score: f64, step: Step, best_score: &mut f64| {
        steps.push((score, step));
        *best_score = best_score.max(score);
    };
    // Counting only: the vbuckets each node holds a replica of.
    let mut replicas_of: Vec<Vec<usize>> = vec![Vec::new(); loads.len()];
    if costs.model.counting {
        for (vbucket, chain) in layout.chains.iter().enumerate() {
            for node in chain.replicas.iter().filter(|_| !chain.pinned) {
                replicas_of[*node].push(vbucket);
            }
        }
    }
    let mut chain_nodes: Vec<usize> = Vec::new();
    for (vbucket, chain) in layout.chains.iter().enumerate() {
        if chain.pinned {
            continue;
        }
        chain_nodes.clear();
        chain_nodes.extend(chain.nodes());
        let held = chain_nodes.as_slice();
        let copy_bytes = costs.bytes[vbucket] as f64;
        for (position, from) in held.iter().copied().enumerate() {
            let active = position == 0 && chain.active.is_some();
            let Some(aim) = &costs.aims[vbucket][usize::from(active)] else {
                continue;
            };
            // Moving `norm` along the aim from `from` to a node at `to` gains
            // 2 norm (from - to) - 2 norm^2; no node is lower than `lowest`.
            let from_along = targets.along(aim, from);
            let gain_to = |to_along: f64| 2.0 * aim.norm * (from_along - to_along - aim.norm);
            let needed = gain_min(aim.delta);
            if gain_to(targets.lowest(aim)) <= needed {
                continue;
            }
            let target = targets.best(aim, |to| {
                !held.contains(&to) && layout.group_allows(held, Some(from), to)
            });
            let Some(to) = target else { continue };
            let gain = gain_to(targets.along(aim, to));
            if gain > needed {
                let step = Step::Relocate { vbucket, from, to };
                consider(
                    gain / (copy_bytes + costs.promotion_bytes),
                    step,
                    &mut best_score,
                );
            }
        }
        let Some(from) = chain.active else { continue };
        let model = costs.model;
        let delta: Vector =
            std::array::from_fn(|d| model.active[vbucket][d] - model.replica[vbucket][d]);
        for to in chain.replicas.iter().copied() {
            let gain = gain(loads[from], loads[to], delta);
            if gain > gain_min(delta) {
                let step = Step::Promote { vbucket, from, to };
                consider(gain / costs.promotion_bytes, step, &mut best_score);
            } else if costs.model.counting {
                // Actives count 2 apart, but the promotion would unbalance replicas as much:
                // shift a replica along with it (module doc).
                let shift = 2.0 * (loads[from][0] - loads[to][0] - 1.0);
                if shift <= 1.0 || shift / costs.promotion_bytes <= best_score {
                    continue;
                }
                if let Some(shifted) = shiftable(layout, &replicas_of[from], from, to) {
                    let step = Step::PromoteAndShift {
                        vbucket,
                        from,
                        to,
                        shifted,
                    };
                    consider(shift / costs.promotion_bytes, step, &mut best_score);
                }
            }
        }
    }
    steps
}

/// A vbucket `from` holds a replica of that `to` may take instead.
fn shiftable(layout: &Layout, replicas: &[usize], from: usize, to: usize) -> Option<usize> {
    replicas.iter().copied().find(|vbucket| {
        let chain = &layout.chains[*vbucket];
        let held: Vec<usize> = chain.nodes().collect();
        !held.contains(&to) && layout.group_allows(&held, Some(from), to)
    })
}

/// How much moving `delta` from a node at `from` to one at `to` lowers the sum of squares.
fn gain(from: Vector, to: Vector, delta: Vector) -> f64 {
    (0..DIMENSIONS)
        .map(|d| 2.0 * delta[d] * (from[d] - to[d] - delta[d]))
        .sum()
}

fn apply(layout: &mut Layout, step: Step) {
    match step {
        Step::Relocate { vbucket, from, to } => relocate(layout, vbucket, from, to),
        Step::Promote { vbucket, to, .. } => promote(layout, vbucket, to),
        Step::PromoteAndShift {
            vbucket,
            from,
            to,
            shifted,
        } => {
            promote(layout, vbucket, to);
            relocate(layout, shifted, from, to);
        }
    }
}

fn relocate(layout: &mut Layout, vbucket: usize, from: usize, to: usize) {
    let chain = &mut layout.chains[vbucket];
    if chain.active == Some(from) {
        chain.active = Some(to);
    } else if let Some(slot) = chain.replicas.iter_mut().find(|node| **node == from) {
        *slot = to;
    }
}

fn promote(layout: &mut Layout, vbucket: usize, to: usize) {
    let chain = &mut layout.chains[vbucket];
    let Some(from) = chain.active else { return };
    if let Some(slot) = chain.replicas.iter_mut().find(|node| **node == to) {
        *slot = from;
        chain.active = Some(to);
    }
}
