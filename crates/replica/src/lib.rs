//! Replica vbuckets that follow their active node over DCP (docs/format/replica.md).
//!
//! A [`Replicator`] makes some vbuckets of a local bucket replicas of the same vbuckets on
//! another node: it connects to that node's KV port, logs in as the node account with the
//! cluster secret (`settee_auth::node_password`), opens a DCP connection with
//! `settee_records`, requests one stream per replica vbucket from its persisted seqno, and
//! applies what arrives through `Bucket::apply_replica` (one fsynced batch per snapshot or
//! full batch), acknowledging the bytes once they are durable. Any failure ends the
//! connection; the replicator reconnects with a backoff and resumes from the persisted seqnos.
//!
//! Start reading at [`Replicator::start`]; `connection.rs` is the handshake, `session.rs` the
//! streaming loop, `stream.rs` one vbucket's stream and its batches. Frames come from
//! `settee-kv-codec` (`dcp`, `dcp_records`), whose parsers are fuzzed.
//!
//! Must not know: the cluster map (the caller says which vbuckets to follow), HTTP, RocksDB.
#![deny(clippy::unwrap_used)]

mod connection;
mod session;
mod stream;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use settee_engine::{Bucket, Engine, EngineError, VbRole};
use tokio::sync::watch;

use connection::Connection;
use session::{Ended, Session};

pub use connection::{BUFFER_BYTES, FRAME_BYTES_MAX, NOOP_INTERVAL_SECS};
pub use stream::{BATCH_BYTES_MAX, BATCH_ITEMS_MAX};

/// The first pause before reconnecting, doubled after each failure up to [`BACKOFF_MAX`].
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Why a connection to the active ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("the active closed the connection")]
    Closed,
    #[error("the active refused the node login (wrong cluster secret?)")]
    AuthFailed,
    #[error("{what} refused with status {status:#06x}")]
    Refused { what: &'static str, status: u16 },
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    #[error("the local bucket has {local} vbuckets, the active's {active}")]
    VbucketCount { local: u16, active: u16 },
}

/// What the replicator follows.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// The local bucket (created with the active's vbucket count if missing) and the active's.
    pub bucket: String,
    /// The active node's KV address, HOST:PORT.
    pub source_kv_addr: String,
    /// The cluster secret (the node account's password is derived from it).
    pub secret: String,
    /// This node's name in the DCP connection name (so the producer tells replicas apart).
    pub node_name: String,
    /// The bucket's vbucket count if the caller knows it (a cluster node, from the map: a
    /// cluster node's GET_ALL_VB_SEQNOS lists only the vbuckets it holds); `None`: the count of
    /// vbuckets the active's GET_ALL_VB_SEQNOS lists.
    pub vbucket_count: Option<u16>,
    /// This node's cluster id: with it the consumer enables sync replication and acknowledges
    /// what it has persisted (SEQNO_ACKNOWLEDGED, replica.md); `None` for the interim
    /// `--replica-of` hook, which is no member of a chain.
    pub node_id: Option<u64>,
}

/// What the running task watches.
pub(crate) struct Control {
    vbuckets: watch::Receiver<BTreeSet<u16>>,
    stop: watch::Receiver<bool>,
    /// Per connection, each vbucket's STREAM_REQ start seqno.
    requested: watch::Sender<Vec<(u16, u64)>>,
    /// The last connection's error, if it failed.
    failure: watch::Sender<Option<String>>,
}

pub struct Replicator;

/// A running replicator: change its vbuckets, read their persisted seqnos, stop it.
pub struct ReplicatorHandle {
    engine: Arc<Engine>,
    bucket: String,
    vbuckets: watch::Sender<BTreeSet<u16>>,
    stop: watch::Sender<bool>,
    requested: watch::Receiver<Vec<(u16, u64)>>,
    failure: watch::Receiver<Option<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Replicator {
    /// Starts following `vbuckets` of `config.bucket` on `config.source_kv_addr` (on the
    /// current tokio runtime).
    pub fn start(
        engine: Arc<Engine>,
        config: ReplicaConfig,
        vbuckets: BTreeSet<u16>,
    ) -> ReplicatorHandle {
        let (vbuckets_tx, vbuckets_rx) = watch::channel(vbuckets);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (requested_tx, requested_rx) = watch::channel(Vec::new());
        let (failure_tx, failure_rx) = watch::channel(None);
        let control = Control {
            vbuckets: vbuckets_rx,
            stop: stop_rx,
            requested: requested_tx,
            failure: failure_tx,
        };
        let task = tokio::spawn(run(engine.clone(), config.clone(), control));
        ReplicatorHandle {
            engine,
            bucket: config.bucket,
            vbuckets: vbuckets_tx,
            stop: stop_tx,
            requested: requested_rx,
            failure: failure_rx,
            task,
        }
    }
}

impl ReplicatorHandle {
    /// Follows these vbuckets from now on (the connection is made again with the new set).
    pub fn set_vbuckets(&self, vbuckets: BTreeSet<u16>) {
        self.vbuckets.send_replace(vbuckets);
    }

