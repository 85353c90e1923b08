//! One simulated run: nodes, their storage that survives crashes, the fault schedule, the
//! seqno model's writes, and the checks. Everything runs on one thread, on tokio's paused
//! clock, driven by one seeded generator.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use settee_cluster::command::{Applied, BucketSettings, Command};
use settee_cluster::map::{
    AutoFailover, Durability, Member, NodeId, Role, AUTO_FAILOVER_TIMEOUT_MS_MIN,
};
use settee_cluster::node::{ClusterError, ClusterNode, NodeConfig};
use settee_cluster::storage::MemoryBackend;
use settee_cluster::voters::VOTERS_MAX;

use crate::sim::checks::Checks;
use crate::sim::model::{Model, SimSeqnos};
use crate::sim::network::{NetState, SimNetwork};

/// The vbuckets of a run, over all its buckets (issue 20: 1,024 in total).
pub const VBUCKETS_TOTAL: u16 = 1024;
/// How often the driver acts (faults, writes, checks), in simulated ms.
const STEP_MS: u64 = 20;

#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub nodes: u64,
    pub fault_ms: u64,
    pub quiet_ms: u64,
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub crashes: u64,
    pub partitions: u64,
    pub failovers: u64,
    pub promotions: u64,
    pub stranded: u64,
    pub writes: u64,
    pub acknowledged_writes: u64,
    pub terms: usize,
    pub revisions: usize,
    pub messages: u64,
    /// A digest of what happened, to check that a seed replays the same run.
    pub trace: u64,
}

struct World {
    plan: Plan,
    rng: StdRng,
    net: SimNetwork,
    model: Arc<Mutex<Model>>,
    storage: BTreeMap<NodeId, MemoryBackend>,
    checks: Checks,
    outcome: Outcome,
}

fn member(id: NodeId) -> Member {
    Member::joining(
        id,
        format!("node{id}:7000"),
        format!("node{id}:5984"),
        format!("node{id}:11210"),
    )
}

fn fnv(trace: u64, value: u64) -> u64 {
    (trace ^ value).wrapping_mul(0x0000_0100_0000_01b3)
}

impl World {
    fn running(&self) -> Vec<(NodeId, Arc<ClusterNode>)> {
        self.net
            .0
            .lock()
            .nodes
            .iter()
            .map(|(id, node)| (*id, node.clone()))
            .collect()
    }

    async fn start(&mut self, id: NodeId) -> Result<Arc<ClusterNode>, String> {
        // Real processes do not start in the same microsecond. openraft checks its election
        // timeout (drawn once per start) on a ticker; nodes started at one instant tick in step,
        // and if their timeouts round to the same tick they split every vote, for ever.
        let phase_ms = self.rng.gen_range(0..100);
        tokio::time::sleep(Duration::from_millis(phase_ms)).await;
        let backend = self.storage.entry(id).or_default().clone();
        let seqnos = SimSeqnos {
            asker: id,
            model: self.model.clone(),
            net: self.net.clone(),
        };
        let mut config = NodeConfig::new(member(id));
        config.snapshot_logs = 200;
        let node = ClusterNode::start(
            config,
            Arc::new(backend),
            Arc::new(self.net.clone()),
            Arc::new(seqnos),
        )
        .await
        .map_err(|error| format!("node {id} did not start: {error}"))?;
        let node = Arc::new(node);
        self.net.0.lock().nodes.insert(id, node.clone());
        Ok(node)
    }

    async fn crash(&mut self, id: NodeId) {
        let node = self.net.0.lock().nodes.remove(&id);
        if let Some(node) = node {
            node.shutdown().await;
            self.outcome.crashes += 1;
            self.outcome.trace = fnv(self.outcome.trace, 1_000_000 + id);
        }
    }

    /// The running leader, if the running nodes agree on one.
    fn leader(&self) -> Option<Arc<ClusterNode>> {
        self.running().into_iter().find_map(|(_, node)| {
            (node.raft().metrics().borrow().state == ServerState::Leader).then_some(node)
        })
    }

