//! Collections through the cluster map (docs/format/cluster-map.md, `ChangeManifest` and "What
//! every node does with the committed map"). A scope or collection change to a map bucket, from
//! either door on any node, is planned here on the map's manifest (so a refusal is typed as a
//! single node's) and committed as `Command::ChangeManifest`; every node then makes its engine
//! bucket's manifest the map's (`follow`), writing the events into its active vbuckets only.
//! The door answers once this node has followed the change's revision.

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
        let current = buckets.node().map().buckets.get(&bucket)?.manifest.clone();
        Some(Box::pin(async move {
            // The planner's refusal, typed (the command would be rejected with its text).
            current.plan(&change, limits)?;
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
                // The map moved between the check and the commit (another node's change).
                Ok(Applied::Rejected(reason)) => Err(EngineError::Invalid(reason)),
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
