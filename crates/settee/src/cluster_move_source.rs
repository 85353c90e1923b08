//! The source's end of a rebalance's file transfer (docs/format/rebalance.md, sections 1 and
//! 2): for one attempt of a move and one target, MoveOpen offers the bucket's index groups
//! and learns the target's bucket and group ids; the vbucket is exported from one snapshot
//! under those ids (`Bucket::export_vbucket_files`, its index rows through settee-views'
//! `ViewRowsExporter`); each file goes in checksummed chunks of at most 1 MiB, each taken from
//! the node's throttle; MoveCommit sends the manifest and the target ingests. A dropped
//! connection opens the move again (same attempt) and resumes each file where the target's
//! MoveOpened says it stands.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use settee_cluster::map::NodeId;
use settee_cluster::moves::MoveEntry;
use settee_cluster::node::ClusterNode;
use settee_cluster_net::moves::{GroupOffer, MoveFrame, MoveId, Moved};
use settee_cluster_net::TcpTransport;
use settee_engine::export::VbucketExport;
use settee_engine::Engine;
use settee_move_files::Throttle;
use settee_move_files::CHUNK_BYTES_MAX;
use settee_views::{GroupTargets, ViewRowsExporter, Views};

/// Times a dropped transfer is opened again before the attempt fails.
const REOPENS_MAX: u32 = 3;

/// A node's outgoing transfers.
pub struct MoveSource {
    engine: Arc<Engine>,
    views: Arc<Views>,
    transport: TcpTransport,
    throttle: Arc<Throttle>,
    /// `DATA_DIR/exports`: one directory per attempt and target, removed after it.
    exports: PathBuf,
}

type Failed = String;

