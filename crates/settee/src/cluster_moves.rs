//! A rebalance's moves as this node executes them (docs/format/rebalance.md, section 4).
//!
//! The moves live in the cluster map (`settee_cluster::moves`); every node follows them:
//! - each move whose **source** is this node is driven here, one task per move: the move is
//!   reported copying (a new attempt); the vbucket's files go to each copy
//!   (`cluster_move_source.rs`; the target's end is `cluster_move_target.rs`), or, on the
//!   rebuild path (section 5), nothing does; the move is reported ready and the copies stream
//!   the vbucket as pending replicas from the files' seqno, or from 0 (`cluster_replicas.rs`).
//!   Once the copies and the new active have caught up, the takeover: the vbucket's
//!   front-door writes pause (ETMPFAIL, HTTP 503: clients retry), the new active reaches the
//!   source's high seqno with no sync write left waiting, and the new chain is committed with
//!   a new epoch (`TakeOver`). The pause ends with the role change the new map brings, or,
//!   when the takeover cannot happen, only once a new attempt is committed (so a late
//!   TakeOver of the paused attempt can never apply after writes resumed);
//! - the **leader** ends the rebalance once every move is done or aborted, or doomed (a node
//!   it needs was failed over: `doomed`), or at once for the moves left when it is stopping
//!   (`EndRebalance`, which ejects the ejected nodes only after a rebalance that completed).
//!
//! A source that dies leaves its moves to the failover, which aborts them; a restarted source
//! drives its unfinished moves again. How far a copy got is what it acknowledged on its
//! stream (`settee_durability::Tracker::latest_ack`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_cluster::command::{Applied, Command};
use settee_cluster::map::{ClusterMap, NodeId};
use settee_cluster::moves::{MoveEntry, MoveState};
use settee_cluster::node::ClusterNode;
use settee_engine::{Bucket, Engine};

use crate::cluster_move_source::MoveSource;
use tokio::task::JoinHandle;

/// How far below the source's high seqno a copy may be when the takeover starts (the pause
/// then waits for the rest).
pub const CATCH_UP_LAG: u64 = 64;

/// The longest a takeover keeps a vbucket's writes paused waiting for its new active; past
/// it the pause ends and the move is tried again.
pub const TAKEOVER_PAUSE_MAX: Duration = Duration::from_secs(5);

/// How often a waiting driver looks at the acknowledgements and the map.
const POLL: Duration = Duration::from_millis(20);

/// The pause before a move whose attempt failed is tried again.
const RETRY: Duration = Duration::from_millis(500);

/// How often the leader looks whether the rebalance is over when no map arrives.
const TICK: Duration = Duration::from_secs(1);

/// Runs until `shutdown`: drives this node's moves and, on the leader, ends rebalances.
/// `files`: the copies get the vbucket as files (`cluster_move_source.rs`); `None`: they
/// stream it from seqno 0 (the rebuild path).
pub fn keep(
    node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    files: Option<Arc<MoveSource>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    let driver = Arc::new(Driver {
        node,
        engine,
        files,
    });
    tokio::spawn(async move {
        tokio::select! {
            () = run(driver) => {}
            () = shutdown => {}
        }
    })
}

/// What a move's driver works with.
struct Driver {
    node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    files: Option<Arc<MoveSource>>,
}

async fn run(driver: Arc<Driver>) {
    let node = driver.node.clone();
    let mut maps = node.subscribe();
    let mut driven: BTreeMap<u64, JoinHandle<()>> = BTreeMap::new();
    let this = node.id();
    loop {
        let map = maps.borrow_and_update().clone();
        driven.retain(|_, task| !task.is_finished());
        if let Some(rebalance) = &map.rebalance {
            for step in &rebalance.moves {
                let ours = step.source == Some(this) && !step.is_finished() && !doomed(&map, step);
                if ours && !rebalance.stopping && !driven.contains_key(&step.id) {
                    let task = tokio::spawn(drive(driver.clone(), step.id));
                    driven.insert(step.id, task);
                }
            }
            if node.status().leader == Some(this) {
                end_if_over(&node, &map).await;
            }
        }
        tokio::select! {
            changed = maps.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            () = tokio::time::sleep(TICK) => {}
        }
    }
    for task in driven.into_values() {
        task.abort();
    }
}

