//! The Couchbase KV front door. A connection speaks the memcached binary protocol with
//! Couchbase's extensions (`settee-kv-codec`); requests become calls on the same document
//! engine the HTTP door uses, so every KV mutation is also a CouchDB revision.
//!
//! Request flow: `connection.rs` reads frames, `session.rs` answers the handshake
//! (HELLO, SASL, SELECT_BUCKET, config) and runs data operations (`ops.rs`); cheap reads are
//! answered inline into the connection's output buffer, writes become futures (run on the
//! runtime's worker threads when the client negotiated UnorderedExecution).
//! A connection that pipelines and stays busy moves to a runtime of its own (`lanes.rs`), so it
//! cannot hold the threads that answer other connections.
//! `dcp/` is the DCP producer a connection becomes after DCP_OPEN (docs/format/dcp.md).
//! `mgmt.rs` serves the `/pools` endpoints on the management port.
//! `routing.rs` holds the cluster as the door follows it: on a cluster node, a data request on
//! a vbucket whose active is another node is answered NOT_MY_VBUCKET with the cluster's config
//! (`cluster.rs`), and connections that asked in HELLO are pushed every new map.
//!
//! Must not know: HTTP API shapes of CouchDB, RocksDB, storage keys, the cluster map's types
//! or Raft (the binary hands it a `routing::Topology`).

mod access;
mod batch;
mod budget;
pub mod cluster;
mod connection;
mod dcp;
mod deadlines;
mod heavy;
mod lanes;
pub mod limits;
mod map_push;
pub mod mgmt;
mod ops;
mod queue;
pub mod routing;
mod session;
mod subdoc;
mod sync_write;
mod timings;

use std::net::SocketAddr;
use std::sync::Arc;

use settee_auth::Users;
use settee_engine::Engine;
use tokio::net::TcpListener;

pub use lanes::BulkLaneConfig;
pub use limits::KvLimits;
pub use mgmt::buckets::{BucketAdmin, BucketRefusal, NewBucket};

/// Couchbase's default item size limit.
pub const MAX_VALUE_BYTES_DEFAULT: usize = 20 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct KvConfig {
    /// The KV address clients reach (advertised in the cluster map).
    pub kv_addr: SocketAddr,
    /// The management address advertised in the cluster map.
    pub mgmt_addr: SocketAddr,
    /// Where view queries go (Couchbase's `capi` service): the node's CouchDB HTTP address,
    /// which serves `/{bucket}/_design/{ddoc}/_view/{view}` as the SDKs send it.
    pub capi_addr: Option<SocketAddr>,
    /// With TLS configured: the KV-over-TLS and HTTPS addresses, advertised as the cluster
    /// map's `kvSSL` and `capiSSL` services so `couchbases://` clients find them.
    pub kv_tls_addr: Option<SocketAddr>,
    pub capi_tls_addr: Option<SocketAddr>,
    /// The management port over TLS (`mgmtSSL`), with TLS configured.
    pub mgmt_tls_addr: Option<SocketAddr>,
    pub max_value_bytes: usize,
    /// Offer SASL PLAIN (password in clear) on plain TCP.
    pub allow_plain: bool,
    pub server_uuid: String,
    /// Requests slower than this are logged with their opcode and key.
    pub slow_op_after: std::time::Duration,
    /// When a busy connection moves to the bulk lane (`lanes.rs`); `None`: never.
    pub bulk_lane: Option<BulkLaneConfig>,
    /// Connection count, timeouts and output budgets (`limits.rs`).
    pub limits: KvLimits,
}

/// Couchbase logs operations slower than half a second.
pub const SLOW_OP_AFTER_DEFAULT: std::time::Duration = std::time::Duration::from_millis(500);

pub struct KvState {
    pub engine: Arc<Engine>,
    pub users: Arc<Users>,
    pub config: KvConfig,
    timings: timings::NodeTimings,
    heavy: heavy::HeavyPool,
    bulk: Option<lanes::BulkLane>,
    /// Unsent reply bytes of every connection (`budget.rs`).
    output: budget::NodeOutput,
    /// Open connections, against `limits.max_connections`.
    slots: settee_door::Slots,
    /// DCP producer connections by name (`dcp/names.rs`).
    dcp_names: dcp::ProducerNames,
    /// The process's and the storage engine's figures, shown by `GET /metrics` beside the
    /// door's own (`mgmt/metrics.rs`).
    metrics: Arc<settee_metrics::NodeMetrics>,
    /// The cluster as this node follows it (`routing.rs`); empty on a node without cluster
    /// flags, which then routes nothing and shows one node's configs.
    pub routing: routing::Routing,
    /// Creates buckets for `POST /pools/default/buckets`: set by a cluster node (through the
    /// cluster map); unset, the endpoint is not offered, as before.
    pub bucket_admin: std::sync::OnceLock<Arc<dyn BucketAdmin>>,
}

