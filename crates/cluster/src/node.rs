//! One node's part in the cluster: its Raft instance over settee-storage, the heartbeats it
//! sends to the leader, and, while it leads, the orchestrator's loop that executes
//! [`orchestrator::decide`]'s actions.
//!
//! Time comes from tokio (paused and driven by the simulation in tests); messages go through
//! the [`Transport`]; seqnos come from the [`SeqnoSource`]. Nothing here opens a socket.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::command::{Applied, BucketSettings, Command};
use crate::detector::Detector;
use crate::failover::{self, Reports};
use crate::map::{ClusterMap, Copies, Member, NodeId};
use crate::network::{Network, Request, Response, Transport};
use crate::orchestrator::{self, Action, Observation, SeqnoSource};
use crate::placement;
use crate::storage::{Backend, LogStore, StateMachine};
use crate::types::Raft;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    #[error("this node is not the leader (leader: {0:?})")]
    NotLeader(Option<NodeId>),
    #[error("raft: {0}")]
    Raft(String),
    #[error("cluster storage: {0}")]
    Storage(String),
}

/// Timings of one node. The defaults suit a LAN; every value is named here.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub member: Member,
    /// Raft's own heartbeat from the leader to every follower and learner.
    pub raft_heartbeat_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// This node's "I am alive" to the leader (the failure detector's input).
    pub liveness_interval_ms: u64,
    /// How often the leader's orchestrator looks at the cluster.
    pub orchestrator_tick_ms: u64,
    /// A snapshot is built after this many log entries, and the log purged behind it.
    pub snapshot_logs: u64,
}

impl NodeConfig {
    pub fn new(member: Member) -> NodeConfig {
        NodeConfig {
            member,
            raft_heartbeat_ms: 100,
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            liveness_interval_ms: 250,
            orchestrator_tick_ms: 250,
            snapshot_logs: 1_000,
        }
    }
}

/// One node's view of the group ([`ClusterNode::status`]).
#[derive(Clone, Debug)]
pub struct Status {
    pub id: NodeId,
    /// Its Raft role: "leader", "follower", "learner", "candidate" or "shutdown".
    pub state: &'static str,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub last_applied_index: Option<u64>,
    pub voters: BTreeSet<NodeId>,
    pub learners: BTreeSet<NodeId>,
    pub map: Arc<ClusterMap>,
}

/// How long `submit` waits for this node to apply what the leader committed.
pub const APPLY_WAIT_MS: u64 = 10_000;

/// The failure detector of the current leadership term, if this node leads.
type DetectorSlot = Mutex<Option<(u64, Detector)>>;

struct Inner {
    id: NodeId,
    raft: Raft,
    map: watch::Receiver<Arc<ClusterMap>>,
    transport: Arc<dyn Transport>,
    seqnos: Arc<dyn SeqnoSource>,
    config: NodeConfig,
    started: Instant,
    // Locked briefly by the heartbeat handler and the orchestrator tick, never across an await.
    detector: DetectorSlot,
    /// The latest proof of contact with the leader a heartbeat brought (a follower's lease).
    lease: Mutex<Option<LeaseBasis>>,
}

/// What a node's serving lease rests on (docs/format/cluster-map.md, "The serving lease"): it
/// was in contact with a leader a quorum acknowledged at `since`, and that leader had applied
/// the map at `revision`. The node may serve as an active until `since` plus most of the
/// auto-failover timeout, once it has followed `revision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBasis {
    pub since: Instant,
    pub revision: u64,
}

