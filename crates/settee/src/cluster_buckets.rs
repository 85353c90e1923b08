//! Buckets through the cluster map. A bucket created on any node (`PUT /db`, the management
//! REST API's `POST /pools/default/buckets`) is placed on the active members and committed as
//! `Command::CreateBucket`; every node follows the committed map: it opens the engine bucket
//! (same name and vbucket count, CouchDB's default security) when the bucket appears and
//! deletes it when the bucket goes, then routes the KV door by the new map
//! (`cluster_topology.rs`). A request is answered once this node has followed the map to the
//! change's revision, so what the client does next here sees it.
//!
//! The accounts databases (`_users`, and a node's `[chttpd_auth] authentication_db` created
//! through it) are buckets of the map with a copy on every member, every vbucket active on the
//! node that created it (docs/format/cluster-map.md, "Accounts on every member"): the node that
//! bootstraps the cluster puts its `_users` there ([`ClusterBuckets::provide_accounts`]).
//!
//! A bucket this node had before it joined a cluster (and `_replicator`, which every node keeps
//! for itself) is not in the map: it stays a local bucket,
//! served whole by this node as before, and other nodes do not know it. If the cluster later
//! creates a bucket of the same name, the local one is kept and used as the cluster's copy on
//! this node when its vbucket count matches; otherwise the node keeps serving it locally
//! (logged) and does not route it by the map.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use settee_cluster::command::{Applied, BucketSettings, Command};
use settee_cluster::map::{
    AutoFailover, ClusterMap, Copies, Durability, MemberState, NodeId, REPLICAS_MAX,
};
use settee_cluster::node::ClusterNode;
use settee_http::{ClusterRefusal, HttpState};
use settee_kv::mgmt::buckets::AutoFailoverSettings;
use settee_kv::{BucketAdmin, BucketRefusal, KvState, NewBucket};
use tokio::sync::watch;

use crate::cluster_replicas::ClusterReplicas;

/// Buckets of the cluster, as this node creates, drops and follows them.
pub struct ClusterBuckets {
    node: Arc<ClusterNode>,
    // Weak: the HTTP state holds the cluster view, which holds this.
    http: Weak<HttpState>,
    /// The map revision the node has followed (engine buckets opened and dropped, routing
    /// published).
    followed: watch::Receiver<u64>,
}

/// Replicas of a new bucket: what was asked, or 1 once the cluster has 2 or more nodes (0 with
/// one), as Couchbase; never more than the other members can hold.
pub fn replicas_for(asked: Option<u8>, members: usize) -> u8 {
    let others = u8::try_from(members.saturating_sub(1)).unwrap_or(u8::MAX);
    asked.unwrap_or(1).min(others).min(REPLICAS_MAX)
}