    /// Proposes `command` on whoever leads, retrying through elections, for at most `ms`.
    async fn propose(&mut self, command: Command, ms: u64) -> Result<Applied, String> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        loop {
            if let Some(leader) = self.leader() {
                match leader.propose(command.clone()).await {
                    Ok(applied) => return Ok(applied),
                    Err(ClusterError::NotLeader(_)) | Err(ClusterError::Raft(_)) => {}
                    Err(error) => return Err(error.to_string()),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("no leader committed {command:?} within {ms} ms"));
            }
            self.step().await?;
        }
    }

    /// One driver step: time passes, every running node's map and leadership is checked.
    async fn step(&mut self) -> Result<(), String> {
        tokio::time::sleep(Duration::from_millis(STEP_MS)).await;
        let model = self.model.clone();
        for (id, node) in self.running() {
            let map = node.map();
            self.checks.map(id, &map, &model.lock())?;
            let metrics = node.raft().metrics().borrow().clone();
            if metrics.state == ServerState::Leader {
                self.checks.leader(metrics.current_term, id)?;
            }
        }
        Ok(())
    }

    async fn set_up(&mut self) -> Result<(), String> {
        let first = self.start(1).await?;
        first
            .bootstrap()
            .await
            .map_err(|e| format!("bootstrap: {e}"))?;
        let timeout = AutoFailover {
            enabled: true,
            timeout_ms: AUTO_FAILOVER_TIMEOUT_MS_MIN,
        };
        self.propose(Command::SetAutoFailover(timeout), 10_000)
            .await?;
        for id in 2..=self.plan.nodes {
            self.start(id).await?;
            self.join(id).await?;
        }
        // Two buckets share the 1,024 vbuckets when the seed says so.
        let split = if self.rng.gen_bool(0.5) {
            VBUCKETS_TOTAL
        } else {
            VBUCKETS_TOTAL / 2
        };
        let mut names = vec![("a", split)];
        if split < VBUCKETS_TOTAL {
            names.push(("b", VBUCKETS_TOTAL - split));
        }
        for (name, vbuckets) in names {
            let settings = BucketSettings {
                name: name.into(),
                vbucket_count: vbuckets,
                replicas: self.rng.gen_range(1..=3),
                durability_min: Durability::Majority,
                copies: Default::default(),
            };
            let deadline = tokio::time::Instant::now() + Duration::from_millis(10_000);
            loop {
                let created = match self.leader() {
                    Some(leader) => leader.create_bucket(&settings).await.ok(),
                    None => None,
                };
                if let Some(Applied::Revision(_)) = created {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("bucket {name} was not created"));
                }
                self.step().await?;
            }
        }
        self.settle(20_000).await
    }

    /// Asks the leader to add node `id` (the join a new node's `--join` will send).
    async fn join(&mut self, id: NodeId) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(10_000);
        loop {
            if let Some(leader) = self.leader() {
                if let Ok(Applied::Revision(_)) = leader.add_member(member(id)).await {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("node {id} could not join"));
            }
            self.step().await?;
        }
    }

    /// Steps until every node applied the leader's map and the map records the voters.
    async fn settle(&mut self, ms: u64) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        loop {
            self.step().await?;
            let running = self.running();
            let revisions: BTreeSet<u64> = running
                .iter()
                .map(|(_, node)| node.map().revision)
                .collect();
            let voters = running[0]
                .1
                .map()
                .members
                .values()
                .filter(|m| m.role == Role::Voter)
                .count();
            let expected = (running.len().min(VOTERS_MAX) - 1) | 1;
            if revisions.len() == 1 && voters == expected {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "no settled cluster: revisions {revisions:?}, {voters} voters"
                ));
            }
        }
    }

    /// Random faults and writes until the fault phase ends.
    async fn faults(&mut self) -> Result<(), String> {
        let end = tokio::time::Instant::now() + Duration::from_millis(self.plan.fault_ms);
        let nodes = self.plan.nodes;
        while tokio::time::Instant::now() < end {
            self.step().await?;
            let roll: f64 = self.rng.gen();
            let running: Vec<NodeId> = self.running().iter().map(|(id, _)| *id).collect();
            let crashed: Vec<NodeId> = (1..=nodes).filter(|id| !running.contains(id)).collect();
            if roll < 0.01 && crashed.len() < (nodes as usize).div_ceil(2).max(1) {
                let victim = running[self.rng.gen_range(0..running.len())];
                self.crash(victim).await;
            } else if roll < 0.02 && !crashed.is_empty() {
                let back = crashed[self.rng.gen_range(0..crashed.len())];
                self.start(back).await?;
                self.outcome.trace = fnv(self.outcome.trace, 2_000_000 + back);
            } else if roll < 0.025 {
                let mut net = self.net.0.lock();
                net.sides = (1..=nodes)
                    .map(|id| (id, u8::from(net.rng.gen_bool(0.3))))
                    .collect();
                self.outcome.partitions += 1;
            } else if roll < 0.035 {
                self.net.0.lock().sides.clear();
            } else if roll < 0.04 {
                let mut net = self.net.0.lock();
                net.drop_rate = [0.0, 0.01, 0.05, 0.2][net.rng.gen_range(0..4)];
            }
            self.write_some();
        }
        Ok(())
    }

    /// A few writes on random vbuckets, each by every running node that believes it is active.
    fn write_some(&mut self) {
        let running = self.running();
        let mut model = self.model.lock();
        for _ in 0..8 {
            let vb = self.rng.gen_range(0..VBUCKETS_TOTAL);
            for (id, node) in &running {
                let map = node.map();
                let (name, vb) = match map.buckets.get("b") {
                    Some(b) if vb >= b.vbucket_count => ("a".to_owned(), vb - b.vbucket_count),
                    Some(_) => ("b".to_owned(), vb),
                    None => ("a".to_owned(), vb),
                };
                let net = self.net.0.clone();
                let rng = &mut self.rng;
                model.write(&map, &(name, vb), *id, |replica| {
                    let state = net.lock();
                    state.nodes.contains_key(&replica)
                        && state.connected(*id, replica)
                        && rng.gen_bool(0.9)
                });
            }
        }
    }

    /// Faults stop; every node runs again; the cluster must settle on one map and one leader.
    async fn heal(&mut self) -> Result<(), String> {
        {
            let mut net = self.net.0.lock();
            net.sides.clear();
            net.drop_rate = 0.0;
        }
        let running: Vec<NodeId> = self.running().iter().map(|(id, _)| *id).collect();
        for id in 1..=self.plan.nodes {
            if !running.contains(&id) {
                self.start(id).await?;
            }
        }
        let end = tokio::time::Instant::now() + Duration::from_millis(self.plan.quiet_ms);
        while tokio::time::Instant::now() < end {
            self.step().await?;
            self.write_some();
        }
        self.converged()
    }

    fn converged(&mut self) -> Result<(), String> {
        let running = self.running();
        let leaders: BTreeSet<Option<NodeId>> = running
            .iter()
            .map(|(_, node)| node.raft().metrics().borrow().current_leader)
            .collect();
        if leaders.len() != 1 || leaders.contains(&None) {
            let lost: Vec<String> = running
                .iter()
                .filter(|(_, node)| node.raft().metrics().borrow().current_leader.is_none())
                .map(|(id, node)| {
                    let m = node.raft().metrics().borrow().clone();
                    format!(
                        "node {id}: {:?} vote {} log {:?} membership {:?}",
                        m.state,
                        m.vote,
                        m.last_log_index,
                        m.membership_config.membership().get_joint_config()
                    )
                })
                .collect();
            let leader = self.leader().map(|l| {
                let m = l.raft().metrics().borrow().clone();
                format!(
                    "leader {}: term {} log {:?} nodes {:?} map members {}",
                    l.id(),
                    m.current_term,
                    m.last_log_index,
                    m.membership_config
                        .membership()
                        .nodes()
                        .map(|(id, _)| *id)
                        .collect::<Vec<_>>(),
                    l.map().members.len()
                )
            });
            return Err(format!(
                "no single leader after the faults stopped: {leaders:?}: {lost:?}; {leader:?}"
            ));
        }
        let maps: Vec<_> = running.iter().map(|(id, node)| (*id, node.map())).collect();
        let top = maps.iter().map(|(_, map)| map.revision).max().unwrap_or(0);
        if let Some((id, map)) = maps.iter().find(|(_, map)| map.revision != top) {
            return Err(format!(
                "node {id} stays at revision {} of {top}",
                map.revision
            ));
        }
        let map = &maps[0].1;
        for (name, bucket) in &map.buckets {
            for (vb, entry) in bucket.vbuckets.iter().enumerate() {
                if let Some(active) = entry.active {
                    if !map.is_active_member(active) {
                        return Err(format!("{name} vb {vb}: active {active} is not active"));
                    }
                }
            }
        }
        let voters = map
            .members
            .values()
            .filter(|m| m.role == Role::Voter)
            .count();
        if voters == 0 || voters > VOTERS_MAX {
            let metrics = running[0].1.raft().metrics().borrow().clone();
            return Err(format!(
                "{voters} voters recorded in the map: {:?}; raft: {:?}",
                map.members, metrics.membership_config
            ));
        }
        self.outcome.trace = fnv(self.outcome.trace, map.revision);
        Ok(())
    }
}

