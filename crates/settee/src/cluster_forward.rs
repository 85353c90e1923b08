//! Single-document HTTP requests answered by the document's active node, over the cluster
//! transport (docs/format/cluster-transport.md, "Forwarded HTTP document requests").
//!
//! The HTTP door decides which requests name one document (settee-http `forward.rs`) and asks
//! through its `ClusterView` ([`Forwarder`]): where does this document live, and send it there.
//! [`ForwardServer`] is the other end, on the cluster port: it fences the request against its
//! own map (not the active: "not my vbucket"; an older entry than its own: "stale epoch"; a
//! newer one: it waits to catch up) and runs it through the HTTP door as the user it carries.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::map::{ClusterMap, NodeId};
use settee_cluster::node::ClusterNode;
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::{
    ForwardFuture, ForwardHandler, ForwardHttp, Refusal, ScatterHttp,
};
use settee_cluster_net::TcpTransport;
use settee_http::forward::ForwardHttpReply;
use settee_http::{ClusterRefusal, HttpState};

/// The front node, refused for a stale map, waits this long for its map to move before it
/// routes the request again (once).
const STALE_MAP_WAIT_MS: u64 = 1_000;
/// The active, sent a request made on a newer map than its own, waits this long to apply it.
const BEHIND_WAIT_MS: u64 = 2_000;
/// A reply's body at most: what leaves room in one frame for its status and headers.
const REPLY_BODY_BYTES_MAX: usize = settee_cluster_net::frame::FRAME_BYTES_MAX - (1 << 20);

/// Where a document of a bucket in the map lives, as one map says.
#[derive(Debug, PartialEq, Eq)]
struct Placement {
    /// The vbucket's active node.
    node: NodeId,
    /// Its cluster address.
    addr: String,
    revision: u64,
    /// The vbucket entry's epoch.
    epoch: u64,
    bucket: String,
    vbucket: u16,
}

/// The map's bucket behind a database name: the bucket's own name, or the bucket part of a
/// collection's `bucket$scope$collection`.
fn bucket_name<'a>(map: &ClusterMap, db: &'a str) -> Option<&'a str> {
    if map.buckets.contains_key(db) {
        return Some(db);
    }
    let door = settee_manifest::split_door_name(db)?;
    map.buckets.contains_key(door.bucket).then_some(door.bucket)
}

/// A vbucket entry's active node and its cluster address; `Err` without one.
fn active_of(
    map: &ClusterMap,
    bucket: &str,
    vbucket: u16,
    entry: &settee_cluster::map::Vbucket,
) -> Result<(NodeId, String), String> {
    let node = entry
        .active
        .ok_or_else(|| format!("vbucket {vbucket} of {bucket} has no active node"))?;
    let addr = map
        .members
        .get(&node)
        .map(|member| member.cluster_addr.clone())
        .ok_or_else(|| format!("node {node} is not a member"))?;
    Ok((node, addr))
}

/// Where `doc_id` of `db` lives at `map`: `Ok(None)` for a database the map does not hold
/// (served by whichever node has it), `Err` for a vbucket without an active node.
fn place(map: &ClusterMap, db: &str, doc_id: &str) -> Result<Option<Placement>, String> {
    let Some(name) = bucket_name(map, db) else {
        return Ok(None);
    };
    let Some(bucket) = map.buckets.get(name) else {
        return Ok(None);
    };
    let vbucket = settee_engine::vbucket::vbucket_of(doc_id.as_bytes(), bucket.vbucket_count);
    let entry = bucket
        .vbuckets
        .get(usize::from(vbucket))
        .ok_or_else(|| format!("vbucket {vbucket} of {name} is not in the map"))?;
    let (node, addr) = active_of(map, name, vbucket, entry)?;
    Ok(Some(Placement {
        node,
        addr,
        revision: map.revision,
        epoch: entry.epoch,
        bucket: name.to_owned(),
        vbucket,
    }))
}

/// Vbuckets with the epochs of their entries in a map.
type VbucketEpochs = Vec<(u16, u64)>;

