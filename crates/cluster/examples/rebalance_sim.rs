//! The rebalance planner's simulation: every scenario of `rebalance::scenario`, planned once,
//! with the spread of load before and after, the bytes moved against the lower bound, and the
//! time the plan took.
//!
//! `cargo run --release -p settee-cluster --example rebalance_sim`
//!
//! Columns: the variance of load / mean load (so clusters of any size and unit compare) and
//! max / mean load, before (over the nodes holding copies before and the new ones) and after
//! (over the new node set); max / mean after of the two parts the planner balances, disk
//! (space) and work; bytes moved, the lower bound and their ratio; vbuckets whose chain
//! changed, how many of them by promoting a replica, balancing steps, and planning time.

use std::time::Instant;

use settee_cluster::rebalance::{plan, scenario::Scenario, Request, Weights};

fn main() {
    println!(
        "{:<20} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7}",
        "scenario",
        "var bef.",
        "var aft.",
        "max b.",
        "max a.",
        "disk",
        "work",
        "moved MB",
        "bound MB",
        "ratio",
        "moves",
        "promo",
        "steps",
        "rounds",
        "ms"
    );
    for scenario in Scenario::all() {
        let bucket = scenario.bucket();
        let loads = scenario.loads();
        let groups = scenario.groups();
        let request = Request {
            bucket: &bucket,
            nodes: &scenario.after,
            groups: &groups,
            loads: &loads,
            weights: Weights::default(),
        };
        let started = Instant::now();
        let planned = plan(&request);
        let elapsed = started.elapsed();
        let bound = planned.bytes_moved_min();
        let ratio = match (planned.bytes_moved, bound) {
            (0, _) => "-".to_string(),
            (_, 0) => "inf".to_string(),
            (moved, bound) => format!("{:.2}", moved as f64 / bound as f64),
        };
        let promotions = planned
            .moves
            .iter()
            .filter(|step| step.promoted.is_some())
            .count();
        let megabytes = |bytes: u64| bytes as f64 / 1e6;
        let (before, after) = (planned.before, planned.after);
        println!(
            "{:<20} {:>9.6} {:>9.6} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>9.0} {:>9.0} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7.1}",
            scenario.name,
            before.load.relative_variance(),
            after.load.relative_variance(),
            before.load.max_over_mean(),
            after.load.max_over_mean(),
            after.parts[0].max_over_mean(),
            after.parts[1].max_over_mean(),
            megabytes(planned.bytes_moved),
            megabytes(bound),
            ratio,
            planned.moves.len(),
            promotions,
            planned.steps,
            planned.rounds,
            elapsed.as_secs_f64() * 1e3,
        );
        if planned.capped {
            println!("  (stopped by the step limit)");
        }
    }
}
