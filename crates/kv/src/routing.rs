//! The cluster as the KV door sees it: which nodes serve, each clustered bucket's vbucket map,
//! and, per bucket, which vbuckets are active on this node.
//!
//! The binary builds a [`Topology`] from every cluster map its node applies and hands it to
//! [`Routing::publish`]; this crate never sees the map itself (nor Raft). A node started
//! without cluster flags publishes nothing: its configs and its behaviour are a single node's.
//!
//! The data path asks one question per request, "is this vbucket active here?", answered by
//! [`ActiveBits::is_active`]: one relaxed atomic load of a word of a per-bucket bitmap. A
//! connection takes its bucket's bitmap at SELECT_BUCKET and keeps the `Arc`; `publish` rewrites
//! the bits in place, so connections see a new map without taking any lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

/// Vbuckets a bitmap covers (the storage layout's maximum).
const BITS: usize = 1024;
const WORDS: usize = BITS / 64;

/// Couchbase 7's `revEpoch` of a config: it starts at 1 and is raised only by a failover that
/// lost the metadata quorum, which settee's Raft group never does (a minority serves nothing).
pub const REV_EPOCH: u64 = 1;

/// One node as clients reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// The host clients connect to; `None` when the node listens on every interface, which
    /// configs name `$HOST` (the address the client used for this node).
    pub host: Option<String>,
    pub kv_port: u16,
    /// The management port; `None` for a member recorded before the map carried it.
    pub mgmt_port: Option<u16>,
    /// The CouchDB HTTP port (Couchbase's `capi` service).
    pub capi_port: Option<u16>,
    /// Its TLS ports (kvSSL, capiSSL, mgmtSSL), as the member recorded them.
    pub tls_ports: TlsPorts,
    pub this_node: bool,
    /// Its name as ns_server's `otpNode` (what `/controller/rebalance` takes).
    pub otp_node: String,
}

/// A node's TLS ports; `None` where it serves no TLS (or did not record it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlsPorts {
    pub kv: Option<u16>,
    pub capi: Option<u16>,
    pub mgmt: Option<u16>,
}

impl NodeEntry {
    /// The host as configs write it.
    pub fn host_or_placeholder(&self) -> String {
        match &self.host {
            Some(host) if host.contains(':') => format!("[{host}]"),
            Some(host) => host.clone(),
            None => "$HOST".into(),
        }
    }
}

/// A clustered bucket's vbucket map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketMap {
    pub vbucket_count: u16,
    /// Replicas the bucket is configured with (rows have `1 + replicas` entries).
    pub replicas: u8,
    /// Per vbucket `[active, replica...]` as indexes into [`Topology::nodes`], -1 where the
    /// map has no serving node.
    pub rows: Vec<Vec<i32>>,
}

/// Everything configs need, as of one cluster map revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// The cluster map's revision (a config's `rev`).
    pub rev: u64,
    /// The serving nodes, in member order (a config's `serverList` and `nodesExt`).
    pub nodes: Vec<NodeEntry>,
    pub buckets: HashMap<String, BucketMap>,
}

impl Topology {
    /// This node's index in `nodes`, if it serves.
    pub fn this_node(&self) -> Option<usize> {
        self.nodes.iter().position(|node| node.this_node)
    }

    /// Which of `bucket`'s vbuckets are active here; `None` when the bucket is not in the map.
    fn active_here(&self, bucket: &str) -> Option<Vec<bool>> {
        let map = self.buckets.get(bucket)?;
        let here = self.this_node().and_then(|index| i32::try_from(index).ok());
        Some(
            map.rows
                .iter()
                .map(|row| here.is_some() && row.first().copied() == here)
                .collect(),
        )
    }

    /// Whether this node holds a replica of `vbucket` of `bucket` in the map.
    pub fn is_replica_here(&self, bucket: &str, vbucket: u16) -> bool {
        let (Some(map), Some(here)) = (
            self.buckets.get(bucket),
            self.this_node().and_then(|index| i32::try_from(index).ok()),
        ) else {
            return false;
        };
        map.rows
            .get(usize::from(vbucket))
            .is_some_and(|row| row.iter().skip(1).any(|node| *node == here))
    }
}

/// A bucket's "active here" bitmap, one bit per vbucket.
pub struct ActiveBits {
    words: [AtomicU64; WORDS],
}