/// Where a whole-bucket request on a bucket of the map goes: per node with active vbuckets,
/// its cluster address and those vbuckets with their entries' epochs.
#[derive(Debug, PartialEq, Eq)]
struct Spread {
    bucket: String,
    revision: u64,
    nodes: BTreeMap<NodeId, (String, VbucketEpochs)>,
}

/// How `db`'s bucket is spread at `map`: `Ok(None)` outside the map, `Err` when a vbucket has
/// no active node or its node is not a member.
fn spread(map: &ClusterMap, db: &str) -> Result<Option<Spread>, String> {
    let Some(name) = bucket_name(map, db) else {
        return Ok(None);
    };
    let Some(bucket) = map.buckets.get(name) else {
        return Ok(None);
    };
    let mut nodes: BTreeMap<NodeId, (String, VbucketEpochs)> = BTreeMap::new();
    for (vbucket, entry) in bucket.vbuckets.iter().enumerate() {
        let (node, addr) = active_of(map, name, vbucket as u16, entry)?;
        nodes
            .entry(node)
            .or_insert_with(|| (addr, Vec::new()))
            .1
            .push((vbucket as u16, entry.epoch));
    }
    Ok(Some(Spread {
        bucket: name.to_owned(),
        revision: map.revision,
        nodes,
    }))
}

/// The front node's side, behind the HTTP door's `ClusterView`.
pub struct Forwarder {
    pub node: Arc<ClusterNode>,
    pub transport: TcpTransport,
}

impl Forwarder {
    pub fn serves_here(&self, db: &str, doc_id: &str) -> bool {
        match place(&self.node.map(), db, doc_id) {
            Ok(Some(placement)) => placement.node == self.node.id(),
            // Outside the map: this node's own database. No active: the local engine answers
            // as it does for a vbucket it does not hold (503).
            Ok(None) | Err(_) => true,
        }
    }

    /// The member named `name` (its member name, as `/_membership` lists it, or its id), not
    /// ejected: its id, member name and cluster address.
    pub fn member(&self, name: &str) -> Option<(NodeId, String, String)> {
        let map = self.node.map();
        map.members
            .values()
            .filter(|member| member.state != settee_cluster::map::MemberState::Ejected)
            .map(|member| {
                let named = crate::cluster::member_name(member.id, &member.cluster_addr);
                (member.id, named, member.cluster_addr.clone())
            })
            .find(|(id, named, _)| named == name || id.to_string() == name)
    }