/// A paused-clock runtime and an empty world for `plan`, everything seeded by its seed.
fn world_for(plan: &Plan) -> Result<(tokio::runtime::Runtime, World), String> {
    settee_cluster::runtime::seed_thread_rng(plan.seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|error| error.to_string())?;
    let net = SimNetwork(Arc::new(Mutex::new(NetState {
        rng: StdRng::seed_from_u64(plan.seed ^ 0x5eed),
        nodes: BTreeMap::new(),
        sides: BTreeMap::new(),
        drop_rate: 0.0,
        delay_ms_max: 5,
        messages: 0,
    })));
    let world = World {
        plan: plan.clone(),
        rng: StdRng::seed_from_u64(plan.seed),
        net,
        model: Arc::new(Mutex::new(Model::default())),
        storage: BTreeMap::new(),
        checks: Checks::default(),
        outcome: Outcome::default(),
    };
    Ok((runtime, world))
}

/// Runs one schedule; `Err` names the broken invariant.
pub fn run(plan: &Plan) -> Result<Outcome, String> {
    let (runtime, mut world) = world_for(plan)?;
    let result = runtime.block_on(async {
        let debug = std::env::var_os("SIM_DEBUG").is_some();
        let start = tokio::time::Instant::now();
        world.set_up().await?;
        if debug {
            eprintln!("set up at {:?}: {:?}", start.elapsed(), world.outcome);
        }
        world.faults().await?;
        if debug {
            eprintln!("faults over at {:?}: {:?}", start.elapsed(), world.outcome);
            for (id, node) in world.running() {
                let m = node.raft().metrics().borrow().clone();
                eprintln!("node {id}: {:?} {:?} term {} leader {:?} last log {:?} applied {:?} rev {} repl {:?} membership {:?}", m.running_state, m.state, m.current_term, m.current_leader, m.last_log_index, m.last_applied, node.map().revision, m.replication, m.membership_config);
            }
        }
        world.heal().await?;
        for (id, node) in world.running() {
            node.shutdown().await;
            world.net.0.lock().nodes.remove(&id);
        }
        Ok::<(), String>(())
    });
    result?;
    let model = world.model.lock();
    let mut outcome = world.outcome;
    outcome.failovers = world.checks.failovers;
    outcome.promotions = world.checks.promotions;
    outcome.stranded = world.checks.stranded;
    outcome.writes = model.writes;
    outcome.acknowledged_writes = model.acknowledged_writes;
    outcome.terms = world.checks.terms();
    outcome.revisions = world.checks.revisions();
    outcome.messages = world.net.0.lock().messages;
    for value in [
        outcome.writes,
        outcome.acknowledged_writes,
        outcome.messages,
        outcome.promotions,
    ] {
        outcome.trace = fnv(outcome.trace, value);
    }
    Ok(outcome)
}

