//! The target's end of a rebalance's file transfer (docs/format/rebalance.md, sections 2 and
//! 3): the node's [`MoveHandler`] on the cluster port. MoveOpen is checked against the moves
//! of the committed map (this node one of the move's copies, the sender its source, the
//! attempt the map's), empties the vbucket for a new attempt and finds or records the offered
//! index groups; MoveChunk appends to the attempt's staging (settee-move-files), throttled by
//! the node's token bucket; MoveCommit checks and ingests the files (`Bucket::ingest_export`)
//! and the groups adopt the vbucket; MoveAbort drops the staging. The vbucket then streams
//! from the snapshot's seqno once the map reports the move ready (`cluster_replicas.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use settee_cluster::map::NodeId;
use settee_cluster::moves::{MoveEntry, MoveState};
use settee_cluster::node::ClusterNode;
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::Refusal;
use settee_cluster_net::moves::{MoveFrame, MoveFuture, MoveHandler, MoveId};
use settee_engine::export::MoveManifest;
use settee_engine::{Bucket, Engine, VbRole};
use settee_move_files::Throttle;
use settee_move_files::{StagedAttempt, Staging};
use settee_views::Views;
use tokio::sync::watch;

/// A node's incoming moves.
pub struct MoveTarget {
    engine: Arc<Engine>,
    views: Arc<Views>,
    staging: Staging,
    throttle: Arc<Throttle>,
    node: OnceLock<Arc<ClusterNode>>,
    /// The map revision this node has followed (roles and streams set).
    followed: OnceLock<watch::Receiver<u64>>,
    /// The attempts opened since start, by move.
    open: Mutex<BTreeMap<u64, (u32, StagedAttempt)>>,
    /// Attempts ingested, with the high seqno answered (a repeated MoveCommit's answer).
    ingested: Mutex<BTreeMap<(u64, u32), u64>>,
    /// One MoveOpen or MoveAbort at a time on this node (each empties or drops a vbucket).
    serial: tokio::sync::Mutex<()>,
}

fn refused(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::Refused, message)
}

impl MoveTarget {
    pub fn new(
        engine: Arc<Engine>,
        views: Arc<Views>,
        staging: Staging,
        throttle: Arc<Throttle>,
    ) -> MoveTarget {
        MoveTarget {
            engine,
            views,
            staging,
            throttle,
            node: OnceLock::new(),
            followed: OnceLock::new(),
            open: Mutex::new(BTreeMap::new()),
            ingested: Mutex::new(BTreeMap::new()),
            serial: tokio::sync::Mutex::new(()),
        }
    }

    pub fn set_node(&self, node: Arc<ClusterNode>) {
        let _ = self.node.set(node);
    }

    pub fn set_followed(&self, followed: watch::Receiver<u64>) {
        let _ = self.followed.set(followed);
    }

    /// Drops the staging of every move the map no longer lists (at start, rebalance.md).
    pub fn forget_unlisted(&self, listed: impl Fn(u64) -> bool) {
        if let Err(error) = self.staging.retain(listed) {
            tracing::warn!(%error, "clearing old move staging failed");
        }
    }

    fn node(&self) -> Result<&Arc<ClusterNode>, Refusal> {
        self.node
            .get()
            .ok_or_else(|| refused("the node is starting"))
    }

    /// The move `id` names as the committed map lists it for this node from `from`, copying at
    /// this attempt.
    fn listed(&self, from: NodeId, id: MoveId) -> Result<MoveEntry, Refusal> {
        let node = self.node()?;
        let map = node.map();
        let step = map
            .rebalance
            .as_ref()
            .and_then(|rebalance| rebalance.moves.iter().find(|step| step.id == id.id))
            .ok_or_else(|| refused(format!("the map lists no move {}", id.id)))?;
        if !step.copies.contains(&node.id()) || step.source != Some(from) {
            return Err(refused(format!(
                "move {} is not from node {from} to this node",
                id.id
            )));
        }
        if step.state != MoveState::Copying || step.attempt != id.attempt {
            return Err(refused(format!(
                "move {} is {:?} at attempt {}, not copying attempt {}",
                id.id, step.state, step.attempt, id.attempt
            )));
        }
        Ok(step.clone())
    }