    /// Sends a `/_node/_local/...` request to member `target` (NodeHttp, docs/format/
    /// cluster-transport.md) and returns its reply.
    pub async fn to_node(
        &self,
        (target, name, addr): (NodeId, String, String),
        mut request: ForwardHttp,
    ) -> Result<ForwardHttpReply, ClusterRefusal> {
        if !settee_cluster_net::frame::fits(request.encoded_len() + name.len()) {
            return Err(ClusterRefusal::TooLarge);
        }
        request.revision = self.node.map().revision;
        request.epoch = 0;
        request.vbucket = 0;
        request.bucket = name;
        match self.transport.node_http(target, &addr, &request).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(refusal)) => Err(ClusterRefusal::Unavailable(format!(
                "node {target} refused the request: {}",
                refusal.message
            ))),
            Err(error) => Err(ClusterRefusal::Unavailable(format!(
                "node {target} could not be reached: {error}"
            ))),
        }
    }

    /// Whether `db` is a database of the cluster map (a bucket or one of its collections).
    pub fn in_map(&self, db: &str) -> bool {
        bucket_name(&self.node.map(), db).is_some()
    }

    /// Waits ([`STALE_MAP_WAIT_MS`] at most) for this node's map to move past `revision`, after
    /// a node refused a request made on it.
    async fn wait_for_newer_map(&self, revision: u64) {
        let mut maps = self.node.subscribe();
        let moved = maps.wait_for(|newer| newer.revision > revision);
        let _ = tokio::time::timeout(Duration::from_millis(STALE_MAP_WAIT_MS), moved).await;
    }

    /// Whether a whole-bucket request on `db` goes to other nodes too: in the map, and not
    /// every vbucket active here. A bucket with a vbucket without an active node is scattered
    /// (and answered 503 by [`Forwarder::scatter`]), never answered from this node's part.
    pub fn scatters(&self, db: &str) -> bool {
        let map = self.node.map();
        let Some(bucket) = bucket_name(&map, db).and_then(|name| map.buckets.get(name)) else {
            return false;
        };
        // No spread is built here: one pass over the entries, no address copied.
        let me = Some(self.node.id());
        bucket.vbuckets.iter().any(|entry| entry.active != me)
    }

    /// Sends every node with active vbuckets of `db`'s bucket the request `parts` makes for its
    /// vbuckets. When nodes refuse for a stale map, their vbuckets (only theirs: the others'
    /// parts have run) are sent once more after the map moved, `parts` asked again for them.
    pub async fn scatter(
        &self,
        db: &str,
        design: Option<&[u8]>,
        parts: &settee_http::ScatterParts<'_>,
    ) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ClusterRefusal> {
        let bucket_bytes_max = settee_cluster::map::BUCKET_NAME_BYTES_MAX;
        let list_bytes_max = 2 + 10 * settee_cluster_net::forward::SCATTER_VBUCKETS_MAX;
        let design_bytes = 1 + design.map_or(0, |design| 4 + design.len());
        let mut pending: Option<BTreeSet<u16>> = None;
        let mut answers = Vec::new();
        loop {
            let map = self.node.map();
            let spread = spread(&map, db)
                .map_err(ClusterRefusal::Unavailable)?
                .ok_or_else(|| ClusterRefusal::Unavailable(format!("{db} left the cluster map")))?;
            let nodes: Vec<(NodeId, String, VbucketEpochs)> = spread
                .nodes
                .into_iter()
                .map(|(node, (addr, vbuckets))| {
                    let wanted = vbuckets
                        .into_iter()
                        .filter(|(vbucket, _)| pending.as_ref().is_none_or(|p| p.contains(vbucket)))
                        .collect::<Vec<_>>();
                    (node, addr, wanted)
                })
                .filter(|(_, _, vbuckets)| !vbuckets.is_empty())
                .collect();
            let groups: Vec<Vec<u16>> = nodes
                .iter()
                .map(|(_, _, vbuckets)| vbuckets.iter().map(|(vbucket, _)| *vbucket).collect())
                .collect();
            let requests = parts(&groups);
            let mut sends = Vec::new();
            for ((node, addr, vbuckets), request) in nodes.into_iter().zip(requests) {
                let Some(mut request) = request else {
                    continue;
                };
                if !settee_cluster_net::frame::fits(
                    request.encoded_len() + bucket_bytes_max + list_bytes_max + design_bytes,
                ) {
                    return Err(ClusterRefusal::TooLarge);
                }
                request.revision = spread.revision;
                request.bucket.clone_from(&spread.bucket);
                let scatter = ScatterHttp {
                    vbuckets,
                    design: design.map(<[u8]>::to_vec),
                    request,
                };
                sends.push(async move {
                    let sent = self.transport.scatter(node, &addr, &scatter).await;
                    let listed: Vec<u16> = scatter
                        .vbuckets
                        .iter()
                        .map(|(vbucket, _)| *vbucket)
                        .collect();
                    (node, listed, sent)
                });
            }
            let mut refused = BTreeSet::new();
            for (node, listed, sent) in futures_util::future::join_all(sends).await {
                match sent {
                    Ok(Ok(reply)) => answers.push((listed, reply)),
                    Ok(Err(refusal))
                        if matches!(
                            refusal.code,
                            ErrorCode::StaleEpoch | ErrorCode::NotMyVbucket
                        ) && pending.is_none() =>
                    {
                        refused.extend(listed);
                    }
                    Ok(Err(refusal)) => {
                        return Err(ClusterRefusal::Unavailable(format!(
                            "node {node} refused its part of the request: {}",
                            refusal.message
                        )))
                    }
                    Err(error) => {
                        return Err(ClusterRefusal::Unavailable(format!(
                            "node {node}, which holds active vbuckets of {db}, could not be \
                             reached: {error}"
                        )))
                    }
                }
            }
            if refused.is_empty() {
                return Ok(answers);
            }
            pending = Some(refused);
            self.wait_for_newer_map(map.revision).await;
        }
    }

    /// Sends `request` to the active of `doc_id`'s vbucket; refused for a stale map, routes
    /// once more after its own map moved. The active may by then be this node: the request
    /// goes to its own cluster port, fenced there like any other.
    pub async fn forward(
        &self,
        db: &str,
        doc_id: &str,
        mut request: ForwardHttp,
    ) -> Result<ForwardHttpReply, ClusterRefusal> {
        // The bucket's name is filled in below; counted here at the map's longest.
        let bucket_bytes_max = settee_cluster::map::BUCKET_NAME_BYTES_MAX;
        if !settee_cluster_net::frame::fits(request.encoded_len() + bucket_bytes_max) {
            return Err(ClusterRefusal::TooLarge);
        }
        let mut retried = false;
        loop {
            let map = self.node.map();
            let placement = place(&map, db, doc_id)
                .map_err(ClusterRefusal::Unavailable)?
                .ok_or_else(|| ClusterRefusal::Unavailable(format!("{db} left the cluster map")))?;
            request.revision = placement.revision;
            request.epoch = placement.epoch;
            request.bucket.clone_from(&placement.bucket);
            request.vbucket = placement.vbucket;
            let node = placement.node;
            let refusal = match self
                .transport
                .forward(node, &placement.addr, &request)
                .await
            {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(refusal)) => refusal,
                Err(error) => {
                    return Err(ClusterRefusal::Unavailable(format!(
                        "the active node {node} of this document could not be reached: {error}"
                    )))
                }
            };
            let stale = matches!(
                refusal.code,
                ErrorCode::StaleEpoch | ErrorCode::NotMyVbucket
            );
            if !stale || retried {
                return Err(ClusterRefusal::Unavailable(format!(
                    "node {node} refused the forwarded request: {}",
                    refusal.message
                )));
            }
            retried = true;
            self.wait_for_newer_map(map.revision).await;
        }
    }
}

