//! `settee serve --cluster-addr`: the node takes part in a cluster. Its id is kept in the data
//! directory; its Raft log, vote and map in the engine's store (`meta` under `cluster/`,
//! docs/format/cluster-map.md); peers are reached over settee-cluster-net. The first start
//! bootstraps a one-node cluster, or joins through `--join`; a later start carries on from the
//! stored log. Buckets live in the map (`cluster_buckets.rs`) and the KV door routes by it
//! (`cluster_topology.rs`); operators see the members in `/_membership` and
//! `/_node/_local/_cluster`. A single-document HTTP request reaching a node that is not the
//! document's active is forwarded to the active over the cluster port (`cluster_forward.rs`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{json, Value};
use settee_cluster::map::{ClusterMap, Member, MemberState, NodeId, Role};
use settee_cluster::network::{Request, Response, Transport, TransportError};
use settee_cluster::node::{ClusterNode, NodeConfig};
use settee_cluster::storage::{stored_map, StoreBackend};
use settee_cluster_net::{Secret, TcpTransport};
use settee_engine::Engine;

use crate::config::ClusterSettings;
use crate::secrets;

/// Generated ids stay below 2^53 so JSON readers that hold numbers as doubles see them whole.
/// How long an HTTP request for an active vbucket waits for a serving lease the node does
/// not hold (just started, or just followed a new map) before it is answered 503.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const GENERATED_ID_MAX: u64 = (1 << 53) - 1;