    /// Each followed vbucket's persisted seqno (what failover compares; `SeqnoSource`).
    pub fn seqnos(&self) -> BTreeMap<u16, u64> {
        let Some(bucket) = self.engine.bucket(&self.bucket) else {
            return BTreeMap::new();
        };
        let high = bucket.high_seqnos();
        self.vbuckets
            .borrow()
            .iter()
            .filter(|vbucket| **vbucket < bucket.vbuckets())
            .map(|vbucket| (*vbucket, high.get(*vbucket)))
            .collect()
    }

    /// Changes with every connection: the seqno each vbucket's stream was requested from.
    pub fn requested(&self) -> watch::Receiver<Vec<(u16, u64)>> {
        self.requested.clone()
    }

    /// Changes when a connection fails: why.
    pub fn failures(&self) -> watch::Receiver<Option<String>> {
        self.failure.clone()
    }

    /// Stops the replicator and waits for it (what was applied stays).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// The high seqno of every vbucket `bucket` has on the node at `kv_addr` (its actives and its
/// replicas; a replica's is what it has persisted), asked over the KV port with the node login:
/// what a failover compares (`SeqnoSource` on a cluster node).
pub async fn remote_seqnos(
    kv_addr: &str,
    secret: &str,
    bucket: &str,
) -> Result<BTreeMap<u16, u64>, ReplicaError> {
    let mut connection = Connection::connect(kv_addr).await?;
    let password = settee_auth::node_password(secret);
    connection.login(settee_auth::NODE_USER, &password).await?;
    connection.select(bucket, Some(0)).await?;
    let value = connection.all_vb_seqnos().await?;
    Ok(value
        .chunks_exact(10)
        .map(|entry| {
            let vbucket = u16::from_be_bytes([entry[0], entry[1]]);
            let mut seqno = [0u8; 8];
            seqno.copy_from_slice(&entry[2..]);
            (vbucket, u64::from_be_bytes(seqno))
        })
        .collect())
}

/// The local bucket for a replica of an active bucket of `count` vbuckets, its `vbuckets`
/// marked replica (or left pending).
async fn local_bucket(
    engine: &Engine,
    name: &str,
    count: u16,
    vbuckets: &BTreeSet<u16>,
) -> Result<Arc<Bucket>, ReplicaError> {
    if engine.bucket(name).is_none() {
        if let settee_engine::CreateOutcome::Created = engine.create_bucket(name, count).await? {
            if let Some(bucket) = engine.bucket(name) {
                bucket.set_security(settee_auth::default_security()).await?;
            }
        }
    }
    let bucket = engine
        .bucket(name)
        .ok_or_else(|| ReplicaError::Protocol("the local bucket went away".into()))?;
    if bucket.vbuckets() != count {
        return Err(ReplicaError::VbucketCount {
            local: bucket.vbuckets(),
            active: count,
        });
    }
    for &vbucket in vbuckets.iter().filter(|vb| **vb < count) {
        // A pending vbucket (a rebalance's copy catching up, rebalance.md) streams as it is.
        if !matches!(
            bucket.vbucket_role(vbucket),
            VbRole::Replica | VbRole::Pending
        ) {
            bucket.set_vbucket_role(vbucket, VbRole::Replica).await?;
        }
    }
    Ok(bucket)
}

/// One connection: handshake, then streaming until it ends.
async fn connect_and_stream(
    engine: &Engine,
    config: &ReplicaConfig,
    control: &mut Control,
    streamed: &mut bool,
) -> Result<Ended, ReplicaError> {
    let mut connection = Connection::connect(&config.source_kv_addr).await?;
    let password = settee_auth::node_password(&config.secret);
    connection.login(settee_auth::NODE_USER, &password).await?;
    let count = connection
        .select(&config.bucket, config.vbucket_count)
        .await?;
    let vbuckets: BTreeSet<u16> = control.vbuckets.borrow_and_update().clone();
    let vbuckets: BTreeSet<u16> = vbuckets.into_iter().filter(|vb| *vb < count).collect();
    let bucket = local_bucket(engine, &config.bucket, count, &vbuckets).await?;
    let name = format!("settee-replica:{}:{}", config.node_name, config.bucket);
    connection.open_dcp(&name, config.node_id).await?;
    let mut session = Session::new(connection, bucket, control, config.node_id.is_some());
    let ended = session.run(&vbuckets).await;
    *streamed = session.streamed;
    ended
}

async fn run(engine: Arc<Engine>, config: ReplicaConfig, mut control: Control) {
    let mut backoff = BACKOFF_MIN;
    loop {
        if *control.stop.borrow() {
            return;
        }
        let mut streamed = false;
        match connect_and_stream(&engine, &config, &mut control, &mut streamed).await {
            Ok(Ended::Stopped) => return,
            Ok(Ended::VbucketsChanged) => {
                backoff = BACKOFF_MIN;
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, bucket = %config.bucket, source = %config.source_kv_addr,
                    "replica connection ended");
                control.failure.send_replace(Some(error.to_string()));
                if streamed {
                    backoff = BACKOFF_MIN;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = control.stop.changed() => return,
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}