/// The active's side: answers ForwardHttp frames on the cluster port.
pub struct ForwardServer {
    pub node: Arc<ClusterNode>,
    pub state: Arc<HttpState>,
}

impl ForwardHandler for ForwardServer {
    fn node(&self, from: NodeId, request: ForwardHttp) -> ForwardFuture<'_> {
        Box::pin(async move {
            self.check_node_request(&request).inspect_err(|refusal| {
                tracing::debug!(from, message = %refusal.message, "node request refused");
            })?;
            self.run(request, None).await
        })
    }

    fn forward(&self, from: NodeId, request: ForwardHttp) -> ForwardFuture<'_> {
        Box::pin(async move {
            self.fence(&request).await.inspect_err(|refusal| {
                tracing::debug!(from, code = ?refusal.code, message = %refusal.message,
                    "forwarded request refused");
            })?;
            let (bucket, vbucket) = (request.bucket.clone(), request.vbucket);
            let reply = self.run(request, None).await?;
            // A write held by a rebalance's takeover (the engine waits the pause out) that
            // finds its vbucket moved: refused as not this node's, so the front node routes
            // it again by its newer map instead of answering 503.
            let moved = reply.status == 503
                && self.state.engine.bucket(&bucket).is_some_and(|local| {
                    local.vbucket_role(vbucket) != settee_engine::VbRole::Active
                });
            if moved {
                return Err(Refusal::new(
                    ErrorCode::NotMyVbucket,
                    format!("vbucket {vbucket} of {bucket} moved to another node"),
                ));
            }
            Ok(reply)
        })
    }

    fn scatter(&self, from: NodeId, request: ScatterHttp) -> ForwardFuture<'_> {
        Box::pin(async move {
            let only = self.fence_scatter(&request).await.inspect_err(|refusal| {
                tracing::debug!(from, code = ?refusal.code, message = %refusal.message,
                    "scattered request refused");
            })?;
            let scattered = settee_http::forward::Scattered {
                vbuckets: only,
                design: request.design.map(Arc::from),
            };
            self.run(request.request, Some(scattered)).await
        })
    }
}

