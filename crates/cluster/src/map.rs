//! The cluster map: members, buckets and each bucket's vbucket map (docs/format/cluster-map.md).
//!
//! Plain data. How it changes is `command.rs`; how it is encoded is `codec.rs`.

use std::collections::BTreeMap;

/// A node's id in the cluster (openraft's node id).
pub type NodeId = u64;

/// Vbuckets a bucket may have at most (the storage layout's `VBUCKETS_MAX`).
pub const VBUCKETS_MAX: u16 = 1024;
/// Replicas a bucket may have at most (Couchbase's limit).
pub const REPLICAS_MAX: u8 = 3;
/// Bytes in a bucket name at most (CouchDB's database name limit is larger; Couchbase's is 100).
pub const BUCKET_NAME_BYTES_MAX: usize = 100;
/// The auto-failover timeout: Couchbase's settings, with settee's default of 5 s.
pub const AUTO_FAILOVER_TIMEOUT_MS_DEFAULT: u32 = 5_000;
pub const AUTO_FAILOVER_TIMEOUT_MS_MIN: u32 = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberState {
    Active,
    /// Failed over: its actives were promoted elsewhere; it serves nothing until added back.
    Failed,
    /// Removed by an operator; kept so its id is never reused.
    Ejected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Voter,
    Learner,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: NodeId,
    /// "host:port" of the internal transport (Raft, heartbeats, later DCP and forwarding).
    pub cluster_addr: String,
    pub http_addr: String,
    pub kv_addr: String,
    /// "host:port" of the management REST port (the KV SDKs bootstrap over it); "" for a member
    /// recorded by a version 1 map or command, which had no such field.
    pub mgmt_addr: String,
    pub state: MemberState,
    pub role: Role,
    /// The ports its TLS doors listen on, on `kv_addr`'s host (all 0 when it serves no TLS,
    /// or was recorded by a version 1 or 2 map).
    pub tls: TlsPorts,
}

/// A member's TLS ports (0: not served), which configs advertise as kvSSL, capiSSL, mgmtSSL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlsPorts {
    pub kv: u16,
    pub https: u16,
    pub mgmt: u16,
}

impl Member {
    /// A node as it joins: active, and a learner until the orchestrator makes it vote.
    pub fn joining(
        id: NodeId,
        cluster_addr: impl Into<String>,
        http_addr: impl Into<String>,
        kv_addr: impl Into<String>,
    ) -> Member {
        Member {
            id,
            cluster_addr: cluster_addr.into(),
            http_addr: http_addr.into(),
            kv_addr: kv_addr.into(),
            mgmt_addr: String::new(),
            state: MemberState::Active,
            role: Role::Learner,
            tls: TlsPorts::default(),
        }
    }

    /// The same member with its management address.
    pub fn with_mgmt_addr(mut self, mgmt_addr: impl Into<String>) -> Member {
        self.mgmt_addr = mgmt_addr.into();
        self
    }

    pub fn with_tls(mut self, tls: TlsPorts) -> Member {
        self.tls = tls;
        self
    }
}

/// Couchbase's durability levels, the minimum a bucket raises every write to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Durability {
    None,
    Majority,
    MajorityAndPersistActive,
    PersistToMajority,
}

/// One vbucket's place in the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vbucket {
    /// `None` only after a failover that could not promote a replica safely.
    pub active: Option<NodeId>,
    /// Replica chain in order of preference; never holds the active, never a node twice.
    pub replicas: Vec<NodeId>,
    /// The map revision at which this entry last changed.
    pub epoch: u64,
}

impl Vbucket {
    /// The chain a durable write's majority is counted over: the active, then the replicas.
    pub fn chain(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.active.into_iter().chain(self.replicas.iter().copied())
    }
}

/// Where a bucket's copies are (docs/format/cluster-map.md, "Accounts on every member").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Copies {
    /// The active and `replicas` replicas, placed over the members.
    #[default]
    Replicas,
    /// Every active member: the accounts databases. Apply keeps every chain whole.
    EveryMember,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub name: String,
    pub vbucket_count: u16,
    pub replicas: u8,
    pub durability_min: Durability,
    /// The bucket's collections manifest (docs/format/cluster-map.md, `ChangeManifest`).
    pub manifest: settee_manifest::Manifest,
    /// Rises by one each time a design document of the bucket was written (DesignsChanged).
    pub design_rev: u64,
    pub copies: Copies,
    /// Exactly `vbucket_count` entries.
    pub vbuckets: Vec<Vbucket>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoFailover {
    pub enabled: bool,
    pub timeout_ms: u32,
}

impl Default for AutoFailover {
    fn default() -> Self {
        AutoFailover {
            enabled: true,
            timeout_ms: AUTO_FAILOVER_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// The state machine of the cluster's Raft group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterMap {
    /// Rises by one with every accepted command.
    pub revision: u64,
    pub auto_failover: AutoFailover,
    pub members: BTreeMap<NodeId, Member>,
    pub buckets: BTreeMap<String, Bucket>,
    /// The rebalance in progress (`moves.rs`).
    pub rebalance: Option<crate::moves::Rebalance>,
}

impl ClusterMap {
    /// Members that serve: neither failed over nor ejected.
    pub fn active_members(&self) -> impl Iterator<Item = &Member> {
        self.members
            .values()
            .filter(|member| member.state == MemberState::Active)
    }

    pub fn is_active_member(&self, node: NodeId) -> bool {
        self.members
            .get(&node)
            .is_some_and(|member| member.state == MemberState::Active)
    }

    /// Checks the invariants of docs/format/cluster-map.md; the first broken one as text.
    pub fn check(&self) -> Result<(), String> {
        for (id, member) in &self.members {
            if *id != member.id {
                return Err(format!("member under id {id} says {}", member.id));
            }
        }
        for (name, bucket) in &self.buckets {
            if *name != bucket.name || bucket.vbuckets.len() != usize::from(bucket.vbucket_count) {
                return Err(format!("bucket {name} is malformed"));
            }
            if bucket.replicas > REPLICAS_MAX && bucket.copies == Copies::Replicas {
                return Err(format!("bucket {name} has {} replicas", bucket.replicas));
            }
            for (vb, entry) in bucket.vbuckets.iter().enumerate() {
                if entry.epoch > self.revision {
                    return Err(format!("{name} vb {vb}: epoch past the revision"));
                }
                let chain: Vec<NodeId> = entry.chain().collect();
                for (index, node) in chain.iter().enumerate() {
                    if !self.members.contains_key(node) {
                        return Err(format!("{name} vb {vb}: node {node} is not a member"));
                    }
                    if chain[..index].contains(node) {
                        return Err(format!("{name} vb {vb}: node {node} twice"));
                    }
                }
                if bucket.copies == Copies::EveryMember {
                    self.check_every_member(name, vb, entry)?;
                }
            }
        }
        Ok(())
    }

    /// Every active member in the entry's chain; no ejected one among its replicas (an
    /// ejected active stays until a rebalance moves it, as in every bucket).
    fn check_every_member(&self, name: &str, vb: usize, entry: &Vbucket) -> Result<(), String> {
        for member in self.members.values() {
            match member.state {
                MemberState::Active if !entry.chain().any(|node| node == member.id) => {
                    return Err(format!(
                        "{name} vb {vb}: active member {} missing",
                        member.id
                    ))
                }
                MemberState::Ejected if entry.replicas.contains(&member.id) => {
                    return Err(format!("{name} vb {vb}: ejected member {} held", member.id))
                }
                _ => {}
            }
        }
        Ok(())
    }
}