impl ClusterBuckets {
    /// Follows the map the node has now (so the doors start on it), then every later one in
    /// a task that ends with `shutdown`.
    pub async fn start(
        node: Arc<ClusterNode>,
        http: &Arc<HttpState>,
        kv: &Arc<KvState>,
        replicas: Arc<ClusterReplicas>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (Arc<ClusterBuckets>, tokio::task::JoinHandle<()>) {
        let mut maps = node.subscribe();
        let map = maps.borrow_and_update().clone();
        let mut known = BTreeSet::new();
        follow(&map, node.id(), http, kv, &replicas, &mut known).await;
        let (followed_sender, followed) = watch::channel(map.revision);
        let (http_weak, kv_weak) = (Arc::downgrade(http), Arc::downgrade(kv));
        let this = node.id();
        let task = tokio::spawn(async move {
            tokio::pin!(shutdown);
            loop {
                tokio::select! {
                    _ = &mut shutdown => return,
                    changed = maps.changed() => if changed.is_err() { return },
                }
                let map = maps.borrow_and_update().clone();
                let (Some(http), Some(kv)) = (http_weak.upgrade(), kv_weak.upgrade()) else {
                    return;
                };
                follow(&map, this, &http, &kv, &replicas, &mut known).await;
                followed_sender.send_replace(map.revision);
            }
        });
        let buckets = ClusterBuckets {
            node,
            http: Arc::downgrade(http),
            followed,
        };
        (Arc::new(buckets), task)
    }

    /// The map revision this node has followed, as it rises.
    pub fn followed(&self) -> watch::Receiver<u64> {
        self.followed.clone()
    }

    /// Puts this node's `_users` in the map with a copy on every member, when the map has none:
    /// called by a node that bootstrapped the cluster or carries on from its stored log, never
    /// by one that joined (it takes the cluster's accounts). Losing a race to another node is
    /// no failure: the map then has the other node's. `false` when it could not be settled
    /// now (no Raft leader yet): the caller tries again.
    pub async fn provide_accounts(&self) -> bool {
        const USERS: &str = "_users";
        let Some(local) = self
            .http
            .upgrade()
            .and_then(|http| http.engine.bucket(USERS))
        else {
            return true;
        };
        if self.node.map().buckets.contains_key(USERS) {
            return true;
        }
        let provided = self
            .create(
                USERS,
                Some(local.vbuckets()),
                None,
                Durability::None,
                Copies::EveryMember,
            )
            .await;
        match provided {
            Ok(()) => {
                tracing::info!("this node's accounts are the cluster's");
                true
            }
            Err(BucketRefusal::Exists) => true,
            Err(error) => {
                tracing::warn!(?error, "putting _users in the cluster map failed");
                false
            }
        }
    }

    /// Creates `name` across the cluster; returns once it is open here.
    pub async fn create(
        &self,
        name: &str,
        vbuckets: Option<u16>,
        replicas: Option<u8>,
        durability_min: Durability,
        copies: Copies,
    ) -> Result<(), BucketRefusal> {
        let map = self.node.map();
        if map.buckets.contains_key(name) {
            return Err(BucketRefusal::Exists);
        }
        let vbuckets = match (vbuckets, self.http.upgrade()) {
            (Some(count), _) => count,
            (None, Some(http)) => http.config.default_vbuckets,
            (None, None) => return Err(unavailable("the node is shutting down")),
        };
        let settings = BucketSettings {
            name: name.to_owned(),
            vbucket_count: vbuckets,
            replicas: replicas_for(replicas, map.active_members().count()),
            durability_min,
            copies,
        };
        match self.node.create_bucket(&settings).await {
            Ok(Applied::Revision(revision)) => self.followed_to(revision).await,
            Ok(Applied::Rejected(reason)) => {
                if self.node.map().buckets.contains_key(name) {
                    Err(BucketRefusal::Exists)
                } else {
                    Err(unavailable(&reason))
                }
            }
            Err(error) => Err(unavailable(&error.to_string())),
        }
    }

    /// Drops `name` across the cluster; `Ok(false)` when the map does not hold it.
    pub async fn drop_bucket(&self, name: &str) -> Result<bool, BucketRefusal> {
        if !self.node.map().buckets.contains_key(name) {
            return Ok(false);
        }
        let command = Command::DropBucket {
            name: name.to_owned(),
        };
        match self.node.submit(command).await {
            Ok(Applied::Revision(revision)) => self.followed_to(revision).await.map(|()| true),
            // Dropped by someone else meanwhile: as if it had never been there.
            Ok(Applied::Rejected(_)) => Ok(false),
            Err(error) => Err(unavailable(&error.to_string())),
        }
    }

    pub fn node(&self) -> &Arc<ClusterNode> {
        &self.node
    }

    /// Waits until this node has followed the map to `revision`.
    pub async fn followed_to(&self, revision: u64) -> Result<(), BucketRefusal> {
        let mut followed = self.followed.clone();
        let wait = async { followed.wait_for(|seen| *seen >= revision).await.is_ok() };
        let patience = std::time::Duration::from_millis(settee_cluster::node::APPLY_WAIT_MS);
        match tokio::time::timeout(patience, wait).await {
            Ok(true) => Ok(()),
            _ => Err(unavailable(
                "the change was committed but not followed here in time",
            )),
        }
    }
}

fn unavailable(reason: &str) -> BucketRefusal {
    BucketRefusal::Unavailable(reason.to_owned())
}

/// One map, followed: engine buckets opened for the map's new buckets and deleted for those
/// that left it since the last map (`known`: the map's bucket names this node has seen), vbucket
/// roles and replica streams set (`cluster_replicas.rs`), then the KV door's routing published.
async fn follow(
    map: &ClusterMap,
    this: u64,
    http: &Arc<HttpState>,
    kv: &Arc<KvState>,
    replicas: &ClusterReplicas,
    known: &mut BTreeSet<String>,
) {
    let engine = &http.engine;
    // Streams of buckets that left the map stop before their buckets are deleted: a running
    // replicator would open its bucket again.
    if known.iter().any(|name| !map.buckets.contains_key(name)) {
        replicas.follow(map).await;
    }
    for gone in known.iter().filter(|name| !map.buckets.contains_key(*name)) {
        match engine.delete_bucket(gone).await {
            Ok(_) => tracing::info!(bucket = %gone, "bucket dropped from the cluster map"),
            Err(error) => tracing::warn!(bucket = %gone, %error, "dropping a bucket failed"),
        }
    }
    for (name, bucket) in &map.buckets {
        match engine.bucket(name) {
            Some(local) if local.vbuckets() != bucket.vbucket_count && !known.contains(name) => {
                tracing::warn!(
                    bucket = %name,
                    local = local.vbuckets(),
                    cluster = bucket.vbucket_count,
                    "a local bucket has the cluster bucket's name but another vbucket count: \
                     it stays local and is not routed by the cluster map"
                );
            }
            Some(_) => {}
            None => match settee_http::db_api::create_db(http, name, bucket.vbucket_count, false)
                .await
            {
                Ok(()) => tracing::info!(bucket = %name, "bucket opened from the cluster map"),
                Err(error) => tracing::warn!(bucket = %name, ?error, "opening a bucket failed"),
            },
        }
    }
    *known = map.buckets.keys().cloned().collect();
    // Vbucket roles and replica streams follow the map before the KV door routes by it; the
    // manifests follow once the roles say which vbuckets take their events.
    replicas.follow(map).await;
    crate::cluster_manifests::follow(map, this, engine).await;
    let routes = |bucket: &settee_cluster::map::Bucket| {
        engine
            .bucket(&bucket.name)
            .is_some_and(|local| local.vbuckets() == bucket.vbucket_count)
    };
    kv.routing
        .publish(crate::cluster_topology::topology_of(map, this, routes));
}

/// The HTTP door's database changes, through the cluster.
pub struct HttpBuckets(pub Arc<ClusterBuckets>);

fn http_refusal(refusal: BucketRefusal) -> ClusterRefusal {
    match refusal {
        BucketRefusal::Exists => ClusterRefusal::Exists,
        BucketRefusal::Invalid(_, reason) | BucketRefusal::Unavailable(reason) => {
            ClusterRefusal::Unavailable(reason)
        }
    }
}

impl HttpBuckets {
    pub fn create_db(
        &self,
        db: &str,
        vbuckets: u16,
        replicas: Option<u8>,
    ) -> settee_http::ClusterChange<'_> {
        let db = db.to_owned();
        // An accounts database (`_users`, or this node's authentication_db) is on every member.
        let copies = if settee_auth::is_users_db(&db) {
            Copies::EveryMember
        } else {
            Copies::Replicas
        };
        Box::pin(async move {
            self.0
                .create(&db, Some(vbuckets), replicas, Durability::None, copies)
                .await
                .map_err(http_refusal)
        })
    }