impl ForwardServer {
    /// Runs a request another node sent here through the HTTP door (`scattered`: the vbuckets
    /// and design document of a scattered one).
    async fn run(
        &self,
        request: ForwardHttp,
        scattered: Option<settee_http::forward::Scattered>,
    ) -> Result<ForwardHttpReply, Refusal> {
        settee_http::forward::answer_forwarded(
            self.state.clone(),
            request,
            scattered,
            REPLY_BODY_BYTES_MAX,
        )
        .await
        .map_err(|reason| Refusal::new(ErrorCode::Refused, reason))
    }

    /// Whether a NodeHttp is for this node and its node API: its `bucket` is this node's
    /// member name and its target is under `/_node/_local`.
    fn check_node_request(&self, request: &ForwardHttp) -> Result<(), Refusal> {
        let map = self.node.map();
        let own = map
            .members
            .get(&self.node.id())
            .map(|member| crate::cluster::member_name(member.id, &member.cluster_addr));
        if own.as_deref() != Some(request.bucket.as_str()) {
            return Err(Refusal::new(
                ErrorCode::Refused,
                format!(
                    "a node request for {}, which is not this node",
                    request.bucket
                ),
            ));
        }
        let target = request.target.as_str();
        let rest = target.strip_prefix("/_node/_local").unwrap_or("x");
        if !(rest.is_empty() || rest.starts_with('/') || rest.starts_with('?')) {
            return Err(Refusal::new(
                ErrorCode::Refused,
                "a node request must be for /_node/_local",
            ));
        }
        Ok(())
    }

    /// Whether this node may answer a scattered request for the vbuckets it lists: a request
    /// that is scattered, on the bucket it names, every listed vbucket active here at the
    /// sender's epoch (after catching up once with a sender whose map is newer). Returns the
    /// vbuckets to answer for, one flag per vbucket of the bucket.
    async fn fence_scatter(&self, scatter: &ScatterHttp) -> Result<Arc<[bool]>, Refusal> {
        self.leased().await?;
        let plus_to_space = self.state.node_config.settings().decode_plus_to_space;
        let request = &scatter.request;
        let db = settee_http_scatter::scattered_db(request, plus_to_space).ok_or_else(|| {
            Refusal::new(
                ErrorCode::Refused,
                "a scattered request must be a whole-bucket read (_all_docs, a normal _changes)",
            )
        })?;
        let mut caught_up = false;
        loop {
            let map = self.node.map();
            let not_here = |reason: String| Refusal::new(ErrorCode::NotMyVbucket, reason);
            let name = bucket_name(&map, &db)
                .ok_or_else(|| not_here(format!("{db} is not a bucket of this node's map")))?;
            if name != request.bucket {
                return Err(Refusal::new(
                    ErrorCode::Refused,
                    format!("{db} is in bucket {name}, not in {}", request.bucket),
                ));
            }
            let bucket = &map.buckets[name];
            let mut only = vec![false; usize::from(bucket.vbucket_count)];
            let mut entries = Vec::with_capacity(scatter.vbuckets.len());
            for &(vbucket, epoch) in &scatter.vbuckets {
                let entry = bucket
                    .vbuckets
                    .get(usize::from(vbucket))
                    .ok_or_else(|| not_here(format!("{name} has no vbucket {vbucket}")))?;
                entries.push((vbucket, epoch, entry));
                only[usize::from(vbucket)] = true;
            }
            // Behind the sender for any of them: catch up first. Then every one must be active
            // here, and then none may be older than this node's entry.
            let behind = entries.iter().any(|(_, epoch, entry)| *epoch > entry.epoch);
            if !behind {
                if let Some((vbucket, _, _)) = entries
                    .iter()
                    .find(|(_, _, entry)| entry.active != Some(self.node.id()))
                {
                    return Err(not_here(format!(
                        "vbucket {vbucket} of {name} is not active here"
                    )));
                }
                if let Some((vbucket, epoch, entry)) = entries
                    .iter()
                    .find(|(_, epoch, entry)| *epoch < entry.epoch)
                {
                    return Err(Refusal::new(
                        ErrorCode::StaleEpoch,
                        format!(
                            "vbucket {vbucket} of {name} changed at epoch {}; the request was \
                             made at epoch {epoch}",
                            entry.epoch
                        ),
                    ));
                }
            }
            if !behind {
                collections_followed(&self.node, &self.state.engine, name, request.revision).await;
                return Ok(only.into());
            }
            self.catch_up(&mut caught_up, map.revision, request.revision)
                .await?;
        }
    }

