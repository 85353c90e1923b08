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
//! Smaller gains are "near-equal plans", not worth bytes. Of those kept it takes the one with
//! the most gain per byte moved, a promotion counting as [`PROMOTION_BYTES_SHARE`] of a mean
//! vbucket, and stops when none is left. Every step lowers the sum of squares, so balancing
//! ends. Node loads are summed afresh each round in a fixed order, so planning again on the
//! result finds the same loads to the bit and takes no step.
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
pub(super) const GAP_SHARE_MIN: f64 = 0.005;
/// What a promotion costs, as a share of the bytes of a mean vbucket.
pub(super) const PROMOTION_BYTES_SHARE: f64 = 0.1;
/// Steps at most, per copy in the map (a bound on time: it has never been reached in the
/// simulation, which stops at a few steps per moved copy).
pub(super) const STEPS_PER_COPY_MAX: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Relocate {
        vbucket: usize,
        from: usize,
        to: usize,
    },
    Promote {
        vbucket: usize,
        to: usize,
    },
    /// Counting only: promote `vbucket` to `to`, and relocate the replica of `shifted` the
    /// old active holds to `to`, so only the active counts change.
    PromoteAndShift {
        vbucket: usize,
        to: usize,
        shifted: usize,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Outcome {
    pub steps: usize,
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
    while let Some(step) = best_step(layout, &costs) {
        if outcome.steps == steps_max {
            outcome.capped = true;
            break;
        }
        apply(layout, step);
        outcome.steps += 1;
    }
    outcome
}

struct Costs<'a> {
    model: &'a CostModel,
    bytes: &'a [u64],
    promotion_bytes: f64,
    aims: Vec<[Option<Aim>; 2]>,
}

fn best_step(layout: &Layout, costs: &Costs<'_>) -> Option<Step> {
    let loads = layout.node_loads(costs.model);
    if loads.len() < 2 {
        return None;
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
    let mut best: Option<(f64, Step)> = None;
    let mut best_score = f64::NEG_INFINITY;
    let mut consider = |score: f64, step: Step, best_score: &mut f64| {
        if score > *best_score {
            best = Some((score, step));
            *best_score = score;
        }
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
                let step = Step::Promote { vbucket, to };
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
                        to,
                        shifted,
                    };
                    consider(shift / costs.promotion_bytes, step, &mut best_score);
                }
            }
        }
    }
    best.map(|(_, step)| step)
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
        Step::Promote { vbucket, to } => promote(layout, vbucket, to),
        Step::PromoteAndShift {
            vbucket,
            to,
            shifted,
        } => {
            if let Some(from) = layout.chains[vbucket].active {
                promote(layout, vbucket, to);
                relocate(layout, shifted, from, to);
            }
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
