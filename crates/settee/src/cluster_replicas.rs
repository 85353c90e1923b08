//! Replica vbuckets as the committed cluster map says (docs/format/replica.md, "Who starts the
//! streams"). With every map the node follows (`cluster_buckets.rs` calls [`ClusterReplicas::
//! follow`] before it publishes the KV door's routing), for each bucket of the map whose engine
//! bucket is open here with the map's vbucket count:
//!
//! - each vbucket's engine role is set from the map: active here -> active, in the replica
//!   chain here -> replica, anything else -> dead (front-door writes to a non-active vbucket
//!   are refused with NOT_MY_VBUCKET);
//! - one [`Replicator`] runs per (bucket, active node) and streams exactly the vbuckets this
//!   node replicates from that node: its set is changed when the map changes it, it is stopped
//!   when the set is empty (or the active moved to another address). A vbucket promoted to
//!   active here leaves its stream before it turns active; a replica whose active moved
//!   streams from the new active.
//!
//! [`MapSeqnos`] is the cluster node's [`SeqnoSource`]: a failover on the orchestrator asks
//! each replica node, over its KV port with the node login, for its vbuckets' seqnos
//! (GET_ALL_VB_SEQNOS; a replica's are what it has persisted), so `failover::plan` promotes the
//! replica with the highest persisted seqno. Fencing is by the map itself: once the failover is
//! committed, the replicas stop streaming from the failed node.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use settee_cluster::failover::ReplicaSeqno;
use settee_cluster::map::{ClusterMap, NodeId};
use settee_cluster::moves::MoveState;
use settee_cluster::orchestrator::SeqnoSource;
use settee_engine::durability::Level;
use settee_engine::{Bucket, Engine, VbRole};
use settee_replica::{ReplicaConfig, Replicator, ReplicatorHandle};
use tokio::sync::{watch, Mutex};

struct Stream {
    kv_addr: String,
    vbuckets: BTreeSet<u16>,
    handle: ReplicatorHandle,
}

/// The replicators of a cluster node, one per (bucket, active node).
pub struct ClusterReplicas {
    engine: Arc<Engine>,
    this: NodeId,
    secret: String,
    node_name: String,
    streams: Mutex<BTreeMap<(String, NodeId), Stream>>,
    views: OnceLock<Arc<settee_views::Views>>,
}

/// The role `map` gives `this` node for each vbucket of `bucket`, and the vbuckets it
/// replicates from each other active member. A node that receives a copy of a vbucket in a
/// rebalance's move holds it pending while the move is copying (its files arrive) and ready
/// (it streams the vbucket from its active as a replica does, from the files' seqno or from
/// 0, docs/format/rebalance.md). A node the map does not hold as an active member
/// (failed over, ejected) holds every vbucket dead and streams nothing: it is fenced until it
/// is added back.
pub fn plan(
    map: &ClusterMap,
    this: NodeId,
    bucket: &settee_cluster::map::Bucket,
) -> (Vec<VbRole>, BTreeMap<NodeId, BTreeSet<u16>>) {
    let mut roles = Vec::with_capacity(bucket.vbuckets.len());
    let mut sources: BTreeMap<NodeId, BTreeSet<u16>> = BTreeMap::new();
    if !map.is_active_member(this) {
        return (vec![VbRole::Dead; bucket.vbuckets.len()], sources);
    }
    // This node's copies of the moves in flight: vbucket -> whether it streams (ready).
    let copies: BTreeMap<u16, bool> = map
        .rebalance
        .iter()
        .flat_map(|rebalance| &rebalance.moves)
        .filter(|step| step.bucket == bucket.name && step.copies.contains(&this))
        .filter(|step| matches!(step.state, MoveState::Copying | MoveState::Ready))
        .map(|step| (step.vbucket, step.state == MoveState::Ready))
        .collect();
    for (vb, entry) in bucket.vbuckets.iter().enumerate() {
        let Ok(vb) = u16::try_from(vb) else { break };
        let replica = entry.replicas.contains(&this);
        let copy = copies.get(&vb).copied();
        let role = if entry.active == Some(this) {
            VbRole::Active
        } else if replica || copy.is_some() {
            let streams = replica || copy == Some(true);
            if let Some(active) = entry.active.filter(|node| map.is_active_member(*node)) {
                if streams {
                    sources.entry(active).or_default().insert(vb);
                }
            }
            if replica {
                VbRole::Replica
            } else {
                VbRole::Pending
            }
        } else {
            VbRole::Dead
        };
        roles.push(role);
    }
    (roles, sources)
}