    /// Refused while this node holds no serving lease, after waiting [`BEHIND_WAIT_MS`] at
    /// most for one: its map may miss a failover (docs/format/cluster-map.md, "The serving
    /// lease"); the sender retries on a newer map.
    async fn leased(&self) -> Result<(), Refusal> {
        let wait = Duration::from_millis(BEHIND_WAIT_MS);
        if self.state.engine.lease().wait_held(wait).await {
            return Ok(());
        }
        Err(Refusal::new(
            ErrorCode::NotMyVbucket,
            "this node cannot confirm its cluster map now (no serving lease)",
        ))
    }

    /// The sender's map is newer: waits (once, [`BEHIND_WAIT_MS`] at most) for this node's map
    /// to reach the sender's revision; refused when it already waited.
    async fn catch_up(
        &self,
        caught_up: &mut bool,
        revision: u64,
        sender_revision: u64,
    ) -> Result<(), Refusal> {
        if *caught_up {
            return Err(Refusal::new(
                ErrorCode::Refused,
                format!(
                    "this node's map (revision {revision}) is behind the sender's \
                     ({sender_revision})"
                ),
            ));
        }
        *caught_up = true;
        let mut maps = self.node.subscribe();
        let reached = maps.wait_for(|newer| newer.revision >= sender_revision);
        let _ = tokio::time::timeout(Duration::from_millis(BEHIND_WAIT_MS), reached).await;
        Ok(())
    }

    /// Whether this node may run `request`: its document is in the vbucket it names, this
    /// node is that vbucket's active (after catching up with a sender whose entry for the
    /// vbucket is newer), and the sender's entry is not older than this node's.
    async fn fence(&self, request: &ForwardHttp) -> Result<(), Refusal> {
        self.leased().await?;
        let plus_to_space = self.state.node_config.settings().decode_plus_to_space;
        let (db, id) = settee_http::forward::forwarded_document(request, plus_to_space)
            .ok_or_else(|| {
                Refusal::new(
                    ErrorCode::Refused,
                    "a forwarded request must name one document",
                )
            })?;
        let mut caught_up = false;
        loop {
            let map = self.node.map();
            let placement = place(&map, &db, &id)
                .map_err(|reason| Refusal::new(ErrorCode::NotMyVbucket, reason))?
                .ok_or_else(|| {
                    Refusal::new(
                        ErrorCode::NotMyVbucket,
                        format!("{db} is not a bucket of this node's cluster map"),
                    )
                })?;
            if placement.bucket != request.bucket || placement.vbucket != request.vbucket {
                return Err(Refusal::new(
                    ErrorCode::Refused,
                    format!(
                        "document {id:?} is in vbucket {} of {}, not in vbucket {} of {}",
                        placement.vbucket, placement.bucket, request.vbucket, request.bucket
                    ),
                ));
            }
            if request.epoch > placement.epoch {
                self.catch_up(&mut caught_up, map.revision, request.revision)
                    .await?;
                continue;
            }
            if placement.node != self.node.id() {
                return Err(Refusal::new(
                    ErrorCode::NotMyVbucket,
                    format!(
                        "vbucket {} of {} is active on node {}, not here",
                        placement.vbucket, placement.bucket, placement.node
                    ),
                ));
            }
            if request.epoch < placement.epoch {
                return Err(Refusal::new(
                    ErrorCode::StaleEpoch,
                    format!(
                        "vbucket {} of {} changed at map revision {}; the request was made at \
                         epoch {}",
                        placement.vbucket, placement.bucket, placement.epoch, request.epoch
                    ),
                ));
            }
            collections_followed(
                &self.node,
                &self.state.engine,
                &placement.bucket,
                request.revision,
            )
            .await;
            return Ok(());
        }
    }
}

