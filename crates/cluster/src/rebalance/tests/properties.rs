//! Property tests over random maps, loads and node changes.

use proptest::prelude::*;

use super::*;
use crate::rebalance::scenario::{skewed_loads, SplitMix64};

/// What a random case looks like; the map itself is drawn from `seed`.
#[derive(Clone, Debug)]
struct Shape {
    seed: u64,
    nodes: u64,
    vbuckets: u16,
    replicas: u8,
    ejected: u64,
    added: u64,
    group_count: u64,
    /// 0: nothing measured, 1: skewed loads, 2: skewed with a third of the vbuckets idle.
    loads: u8,
    /// Draw broken chains: short ones, and vbuckets without an active.
    broken: bool,
}

fn shapes() -> impl Strategy<Value = Shape> {
    (
        any::<u64>(),
        1u64..10,
        1u16..80,
        0u8..=3,
        0u64..3,
        0u64..3,
        0u64..=4,
        0u8..3,
        any::<bool>(),
    )
        .prop_map(
            |(seed, nodes, vbuckets, replicas, ejected, added, group_count, loads, broken)| Shape {
                seed,
                nodes,
                vbuckets,
                replicas,
                ejected,
                added,
                group_count,
                loads,
                broken,
            },
        )
}

struct World {
    bucket: Bucket,
    nodes: BTreeSet<NodeId>,
    groups: BTreeMap<NodeId, String>,
    loads: Vec<VbucketLoad>,
}

impl World {
    fn new(shape: &Shape) -> World {
        let mut random = SplitMix64::new(shape.seed);
        let old: Vec<NodeId> = (1..=shape.nodes).collect();
        let fit = usize::from(shape.replicas).min(old.len() - 1) + 1;
        let mut bucket = placement::place(&settings(shape.vbuckets, shape.replicas), &old);
        for entry in &mut bucket.vbuckets {
            let mut chain = old.clone();
            random.shuffle(&mut chain);
            let len = match shape.broken && random.below(4) == 0 {
                true => random.below(fit as u64 + 1) as usize,
                false => fit,
            };
            chain.truncate(len);
            let no_active = chain.is_empty() || (shape.broken && random.below(8) == 0);
            *entry = Vbucket {
                active: if no_active { None } else { Some(chain[0]) },
                replicas: chain.into_iter().skip(usize::from(!no_active)).collect(),
                epoch: random.below(5),
            };
        }
        let mut nodes: BTreeSet<NodeId> = old.iter().copied().collect();
        for _ in 0..shape.ejected {
            let leaving = 1 + random.below(shape.nodes);
            nodes.remove(&leaving);
        }
        nodes.extend((1..=shape.added).map(|k| shape.nodes + k));
        let groups = match shape.group_count {
            0 => BTreeMap::new(),
            count => nodes
                .iter()
                .map(|node| (*node, format!("g{}", random.below(count))))
                .collect(),
        };
        let mut loads = match shape.loads {
            0 => Vec::new(),
            _ => skewed_loads(shape.vbuckets, shape.seed),
        };
        if shape.loads == 2 {
            for load in &mut loads {
                if random.below(3) == 0 {
                    *load = VbucketLoad::default();
                }
            }
        }
        World {
            bucket,
            nodes,
            groups,
            loads,
        }
    }

    fn request(&self) -> Request<'_> {
        Request {
            bucket: &self.bucket,
            nodes: &self.nodes,
            groups: &self.groups,
            loads: &self.loads,
            weights: Weights::default(),
        }
    }

    /// Whether `entry` is already as a plan leaves a vbucket: whole, on staying nodes, in
    /// distinct groups when there are enough.
    fn well_placed(&self, entry: &Vbucket) -> bool {
        let copies = 1 + usize::from(self.bucket.replicas).min(self.nodes.len().saturating_sub(1));
        let chain: Vec<NodeId> = entry.chain().collect();
        let group_of = |node: &NodeId| match self.groups.get(node) {
            Some(name) => name.clone(),
            None => format!("node {node}"),
        };
        let groups: BTreeSet<String> = self.nodes.iter().map(group_of).collect();
        let used: BTreeSet<String> = chain.iter().map(group_of).collect();
        entry.active.is_some()
            && chain.len() == copies
            && chain.iter().all(|node| self.nodes.contains(node))
            && (groups.len() < copies || used.len() == copies)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Distinct chains, ejected nodes empty, replica counts, groups, moves and bytes
    /// consistent, the bound below the bytes moved: `check`.
    #[test]
    fn every_plan_is_structurally_sound(shape in shapes()) {
        let world = World::new(&shape);
        let request = world.request();
        let planned = plan(&request);
        check(&request, &planned);
        prop_assert_eq!(&plan(&request), &planned, "the same request gives the same plan");
    }

    /// Planning again on a plan's result moves nothing at all.
    #[test]
    fn planning_again_moves_nothing(shape in shapes()) {
        let world = World::new(&shape);
        let planned = plan(&world.request());
        let mut again = World { bucket: world.bucket.clone(), ..world };
        again.bucket.vbuckets = planned.vbuckets.clone();
        let replanned = plan(&again.request());
        prop_assert!(replanned.moves.is_empty(), "{:?}", replanned.moves);
    }

    /// With the same nodes and every chain whole, a plan only lowers the imbalance (the sum
    /// of the variances of space and work, or of actives and replicas).
    #[test]
    fn with_the_same_nodes_the_imbalance_never_rises(shape in shapes()) {
        let shape = Shape { ejected: 0, added: 0, broken: false, group_count: 0, ..shape };
        let world = World::new(&shape);
        let planned = plan(&world.request());
        prop_assert_eq!(planned.bytes_required, 0);
        let (before, after) = (planned.before.imbalance(), planned.after.imbalance());
        prop_assert!(after <= before * (1.0 + 1e-9) + 1e-15, "{} -> {}", before, after);
    }

    /// Nothing measured: actives and replicas are counted, each within one per node.
    #[test]
    fn zero_loads_balance_the_counts_within_one(shape in shapes()) {
        let shape = Shape { loads: 0, broken: false, group_count: 0, ..shape };
        let world = World::new(&shape);
        let planned = plan(&world.request());
        let counts: Vec<(usize, usize)> =
            world.nodes.iter().map(|node| holding(&planned, *node)).collect();
        let spread = |values: Vec<usize>| {
            values.iter().max().unwrap_or(&0) - values.iter().min().unwrap_or(&0)
        };
        prop_assert!(spread(counts.iter().map(|c| c.0).collect()) <= 1, "{:?}", counts);
        prop_assert!(spread(counts.iter().map(|c| c.1).collect()) <= 1, "{:?}", counts);
    }

    /// A vbucket that costs nothing and is already well placed never moves: moving it could
    /// not lower the variance. (When nothing at all was measured, copies are counted instead
    /// and every vbucket costs the same.)
    #[test]
    fn an_idle_well_placed_vbucket_stays(shape in shapes()) {
        let shape = Shape { loads: 2, ..shape };
        let world = World::new(&shape);
        let planned = plan(&world.request());
        let idle = VbucketLoad::default();
        prop_assume!(world.loads.iter().any(|load| *load != idle));
        for (vb, entry) in world.bucket.vbuckets.iter().enumerate() {
            if world.loads[vb] == idle && world.well_placed(entry) {
                prop_assert_eq!(&planned.vbuckets[vb], entry, "vb {}", vb);
            }
        }
    }
}