/// This node's id: DATA_DIR/node_id if it exists, else `--node-id` or a random one, written
/// there before anything else happens so a restart is the same node.
pub fn node_id(data_dir: &Path, settings: &ClusterSettings) -> anyhow::Result<NodeId> {
    let path = data_dir.join("node_id");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let stored: NodeId = text
                .trim()
                .parse()
                .with_context(|| format!("{} does not hold a node id", path.display()))?;
            if let Some(asked) = settings.node_id.filter(|asked| *asked != stored) {
                anyhow::bail!(
                    "--node-id {asked}: this data directory belongs to node {stored} ({})",
                    path.display()
                );
            }
            Ok(stored)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = settings
                .node_id
                .unwrap_or_else(|| rand::random_range(1..=GENERATED_ID_MAX));
            secrets::write_whole(
                &path,
                format!("{id}\n").as_bytes(),
                secrets::PUBLIC_FILE_MODE,
            )?;
            Ok(id)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// A member's name in `/_membership`, in CouchDB's `name@host` shape.
pub fn member_name(id: NodeId, cluster_addr: &str) -> String {
    let host = cluster_addr
        .parse::<SocketAddr>()
        .map(|addr| addr.ip().to_string())
        .unwrap_or_else(|_| cluster_addr.to_owned());
    format!("settee-{id}@{host}")
}

pub struct Cluster {
    pub node: Arc<ClusterNode>,
    /// The pooled connections to peers, shared by Raft and forwarded HTTP requests.
    pub transport: TcpTransport,
    /// This start joined a cluster through `--join` (it takes the cluster's accounts).
    pub joined: bool,
    server: tokio::task::JoinHandle<()>,
}

/// Starts the node's Raft instance and its cluster port, then bootstraps, joins or carries on
/// from the stored log. A refused join is an error naming the reason. Documents forwarded by
/// other nodes are answered through `http` (cluster_forward.rs), moves by `moves`.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    settings: &ClusterSettings,
    id: NodeId,
    engine: &Arc<Engine>,
    http: &Arc<settee_http::HttpState>,
    http_addr: SocketAddr,
    kv_addr: SocketAddr,
    mgmt_addr: SocketAddr,
    tls: settee_cluster::map::TlsPorts,
    moves: Arc<crate::cluster_move_target::MoveTarget>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Cluster> {
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .with_context(|| format!("binding the cluster port {}", settings.addr))?;
    let cluster_addr = listener.local_addr()?.to_string();
    let member = Member::joining(
        id,
        &cluster_addr,
        http_addr.to_string(),
        kv_addr.to_string(),
    )
    .with_mgmt_addr(mgmt_addr.to_string())
    .with_tls(tls);
    let backend = Arc::new(StoreBackend::new(engine.store().clone()));
    // Checked before Raft starts, so a node at the wrong address never disturbs its peers.
    let stored = stored_map(backend.as_ref())
        .map_err(|error| anyhow::anyhow!("reading the stored cluster map: {error}"))?;
    same_addresses(&stored, &member)?;
    let secret = Secret::new(settings.secret.as_bytes());
    let transport = TcpTransport::new(id, secret.clone());
    // Failover asks replicas for their seqnos through the map's addresses (cluster_replicas.rs).
    let seqnos = Arc::new(crate::cluster_replicas::MapSeqnos::new(
        engine.clone(),
        id,
        settings.secret.clone(),
    ));
    let node = ClusterNode::start(
        NodeConfig::new(member.clone()),
        backend,
        Arc::new(transport.clone()),
        seqnos.clone(),
    )
    .await
    .context("starting the cluster node")?;
    seqnos.set_map(node.subscribe());
    let node = Arc::new(node);
    let forward = Arc::new(crate::cluster_forward::ForwardServer {
        node: node.clone(),
        state: http.clone(),
    });
    // A rebalance's moves to this node (cluster_move_target.rs).
    moves.set_node(node.clone());
    let handlers = settee_cluster_net::Handlers {
        forward: Some(forward),
        moves: Some(moves),
    };
    let server = tokio::spawn(settee_cluster_net::serve_with_handlers(
        listener,
        node.clone(),
        handlers,
        secret,
        shutdown,
    ));
    let mut cluster = Cluster {
        node,
        transport: transport.clone(),
        joined: false,
        server,
    };
    let begun = match (cluster.node.is_initialized().await?, &settings.join) {
        (true, join) => {
            if join.is_some() {
                tracing::info!("the node has a stored Raft log: --join ignored");
            }
            println!("settee cluster node {id} on {cluster_addr}: carrying on from its stored log");
            Ok(())
        }
        (false, None) => cluster
            .node
            .bootstrap()
            .await
            .map(|()| println!("settee cluster node {id} on {cluster_addr}: a new cluster"))
            .context("bootstrapping a one-node cluster"),
        (false, Some(via)) => join(&transport, member, via).await.map(|revision| {
            cluster.joined = true;
            println!(
                "settee cluster node {id} on {cluster_addr}: joined through {via} (map revision {revision})"
            )
        }),
    };
    if let Err(error) = begun {
        cluster.stop().await;
        return Err(error);
    }
    Ok(cluster)
}

/// A restarted node must be where its peers look for it: the Raft group reaches it at the
/// cluster address the map recorded, so another one is refused with the address to use.
/// Other doors' addresses are only reported: updating a member's addresses is a later issue.
fn same_addresses(map: &ClusterMap, now: &Member) -> anyhow::Result<()> {
    let Some(recorded) = map.members.get(&now.id) else {
        return Ok(());
    };
    if recorded.cluster_addr != now.cluster_addr {
        anyhow::bail!(
            "node {} is at {} in its cluster: start it with --cluster-addr {} (it listens on {})",
            now.id,
            recorded.cluster_addr,
            recorded.cluster_addr,
            now.cluster_addr
        );
    }
    let addrs = |member: &Member| {
        (
            member.http_addr.clone(),
            member.kv_addr.clone(),
            member.mgmt_addr.clone(),
        )
    };
    if addrs(recorded) != addrs(now) {
        tracing::warn!(
            recorded_http = %recorded.http_addr,
            recorded_kv = %recorded.kv_addr,
            recorded_mgmt = %recorded.mgmt_addr,
            http = %now.http_addr,
            kv = %now.kv_addr,
            mgmt = %now.mgmt_addr,
            "the cluster map still records this node's former HTTP, KV or management \
             addresses: clients are sent to those"
        );
    }
    Ok(())
}

async fn join(transport: &TcpTransport, member: Member, via: &str) -> anyhow::Result<u64> {
    let id = member.id;
    let request = Request::Join {
        member,
        forwarded: false,
    };
    match transport.send(id, 0, via, request).await {
        Ok(Response::Joined { revision }) => Ok(revision),
        Ok(Response::Refused(reason)) => {
            anyhow::bail!("joining the cluster through {via} was refused: {reason}")
        }
        Ok(other) => anyhow::bail!("joining through {via}: unexpected answer {other:?}"),
        Err(TransportError::Refused { reason, .. }) => {
            anyhow::bail!("joining the cluster through {via} was refused: {reason}")
        }
        Err(error) => anyhow::bail!("joining the cluster through {via} failed: {error}"),
    }
}

impl Cluster {
    /// Stops serving peers and stops the Raft instance (the shutdown future given to `start`
    /// must have resolved, or be about to, for the server to end).
    pub async fn stop(self) {
        self.server.abort();
        let _ = self.server.await;
        self.node.shutdown().await;
    }
}

/// The HTTP door's window on the cluster.
pub struct View {
    pub node: Arc<ClusterNode>,
    pub buckets: crate::cluster_buckets::HttpBuckets,
    pub forwarder: crate::cluster_forward::Forwarder,
    /// The engine's serving lease (cluster_lease.rs).
    pub lease: Arc<settee_engine::lease::Lease>,
    pub engine: Arc<settee_engine::Engine>,
}

fn state_name(state: MemberState) -> &'static str {
    match state {
        MemberState::Active => "active",
        MemberState::Failed => "failed",
        MemberState::Ejected => "ejected",
    }
}