impl MoveSource {
    /// `exports` is emptied: a restarted source starts its moves with new attempts.
    pub fn new(
        engine: Arc<Engine>,
        views: Arc<Views>,
        transport: TcpTransport,
        throttle: Arc<Throttle>,
        exports: PathBuf,
    ) -> MoveSource {
        if let Err(error) = std::fs::remove_dir_all(&exports) {
            if error.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(%error, "clearing old exports failed");
            }
        }
        MoveSource {
            engine,
            views,
            transport,
            throttle,
            exports,
        }
    }

    /// Ships attempt `attempt` of `step` to `target`; the high seqno the target ingested.
    pub async fn send(
        &self,
        node: &ClusterNode,
        step: &MoveEntry,
        attempt: u32,
        target: NodeId,
    ) -> Result<u64, Failed> {
        let map = node.map();
        let addr = map
            .members
            .get(&target)
            .map(|member| member.cluster_addr.clone())
            .ok_or_else(|| format!("node {target} is not a member"))?;
        let bucket = self
            .engine
            .bucket(&step.bucket)
            .ok_or_else(|| format!("bucket {} is not open here", step.bucket))?;
        // One group per signature (the codec's bound): a design document in a second
        // collection is indexed anew on the target.
        let mut offers: Vec<GroupOffer> = Vec::new();
        for group in self
            .views
            .stored_groups(&bucket)
            .map_err(|error| error.to_string())?
        {
            if !offers
                .iter()
                .any(|offer| offer.signature == group.signature)
            {
                offers.push(GroupOffer {
                    signature: group.signature,
                    meta: group.meta,
                    collection: group.collection,
                });
            }
        }
        let id = MoveId {
            id: step.id,
            attempt,
        };
        let open = MoveFrame::Open {
            id,
            revision: map.revision,
            bucket: step.bucket.clone(),
            vbucket: step.vbucket,
            snapshot_seqno: bucket.high_seqnos().get(step.vbucket),
            groups: offers.clone(),
        };
        let (bucket_id, groups, _) = self.open(target, &addr, &open).await?;
        let targets: GroupTargets = offers
            .iter()
            .filter_map(|offer| {
                let (_, group) = groups.iter().find(|(held, _)| *held == offer.signature)?;
                Some(((offer.collection, offer.signature), *group))
            })
            .collect();
        let dir = self.exports.join(format!("{}-{attempt}-{target}", step.id));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|error| error.to_string())?;
        let vbucket = step.vbucket;
        let exporting = bucket.clone();
        let export_dir = dir.clone();
        let export = tokio::task::spawn_blocking(move || {
            exporting.export_vbucket_files(
                vbucket,
                &export_dir,
                bucket_id,
                Some(&ViewRowsExporter::new(targets)),
            )
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("exporting vbucket {vbucket}: {error}"))?;
        let shipped = self.ship(target, &addr, &open, id, &export).await;
        let _ = std::fs::remove_dir_all(&dir);
        shipped
    }

    /// The files, then the manifest; reopening after a dropped connection.
    async fn ship(
        &self,
        target: NodeId,
        addr: &str,
        open: &MoveFrame,
        id: MoveId,
        export: &VbucketExport,
    ) -> Result<u64, Failed> {
        let manifest = export
            .manifest(id.id, id.attempt)
            .map_err(|error| error.to_string())?;
        let manifest = serde_json::to_vec(&manifest).map_err(|error| error.to_string())?;
        let mut received: BTreeMap<String, u64> = BTreeMap::new();
        let mut reopens = 0;
        loop {
            match self
                .push(target, addr, id, export, &received, &manifest)
                .await
            {
                Ok(high) => return Ok(high),
                Err(Dropped::Refused(reason)) => return Err(reason),
                Err(Dropped::Connection(reason)) if reopens < REOPENS_MAX => {
                    reopens += 1;
                    tracing::info!(move_id = id.id, %reason, "a transfer's connection dropped: opened again");
                    let (_, _, held) = self.open(target, addr, open).await?;
                    received = held.into_iter().collect();
                }
                Err(Dropped::Connection(reason)) => return Err(reason),
            }
        }
    }

    async fn open(
        &self,
        target: NodeId,
        addr: &str,
        open: &MoveFrame,
    ) -> Result<(u32, Vec<([u8; 16], u32)>, Vec<(String, u64)>), Failed> {
        match self.exchange(target, addr, open).await {
            Ok(MoveFrame::Opened {
                bucket_id,
                groups,
                received,
            }) => Ok((bucket_id, groups, received)),
            Ok(other) => Err(format!("MoveOpen answered {other:?}")),
            Err(Dropped::Refused(reason) | Dropped::Connection(reason)) => Err(reason),
        }
    }

    /// Every file from where the target holds it, then MoveCommit.
    async fn push(
        &self,
        target: NodeId,
        addr: &str,
        id: MoveId,
        export: &VbucketExport,
        received: &BTreeMap<String, u64>,
        manifest: &[u8],
    ) -> Result<u64, Dropped> {
        for exported in &export.files {
            let name = settee_move_files::file_name(exported.cf)
                .ok_or_else(|| Dropped::Refused(format!("no file name for {:?}", exported.cf)))?;
            let path = exported.file.path.clone();
            let size = std::fs::metadata(&path)
                .map_err(|error| Dropped::Refused(error.to_string()))?
                .len();
            let mut offset = received.get(name).copied().unwrap_or(0);
            while offset < size {
                let bytes = read_at(&path, offset, CHUNK_BYTES_MAX)
                    .map_err(|error| Dropped::Refused(error.to_string()))?;
                self.throttle.take(bytes.len() as u64).await;
                let length = bytes.len() as u64;
                let chunk = MoveFrame::Chunk {
                    id,
                    file: name.to_owned(),
                    offset,
                    crc32c: crc32c::crc32c(&bytes),
                    bytes,
                };
                match self.exchange(target, addr, &chunk).await? {
                    MoveFrame::ChunkAck { received, .. } if received == offset + length => {
                        offset = received;
                    }
                    other => {
                        return Err(Dropped::Refused(format!(
                            "a chunk of {name} at {offset} answered {other:?}"
                        )))
                    }
                }
            }
        }
        let commit = MoveFrame::Commit {
            id,
            manifest: manifest.to_vec(),
        };
        match self.exchange(target, addr, &commit).await? {
            MoveFrame::Ingested { high_seqno, .. } => Ok(high_seqno),
            other => Err(Dropped::Refused(format!("MoveCommit answered {other:?}"))),
        }
    }

    async fn exchange(
        &self,
        target: NodeId,
        addr: &str,
        request: &MoveFrame,
    ) -> Result<MoveFrame, Dropped> {
        let moved: Moved = self
            .transport
            .move_frame(target, addr, request)
            .await
            .map_err(|error| Dropped::Connection(error.to_string()))?;
        moved.map_err(|refusal| Dropped::Refused(refusal.message))
    }
}

/// How an exchange failed: the target refused (the attempt fails), or the connection did
/// (opened again).
enum Dropped {
    Refused(String),
    Connection(String),
}

/// Up to `max` bytes of `path` from `offset`.
fn read_at(path: &std::path::Path, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::with_capacity(max);
    file.take(max as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}
