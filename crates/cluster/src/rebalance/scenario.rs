//! Synthetic buckets for the planner's simulation (the test and `examples/rebalance_sim.rs`).
//!
//! Documents hash evenly over vbuckets, so a vbucket's size varies little; what skews a
//! cluster is hot keys and large documents. The generator gives every vbucket 8,000 to 12,000
//! documents of a size drawn per vbucket (0.5 to 4 KB, a few vbuckets much larger), index rows
//! worth 30 % of the documents' bytes, and reads and writes with a uniform base plus a Zipf
//! share (exponent 1.1) over a random ranking of the vbuckets, so a few vbuckets are hot.
//! The [`Scenario`]s are the topology changes the simulation plans: each starts from a bucket
//! already balanced for its loads on the nodes before (as a previous rebalance left it), or
//! from `placement`'s map, balanced by counts only.
//!
//! It uses its own seeded generator (SplitMix64): the same seed gives the same bucket on any
//! platform and with any version of `rand`.

use std::collections::{BTreeMap, BTreeSet};

use super::load::{VbucketLoad, Weights};
use super::{plan, Request};
use crate::command::BucketSettings;
use crate::map::{Bucket, Durability, NodeId};
use crate::placement;

/// SplitMix64 (Steele, Lea and Flood, 2014): small, fast, and fixed forever.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An integer in [0, bound) (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    /// `items` in a random order (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for index in (1..items.len()).rev() {
            let other = self.below(index as u64 + 1) as usize;
            items.swap(index, other);
        }
    }
}

/// Skewed loads for `vbuckets` vbuckets (module doc).
pub fn skewed_loads(vbuckets: u16, seed: u64) -> Vec<VbucketLoad> {
    let mut random = SplitMix64::new(seed);
    let count = usize::from(vbuckets);
    let mut read_rank: Vec<usize> = (0..count).collect();
    let mut write_rank: Vec<usize> = (0..count).collect();
    random.shuffle(&mut read_rank);
    random.shuffle(&mut write_rank);
    let zipf = |rank: usize| 1.0 / ((rank + 1) as f64).powf(1.1);
    (0..count)
        .map(|vb| {
            let documents = 8_000 + random.below(4_001);
            let mut doc_bytes = 512.0 + 3_584.0 * random.unit();
            if random.below(50) == 0 {
                doc_bytes *= 8.0;
            }
            let disk_bytes = (documents as f64 * doc_bytes * 1.3) as u64;
            let reads = 200.0 * (0.5 + random.unit()) + 20_000.0 * zipf(read_rank[vb]);
            let writes = 50.0 * (0.5 + random.unit()) + 5_000.0 * zipf(write_rank[vb]);
            VbucketLoad {
                documents,
                disk_bytes,
                reads_per_sec: reads as u64,
                writes_per_sec: writes as u64,
                view_rows: documents * (1 + random.below(3)),
            }
        })
        .collect()
}

/// One rebalance to simulate: a bucket on `before`, rebalanced onto `after`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub vbuckets: u16,
    pub replicas: u8,
    pub before: BTreeSet<NodeId>,
    pub after: BTreeSet<NodeId>,
    /// Server groups the nodes are dealt into round-robin by id (0: none).
    pub group_count: u64,
    /// Start from a map the planner balanced for the loads, else from `placement`'s.
    pub settled: bool,
    pub seed: u64,
}

/// Node ids `first..=last`.
fn ids(first: NodeId, last: NodeId) -> BTreeSet<NodeId> {
    (first..=last).collect()
}

impl Scenario {
    fn new(
        name: &'static str,
        replicas: u8,
        before: BTreeSet<NodeId>,
        after: BTreeSet<NodeId>,
    ) -> Scenario {
        Scenario {
            name,
            vbuckets: 1024,
            replicas,
            before,
            after,
            group_count: 0,
            settled: true,
            seed: 21,
        }
    }

    /// The simulation's scenarios: rebalance-in, -out and swap at 3, 10 and 100 nodes.
    pub fn all() -> Vec<Scenario> {
        let mut unsettled = Scenario::new("100, loads only", 3, ids(1, 100), ids(1, 100));
        unsettled.settled = false;
        let mut grouped = Scenario::new("100 -> 99, 4 groups", 3, ids(1, 100), ids(1, 99));
        grouped.group_count = 4;
        let mut swap = ids(1, 99);
        swap.insert(101);
        vec![
            Scenario::new("2 -> 3, 1 replica", 1, ids(1, 2), ids(1, 3)),
            Scenario::new("3 -> 2, 1 replica", 1, ids(1, 3), ids(1, 2)),
            Scenario::new("3 -> 4, 1 replica", 1, ids(1, 3), ids(1, 4)),
            Scenario::new("3 swap, 2 replicas", 2, ids(1, 3), [1, 2, 4].into()),
            Scenario::new("10 -> 11, 1 replica", 1, ids(1, 10), ids(1, 11)),
            unsettled,
            Scenario::new("100 -> 101", 3, ids(1, 100), ids(1, 101)),
            Scenario::new("100 -> 99", 3, ids(1, 100), ids(1, 99)),
            Scenario::new("100 swap", 3, ids(1, 100), swap),
            grouped,
        ]
    }

    pub fn loads(&self) -> Vec<VbucketLoad> {
        skewed_loads(self.vbuckets, self.seed)
    }

    pub fn groups(&self) -> BTreeMap<NodeId, String> {
        if self.group_count == 0 {
            return BTreeMap::new();
        }
        self.before
            .iter()
            .chain(&self.after)
            .map(|node| (*node, format!("group {}", node % self.group_count)))
            .collect()
    }

    /// The bucket as it stands before the change.
    pub fn bucket(&self) -> Bucket {
        let settings = BucketSettings {
            name: "sim".into(),
            vbucket_count: self.vbuckets,
            replicas: self.replicas,
            durability_min: Durability::None,
            copies: Default::default(),
        };
        let nodes: Vec<NodeId> = self.before.iter().copied().collect();
        let mut bucket = placement::place(&settings, &nodes);
        if self.settled {
            let loads = self.loads();
            let groups = self.groups();
            let settled = plan(&Request {
                bucket: &bucket,
                nodes: &self.before,
                groups: &groups,
                loads: &loads,
                weights: Weights::default(),
            });
            bucket.vbuckets = settled.vbuckets;
        }
        bucket
    }
}