fn members_json(map: &ClusterMap) -> Vec<Value> {
    map.members
        .values()
        .map(|member| {
            json!({
                "id": member.id,
                "name": member_name(member.id, &member.cluster_addr),
                "cluster_addr": member.cluster_addr,
                "http_addr": member.http_addr,
                "kv_addr": member.kv_addr,
                "mgmt_addr": member.mgmt_addr,
                "state": state_name(member.state),
                "role": match member.role { Role::Voter => "voter", Role::Learner => "learner" },
            })
        })
        .collect()
}

/// Each bucket of the map: its settings and how many actives each node holds.
fn buckets_json(map: &ClusterMap) -> Value {
    map.buckets
        .values()
        .map(|bucket| {
            let mut actives = std::collections::BTreeMap::<String, usize>::new();
            for entry in &bucket.vbuckets {
                if let Some(node) = entry.active {
                    *actives.entry(node.to_string()).or_default() += 1;
                }
            }
            json!({
                "name": bucket.name,
                "vbuckets": bucket.vbucket_count,
                "replicas": bucket.replicas,
                "actives": actives,
            })
        })
        .collect()
}

impl settee_http::ClusterView for View {
    fn membership(&self) -> (Vec<String>, Vec<String>) {
        let map = self.node.map();
        let names = |keep: fn(MemberState) -> bool| {
            map.members
                .values()
                .filter(|member| keep(member.state))
                .map(|member| member_name(member.id, &member.cluster_addr))
                .collect()
        };
        (
            names(|state| state == MemberState::Active),
            names(|state| state != MemberState::Ejected),
        )
    }

    fn create_db(
        &self,
        db: &str,
        vbuckets: u16,
        replicas: Option<u8>,
    ) -> settee_http::ClusterChange<'_> {
        self.buckets.create_db(db, vbuckets, replicas)
    }

    fn delete_db(&self, db: &str) -> settee_http::ClusterDelete<'_> {
        self.buckets.delete_db(db)
    }

    fn serves_here(&self, db: &str, doc_id: &str) -> bool {
        self.forwarder.serves_here(db, doc_id)
    }

    fn collections_followed<'a>(&'a self, db: &'a str) -> settee_http::ClusterWait<'a> {
        let bucket = db.split('$').next().unwrap_or(db);
        Box::pin(crate::cluster_forward::collections_followed(
            &self.node,
            &self.engine,
            bucket,
            0,
        ))
    }

    fn unleased<'a>(&'a self, db: &'a str) -> settee_http::ClusterUnleased<'a> {
        Box::pin(async move {
            !self.lease.holds()
                && self.forwarder.in_map(db)
                && !self.lease.wait_held(LEASE_WAIT).await
        })
    }

    fn forward(
        &self,
        db: &str,
        doc_id: &str,
        request: settee_http::forward::ForwardHttp,
    ) -> settee_http::ClusterForward<'_> {
        let (db, doc_id) = (db.to_owned(), doc_id.to_owned());
        Box::pin(async move { self.forwarder.forward(&db, &doc_id, request).await })
    }

    fn scatters(&self, db: &str) -> bool {
        self.forwarder.scatters(db)
    }

    fn to_node(
        &self,
        name: &str,
        request: settee_http::forward::ForwardHttp,
    ) -> Option<settee_http::ClusterForward<'_>> {
        let member = self.forwarder.member(name)?;
        Some(Box::pin(self.forwarder.to_node(member, request)))
    }

    fn scatter<'a>(
        &'a self,
        db: &'a str,
        design: Option<&'a [u8]>,
        parts: &'a settee_http::ScatterParts<'a>,
    ) -> settee_http::ClusterScatter<'a> {
        Box::pin(self.forwarder.scatter(db, design, parts))
    }

    fn status(&self) -> Value {
        let status = self.node.status();
        json!({
            "node": status.id,
            "state": status.state,
            "leader": status.leader,
            "term": status.term,
            "applied_index": status.last_applied_index,
            "revision": status.map.revision,
            "voters": status.voters,
            "learners": status.learners,
            "members": members_json(&status.map),
            "buckets": buckets_json(&status.map),
        })
    }
}