    pub fn delete_db(&self, db: &str) -> settee_http::ClusterDelete<'_> {
        let db = db.to_owned();
        Box::pin(async move { self.0.drop_bucket(&db).await.map_err(http_refusal) })
    }
}

/// The management door's `POST /pools/default/buckets`, through the cluster.
pub struct KvBuckets(pub Arc<ClusterBuckets>);

impl BucketAdmin for KvBuckets {
    fn create_bucket(&self, bucket: NewBucket) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move {
            if bucket.name.starts_with('_') {
                return Err(BucketRefusal::Invalid(
                    "name",
                    "Bucket name cannot start with _".into(),
                ));
            }
            settee_http::db_api::validate_db_name(&bucket.name)
                .map_err(|error| BucketRefusal::Invalid("name", format!("{error:?}")))?;
            self.0
                .create(
                    &bucket.name,
                    bucket.vbuckets,
                    bucket.replicas,
                    crate::cluster_replicas::durability_of(bucket.durability_min),
                    Copies::Replicas,
                )
                .await
        })
    }

    fn fail_over(&self, otp_node: String) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move {
            let id = self.member_named(&otp_node)?;
            self.committed(self.0.node.fail_over(id).await).await
        })
    }

    fn re_add_node(&self, otp_node: String) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move {
            let node = self.member_named(&otp_node)?;
            self.committed(self.0.node.submit(Command::AddBack { node }).await)
                .await
        })
    }

    fn rebalance(
        &self,
        known: Vec<String>,
        ejected: Vec<String>,
    ) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move {
            let revision = crate::cluster_rebalance::start(&self.0.node, &known, &ejected).await?;
            self.0.followed_to(revision).await
        })
    }

    fn stop_rebalance(&self) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move { crate::cluster_rebalance::stop(&self.0.node).await })
    }

    fn rebalance_progress(&self) -> Option<serde_json::Value> {
        Some(crate::cluster_rebalance::progress(&self.0.node.map()))
    }

    fn auto_failover(&self) -> Option<AutoFailoverSettings> {
        let map = self.0.node.map();
        Some(AutoFailoverSettings {
            enabled: map.auto_failover.enabled,
            timeout_secs: map.auto_failover.timeout_ms / 1000,
            failed_over: map
                .members
                .values()
                .filter(|member| member.state == MemberState::Failed)
                .count(),
        })
    }

    fn set_auto_failover(
        &self,
        settings: AutoFailoverSettings,
    ) -> settee_kv::mgmt::buckets::CreateFuture<'_> {
        Box::pin(async move {
            let command = Command::SetAutoFailover(AutoFailover {
                enabled: settings.enabled,
                timeout_ms: settings.timeout_secs.saturating_mul(1000),
            });
            self.committed(self.0.node.submit(command).await).await
        })
    }
}