pub struct ClusterNode {
    inner: Arc<Inner>,
    // Taken once, by `shutdown`.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl ClusterNode {
    /// Starts the node on what `backend` holds (a restart recovers the log, vote and map).
    pub async fn start(
        config: NodeConfig,
        backend: Arc<dyn Backend>,
        transport: Arc<dyn Transport>,
        seqnos: Arc<dyn SeqnoSource>,
    ) -> Result<ClusterNode, ClusterError> {
        let id = config.member.id;
        let raft_config = Config {
            cluster_name: "settee".into(),
            heartbeat_interval: config.raft_heartbeat_ms,
            election_timeout_min: config.election_timeout_min_ms,
            election_timeout_max: config.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_logs),
            max_in_snapshot_log_to_keep: config.snapshot_logs / 2,
            ..Config::default()
        }
        .validate()
        .map_err(|error| ClusterError::Raft(error.to_string()))?;
        let state_machine = StateMachine::open(backend.clone())
            .map_err(|e| ClusterError::Storage(e.to_string()))?;
        let map = state_machine.subscribe();
        let network = Network {
            from: id,
            transport: transport.clone(),
        };
        let raft = Raft::new(
            id,
            Arc::new(raft_config),
            network,
            LogStore::new(backend),
            state_machine,
        )
        .await
        .map_err(|error| ClusterError::Raft(error.to_string()))?;
        let inner = Arc::new(Inner {
            id,
            raft,
            map,
            transport,
            seqnos,
            config,
            started: Instant::now(),
            detector: Mutex::new(None),
            lease: Mutex::new(None),
        });
        let tasks = vec![
            tokio::spawn(heartbeats(inner.clone())),
            tokio::spawn(orchestrate(inner.clone())),
        ];
        Ok(ClusterNode {
            inner,
            tasks: Mutex::new(tasks),
        })
    }

    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// The last map this node applied.
    pub fn map(&self) -> Arc<ClusterMap> {
        self.inner.map.borrow().clone()
    }

    /// Every map this node applies from now on.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterMap>> {
        self.inner.map.clone()
    }

    /// Makes this node a new one-node cluster: it votes alone and records itself in the map.
    pub async fn bootstrap(&self) -> Result<(), ClusterError> {
        let member = &self.inner.config.member;
        let nodes = BTreeMap::from([(
            member.id,
            BasicNode {
                addr: member.cluster_addr.clone(),
            },
        )]);
        self.inner
            .raft
            .initialize(nodes)
            .await
            .map_err(|error| ClusterError::Raft(error.to_string()))?;
        // Alone, the node elects itself within an election timeout; wait for it.
        let patience = Duration::from_millis(self.inner.config.election_timeout_max_ms * 10);
        self.inner
            .raft
            .wait(Some(patience))
            .state(ServerState::Leader, "bootstrap")
            .await
            .map_err(|error| ClusterError::Raft(error.to_string()))?;
        self.propose(Command::AddMember(member.clone())).await?;
        Ok(())
    }

    /// Leader only: records a joining node in the map and makes it a learner. The orchestrator
    /// later makes it a voter if the group needs one.
    pub async fn add_member(&self, member: Member) -> Result<Applied, ClusterError> {
        add_member(&self.inner, member).await
    }

    /// Whether this node's Raft storage holds a cluster (a log, a vote or a snapshot): a node
    /// that has one restarts from it and needs no bootstrap or join.
    pub async fn is_initialized(&self) -> Result<bool, ClusterError> {
        self.inner
            .raft
            .is_initialized()
            .await
            .map_err(|error| ClusterError::Raft(error.to_string()))
    }

    /// What this node knows of the group now, for operators and tests.
    pub fn status(&self) -> Status {
        let metrics = self.inner.raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        Status {
            id: self.inner.id,
            state: match metrics.state {
                ServerState::Leader => "leader",
                ServerState::Follower => "follower",
                ServerState::Learner => "learner",
                ServerState::Candidate => "candidate",
                ServerState::Shutdown => "shutdown",
            },
            leader: metrics.current_leader,
            term: metrics.current_term,
            last_applied_index: metrics.last_applied.map(|log_id| log_id.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            map: self.map(),
        }
    }

    /// What this node's serving lease rests on now: as the leader, its last quorum
    /// acknowledgement (always now when it is the only voter); otherwise the last heartbeat
    /// the leader answered. `None`: no proof of contact at all.
    pub fn lease_basis(&self) -> Option<LeaseBasis> {
        match leader_quorum_age(&self.inner) {
            Some(age) => Some(LeaseBasis {
                since: Instant::now()
                    .checked_sub(age)
                    .unwrap_or(self.inner.started),
                revision: self.inner.map.borrow().revision,
            }),
            None => *self.inner.lease.lock(),
        }
    }

    /// Places a new bucket on the active members of the map this node has and commits it,
    /// through the leader if this node does not lead (`submit`). A map that moved meanwhile
    /// (a member failed) rejects the placement, as every command made on an older map.
    pub async fn create_bucket(&self, settings: &BucketSettings) -> Result<Applied, ClusterError> {
        let map = self.map();
        // A bucket on every member has every active here; apply adds the other members
        // (cluster-map.md, "Accounts on every member").
        let nodes: Vec<NodeId> = match settings.copies {
            Copies::Replicas => map.active_members().map(|member| member.id).collect(),
            Copies::EveryMember => vec![self.id()],
        };
        let bucket = placement::place(settings, &nodes);
        self.submit(Command::CreateBucket(bucket)).await
    }

    /// Commits `command` from any node: proposed here when this node leads, else sent to the
    /// leader it knows (`Request::Propose`, docs/format/cluster-transport.md). Returns once
    /// this node has applied the command's entry, so what follows here sees its effect.
    pub async fn submit(&self, command: Command) -> Result<Applied, ClusterError> {
        let applied = submit(&self.inner, command, false).await?;
        if let Applied::Revision(revision) = applied {
            self.wait_for_revision(revision).await?;
        }
        Ok(applied)
    }

    /// Waits (at most `APPLY_WAIT_MS`) until this node has applied the map at `revision`.
    pub async fn wait_for_revision(&self, revision: u64) -> Result<(), ClusterError> {
        let mut map = self.subscribe();
        let reached = async { map.wait_for(|map| map.revision >= revision).await.is_ok() };
        match tokio::time::timeout(Duration::from_millis(APPLY_WAIT_MS), reached).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ClusterError::Raft("the node is shutting down".into())),
            Err(_) => Err(ClusterError::Raft(format!(
                "revision {revision} was committed but not applied here within {APPLY_WAIT_MS} ms"
            ))),
        }
    }

    /// Leader only: fails `node` over now, as the auto-failover would (the manual failover of
    /// Couchbase's REST API): asks its replicas for their seqnos, then commits the plan.
    pub async fn fail_over(&self, node: NodeId) -> Result<Applied, ClusterError> {
        let map = self.map();
        fail_over(&self.inner, &map, node).await
    }

    /// Leader only: commits `command` and returns what applying it did.
    pub async fn propose(&self, command: Command) -> Result<Applied, ClusterError> {
        propose(&self.inner, command).await
    }

    /// Answers a request another node sent through the transport.
    pub async fn handle(&self, request: Request) -> Response {
        handle(&self.inner, request).await
    }

    /// Stops the node's tasks and its Raft instance (a crash, as far as peers can tell).
    /// Returns once the node's own tasks are gone.
    pub async fn shutdown(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        let _ = self.inner.raft.shutdown().await;
    }
}

