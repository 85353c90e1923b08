//! The rebalance planner (issue 21, item 1): where every vbucket of a bucket should live after
//! nodes join or leave, as a pure function of the current map and the measured load.
//!
//! The orchestrator decides, the executor moves (STYLE 14): [`plan`] takes a [`Request`] (the
//! bucket's current vbucket map, the node set after the change, optional server groups, each
//! vbucket's [`VbucketLoad`]) and returns a [`Plan`]: the new chain of every vbucket, the
//! [`Move`]s that lead there (which nodes receive a copy, which replica is promoted), the bytes
//! they copy, and a lower bound on the bytes any plan would copy. Nothing here does I/O, reads a
//! clock or draws a random number: the same request gives the same plan.
//!
//! # What a plan guarantees
//! - A vbucket that has an active keeps one, with `min(configured replicas, nodes - 1)`
//!   replicas, as `placement` places a new bucket; its copies are on distinct nodes of the new
//!   node set, and on distinct server groups when there are at least as many groups as copies.
//!   With fewer groups that is a preference: a new copy goes to a group holding fewer than
//!   `ceil(copies / groups)` copies of the vbucket where there is one, and no balancing step
//!   crowds a group further.
//! - A node outside the new node set (ejected, or failed over and not added back) holds
//!   nothing.
//! - A vbucket without an active (a failover could not promote a replica without losing an
//!   acknowledged write) is not healed here: choosing a copy to trust is an operator's call
//!   (`AddBack`). It keeps its surviving copies in place and is never moved.
//!
//! # Load
//! Each measure is taken as the vbucket's share of the bucket's total of that measure, so bytes
//! and operations per second can be added. With the default [`Weights`]:
//!
//! ```text
//!                 space       work
//! active  =    3 bytes  +  1 documents + 1 view_rows + 2 reads + 2 writes
//! replica =    3 bytes  +  1 documents                         + 2 writes x 1/2
//! ```
//!
//! Both roles store the vbucket (bytes, documents' metadata) and apply its writes, a replica at
//! half the cost (no request to parse, no durability to track); only the active serves reads
//! and view queries. A node's load is the sum over the copies it holds, of both parts.
//!
//! The planner minimises the sum of the variances of the two parts, space and work; the
//! variance of the load is at most twice that sum. A single number would let it trade one
//! part for the other: in the simulation, balancing the sum alone left the most loaded node within 2 %
//! of the mean load while disk bytes reached 1.56 times the mean at 100 nodes, and a node
//! added to two got half the mean disk bytes, "equally loaded" by small hot vbuckets, which
//! are also the cheapest to copy. Disk is a capacity, not a rate; it is balanced in its own
//! right. A bucket that measured nothing is balanced by counts instead, actives and replicas
//! being the two parts.
//!
//! # Algorithm
//! 1. *Keep* (`layout.rs`): every copy on a surviving node stays, unless the replica count or
//!    the group rule has no room for it; an active lost with its node is replaced by the first
//!    surviving replica (a promotion, no bytes).
//! 2. *Fill*: the missing copies are made, the heaviest vbucket first, each on the node it
//!    loads least among those allowed to hold it.
//! 3. *Balance* (`balance.rs`): relocations and promotions, each lowering the variance by
//!    more than a small margin (a step must leave its two nodes more than 0.5 % of the mean
//!    apart), the ones with the most gain per byte first (a promotion costs a tenth of a mean
//!    vbucket), in rounds of steps on distinct nodes, until none is left. A vbucket that costs
//!    nothing is never moved by this step; planning again on a plan's result moves nothing.
//!
//! A bucket with copies on every member (the accounts databases, cluster-map.md) is not
//! balanced: every node of the new set holds every vbucket, each active stays where it is while
//! its node serves, else the first surviving replica takes it (a promotion), and the nodes new
//! to a chain are appended to it.
//!
//! The lower bound (`bound.rs`) is the larger of the copies no valid plan can avoid and the
//! bytes any plan needs to lift every node to the least loaded node's disk bytes and load in
//! this plan. docs/rebalance.md has the figures of the simulation (`scenario.rs`,
//! `examples/rebalance_sim.rs`).

mod balance;
mod bound;
mod layout;
mod load;
pub mod scenario;
mod targets;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

pub use load::{node_loads, Balance, Spread, VbucketLoad, Weights};

use crate::map::{Bucket, Copies, NodeId, Vbucket};
use layout::Layout;
use load::{loads_of, CostModel};

/// What the planner is asked.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub bucket: &'a Bucket,
    /// The nodes that serve after the change: kept and added ones. Every other node (ejected,
    /// failed over) ends up holding nothing.
    pub nodes: &'a BTreeSet<NodeId>,
    /// Server groups by name; empty when the cluster has none. A node without an entry is a
    /// group of its own.
    pub groups: &'a BTreeMap<NodeId, String>,
    /// One per vbucket, in vbucket order; a vbucket past the end measured nothing.
    pub loads: &'a [VbucketLoad],
    pub weights: Weights,
}

/// One vbucket whose chain changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub vbucket: u16,
    pub before: Vbucket,
    /// The new entry, with `before`'s epoch: the change applies only on that epoch.
    pub after: Vbucket,
    /// Nodes that receive a copy they do not hold (each one is the vbucket's bytes).
    pub copies: Vec<NodeId>,
    /// The new active, when it held a replica before: a takeover with nothing to copy.
    pub promoted: Option<NodeId>,
    /// Nodes whose copy is dropped once the new entry is live.
    pub dropped: Vec<NodeId>,
    pub bytes: u64,
}