impl KvBuckets {
    /// The id of the member `otp_node` names (its id or its `/_membership` name).
    fn member_named(&self, otp_node: &str) -> Result<NodeId, BucketRefusal> {
        crate::cluster_rebalance::member_named(&self.0.node.map(), otp_node)
            .ok_or_else(|| BucketRefusal::Invalid("otpNode", "Unknown server given.".into()))
    }

    /// Once a change was committed, when this node follows it; a rejected change (a node not
    /// failed over, a plan overtaken) is a 400 naming why.
    async fn committed(
        &self,
        applied: Result<Applied, settee_cluster::node::ClusterError>,
    ) -> Result<(), BucketRefusal> {
        match applied {
            Ok(Applied::Revision(revision)) => self.0.followed_to(revision).await,
            Ok(Applied::Rejected(reason)) => Err(BucketRefusal::Invalid("otpNode", reason)),
            Err(error) => Err(unavailable(&error.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::replicas_for;

    #[test]
    fn one_replica_once_there_are_two_nodes_and_never_more_than_fit() {
        assert_eq!(replicas_for(None, 1), 0);
        assert_eq!(replicas_for(None, 2), 1);
        assert_eq!(replicas_for(None, 5), 1);
        assert_eq!(replicas_for(Some(3), 3), 2);
        assert_eq!(replicas_for(Some(3), 10), 3);
        assert_eq!(replicas_for(Some(0), 3), 0);
    }
}
