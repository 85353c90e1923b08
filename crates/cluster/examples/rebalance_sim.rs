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
//! changed, how many of them by promoting a replica, balancing steps and rounds, and planning
//! time. "hot" is the work of the hottest vbucket's active alone, over the mean work of a
//! node after: the least the work column can be.

use std::time::Instant;

use settee_cluster::map::Vbucket;
use settee_cluster::rebalance::{node_loads, plan, scenario::Scenario, Request, Weights};

fn main() {
    println!(
        "{:<20} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6} {:>5} {:>9} {:>9} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7}",
        "scenario",
        "var bef.",
        "var aft.",
        "max b.",
        "max a.",
        "disk",
        "work",
        "hot",
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
            "{:<20} {:>9.6} {:>9.6} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>5.2} {:>9.0} {:>9.0} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7.1}",
            scenario.name,
            before.load.relative_variance(),
            after.load.relative_variance(),
            before.load.max_over_mean(),
            after.load.max_over_mean(),
            after.parts[0].max_over_mean(),
            after.parts[1].max_over_mean(),
            hottest_work(&loads) / after.parts[1].mean,
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

/// The work of the busiest vbucket's active copy alone (node loads of a map holding only it).
fn hottest_work(loads: &[settee_cluster::rebalance::VbucketLoad]) -> f64 {
    let mut alone = vec![
        Vbucket {
            active: None,
            replicas: Vec::new(),
            epoch: 0,
        };
        loads.len()
    ];
    let mut hottest = 0.0f64;
    for vb in 0..loads.len() {
        alone[vb].active = Some(0);
        let work = node_loads(&alone, loads, &Weights::default())
            .get(&0)
            .map_or(0.0, |load| load[1]);
        hottest = hottest.max(work);
        alone[vb].active = None;
    }
    hottest
}