/// The leader's EndRebalance once nothing is left to do: every move finished, or the
/// rebalance stopping (its unfinished moves aborted).
async fn end_if_over(node: &ClusterNode, map: &ClusterMap) {
    let Some(rebalance) = &map.rebalance else {
        return;
    };
    let open: Vec<&MoveEntry> = rebalance
        .moves
        .iter()
        .filter(|step| !step.is_finished())
        .collect();
    // Moves that can no longer finish (a node they need failed over) do not hold it up once
    // every other move is over.
    if !rebalance.stopping && !open.iter().all(|step| doomed(map, step)) {
        return;
    }
    let open: Vec<u64> = open.iter().map(|step| step.id).collect();
    match node.propose(Command::EndRebalance { aborted: open }).await {
        Ok(Applied::Revision(revision)) => {
            tracing::info!(rebalance = rebalance.id, revision, "rebalance ended")
        }
        // A takeover landed meanwhile: the next map is looked at again.
        Ok(Applied::Rejected(reason)) => tracing::info!(%reason, "ending the rebalance waits"),
        Err(error) => tracing::warn!(%error, "ending the rebalance failed"),
    }
}

/// Whether a move can no longer finish: its source, a copy or a node of its new chain is not
/// a serving member (failed over or ejected). The leader aborts it when the rest is over.
fn doomed(map: &ClusterMap, step: &MoveEntry) -> bool {
    let mut nodes = step
        .source
        .into_iter()
        .chain(step.copies.iter().copied())
        .chain(step.after.chain());
    nodes.any(|node| !map.is_active_member(node))
}

/// The move `move_id` as the map has it while this node still drives it: listed, unfinished,
/// its source this node, not doomed, the rebalance not stopping.
fn driven_move(map: &ClusterMap, move_id: u64, this: NodeId) -> Option<MoveEntry> {
    let rebalance = map
        .rebalance
        .as_ref()
        .filter(|rebalance| !rebalance.stopping)?;
    rebalance
        .moves
        .iter()
        .find(|step| step.id == move_id)
        .filter(|step| !step.is_finished() && step.source == Some(this))
        .filter(|step| !doomed(map, step))
        .cloned()
}