/// A manual failover of a live node on a quiet cluster: every vbucket it was active for moves
/// to a replica that holds every acknowledged write, and the node is marked failed. Returns
/// how many vbuckets moved.
pub fn run_manual_failover(seed: u64, nodes: u64, victim: NodeId) -> Result<usize, String> {
    let (runtime, mut world) = world_for(&Plan {
        seed,
        nodes,
        fault_ms: 0,
        quiet_ms: 0,
    })?;
    runtime.block_on(async {
        world.set_up().await?;
        for _ in 0..50 {
            world.step().await?;
            world.write_some();
        }
        let before = world.leader().ok_or("no leader")?.map();
        let leader = world.leader().ok_or("no leader")?;
        let applied = leader.fail_over(victim).await.map_err(|e| e.to_string())?;
        if !matches!(applied, Applied::Revision(_)) {
            return Err(format!("manual failover refused: {applied:?}"));
        }
        world.step().await?;
        let after = leader.map();
        if after.is_active_member(victim) {
            return Err(format!("node {victim} is still active"));
        }
        let mut moved = 0;
        for (name, bucket) in &after.buckets {
            for (vb, entry) in bucket.vbuckets.iter().enumerate() {
                let old = &before.buckets[name].vbuckets[vb];
                if old.active == Some(victim) {
                    if entry.active.is_none() || !old.replicas.contains(&entry.active.unwrap_or(0))
                    {
                        return Err(format!("{name} vb {vb} went from {old:?} to {entry:?}"));
                    }
                    moved += 1;
                } else if entry != old {
                    return Err(format!(
                        "{name} vb {vb} changed though node {victim} was not its active"
                    ));
                }
            }
        }
        for (_, node) in world.running() {
            node.shutdown().await;
        }
        Ok(moved)
    })
}