    async fn open(
        &self,
        from: NodeId,
        id: MoveId,
        revision: u64,
        bucket: String,
        vbucket: u16,
        groups: Vec<settee_cluster_net::moves::GroupOffer>,
    ) -> Result<MoveFrame, Refusal> {
        let node = self.node()?;
        node.wait_for_revision(revision)
            .await
            .map_err(|error| refused(error.to_string()))?;
        let step = self.listed(from, id)?;
        if step.bucket != bucket || step.vbucket != vbucket {
            return Err(refused(format!("move {} is of another vbucket", id.id)));
        }
        // This node's roles and streams follow that map: the vbucket streams no more.
        let mut followed = self
            .followed
            .get()
            .cloned()
            .ok_or_else(|| refused("the node is starting"))?;
        let current = node.map().revision;
        let reached = followed.wait_for(|seen| *seen >= current);
        tokio::time::timeout(std::time::Duration::from_secs(10), reached)
            .await
            .map_err(|_| refused("this node has not followed the map yet"))?
            .map_err(|_| refused("the node is stopping"))?;
        let local = self
            .engine
            .bucket(&bucket)
            .ok_or_else(|| refused(format!("bucket {bucket} is not open here yet")))?;
        if matches!(
            local.vbucket_role(vbucket),
            VbRole::Active | VbRole::Replica
        ) {
            return Err(refused(format!("vbucket {vbucket} is served here")));
        }
        let staged = self
            .staging
            .attempt(id.id, id.attempt)
            .map_err(|error| refused(error.to_string()))?;
        let received = staged
            .received()
            .map_err(|error| refused(error.to_string()))?;
        let resumed =
            matches!(self.open.lock().get(&id.id), Some((attempt, _)) if *attempt == id.attempt);
        if !resumed && received.is_empty() {
            self.empty(&local, vbucket).await?;
        }
        let mut answered = Vec::with_capacity(groups.len());
        for offer in &groups {
            let group = self
                .views
                .group_for_move(&local, offer.collection, offer.signature, &offer.meta)
                .await
                .map_err(|error| refused(error.to_string()))?;
            answered.push((offer.signature, group));
        }
        self.open.lock().insert(id.id, (id.attempt, staged));
        Ok(MoveFrame::Opened {
            bucket_id: local.id(),
            groups: answered,
            received,
        })
    }

    /// Empties a vbucket that is not served here: its index rows, then its data.
    async fn empty(&self, bucket: &Arc<Bucket>, vbucket: u16) -> Result<(), Refusal> {
        if bucket.vbucket_role(vbucket) != VbRole::Pending {
            bucket
                .set_vbucket_role(vbucket, VbRole::Pending)
                .await
                .map_err(|error| refused(error.to_string()))?;
        }
        crate::cluster_replicas::empty_vbucket(Some(&self.views), bucket, vbucket)
            .await
            .map_err(refused)
    }

    async fn chunk(
        &self,
        from: NodeId,
        id: MoveId,
        file: String,
        offset: u64,
        crc32c: u32,
        bytes: Vec<u8>,
    ) -> Result<MoveFrame, Refusal> {
        self.listed(from, id)?;
        let staged = match self.open.lock().get(&id.id) {
            Some((attempt, staged)) if *attempt == id.attempt => staged.clone(),
            _ => return Err(refused("MoveOpen first")),
        };
        self.throttle.take(bytes.len() as u64).await;
        let name = file.clone();
        let received =
            tokio::task::spawn_blocking(move || staged.write_chunk(&name, offset, crc32c, &bytes))
                .await
                .map_err(|error| refused(error.to_string()))?
                .map_err(|error| refused(error.to_string()))?;
        Ok(MoveFrame::ChunkAck { id, file, received })
    }