/// Empties a vbucket that is not active here: its rows in every index group of `views` (found
/// through the documents, so first), then its data (`Bucket::reset_replica`). A copy a
/// rebalance moved away, and a move's target before its files come, are emptied so.
pub async fn empty_vbucket(
    views: Option<&Arc<settee_views::Views>>,
    bucket: &Arc<Bucket>,
    vb: u16,
) -> Result<(), String> {
    if let Some(views) = views {
        let (views, held) = (views.clone(), bucket.clone());
        tokio::task::spawn_blocking(move || views.drop_vbucket_rows(&held, vb))
            .await
            .map_err(|error| error.to_string())?
            .map_err(|error| error.to_string())?;
    }
    bucket
        .reset_replica(vb)
        .await
        .map_err(|error| error.to_string())
}

/// For each vbucket of `bucket` active on `this` node, the replica nodes whose
/// acknowledgements count for its sync writes: the chain's active members, at most `replicas`
/// of them (a failed node appended by a failover is not one); empty for the other vbuckets
/// (docs/format/replica.md, "Sync writes on the active").
pub fn sync_chains(
    map: &ClusterMap,
    this: NodeId,
    bucket: &settee_cluster::map::Bucket,
) -> Vec<Vec<NodeId>> {
    bucket
        .vbuckets
        .iter()
        .map(|entry| {
            if entry.active != Some(this) {
                return Vec::new();
            }
            entry
                .replicas
                .iter()
                .copied()
                .filter(|node| map.is_active_member(*node))
                .take(usize::from(bucket.replicas))
                .collect()
        })
        .collect()
}

/// The map's minimum durability as the engine's level.
pub fn level_of(durability: settee_cluster::map::Durability) -> Level {
    use settee_cluster::map::Durability;
    match durability {
        Durability::None => Level::None,
        Durability::Majority => Level::Majority,
        Durability::MajorityAndPersistActive => Level::MajorityAndPersistActive,
        Durability::PersistToMajority => Level::PersistToMajority,
    }
}

/// A `durabilityMinLevel` as the cluster map records it.
pub fn durability_of(level: Level) -> settee_cluster::map::Durability {
    use settee_cluster::map::Durability;
    match level {
        Level::None => Durability::None,
        Level::Majority => Durability::Majority,
        Level::MajorityAndPersistActive => Durability::MajorityAndPersistActive,
        Level::PersistToMajority => Durability::PersistToMajority,
    }
}

impl ClusterReplicas {
    pub fn new(engine: Arc<Engine>, this: NodeId, secret: String, node_name: String) -> Self {
        ClusterReplicas {
            engine,
            this,
            secret,
            node_name,
            streams: Mutex::new(BTreeMap::new()),
            views: OnceLock::new(),
        }
    }

    /// Brings roles and streams to what `map` says (see the module's documentation).
    pub async fn follow(&self, map: &ClusterMap) {
        let mut wanted: BTreeMap<(String, NodeId), (String, BTreeSet<u16>)> = BTreeMap::new();
        let mut counts: BTreeMap<String, u16> = BTreeMap::new();
        let mut roles: Vec<(String, Vec<VbRole>)> = Vec::new();
        for (name, bucket) in &map.buckets {
            let Some(local) = self.engine.bucket(name) else {
                continue;
            };
            if local.vbuckets() != bucket.vbucket_count {
                continue;
            }
            counts.insert(name.clone(), bucket.vbucket_count);
            local.durability().set_topology(
                bucket.replicas,
                &sync_chains(map, self.this, bucket),
                level_of(bucket.durability_min),
            );
            let (bucket_roles, sources) = plan(map, self.this, bucket);
            for (source, vbuckets) in sources {
                let Some(member) = map.members.get(&source) else {
                    continue;
                };
                wanted.insert((name.clone(), source), (member.kv_addr.clone(), vbuckets));
            }
            roles.push((name.clone(), bucket_roles));
        }
        let mut streams = self.streams.lock().await;
        // First the streams shrink or stop, so no vbucket is still streamed once it is active.
        let current: Vec<(String, NodeId)> = streams.keys().cloned().collect();
        for key in current {
            match wanted.get(&key) {
                Some((kv_addr, vbuckets)) if streams[&key].kv_addr == *kv_addr => {
                    let stream = streams.get_mut(&key).expect("listed");
                    if stream.vbuckets != *vbuckets {
                        stream.vbuckets = vbuckets.clone();
                        stream.handle.set_vbuckets(vbuckets.clone());
                        tracing::info!(bucket = %key.0, source = key.1, vbuckets = vbuckets.len(),
                            "replica stream follows new vbuckets");
                    }
                }
                _ => {
                    if let Some(stream) = streams.remove(&key) {
                        stream.handle.stop().await;
                        tracing::info!(bucket = %key.0, source = key.1, "replica stream stopped");
                    }
                }
            }
        }
        for (name, bucket_roles) in roles {
            let Some(local) = self.engine.bucket(&name) else {
                continue;
            };
            for (vb, role) in bucket_roles.into_iter().enumerate() {
                let Ok(vb) = u16::try_from(vb) else { break };
                let was = local.vbucket_role(vb);
                if was == role {
                    continue;
                }
                if let Err(error) = local.set_vbucket_role(vb, role).await {
                    tracing::warn!(bucket = %name, vb, %error, "setting a vbucket role failed");
                    continue;
                }
                // A serving node that no longer holds a vbucket it held (a rebalance moved it
                // away) drops its copy (rebalance.md, section 4); a fenced node keeps its data
                // for a delta recovery.
                let held = local.high_seqnos().get(vb) > 0;
                if role == VbRole::Dead && held && map.is_active_member(self.this) {
                    match self.drop_copy(&local, vb).await {
                        Ok(()) => {
                            tracing::info!(bucket = %name, vb, ?was, "dropped a vbucket copy")
                        }
                        Err(error) => {
                            tracing::warn!(bucket = %name, vb, %error, "dropping a vbucket copy failed")
                        }
                    }
                }
            }
        }
        for (key, (kv_addr, vbuckets)) in wanted {
            if streams.contains_key(&key) {
                continue;
            }
            let config = ReplicaConfig {
                bucket: key.0.clone(),
                source_kv_addr: kv_addr.clone(),
                secret: self.secret.clone(),
                node_name: self.node_name.clone(),
                vbucket_count: counts.get(&key.0).copied(),
                node_id: Some(self.this),
            };
            tracing::info!(bucket = %key.0, source = key.1, %kv_addr, vbuckets = vbuckets.len(),
                "replica stream started");
            let handle = Replicator::start(self.engine.clone(), config, vbuckets.clone());
            streams.insert(
                key,
                Stream {
                    kv_addr,
                    vbuckets,
                    handle,
                },
            );
        }
    }