/// Waits ([`BEHIND_WAIT_MS`] at most) until this node has the map revision `revision` (the
/// sender's, for a forwarded or scattered request; 0 on the front node) and its engine bucket
/// has the collections its map names: a scope or collection change is committed without moving
/// any vbucket's epoch, and the engine adopts the map's manifest after the map is applied
/// (cluster_manifests.rs), so a request about a collection made through another node a moment
/// ago would otherwise find no such database here, or a dropped one's documents. Past the wait
/// the request runs as the node stands. One map lookup when nothing lags.
pub async fn collections_followed(
    node: &ClusterNode,
    engine: &settee_engine::Engine,
    bucket: &str,
    revision: u64,
) {
    let wait = Duration::from_millis(BEHIND_WAIT_MS);
    let deadline = tokio::time::Instant::now() + wait;
    if node.map().revision < revision {
        let _ = tokio::time::timeout(wait, node.wait_for_revision(revision)).await;
    }
    loop {
        let Some(wanted) = node
            .map()
            .buckets
            .get(bucket)
            .map(|entry| entry.manifest.uid())
        else {
            return;
        };
        let behind = engine
            .bucket(bucket)
            .is_some_and(|local| local.manifest().uid() < wanted);
        if !behind || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_cluster::map::{Bucket, Durability, Member, Vbucket};

    fn map() -> ClusterMap {
        let mut map = ClusterMap {
            revision: 9,
            ..ClusterMap::default()
        };
        for id in [1, 2] {
            let member = Member::joining(id, format!("127.0.0.1:{id}"), "h", "k");
            map.members.insert(id, member);
        }
        let vbuckets = (0..4u64)
            .map(|vb| Vbucket {
                active: (vb != 3).then_some(1 + vb % 2),
                replicas: vec![],
                epoch: 5 + vb,
            })
            .collect();
        map.buckets.insert(
            "db".into(),
            Bucket {
                name: "db".into(),
                vbucket_count: 4,
                replicas: 0,
                durability_min: Durability::None,
                manifest: Default::default(),
                design_rev: 0,
                copies: Default::default(),
                vbuckets,
            },
        );
        map
    }

    #[test]
    fn a_document_is_placed_on_its_vbuckets_active_with_that_entrys_epoch() {
        let map = map();
        let id = (0..)
            .map(|n| format!("doc{n}"))
            .find(|id| settee_engine::vbucket::vbucket_of(id.as_bytes(), 4) == 1)
            .expect("some id lands in vbucket 1");
        let placed = place(&map, "db", &id).expect("placed").expect("in the map");
        assert_eq!(
            placed,
            Placement {
                node: 2,
                addr: "127.0.0.1:2".into(),
                revision: 9,
                epoch: 6,
                bucket: "db".into(),
                vbucket: 1
            }
        );
        let collection = place(&map, "db$s$c", &id)
            .expect("placed")
            .expect("in the map");
        assert_eq!(collection, placed, "a collection is routed by its bucket");
        assert_eq!(place(&map, "other", &id), Ok(None));
        let orphan = (0..)
            .map(|n| format!("doc{n}"))
            .find(|id| settee_engine::vbucket::vbucket_of(id.as_bytes(), 4) == 3)
            .expect("some id lands in vbucket 3");
        assert!(place(&map, "db", &orphan).is_err());
    }
}
