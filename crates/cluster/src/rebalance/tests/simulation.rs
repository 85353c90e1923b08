//! The simulation's scenarios (`scenario.rs`, also run by `examples/rebalance_sim.rs`):
//! structure, bytes moved against the lower bound, and a second plan that moves nothing.

use super::*;
use crate::rebalance::scenario::Scenario;

/// Bytes moved at most this many times the lower bound when the node set changes.
const RATIO_MAX: f64 = 2.0;
/// With the same nodes nothing has to move and the bound is weak (it only sees what lifting
/// the least loaded node takes), so the bytes moved are held to a share of the bucket's data.
const SAME_NODES_SHARE_MAX: f64 = 0.1;

#[test]
fn simulated_rebalances_are_sound_and_move_little_more_than_the_bound() {
    for scenario in Scenario::all() {
        let mut bucket = scenario.bucket();
        let loads = scenario.loads();
        let groups = scenario.groups();
        let planned = run(&bucket, &scenario.after, &groups, &loads);
        let name = scenario.name;
        if scenario.before == scenario.after {
            let stored: u64 = bucket
                .vbuckets
                .iter()
                .zip(&loads)
                .map(|(entry, load)| entry.chain().count() as u64 * load.disk_bytes)
                .sum();
            let share = planned.bytes_moved as f64 / stored as f64;
            assert!(share <= SAME_NODES_SHARE_MAX, "{name}: {share} of the data");
        } else {
            let ratio = planned.bytes_moved as f64 / planned.bytes_moved_min().max(1) as f64;
            assert!(ratio <= RATIO_MAX, "{name}: ratio {ratio}");
        }
        let (before, after) = (planned.before.load, planned.after.load);
        assert!(
            after.max_over_mean() <= before.max_over_mean() + 0.01,
            "{name}: {before:?} -> {after:?}"
        );
        bucket.vbuckets = planned.vbuckets;
        let again = run(&bucket, &scenario.after, &groups, &loads);
        assert!(again.moves.is_empty(), "{name}: {:?}", again.moves);
    }
}