    /// Empties a vbucket this node no longer holds ([`empty_vbucket`]).
    async fn drop_copy(&self, bucket: &Arc<Bucket>, vb: u16) -> Result<(), String> {
        empty_vbucket(self.views.get(), bucket, vb).await
    }

    /// The views whose rows a dropped vbucket leaves (set once, at start).
    pub fn set_views(&self, views: Arc<settee_views::Views>) {
        let _ = self.views.set(views);
    }

    /// Stops every stream (what was applied stays).
    pub async fn stop(&self) {
        let streams = std::mem::take(&mut *self.streams.lock().await);
        for stream in streams.into_values() {
            stream.handle.stop().await;
        }
    }
}

/// The cluster node's [`SeqnoSource`]: each replica node's seqnos over its KV port (this
/// node's own from its engine). The map is given once the node has started
/// ([`MapSeqnos::set_map`]); before that nobody answers.
pub struct MapSeqnos {
    engine: Arc<Engine>,
    this: NodeId,
    secret: String,
    map: OnceLock<watch::Receiver<Arc<ClusterMap>>>,
}

impl MapSeqnos {
    pub fn new(engine: Arc<Engine>, this: NodeId, secret: String) -> Self {
        MapSeqnos {
            engine,
            this,
            secret,
            map: OnceLock::new(),
        }
    }

    pub fn set_map(&self, map: watch::Receiver<Arc<ClusterMap>>) {
        let _ = self.map.set(map);
    }
}

type Answer = Pin<Box<dyn Future<Output = Option<Vec<ReplicaSeqno>>> + Send>>;