    async fn commit(
        &self,
        from: NodeId,
        id: MoveId,
        manifest: Vec<u8>,
    ) -> Result<MoveFrame, Refusal> {
        if let Some(high_seqno) = self.ingested.lock().get(&(id.id, id.attempt)) {
            return Ok(MoveFrame::Ingested {
                id,
                high_seqno: *high_seqno,
            });
        }
        let step = self.listed(from, id)?;
        let manifest =
            MoveManifest::parse(&manifest).map_err(|error| refused(error.to_string()))?;
        if manifest.move_id != id.id
            || manifest.attempt != id.attempt
            || manifest.bucket != step.bucket
            || manifest.vbucket != step.vbucket
        {
            return Err(refused("the manifest is of another move"));
        }
        let staged = match self.open.lock().get(&id.id) {
            Some((attempt, staged)) if *attempt == id.attempt => staged.clone(),
            _ => return Err(refused("MoveOpen first")),
        };
        let bucket = self
            .engine
            .bucket(&step.bucket)
            .ok_or_else(|| refused(format!("bucket {} is not open here", step.bucket)))?;
        let views = self.views.clone();
        let dir = staged.dir().to_path_buf();
        let checked = manifest.clone();
        let missing = tokio::task::spawn_blocking(move || {
            bucket
                .ingest_export(&dir, &checked)
                .map_err(|error| error.to_string())?;
            views
                .adopt_moved_vbucket(&bucket, &checked)
                .map_err(|error| error.to_string())
        })
        .await
        .map_err(|error| refused(error.to_string()))?
        .map_err(refused)?;
        if !missing.is_empty() {
            tracing::warn!(
                move_id = id.id,
                ?missing,
                "groups of a moved vbucket are not here: they index it anew"
            );
        }
        self.open.lock().remove(&id.id);
        if let Err(error) = self.staging.remove(id.id, id.attempt) {
            tracing::warn!(move_id = id.id, %error, "removing a move's staging failed");
        }
        self.ingested
            .lock()
            .insert((id.id, id.attempt), manifest.snapshot_seqno);
        tracing::info!(move_id = id.id, attempt = id.attempt, bucket = %step.bucket,
            vb = step.vbucket, seqno = manifest.snapshot_seqno, "a moved vbucket was ingested");
        Ok(MoveFrame::Ingested {
            id,
            high_seqno: manifest.snapshot_seqno,
        })
    }

    fn abort(&self, id: MoveId) -> MoveFrame {
        let mut open = self.open.lock();
        if open
            .get(&id.id)
            .is_some_and(|(attempt, _)| id.attempt == 0 || *attempt == id.attempt)
        {
            open.remove(&id.id);
        }
        drop(open);
        let held = self.staging.held().unwrap_or_default();
        for (held_move, attempt) in held {
            if held_move == id.id && (id.attempt == 0 || attempt == id.attempt) {
                if let Err(error) = self.staging.remove(held_move, attempt) {
                    tracing::warn!(move_id = id.id, %error, "removing a move's staging failed");
                }
            }
        }
        MoveFrame::Aborted { id: id.id }
    }
}

impl MoveHandler for MoveTarget {
    fn handle(&self, from: NodeId, request: MoveFrame) -> MoveFuture<'_> {
        Box::pin(async move {
            match request {
                MoveFrame::Open {
                    id,
                    revision,
                    bucket,
                    vbucket,
                    groups,
                    ..
                } => {
                    let _serial = self.serial.lock().await;
                    self.open(from, id, revision, bucket, vbucket, groups).await
                }
                MoveFrame::Chunk {
                    id,
                    file,
                    offset,
                    crc32c,
                    bytes,
                } => self.chunk(from, id, file, offset, crc32c, bytes).await,
                // Commits of different moves ingest into different vbuckets: they overlap.
                MoveFrame::Commit { id, manifest } => self.commit(from, id, manifest).await,
                MoveFrame::Abort { id } => {
                    let _serial = self.serial.lock().await;
                    Ok(self.abort(id))
                }
                _ => Err(refused("not a move request")),
            }
        })
    }
}
