//! A lower bound on the bytes a rebalance must copy, to judge a plan by.
//!
//! Two bounds, each valid on its own; the plan reports the larger.
//!
//! - **Required copies.** A vbucket with an active ends with `chain_len` copies on distinct
//!   nodes of the new node set, on distinct server groups when there are enough groups. The
//!   copies it can keep are on surviving nodes, one per group when groups are strict; every
//!   other copy must be made, and a copy costs the vbucket's bytes. This counts, for instance, every copy on an
//!   ejected node (its vbucket must get it back elsewhere) and every replica a rise of the
//!   replica count adds. It holds for every valid plan.
//! - **Filling the lightest node.** A node can only gain what it does not hold by receiving
//!   it. In disk bytes: a node that held `held` bytes of vbuckets and ends with at least
//!   `floor` (the bytes of the plan's least filled node) received at least `floor - held`.
//!   In load: a node that held copies of load at most `held` (each counted as an active, the
//!   heavier role: promotions are free) and ends at least at `floor` (the load of the plan's
//!   least loaded node) received copies of load at least `floor - held`; load costs bytes at
//!   best at the rate of the vbuckets with the most load per byte, and taking them in that
//!   order, the last one in part, and letting every node take any vbucket (a relaxation)
//!   gives the fewest bytes that carry it. Each node received at least the larger of the two,
//!   and transfers to different nodes are different transfers, so the nodes' sum bounds every
//!   plan at least as balanced at the bottom as ours (its least loaded node, in bytes and in
//!   load, at least ours). On a rebalance-in this is what the new empty nodes must be given.

use std::cmp::Ordering;

use super::layout::Layout;
use super::load::CostModel;
use crate::map::Vbucket;

/// Bytes that every valid plan copies: copies that cannot be kept, times their vbucket's bytes.
pub(super) fn required_bytes(layout: &Layout, old: &[Vbucket], bytes: &[u64]) -> u64 {
    let mut total = 0u64;
    for (vb, entry) in old.iter().enumerate() {
        if entry.active.is_none() || layout.chain_len == 0 {
            continue;
        }
        let mut groups: Vec<usize> = entry
            .chain()
            .filter_map(|node| layout.index_of(node))
            .map(|node| layout.group_of(node))
            .collect();
        groups.sort_unstable();
        let mut keepable = 0;
        for run in groups.chunk_by(|a, b| a == b) {
            keepable += match layout.groups_strict {
                true => 1,
                false => run.len(),
            };
        }
        let missing = layout.chain_len.saturating_sub(keepable);
        total = total.saturating_add((missing as u64).saturating_mul(bytes[vb]));
    }
    total
}

/// Bytes every plan needs to lift each node to the disk bytes and to the load of `layout`'s
/// least loaded node.
pub(super) fn filling_bytes(
    layout: &Layout,
    old: &[Vbucket],
    model: &CostModel,
    bytes: &[u64],
) -> u64 {
    if layout.nodes.is_empty() {
        return 0;
    }
    let active = |vb: usize| model.active[vb].iter().sum::<f64>();
    // What each node holds before (that it may keep), and after, in bytes and in load.
    let count = layout.nodes.len();
    let (mut held_bytes, mut held_load) = (vec![0u64; count], vec![0.0; count]);
    for (vb, entry) in old.iter().enumerate() {
        for node in entry.chain().filter_map(|node| layout.index_of(node)) {
            held_bytes[node] = held_bytes[node].saturating_add(bytes[vb]);
            held_load[node] += active(vb);
        }
    }
    let mut final_bytes = vec![0u64; count];
    for (vb, chain) in layout.chains.iter().enumerate() {
        for node in chain.nodes() {
            final_bytes[node] = final_bytes[node].saturating_add(bytes[vb]);
        }
    }
    let floor_bytes = final_bytes.iter().copied().min().unwrap_or(0);
    let floor_load = if model.counting {
        0.0
    } else {
        layout
            .node_loads(model)
            .iter()
            .map(|load| load.iter().sum::<f64>())
            .fold(f64::INFINITY, f64::min)
    };
    let cheapest = Cheapest::new(old, bytes, active);
    // Rounding slack: sums taken in another order must not make a bound out of nothing.
    let slack = 1e-9 * floor_load.abs();
    let mut total = 0u64;
    for node in 0..count {
        let space = floor_bytes.saturating_sub(held_bytes[node]);
        let work = cheapest.bytes_for(floor_load - held_load[node] - slack);
        total = total.saturating_add(space.max(work));
    }
    total
}

/// The vbuckets that can be copied, most load per byte first, with running sums: the fewest
/// bytes that carry a given load, taking the last vbucket in part (a relaxation).
struct Cheapest {
    load: Vec<f64>,
    bytes: Vec<f64>,
    /// The last vbucket's load and bytes, per prefix of the order.
    last: Vec<(f64, u64)>,
}

impl Cheapest {
    fn new(old: &[Vbucket], bytes: &[u64], active: impl Fn(usize) -> f64) -> Cheapest {
        let mut sources: Vec<usize> = (0..old.len())
            .filter(|vb| old[*vb].active.is_some() && active(*vb) > 0.0)
            .collect();
        // a's load / a's bytes against b's, cross-multiplied (zero bytes: infinitely cheap).
        let per_byte = |a: usize, b: usize| -> Ordering {
            let left = active(a) * bytes[b] as f64;
            let right = active(b) * bytes[a] as f64;
            right.total_cmp(&left).then(a.cmp(&b))
        };
        sources.sort_by(|a, b| per_byte(*a, *b));
        let mut cheapest = Cheapest {
            load: Vec::with_capacity(sources.len()),
            bytes: Vec::with_capacity(sources.len()),
            last: Vec::with_capacity(sources.len()),
        };
        let (mut load_sum, mut bytes_sum) = (0.0, 0.0);
        for vb in sources {
            load_sum += active(vb);
            bytes_sum += bytes[vb] as f64;
            cheapest.load.push(load_sum);
            cheapest.bytes.push(bytes_sum);
            cheapest.last.push((active(vb), bytes[vb]));
        }
        cheapest
    }

    /// The fewest bytes carrying `need` load (all of them when even all cannot).
    fn bytes_for(&self, need: f64) -> u64 {
        if need <= 0.0 || self.load.is_empty() {
            return 0;
        }
        let whole = self.load.partition_point(|load| *load < need);
        let Some((last_load, last_bytes)) = self.last.get(whole).copied() else {
            return self.bytes.last().copied().unwrap_or(0.0).floor() as u64;
        };
        let (before_load, before_bytes) = match whole {
            0 => (0.0, 0.0),
            _ => (self.load[whole - 1], self.bytes[whole - 1]),
        };
        let part = (need - before_load) / last_load;
        (before_bytes + part * last_bytes as f64).floor() as u64
    }
}