impl ActiveBits {
    /// Every vbucket active here: a bucket the map does not hold is served locally.
    fn all() -> ActiveBits {
        ActiveBits {
            words: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }

    #[inline]
    pub fn is_active(&self, vbucket: u16) -> bool {
        let vbucket = usize::from(vbucket);
        self.words
            .get(vbucket / 64)
            .is_some_and(|word| word.load(Ordering::Relaxed) >> (vbucket % 64) & 1 == 1)
    }

    /// Sets the bits from `active` (vbuckets past its end are not active).
    fn store(&self, active: Option<&[bool]>) {
        for (index, word) in self.words.iter().enumerate() {
            let value = match active {
                None => u64::MAX,
                Some(active) => (0..64).fold(0u64, |value, bit| {
                    let set = active.get(index * 64 + bit).copied().unwrap_or(false);
                    value | (u64::from(set) << bit)
                }),
            };
            word.store(value, Ordering::Relaxed);
        }
    }
}

/// The node's routing state, shared by every connection of the KV door.
pub struct Routing {
    /// `None` until a cluster node publishes its first map (and forever on a single node).
    /// Read for configs and NOT_MY_VBUCKET replies, never by the data path.
    topology: RwLock<Option<Arc<Topology>>>,
    /// Every bucket's bitmap handed out so far. Entries stay when a bucket goes (a connection
    /// may still hold one; a bucket created again under the name takes it over); the lock is
    /// taken at SELECT_BUCKET and by `publish`, never per request.
    bits: Mutex<HashMap<String, Arc<ActiveBits>>>,
    /// The published revision, for connections that push map changes to their clients.
    changes: watch::Sender<u64>,
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            topology: RwLock::new(None),
            bits: Mutex::new(HashMap::new()),
            changes: watch::channel(0).0,
        }
    }
}

impl Routing {
    /// Whether the node is a cluster node (a topology was published).
    pub fn is_clustered(&self) -> bool {
        self.topology.read().is_some()
    }

    pub fn topology(&self) -> Option<Arc<Topology>> {
        self.topology.read().clone()
    }

    /// The bitmap of `bucket`, on a cluster node; `None` on a single node, whose every
    /// vbucket is active.
    pub fn bits_for(&self, bucket: &str) -> Option<Arc<ActiveBits>> {
        let topology = self.topology()?;
        let mut bits = self.bits.lock();
        Some(
            bits.entry(bucket.to_owned())
                .or_insert_with(|| {
                    let entry = ActiveBits::all();
                    entry.store(topology.active_here(bucket).as_deref());
                    Arc::new(entry)
                })
                .clone(),
        )
    }

    /// Makes `topology` the one configs show and routes by, then tells the connections that
    /// asked for map changes.
    pub fn publish(&self, topology: Topology) {
        let rev = topology.rev;
        {
            // The bits under their lock, so a `bits_for` racing with this publish never
            // stores bits from an older topology after the newer ones.
            let bits = self.bits.lock();
            for (bucket, entry) in bits.iter() {
                entry.store(topology.active_here(bucket).as_deref());
            }
            *self.topology.write() = Some(Arc::new(topology));
        }
        self.changes.send_replace(rev);
    }

    /// Wakes at every publish.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(this_node: bool) -> NodeEntry {
        NodeEntry {
            host: Some("127.0.0.1".into()),
            kv_port: 11210,
            mgmt_port: Some(8091),
            capi_port: Some(5984),
            tls_ports: TlsPorts::default(),
            this_node,
            otp_node: "settee-1@127.0.0.1".into(),
        }
    }

    /// Three nodes, this one second; vbucket v active on node v % 3.
    fn topology(rev: u64, this: usize) -> Topology {
        let rows = (0..64).map(|vb: i32| vec![vb % 3, (vb + 1) % 3]).collect();
        Topology {
            rev,
            nodes: (0..3).map(|index| node(index == this)).collect(),
            buckets: HashMap::from([(
                "b".to_string(),
                BucketMap {
                    vbucket_count: 64,
                    replicas: 1,
                    rows,
                },
            )]),
        }
    }

    #[test]
    fn a_single_node_routes_nothing() {
        let routing = Routing::default();
        assert!(!routing.is_clustered());
        assert!(routing.bits_for("b").is_none());
    }

    #[test]
    fn the_bitmap_follows_published_maps_in_place() {
        let routing = Routing::default();
        routing.publish(topology(5, 1));
        let bits = routing.bits_for("b").expect("clustered");
        let active: Vec<u16> = (0..64).filter(|vb| bits.is_active(*vb)).collect();
        assert_eq!(active, (0..64).filter(|vb| vb % 3 == 1).collect::<Vec<_>>());
        // Vbuckets past the bucket's count are never active here.
        assert!(!bits.is_active(64) && !bits.is_active(1023) && !bits.is_active(u16::MAX));
        // A new map: the bitmap a connection already holds changes with it.
        routing.publish(topology(6, 0));
        assert!(bits.is_active(0) && bits.is_active(3) && !bits.is_active(1));
        let topology = routing.topology().expect("published");
        assert!(topology.is_replica_here("b", 2) && !topology.is_replica_here("b", 1));
    }

    #[test]
    fn a_bucket_outside_the_map_is_served_here_whole() {
        let routing = Routing::default();
        routing.publish(topology(5, 1));
        let local = routing
            .bits_for("made-before-the-cluster")
            .expect("clustered");
        assert!((0..1024).all(|vb| local.is_active(vb)));
    }

    #[test]
    fn a_node_that_serves_nothing_is_active_for_nothing() {
        let routing = Routing::default();
        routing.publish(topology(5, 7));
        let bits = routing.bits_for("b").expect("clustered");
        assert!((0..64).all(|vb| !bits.is_active(vb)));
    }
}
