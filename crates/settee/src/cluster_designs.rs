//! `validate_doc_update` across the cluster (docs/format/cluster-map.md, `DesignsChanged`):
//! a design document lives in one vbucket, so a node's own vbuckets do not hold every
//! validation function of a bucket. Each node gathers the design documents of every map
//! bucket from the active vbuckets of every node (a scattered `_all_docs` of `_design/` per
//! collection) and hands them to its engine bucket (`Bucket::set_shared_designs`), where the
//! validator reads them with its own. It gathers again whenever the bucket's `design_rev`
//! moves in the map; a node that wrote a design document commits `DesignsChanged` and answers
//! the write once it has gathered at that revision itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::Value;
use settee_cluster::command::{Applied, Command};
use settee_cluster::map::ClusterMap;
use settee_cluster::node::ClusterNode;
use settee_engine::{DesignsListener, DesignsWritten, Engine, SharedDesign};
use settee_http::forward::{AuthMethod, ForwardHttp, Identity};
use tokio::sync::watch;

use crate::cluster_forward::Forwarder;

/// How long a design document write waits for this node's gather at its revision.
const WRITTEN_WAIT: Duration = Duration::from_secs(5);
/// How soon a gather that failed (a node unreachable) is tried again.
const RETRY: Duration = Duration::from_millis(500);

pub struct ClusterDesigns {
    node: Arc<ClusterNode>,
    forwarder: Forwarder,
    engine: Arc<Engine>,
    /// Per bucket, the `design_rev` this node last gathered at.
    gathered: watch::Sender<BTreeMap<String, u64>>,
    /// Per bucket, the `design_rev` of the last gather that ended, whether it succeeded or
    /// not: what writes wait for.
    attempted: watch::Sender<BTreeMap<String, u64>>,
    /// Buckets a design document write of this node is committing DesignsChanged for.
    writing: std::sync::RwLock<BTreeSet<String>>,
}

impl ClusterDesigns {
    pub fn new(node: Arc<ClusterNode>, forwarder: Forwarder, engine: Arc<Engine>) -> Arc<Self> {
        Arc::new(ClusterDesigns {
            node,
            forwarder,
            engine,
            gathered: watch::Sender::new(BTreeMap::new()),
            attempted: watch::Sender::new(BTreeMap::new()),
            writing: std::sync::RwLock::new(BTreeSet::new()),
        })
    }

    /// Gathers what the map asks for, at start and at every map change, until `shutdown`.
    pub fn keep(
        self: &Arc<Self>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            let mut maps = this.node.subscribe();
            loop {
                let map = maps.borrow_and_update().clone();
                let complete = this.gather_moved(&map).await;
                tokio::select! {
                    _ = &mut shutdown => return,
                    changed = maps.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(RETRY), if !complete => {}
                }
            }
        })
    }

    /// Gathers every bucket whose `design_rev` moved; false if a gather failed.
    async fn gather_moved(&self, map: &ClusterMap) -> bool {
        let moved: Vec<(&String, u64)> = map
            .buckets
            .iter()
            .filter(|(name, bucket)| {
                let seen = self.gathered.borrow().get(*name).copied();
                bucket.design_rev != 0 && seen != Some(bucket.design_rev)
            })
            .map(|(name, bucket)| (name, bucket.design_rev))
            .collect();
        let mut complete = true;
        for (name, design_rev) in moved {
            let Some(local) = self.engine.bucket(name) else {
                continue;
            };
            let gathered = self.gather(map, name).await;
            self.attempted.send_modify(|attempted| {
                attempted.insert(name.clone(), design_rev);
            });
            match gathered {
                Ok(designs) => {
                    tracing::debug!(bucket = %name, count = designs.len(), "design documents gathered");
                    local.set_shared_designs(designs);
                    self.gathered.send_modify(|gathered| {
                        gathered.insert(name.clone(), design_rev);
                    });
                }
                Err(reason) => {
                    tracing::warn!(bucket = %name, %reason, "gathering design documents failed");
                    complete = false;
                }
            }
        }
        complete
    }

    /// The bucket's design documents with a validation function, from every node's active
    /// vbuckets, in every collection of the map's manifest.
    async fn gather(&self, map: &ClusterMap, name: &str) -> Result<Vec<SharedDesign>, String> {
        let bucket = map.buckets.get(name).ok_or("the bucket left the map")?;
        let mut designs = Vec::new();
        for scope in bucket.manifest.scopes() {
            for collection in &scope.collections {
                let db = if collection.id == 0 {
                    name.to_owned()
                } else {
                    settee_manifest::door_name(name, &scope.name, &collection.name)
                };
                let request = design_listing(&db);
                let parts = move |groups: &[Vec<u16>]| vec![Some(request.clone()); groups.len()];
                let replies = self
                    .forwarder
                    .scatter(&db, None, &parts)
                    .await
                    .map_err(|refusal| format!("{db}: {refusal:?}"))?;
                for (_, reply) in replies {
                    if reply.status != 200 {
                        return Err(format!("{db}: a node answered {}", reply.status));
                    }
                    let listing: Value = serde_json::from_slice(&reply.body)
                        .map_err(|error| format!("{db}: {error}"))?;
                    designs.extend(validating(&listing, collection.id));
                }
            }
        }
        Ok(designs)
    }
}