impl KvState {
    /// Latencies per opcode seen, by opcode name, for the node's other expositions
    /// (`settee-metrics` `NodeMetrics::set_kv_latency_reader`).
    pub fn opcode_latencies(&self) -> Vec<(&'static str, settee_metrics::Snapshot)> {
        self.timings
            .snapshots()
            .into_iter()
            .map(|(code, snapshot)| (settee_kv_codec::opcode::name(code), snapshot))
            .collect()
    }

    pub fn new(
        engine: Arc<Engine>,
        users: Arc<Users>,
        config: KvConfig,
        metrics: Arc<settee_metrics::NodeMetrics>,
    ) -> std::io::Result<KvState> {
        Ok(KvState {
            timings: timings::NodeTimings::new(config.slow_op_after),
            heavy: heavy::HeavyPool::for_this_machine()?,
            bulk: config.bulk_lane.map(lanes::BulkLane::new).transpose()?,
            output: budget::NodeOutput::new(config.limits.node_output_bytes_max),
            slots: settee_door::Slots::new("kv", config.limits.max_connections),
            dcp_names: dcp::ProducerNames::default(),
            metrics,
            routing: routing::Routing::default(),
            bucket_admin: std::sync::OnceLock::new(),
            engine,
            users,
            config,
        })
    }

    /// Latency percentiles by opcode since the node started (`GET /settee/timings`).
    /// Also how many connections moved to the bulk lane and how many each of its threads
    /// serves now (`"bulk_lane"`).
    pub fn timings_report(&self) -> serde_json::Value {
        let mut report = self.timings.report();
        if let (Some(bulk), Some(map)) = (&self.bulk, report.as_object_mut()) {
            map.insert(
                "bulk_lane".into(),
                serde_json::json!({
                    "connections_moved": bulk.moved(),
                    "connections": bulk.connections(),
                }),
            );
        }
        report
    }
}

/// Serves the KV protocol on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    state: Arc<KvState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_connections(listener, state, shutdown, false).await
}

/// How a connection reached the door.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Transport {
    Plain,
    /// Through the TLS relay, from `peer` to `local` (the relay's preface).
    TlsRelayed {
        peer: std::net::IpAddr,
        local: std::net::IpAddr,
    },
}

/// A relay that has not sent its preface this quickly is closed.
const RELAY_PREFACE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the connections the TLS relay (`settee-tls`) makes for `couchbases://` clients, on
/// a loopback listener of their own: as on the plain port, but SASL PLAIN is offered, as
/// Couchbase Server offers it over TLS, and each connection starts with the relay's preface
/// (`settee_door::relay_preface`: the client's address, counted for failed logins, and the
/// address it reached, named in cluster configs). The listener must be reachable from
/// loopback only.
pub async fn serve_tls_relayed(
    listener: TcpListener,
    state: Arc<KvState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_connections(listener, state, shutdown, true).await
}

/// Reads the relay's preface off `stream` (exactly its bytes, nothing of the KV frames).
async fn relay_preface(stream: &mut tokio::net::TcpStream) -> Option<Transport> {
    use tokio::io::AsyncReadExt;
    let read = async {
        let length = usize::from(stream.read_u8().await.ok()?);
        if length > settee_door::relay_preface::TEXT_BYTES_MAX {
            return None;
        }
        let mut text = vec![0u8; length];
        stream.read_exact(&mut text).await.ok()?;
        let (peer, local) = settee_door::relay_preface::decode(&text)?;
        Some(Transport::TlsRelayed { peer, local })
    };
    tokio::time::timeout(RELAY_PREFACE_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

async fn serve_connections(
    listener: TcpListener,
    state: Arc<KvState>,
    shutdown: impl std::future::Future<Output = ()>,
    relayed: bool,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Over the limit the connection is closed at once, as kv_engine does.
                    let Some(slot) = state.slots.take() else {
                        drop(stream);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    if relayed {
                        let state = state.clone();
                        let mut stream = stream;
                        tokio::spawn(async move {
                            if let Some(transport) = relay_preface(&mut stream).await {
                                connection::run(stream, state, slot, transport).await;
                            }
                        });
                    } else {
                        tokio::spawn(connection::run(stream, state.clone(), slot, Transport::Plain));
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "kv accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
}