/// The planner's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The new vbucket map, one entry per vbucket, epochs as before.
    pub vbuckets: Vec<Vbucket>,
    /// The vbuckets whose entry changes, in vbucket order.
    pub moves: Vec<Move>,
    pub bytes_moved: u64,
    /// Bytes that every valid plan copies (bound.rs).
    pub bytes_required: u64,
    /// Bytes every plan copies that leaves no node below this plan's least loaded node, in
    /// disk bytes and in load (bound.rs).
    pub bytes_filling: u64,
    /// Node loads before, over the nodes holding copies before and the new node set.
    pub before: Balance,
    /// Node loads after, over the new node set.
    pub after: Balance,
    /// Vbuckets left without an active (module doc), in vbucket order.
    pub without_active: Vec<u16>,
    /// Balancing steps taken (a step can be undone by a later one; moves count the net).
    pub steps: usize,
    /// Balancing rounds: each takes the best steps on distinct nodes.
    pub rounds: usize,
    /// The step limit stopped balancing early (never seen; planning again would go on).
    pub capped: bool,
}

impl Plan {
    /// A lower bound on the bytes a plan at least as balanced as this one copies.
    pub fn bytes_moved_min(&self) -> u64 {
        self.bytes_required.max(self.bytes_filling)
    }
}

/// Plans the rebalance `request` describes (module doc).
pub fn plan(request: &Request<'_>) -> Plan {
    let bucket = request.bucket;
    let old = &bucket.vbuckets;
    let model = CostModel::new(old.len(), request.loads, &request.weights);
    let bytes: Vec<u64> = (0..old.len())
        .map(|vb| request.loads.get(vb).map_or(0, |load| load.disk_bytes))
        .collect();
    if bucket.copies == Copies::EveryMember {
        return every_member(request, &model, &bytes);
    }
    let mut layout = Layout::keep(bucket, request.nodes, request.groups);
    let bytes_required = bound::required_bytes(&layout, old, &bytes);
    layout.fill(&model);
    let outcome = balance::balance(&mut layout, &model, &bytes);
    let bytes_filling = bound::filling_bytes(&layout, old, &model, &bytes);
    let vbuckets = layout.to_vbuckets(old);
    Plan {
        bytes_required,
        bytes_filling,
        steps: outcome.steps,
        rounds: outcome.rounds,
        capped: outcome.capped,
        ..plan_to(request, &model, &bytes, vbuckets)
    }
}

/// The plan leading from the bucket's map to `vbuckets`: its moves, the bytes they copy and the
/// loads before and after; the caller sets the bounds and the balancing figures.
fn plan_to(
    request: &Request<'_>,
    model: &CostModel,
    bytes: &[u64],
    vbuckets: Vec<Vbucket>,
) -> Plan {
    let old = &request.bucket.vbuckets;
    let moves = moves(old, &vbuckets, bytes);
    let mut holders: BTreeSet<NodeId> = old.iter().flat_map(|entry| entry.chain()).collect();
    holders.extend(request.nodes.iter().copied());
    Plan {
        bytes_moved: moves
            .iter()
            .fold(0, |sum, step| sum.saturating_add(step.bytes)),
        before: Balance::over(&loads_of(old, model), &holders),
        after: Balance::over(&loads_of(&vbuckets, model), request.nodes),
        without_active: (0..vbuckets.len())
            .filter(|vb| vbuckets[*vb].active.is_none())
            .filter_map(|vb| u16::try_from(vb).ok())
            .collect(),
        vbuckets,
        moves,
        bytes_required: 0,
        bytes_filling: 0,
        steps: 0,
        rounds: 0,
        capped: false,
    }
}

/// The plan of a bucket with copies on every member (module doc): nothing to balance.
fn every_member(request: &Request<'_>, model: &CostModel, bytes: &[u64]) -> Plan {
    let old = &request.bucket.vbuckets;
    let vbuckets: Vec<Vbucket> = old
        .iter()
        .map(|entry| {
            let mut chain: Vec<NodeId> = entry
                .chain()
                .filter(|node| request.nodes.contains(node))
                .collect();
            let missing: Vec<NodeId> = request
                .nodes
                .iter()
                .copied()
                .filter(|node| !chain.contains(node))
                .collect();
            chain.extend(missing);
            let (active, replicas) = match entry.active {
                // Without an active it stays so (module doc), its copies where they are.
                None => (None, entry.replicas.clone()),
                Some(_) => (
                    chain.first().copied(),
                    chain.iter().skip(1).copied().collect(),
                ),
            };
            Vbucket {
                active,
                replicas,
                epoch: entry.epoch,
            }
        })
        .collect();
    let planned = plan_to(request, model, bytes, vbuckets);
    // Every copy it makes is one no plan avoids.
    Plan {
        bytes_required: planned.bytes_moved,
        ..planned
    }
}

fn moves(old: &[Vbucket], new: &[Vbucket], bytes: &[u64]) -> Vec<Move> {
    let mut moves = Vec::new();
    for (vb, (before, after)) in old.iter().zip(new).enumerate() {
        if before.active == after.active && before.replicas == after.replicas {
            continue;
        }
        let Ok(vbucket) = u16::try_from(vb) else {
            continue;
        };
        let held: Vec<NodeId> = before.chain().collect();
        let kept: Vec<NodeId> = after.chain().collect();
        let copies: Vec<NodeId> = after.chain().filter(|n| !held.contains(n)).collect();
        let promoted = after.active.filter(|node| before.replicas.contains(node));
        moves.push(Move {
            vbucket,
            bytes: (copies.len() as u64).saturating_mul(bytes[vb]),
            copies,
            promoted,
            dropped: before.chain().filter(|n| !kept.contains(n)).collect(),
            before: before.clone(),
            after: after.clone(),
        });
    }
    moves
}