/// `GET /db/_all_docs` of the `_design/` range with the documents, as the server admin.
fn design_listing(db: &str) -> ForwardHttp {
    let encoded: String = db
        .bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'$' | b'(' | b')' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect();
    ForwardHttp {
        revision: 0,
        epoch: 0,
        bucket: String::new(),
        vbucket: 0,
        method: "GET".into(),
        target: format!(
            "/{encoded}/_all_docs?include_docs=true&startkey=%22_design%2F%22&endkey=%22_design0%22"
        ),
        identity: Identity {
            name: None,
            roles: vec!["_admin".into()],
            auth: AuthMethod::None,
        },
        headers: vec![("accept".into(), b"application/json".to_vec())],
        body: Vec::new(),
    }
}

/// The rows of an `_all_docs` answer whose document has a `validate_doc_update` string.
fn validating(listing: &Value, collection: u32) -> Vec<SharedDesign> {
    let rows = listing["rows"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    rows.iter()
        .filter_map(|row| {
            let doc = &row["doc"];
            doc["validate_doc_update"].as_str()?;
            Some(SharedDesign {
                collection,
                id: doc["_id"].as_str()?.to_owned(),
                rev: doc["_rev"].as_str()?.to_owned(),
                json: serde_json::to_vec(doc).ok()?,
            })
        })
        .collect()
}

/// The engine's listener: a design document of a map bucket written here commits
/// `DesignsChanged` and waits (bounded) for this node to gather at the new `design_rev`.
pub struct DesignsThroughMap(pub Weak<ClusterDesigns>);

impl DesignsListener for DesignsThroughMap {
    fn designs_written(&self, bucket: &str) -> Option<DesignsWritten> {
        let designs = self.0.upgrade()?;
        if !designs.node.map().buckets.contains_key(bucket) {
            return None;
        }
        let name = bucket.to_owned();
        Some(Box::pin(async move {
            let command = Command::DesignsChanged { name: name.clone() };
            // Until the change is applied here (then the map says this node is behind), the
            // node's writes to the bucket wait for its next gather.
            designs.writing().insert(name.clone());
            let submitted = designs.node.submit(command).await;
            designs.writing().remove(&name);
            match submitted {
                Ok(Applied::Revision(_)) => {}
                other => {
                    tracing::warn!(bucket = %name, ?other, "a design document change was not committed");
                    return;
                }
            }
            let Some(wanted) = designs.node.map().buckets.get(&name).map(|b| b.design_rev) else {
                return;
            };
            designs.until_attempted(&name, wanted).await;
        }))
    }

    fn designs_current(&self, bucket: &str) -> Option<DesignsWritten> {
        let designs = self.0.upgrade()?;
        // The map this node applied may already name a newer design revision than it has
        // gathered (its gather task not run yet); or its own design write is being committed.
        let wanted = designs.node.map().buckets.get(bucket)?.design_rev;
        let attempted = designs.attempted.borrow().get(bucket).copied().unwrap_or(0);
        let writing = designs
            .writing
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(bucket);
        if wanted <= attempted && !writing {
            return None;
        }
        let name = bucket.to_owned();
        Some(Box::pin(async move {
            designs.until_attempted(&name, wanted).await;
        }))
    }
}

impl ClusterDesigns {
    fn writing(&self) -> std::sync::RwLockWriteGuard<'_, BTreeSet<String>> {
        self.writing
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits ([`WRITTEN_WAIT`] at most) until this node's gather of `name` at `wanted` or
    /// later ended.
    async fn until_attempted(&self, name: &str, wanted: u64) {
        let mut attempted = self.attempted.subscribe();
        let reached = attempted.wait_for(|seen| seen.get(name).copied().unwrap_or(0) >= wanted);
        if tokio::time::timeout(WRITTEN_WAIT, reached).await.is_err() {
            tracing::warn!(bucket = %name, "design documents not gathered in time");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_design_documents_with_a_validation_function_are_kept() {
        let listing = serde_json::json!({"rows": [
            {"id": "_design/a", "doc": {"_id": "_design/a", "_rev": "2-x", "validate_doc_update": "function(){}"}},
            {"id": "_design/b", "doc": {"_id": "_design/b", "_rev": "1-y", "views": {}}},
        ]});
        let kept = validating(&listing, 8);
        assert_eq!(kept.len(), 1);
        assert_eq!(
            (
                kept[0].id.as_str(),
                kept[0].rev.as_str(),
                kept[0].collection
            ),
            ("_design/a", "2-x", 8)
        );
        let request = design_listing("travel$inventory$a(b)c/d");
        assert!(
            request
                .target
                .starts_with("/travel$inventory$a(b)c%2Fd/_all_docs?"),
            "{}",
            request.target
        );
    }
}