impl SeqnoSource for MapSeqnos {
    fn fence_and_report(&self, node: NodeId, bucket: &str, vbuckets: Vec<(u16, u64)>) -> Answer {
        let answer = move |seqnos: &BTreeMap<u16, u64>| -> Vec<ReplicaSeqno> {
            vbuckets
                .iter()
                .map(|(vb, _)| ReplicaSeqno {
                    persisted: seqnos.get(vb).copied().unwrap_or(0),
                    majority_acked: 0,
                })
                .collect()
        };
        if node == self.this {
            let local = self.engine.bucket(bucket).map(|local| {
                let high = local.high_seqnos();
                (0..local.vbuckets())
                    .map(|vb| (vb, high.get(vb)))
                    .collect::<BTreeMap<u16, u64>>()
            });
            let answered = local.map(|seqnos| answer(&seqnos));
            return Box::pin(async move { answered });
        }
        let kv_addr = self
            .map
            .get()
            .and_then(|map| map.borrow().members.get(&node).map(|m| m.kv_addr.clone()));
        let (secret, bucket) = (self.secret.clone(), bucket.to_owned());
        Box::pin(async move {
            let kv_addr = kv_addr?;
            match settee_replica::remote_seqnos(&kv_addr, &secret, &bucket).await {
                Ok(seqnos) => Some(answer(&seqnos)),
                Err(error) => {
                    tracing::warn!(node, %bucket, %error, "a replica did not report its seqnos");
                    None
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_cluster::map::{Bucket, Durability, Member, MemberState, Vbucket};

    /// A map of members 1, 2 and 3.
    fn three_members() -> ClusterMap {
        let mut map = ClusterMap::default();
        for id in [1, 2, 3] {
            map.members.insert(id, Member::joining(id, "", "", ""));
        }
        map
    }

    /// A bucket with one replica and these (active, replica chain) vbuckets.
    fn bucket_of(vbuckets: &[(NodeId, &[NodeId])]) -> Bucket {
        Bucket {
            name: "db".into(),
            vbucket_count: u16::try_from(vbuckets.len()).expect("a few"),
            replicas: 1,
            durability_min: Durability::None,
            manifest: Default::default(),
            design_rev: 0,
            copies: Default::default(),
            vbuckets: vbuckets
                .iter()
                .map(|(active, replicas)| Vbucket {
                    active: Some(*active),
                    replicas: replicas.to_vec(),
                    epoch: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn roles_and_sources_follow_the_map() {
        let mut map = three_members();
        let bucket = bucket_of(&[(1, &[2]), (2, &[1]), (3, &[1]), (2, &[3])]);
        let (roles, sources) = plan(&map, 1, &bucket);
        assert_eq!(
            roles,
            [
                VbRole::Active,
                VbRole::Replica,
                VbRole::Replica,
                VbRole::Dead
            ]
        );
        assert_eq!(
            sources,
            BTreeMap::from([(2, BTreeSet::from([1])), (3, BTreeSet::from([2]))])
        );
        // A failed active is streamed from by nobody.
        map.members.get_mut(&3).expect("member").state = MemberState::Failed;
        let (_, sources) = plan(&map, 1, &bucket);
        assert_eq!(sources, BTreeMap::from([(2, BTreeSet::from([1]))]));
        // A failed-over node is fenced: nothing active, nothing streamed.
        let (roles, sources) = plan(&map, 3, &bucket);
        assert_eq!(roles, [VbRole::Dead; 4]);
        assert!(sources.is_empty());
    }

    #[test]
    fn a_moves_copy_is_pending_while_its_files_come_and_streams_once_ready() {
        use settee_cluster::moves::{MoveEntry, Rebalance};
        let mut map = three_members();
        let bucket = bucket_of(&[(1, &[2]), (2, &[1])]);
        let step = |state| MoveEntry {
            id: 7,
            bucket: "db".into(),
            vbucket: 0,
            expected_epoch: 0,
            after: Vbucket {
                active: Some(3),
                replicas: vec![2],
                epoch: 0,
            },
            source: Some(1),
            copies: vec![3],
            attempt: 1,
            state,
        };
        for (state, role, streamed) in [
            (MoveState::Planned, VbRole::Dead, false),
            (MoveState::Copying, VbRole::Pending, false),
            (MoveState::Ready, VbRole::Pending, true),
            (MoveState::Aborted, VbRole::Dead, false),
        ] {
            map.rebalance = Some(Rebalance {
                id: 1,
                stopping: false,
                nodes: [1, 2, 3].into(),
                ejected: Default::default(),
                moves: vec![step(state)],
            });
            let (roles, sources) = plan(&map, 3, &bucket);
            assert_eq!(roles, [role, VbRole::Dead], "{state:?}");
            if streamed {
                assert_eq!(sources, BTreeMap::from([(1, BTreeSet::from([0]))]));
            } else {
                assert!(sources.is_empty(), "{state:?}");
            }
            // The source and the kept replica hold their roles meanwhile.
            assert_eq!(plan(&map, 1, &bucket).0, [VbRole::Active, VbRole::Replica]);
            assert_eq!(plan(&map, 2, &bucket).0, [VbRole::Replica, VbRole::Active]);
        }
    }

    #[test]
    fn sync_chains_hold_the_active_members_of_this_nodes_actives() {
        let mut map = three_members();
        // vb 2: a failover appended the failed active 3 after the promoted replica's slot.
        let bucket = bucket_of(&[(1, &[2]), (2, &[1]), (1, &[2, 3])]);
        assert_eq!(sync_chains(&map, 1, &bucket), [vec![2], vec![], vec![2]]);
        map.members.get_mut(&2).expect("member").state = MemberState::Failed;
        assert_eq!(
            sync_chains(&map, 1, &bucket),
            [Vec::<NodeId>::new(), vec![], vec![3]]
        );
        for level in Level::ALL {
            assert_eq!(level_of(durability_of(level)), level);
        }
    }
}