impl Inner {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

async fn add_member(inner: &Inner, member: Member) -> Result<Applied, ClusterError> {
    let id = member.id;
    let node = BasicNode {
        addr: member.cluster_addr.clone(),
    };
    let applied = propose(inner, Command::AddMember(member)).await?;
    if let Applied::Revision(_) = applied {
        // If this fails (a new leader), the orchestrator's AddLearner action finishes it.
        let _ = inner.raft.add_learner(id, node, false).await;
    }
    Ok(applied)
}

/// The Raft leader this node knows of, with its address in the membership.
fn current_leader(inner: &Inner) -> Option<(NodeId, String)> {
    let metrics = inner.raft.metrics();
    let metrics = metrics.borrow();
    metrics.current_leader.and_then(|leader| {
        metrics
            .membership_config
            .membership()
            .get_node(&leader)
            .map(|node| (leader, node.addr.clone()))
    })
}

/// A join request: the leader records the member; another node forwards it to the leader once.
async fn join(inner: &Inner, member: Member, forwarded: bool) -> Response {
    let leader = current_leader(inner);
    match leader {
        Some((leader, _)) if leader == inner.id => {}
        Some((leader, addr)) if !forwarded => {
            let request = Request::Join {
                member,
                forwarded: true,
            };
            return match inner.transport.send(inner.id, leader, &addr, request).await {
                Ok(response) => response,
                Err(error) => Response::Refused(format!("the Raft leader did not answer: {error}")),
            };
        }
        _ => return Response::Refused("no leader yet; try again".into()),
    }
    let map = inner.map.borrow().clone();
    if let Some(existing) = map.members.get(&member.id) {
        if existing.cluster_addr != member.cluster_addr {
            return Response::Refused(format!(
                "node id {} is already a member (at {})",
                member.id, existing.cluster_addr
            ));
        }
        // The same node asking again (it stopped before the log reached it): make sure it is
        // in the Raft group and answer as the first time.
        let node = BasicNode {
            addr: member.cluster_addr.clone(),
        };
        let _ = inner.raft.add_learner(member.id, node, false).await;
        return Response::Joined {
            revision: map.revision,
        };
    }
    match add_member(inner, member).await {
        Ok(Applied::Revision(revision)) => Response::Joined { revision },
        Ok(Applied::Rejected(reason)) => Response::Refused(reason),
        Err(error) => Response::Refused(error.to_string()),
    }
}

async fn propose(inner: &Inner, command: Command) -> Result<Applied, ClusterError> {
    match inner.raft.client_write(command).await {
        Ok(response) => Ok(response.data),
        Err(error) => match error.forward_to_leader() {
            Some(forward) => Err(ClusterError::NotLeader(forward.leader_id)),
            None => Err(ClusterError::Raft(error.to_string())),
        },
    }
}

/// Proposes `command` here if this node leads, else sends it to the leader it knows (once:
/// a forwarded proposal that finds no leader here is refused).
async fn submit(inner: &Inner, command: Command, forwarded: bool) -> Result<Applied, ClusterError> {
    let leader = match propose(inner, command.clone()).await {
        Err(ClusterError::NotLeader(leader)) => leader,
        other => return other,
    };
    let target = leader.and_then(|leader| {
        current_leader(inner).filter(|(known, _)| *known == leader && leader != inner.id)
    });
    let (Some((leader, addr)), false) = (target, forwarded) else {
        return Err(ClusterError::NotLeader(leader));
    };
    let request = Request::Propose {
        command,
        forwarded: true,
    };
    match inner.transport.send(inner.id, leader, &addr, request).await {
        Ok(Response::Proposed(applied)) => Ok(applied),
        Ok(Response::Refused(reason)) => Err(ClusterError::Raft(reason)),
        Ok(other) => Err(ClusterError::Raft(format!("the leader answered {other:?}"))),
        Err(error) => Err(ClusterError::Raft(format!(
            "the Raft leader did not answer: {error}"
        ))),
    }
}

async fn handle(inner: &Inner, request: Request) -> Response {
    match request {
        Request::AppendEntries(rpc) => match inner.raft.append_entries(rpc).await {
            Ok(response) => Response::AppendEntries(response),
            Err(error) => Response::Refused(error.to_string()),
        },
        Request::Vote(rpc) => match inner.raft.vote(rpc).await {
            Ok(response) => Response::Vote(response),
            Err(error) => Response::Refused(error.to_string()),
        },
        Request::Snapshot { vote, meta, data } => {
            let snapshot = openraft::Snapshot {
                meta,
                snapshot: Box::new(data),
            };
            match inner.raft.install_full_snapshot(vote, snapshot).await {
                Ok(response) => Response::Snapshot(response),
                Err(error) => Response::Refused(error.to_string()),
            }
        }
        Request::Heartbeat { from } => {
            // Only a leader that a quorum acknowledged lately answers: its answer extends the
            // sender's serving lease.
            let Some(age) = leader_quorum_age(inner) else {
                return Response::Refused("not the leader".into());
            };
            let now = inner.now_ms();
            if let Some((_, detector)) = inner.detector.lock().as_mut() {
                detector.heard(from, now);
            }
            Response::Heartbeat {
                revision: inner.map.borrow().revision,
                quorum_age_ms: u32::try_from(age.as_millis()).unwrap_or(u32::MAX),
            }
        }
        Request::Join { member, forwarded } => join(inner, member, forwarded).await,
        Request::Propose { command, forwarded } => match submit(inner, command, forwarded).await {
            Ok(applied) => Response::Proposed(applied),
            Err(ClusterError::NotLeader(_)) => Response::Refused("no leader yet; try again".into()),
            Err(error) => Response::Refused(error.to_string()),
        },
    }
}

/// Sends "I am alive" to the current leader every liveness interval.
async fn heartbeats(inner: Arc<Inner>) {
    let interval = Duration::from_millis(inner.config.liveness_interval_ms);
    loop {
        tokio::time::sleep(interval).await;
        let target = current_leader(&inner);
        let Some((leader, addr)) = target else {
            continue;
        };
        if leader == inner.id {
            continue;
        }
        let request = Request::Heartbeat { from: inner.id };
        let sent_at = Instant::now();
        let sent = inner.transport.send(inner.id, leader, &addr, request);
        if let Ok(Ok(Response::Heartbeat {
            revision,
            quorum_age_ms,
        })) = tokio::time::timeout(interval, sent).await
        {
            // The leader's quorum was last seen `quorum_age_ms` before it answered, which is
            // after this was sent: counting from the send is on the safe side.
            let since = sent_at
                .checked_sub(Duration::from_millis(quorum_age_ms.into()))
                .unwrap_or(inner.started);
            let mut lease = inner.lease.lock();
            if lease.is_none_or(|held| held.since < since) {
                *lease = Some(LeaseBasis { since, revision });
            }
        }
    }
}

/// How long ago a quorum last acknowledged this node's leadership; `None` unless it leads.
/// The only voter is its own quorum.
fn leader_quorum_age(inner: &Inner) -> Option<Duration> {
    let metrics = inner.raft.metrics();
    let metrics = metrics.borrow();
    if metrics.state != ServerState::Leader {
        return None;
    }
    let membership = metrics.membership_config.membership();
    if membership.voter_ids().all(|voter| voter == inner.id) {
        return Some(Duration::ZERO);
    }
    metrics.millis_since_quorum_ack.map(Duration::from_millis)
}

/// The orchestrator: while this node leads, one `decide` and its action per tick.
async fn orchestrate(inner: Arc<Inner>) {
    let tick = Duration::from_millis(inner.config.orchestrator_tick_ms);
    loop {
        tokio::time::sleep(tick).await;
        let (term, leading, raft_nodes, raft_voters) = {
            let metrics = inner.raft.metrics();
            let metrics = metrics.borrow();
            let membership = metrics.membership_config.membership();
            (
                metrics.current_term,
                metrics.state == ServerState::Leader,
                membership
                    .nodes()
                    .map(|(id, _)| *id)
                    .collect::<BTreeSet<NodeId>>(),
                membership.voter_ids().collect::<BTreeSet<NodeId>>(),
            )
        };
        if !leading {
            *inner.detector.lock() = None;
            continue;
        }
        let now = inner.now_ms();
        let map = inner.map.borrow().clone();
        let silent = {
            let mut slot = inner.detector.lock();
            if slot.as_ref().is_none_or(|(since, _)| *since != term) {
                *slot = Some((term, Detector::new(now)));
            }
            if let Some((_, detector)) = slot.as_mut() {
                detector.watch(map.active_members().map(|member| member.id), now);
            }
            match slot.as_ref() {
                Some((_, detector)) => detector.silent(
                    map.active_members().map(|member| member.id),
                    now,
                    u64::from(map.auto_failover.timeout_ms),
                ),
                None => Vec::new(),
            }
        };
        let seen = Observation {
            map: &map,
            leader: inner.id,
            silent: &silent,
            raft_nodes: &raft_nodes,
            raft_voters: &raft_voters,
        };
        let Some(action) = orchestrator::decide(&seen) else {
            continue;
        };
        let outcome = execute(&inner, &map, action.clone()).await;
        tracing::debug!(node = inner.id, ?action, ?outcome, "orchestrator action");
    }
}

async fn execute(inner: &Inner, map: &ClusterMap, action: Action) -> Result<(), ClusterError> {
    match action {
        Action::FailOver(node) => {
            fail_over(inner, map, node).await?;
        }
        Action::AddLearner(node) => {
            let addr = map
                .members
                .get(&node)
                .map(|member| member.cluster_addr.clone())
                .unwrap_or_default();
            inner
                .raft
                .add_learner(node, BasicNode { addr }, false)
                .await
                .map_err(|error| ClusterError::Raft(error.to_string()))?;
        }
        Action::ChangeVoters(voters) => {
            inner
                .raft
                .change_membership(voters, true)
                .await
                .map_err(|error| ClusterError::Raft(error.to_string()))?;
        }
        Action::RecordVoters(voters) => {
            propose(inner, Command::SetVoters { voters }).await?;
        }
    }
    Ok(())
}

async fn fail_over(inner: &Inner, map: &ClusterMap, node: NodeId) -> Result<Applied, ClusterError> {
    let reports = gather_seqnos(inner, map, node).await;
    let plan = failover::plan(map, node, &reports);
    for (vbucket, decision) in &plan.decisions {
        tracing::info!(failed = node, ?vbucket, ?decision, "failover decision");
    }
    propose(
        inner,
        Command::Failover {
            node,
            changes: plan.changes,
        },
    )
    .await
}

/// Asks every other chain member of the failed node's actives for its seqnos, one request per
/// node and bucket, fencing each as it answers.
async fn gather_seqnos(inner: &Inner, map: &ClusterMap, failed: NodeId) -> Reports {
    let mut asks: BTreeMap<(NodeId, String), Vec<(u16, u64)>> = BTreeMap::new();
    for (name, bucket) in &map.buckets {
        for (vb, entry) in bucket.vbuckets.iter().enumerate() {
            let Ok(vb) = u16::try_from(vb) else { continue };
            if entry.active != Some(failed) {
                continue;
            }
            for replica in entry
                .replicas
                .iter()
                .filter(|node| map.is_active_member(**node))
            {
                asks.entry((*replica, name.clone()))
                    .or_default()
                    .push((vb, entry.epoch));
            }
        }
    }
    let mut reports = Reports::new();
    let timeout = Duration::from_millis(inner.config.orchestrator_tick_ms * 4);
    for ((node, bucket), vbuckets) in asks {
        let asked = inner
            .seqnos
            .fence_and_report(node, &bucket, vbuckets.clone());
        let Ok(Some(answers)) = tokio::time::timeout(timeout, asked).await else {
            continue;
        };
        for ((vb, _), answer) in vbuckets.iter().zip(answers) {
            reports
                .entry((bucket.clone(), *vb))
                .or_default()
                .insert(node, answer);
        }
    }
    reports
}