/// Drives one move until it is done or no longer this node's to drive.
async fn drive(driver: Arc<Driver>, move_id: u64) {
    loop {
        match attempt(&driver, move_id).await {
            Ok(()) => return,
            Err(reason) => {
                tracing::warn!(move_id, %reason, "a move's attempt failed; it is tried again");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Why an attempt ended early.
type Failed = String;

/// One attempt of a move: copying reported (a new attempt), the files shipped, ready (the
/// copies stream from the files' seqno, or from 0 on the rebuild path), the copies caught up,
/// the takeover. `Ok` once the move is done or no longer driven here.
async fn attempt(driver: &Driver, move_id: u64) -> Result<(), Failed> {
    let node = driver.node.as_ref();
    let this = node.id();
    let Some(mut step) = driven_move(&node.map(), move_id, this) else {
        return Ok(());
    };
    let bucket = driver
        .engine
        .bucket(&step.bucket)
        .ok_or_else(|| format!("bucket {} is not open here", step.bucket))?;
    let vb = step.vbucket;
    // Files come from one snapshot per attempt: a copying move driven again starts anew.
    let fresh = step.state == MoveState::Planned
        || (step.state == MoveState::Copying && driver.files.is_some());
    if fresh {
        let attempt = step.attempt + 1;
        submitted(node, copying(move_id, attempt)).await?;
        tracing::info!(move_id, bucket = %step.bucket, vb, attempt, copies = ?step.copies,
            after = ?step.after, "a move is copying");
        step = driven_move(&node.map(), move_id, this).ok_or("the move is no longer driven")?;
    }
    if step.state == MoveState::Copying {
        if let Some(files) = &driver.files {
            for target in &step.copies {
                let high = files.send(node, &step, step.attempt, *target).await?;
                tracing::info!(
                    move_id,
                    vb,
                    target,
                    seqno = high,
                    "a move's files were ingested"
                );
            }
        }
        submitted(node, ready(move_id, step.attempt)).await?;
        step = driven_move(&node.map(), move_id, this).ok_or("the move is no longer driven")?;
    }
    // The nodes that must hold the vbucket's writes before the takeover.
    let mut watched: BTreeSet<NodeId> = step.copies.iter().copied().collect();
    watched.extend(step.after.active.filter(|node| *node != this));
    let watched: Vec<NodeId> = watched.into_iter().collect();
    loop {
        if driven_move(&node.map(), move_id, this).is_none() {
            return Ok(());
        }
        let high = bucket.high_seqnos().get(vb);
        if lagging(&bucket, vb, &watched, high.saturating_sub(CATCH_UP_LAG)).is_none() {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let moves_active = step.after.active != Some(this);
    if moves_active {
        if !bucket.pause_writes(vb) {
            return Err(format!("vbucket {vb} is not active here"));
        }
        if let Err(reason) = drain(&bucket, vb, &watched).await {
            bucket.resume_writes(vb);
            return Err(reason);
        }
    }
    let taken = take_over(node, move_id, this).await;
    match taken {
        Ok(()) => {
            tracing::info!(move_id, bucket = %step.bucket, vb, "a move took over");
            Ok(())
        }
        Err(reason) if moves_active => {
            unpause(node, &bucket, vb, move_id).await;
            Err(reason)
        }
        Err(reason) => Err(reason),
    }
}

/// Waits, writes paused, until every `watched` node holds the source's high seqno and no sync
/// write of `vb` still waits for its majority; at most [`TAKEOVER_PAUSE_MAX`].
async fn drain(bucket: &Bucket, vb: u16, watched: &[NodeId]) -> Result<(), Failed> {
    let deadline = Instant::now() + TAKEOVER_PAUSE_MAX;
    loop {
        let high = bucket.high_seqnos().get(vb);
        let lagging = lagging(bucket, vb, watched, high);
        let waiting = bucket.durability().waiting_in(vb);
        if lagging.is_none() && !waiting {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "vbucket {vb} did not drain in {TAKEOVER_PAUSE_MAX:?} (high seqno {high}, \
                 lagging {lagging:?}, sync writes waiting: {waiting})"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The first `watched` node that has not acknowledged `seqno` of `vb` on a stream open now.
fn lagging(bucket: &Bucket, vb: u16, watched: &[NodeId], seqno: u64) -> Option<NodeId> {
    let tracker = bucket.durability();
    watched.iter().copied().find(|node| {
        tracker
            .latest_ack(vb, *node)
            .is_none_or(|held| held < seqno)
    })
}

/// TakeOver of a ready move: the new chain committed.
async fn take_over(node: &ClusterNode, move_id: u64, this: NodeId) -> Result<(), Failed> {
    let step = driven_move(&node.map(), move_id, this).ok_or("the move is no longer driven")?;
    if step.state != MoveState::Ready {
        return Err(format!("move {move_id} is {:?}, not ready", step.state));
    }
    submitted(
        node,
        Command::TakeOver {
            move_id,
            expected_epoch: step.expected_epoch,
        },
    )
    .await
}

/// Ends a takeover's pause that did not lead to the new chain, once that is safe: a new
/// attempt committed (a TakeOver of the old one, still in flight, is then refused: it needs
/// the move ready), or the move gone from the map. A move found done keeps the pause until
/// the role change of the new map ends it.
async fn unpause(node: &ClusterNode, bucket: &Bucket, vb: u16, move_id: u64) {
    let this = node.id();
    loop {
        let map = node.map();
        let listed = map
            .rebalance
            .as_ref()
            .and_then(|rebalance| rebalance.moves.iter().find(|step| step.id == move_id));
        let attempt = match listed {
            None => break,
            Some(step) if step.state == MoveState::Done => return,
            Some(step) if step.is_finished() || step.source != Some(this) => break,
            Some(step) => step.attempt + 1,
        };
        match node.submit(copying(move_id, attempt)).await {
            Ok(Applied::Revision(_)) => break,
            // The map moved on (done, aborted, ended): looked at again.
            Ok(Applied::Rejected(_)) => {}
            Err(error) => {
                tracing::warn!(move_id, %error, "a paused move waits for the cluster");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    bucket.resume_writes(vb);
}

fn ready(move_id: u64, attempt: u32) -> Command {
    Command::MoveState {
        move_id,
        attempt,
        state: MoveState::Ready,
    }
}

fn copying(move_id: u64, attempt: u32) -> Command {
    Command::MoveState {
        move_id,
        attempt,
        state: MoveState::Copying,
    }
}

/// Submits `command`; a rejection or an error is a failed attempt naming why.
async fn submitted(node: &ClusterNode, command: Command) -> Result<(), Failed> {
    match node.submit(command).await {
        Ok(Applied::Revision(_)) => Ok(()),
        Ok(Applied::Rejected(reason)) => Err(reason),
        Err(error) => Err(error.to_string()),
    }
}
