//! Collections through the cluster map (docs/format/cluster-map.md, `ChangeManifest` and "What
//! every node does with the committed map"). A scope or collection change to a map bucket, from
//! either door on any node, is committed as `Command::ChangeManifest` and planned where it is
//! applied, on the committed manifest (as Couchbase runs every change on its orchestrator): a
//! node whose map is a change behind neither refuses what the cluster would accept nor accepts
//! what it refuses; a refusal comes back as the planner's text and is typed again
//! (`ManifestError::from_reason`), so it answers as a single node's. Every node then makes its
//! engine bucket's manifest the map's (`follow`), writing the events into its active vbuckets
//! only. The door answers once this node has followed the change's revision.

use std::sync::{Arc, Weak};

use settee_cluster::command::{Applied, Command};
use settee_cluster::map::ClusterMap;
use settee_engine::{Engine, EngineError, ManifestChange, ManifestRouter, RoutedChange};
use settee_kv::BucketRefusal;

use crate::cluster_buckets::ClusterBuckets;

/// The engine's router for the map's buckets; weak, as the engine outlives the cluster glue.
pub struct ManifestsThroughMap(pub Weak<ClusterBuckets>);

impl ManifestRouter for ManifestsThroughMap {
    fn route(
        &self,
        bucket: String,
        change: ManifestChange,
        limits: settee_manifest::ManifestLimits,
    ) -> Option<RoutedChange> {
        let buckets = self.0.upgrade()?;
        buckets.node().map().buckets.get(&bucket)?;
        Some(Box::pin(async move {
            let command = Command::ChangeManifest {
                name: bucket,
                change,
                limits,
            };
            match buckets.node().submit(command).await {
                Ok(Applied::Revision(revision)) => {
                    buckets
                        .followed_to(revision)
                        .await
                        .map_err(|refusal| match refusal {
                            BucketRefusal::Unavailable(reason) => EngineError::Unavailable(reason),
                            other => EngineError::Unavailable(format!("{other:?}")),
                        })
                }
                Ok(Applied::Rejected(reason)) => {
                    Err(settee_manifest::ManifestError::from_reason(&reason).into())
                }
                Err(error) => Err(EngineError::Unavailable(error.to_string())),
            }
        }))
    }
}

/// Makes every map bucket this node routes have the map's manifest, the events going into the
/// vbuckets active here. A bucket already at the map's uid is left alone.
pub async fn follow(map: &ClusterMap, this: u64, engine: &Engine) {
    for (name, bucket) in &map.buckets {
        let Some(local) = engine.bucket(name) else {
            continue;
        };
        if local.vbuckets() != bucket.vbucket_count
            || local.manifest().uid() >= bucket.manifest.uid()
        {
            continue;
        }
        let actives: Vec<bool> = bucket
            .vbuckets
            .iter()
            .map(|entry| entry.active == Some(this))
            .collect();
        match local.adopt_manifest(&bucket.manifest, &actives).await {
            Ok(manifest) => {
                tracing::info!(bucket = %name, uid = manifest.uid(), "collections manifest followed")
            }
            Err(error) => {
                tracing::warn!(bucket = %name, %error, "following the collections manifest failed")
            }
        }
    }
}

/// Registers the router with the engine.
pub fn route_through(engine: &Engine, buckets: &Arc<ClusterBuckets>) {
    engine.set_manifest_router(Arc::new(ManifestsThroughMap(Arc::downgrade(buckets))));
}
