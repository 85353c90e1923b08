//! Finding, for one copy, the node that should take it: exactly, without scanning every node.
//!
//! Moving a copy of cost `d` (a vector: space, work) to node `n` is best where `d . load(n)` is
//! least. With one dimension that is the least loaded node; with two it depends on the copy's
//! direction. So the nodes are sorted along [`DIRECTIONS`] fixed directions, from space alone
//! to work alone, and a copy scans the order of the direction nearest its own. Its value at a
//! node differs from the sorted value by at most the angle between the two directions times
//! the node's distance from the mean load (Cauchy-Schwarz), so the scan stops as soon as no
//! node further on can beat the best found. Near balance that is after a few nodes.

use std::f64::consts::FRAC_PI_2;

use super::load::{dot, Vector, DIMENSIONS};

/// Directions the nodes are sorted along.
const DIRECTIONS: usize = 16;

// The angles below assume a plane.
const _: () = assert!(DIMENSIONS == 2);

pub(super) struct Targets {
    /// Each node's load minus the mean (the same minimiser, smaller distances).
    centered: Vec<Vector>,
    units: Vec<Vector>,
    /// Per direction: the nodes in the order of their load along it, and from each place in
    /// that order on, the largest distance of a node from the mean.
    orders: Vec<Vec<usize>>,
    reach: Vec<Vec<f64>>,
}

impl Targets {
    pub fn new(loads: &[Vector]) -> Targets {
        let count = loads.len().max(1) as f64;
        let mut mean = [0.0; DIMENSIONS];
        for load in loads {
            for (total, value) in mean.iter_mut().zip(load) {
                *total += value / count;
            }
        }
        let centered: Vec<Vector> = loads
            .iter()
            .map(|load| std::array::from_fn(|d| load[d] - mean[d]))
            .collect();
        let units: Vec<Vector> = (0..DIRECTIONS).map(unit_at).collect();
        let mut orders = Vec::with_capacity(DIRECTIONS);
        let mut reach = Vec::with_capacity(DIRECTIONS);
        for unit in &units {
            let along = |node: usize| dot(*unit, centered[node]);
            let mut order: Vec<usize> = (0..loads.len()).collect();
            order.sort_by(|a, b| along(*a).total_cmp(&along(*b)).then(a.cmp(b)));
            let mut furthest = vec![0.0; order.len()];
            let mut max = 0.0f64;
            for (place, node) in order.iter().enumerate().rev() {
                max = max.max(length(centered[*node]));
                furthest[place] = max;
            }
            orders.push(order);
            reach.push(furthest);
        }
        Targets {
            centered,
            units,
            orders,
            reach,
        }
    }

    /// Where a copy of `aim` ends up on `node`, along the copy's direction.
    pub fn along(&self, aim: &Aim, node: usize) -> f64 {
        dot(aim.unit, self.centered[node])
    }

    /// No node is lower than this along `aim` (the least any node could offer).
    pub fn lowest(&self, aim: &Aim) -> f64 {
        match self.orders[aim.direction].first() {
            Some(node) => {
                dot(self.units[aim.direction], self.centered[*node])
                    - aim.error * self.reach[aim.direction][0]
            }
            None => f64::INFINITY,
        }
    }

    /// The node `allowed` accepts that is lowest along `aim` (ties: the lowest index).
    pub fn best(&self, aim: &Aim, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let sorted = self.units[aim.direction];
        let mut best: Option<(f64, usize)> = None;
        for (place, node) in self.orders[aim.direction].iter().copied().enumerate() {
            let centered = self.centered[node];
            if let Some((top, _)) = best {
                if dot(sorted, centered) - aim.error * self.reach[aim.direction][place] > top {
                    break;
                }
            }
            if !allowed(node) {
                continue;
            }
            let value = dot(aim.unit, centered);
            let better = match best {
                None => true,
                Some((top, top_node)) => value < top || (value == top && node < top_node),
            };
            if better {
                best = Some((value, node));
            }
        }
        best.map(|(_, node)| node)
    }
}

/// A copy's cost as a direction and a length, with the sorted direction nearest to it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Aim {
    pub delta: Vector,
    pub norm: f64,
    unit: Vector,
    direction: usize,
    /// The distance from `unit` to the sorted direction's unit vector.
    error: f64,
}

impl Aim {
    /// The aim of a copy costing `delta` (no negative part); none for a copy costing nothing.
    pub fn new(delta: Vector) -> Option<Aim> {
        let norm = length(delta);
        if norm == 0.0 || !norm.is_finite() {
            return None;
        }
        let unit: Vector = std::array::from_fn(|d| delta[d] / norm);
        let angle = unit[1].atan2(unit[0]).clamp(0.0, FRAC_PI_2);
        let nearest = (angle / FRAC_PI_2 * (DIRECTIONS - 1) as f64).round();
        let direction = (nearest as usize).min(DIRECTIONS - 1);
        let sorted = unit_at(direction);
        Some(Aim {
            delta,
            norm,
            unit,
            direction,
            error: length(std::array::from_fn(|d| unit[d] - sorted[d])),
        })
    }
}

fn unit_at(direction: usize) -> Vector {
    let angle = FRAC_PI_2 * direction as f64 / (DIRECTIONS - 1) as f64;
    [angle.cos(), angle.sin()]
}

fn length(vector: Vector) -> f64 {
    dot(vector, vector).sqrt()
}
