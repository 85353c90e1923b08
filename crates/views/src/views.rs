//! The node's view registry: index groups by (bucket, signature), design documents parsed once
//! per revision, group ids allocated in `meta`, `_view_cleanup`, and `/_active_tasks`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use settee_engine::{Bucket, Engine};
use settee_js::{JsConfig, JsPool, Program};
use settee_storage::{Batch, Cf, Store};

use crate::design::Design;
use crate::error::ViewError;
use crate::group::{GroupParts, IndexGroup};
use crate::keys;
use crate::mapper::{JsMapper, Mapper};

/// Settings of the indexer.
#[derive(Clone, Debug)]
pub struct ViewsConfig {
    pub js: JsConfig,
    /// Threads one group's batch is mapped on (default: the number of cores).
    pub map_threads: usize,
}

impl Default for ViewsConfig {
    fn default() -> Self {
        let js = JsConfig::default();
        ViewsConfig {
            map_threads: js.threads,
            js,
        }
    }
}

/// What a caller registers to get an index group (see the crate documentation).
pub struct GroupSpec {
    /// Identifies what the group's rows depend on; equal signatures share one index.
    pub signature: [u8; 16],
    /// The design document the group belongs to (`_design/...`), for tasks and logs.
    pub name: String,
    /// The views, in the order the mapper emits them.
    pub view_names: Vec<String>,
    /// Whether design documents are mapped too.
    pub include_design: bool,
    pub mapper: Arc<dyn Mapper>,
}

/// A design document's JavaScript views, ready to query.
pub struct DesignViews {
    pub design: Arc<Design>,
    pub program: Arc<Program>,
    pub group: Arc<IndexGroup>,
}

type GroupKey = (u32, [u8; 16]);
/// A parsed design document and its compiled-on-demand program.
pub type ParsedDesign = (Arc<Design>, Arc<Program>);

pub struct Views {
    engine: Arc<Engine>,
    js: Arc<JsPool>,
    config: ViewsConfig,
    /// Open groups; read on every query, written when a group opens or is cleaned up.
    groups: Mutex<HashMap<GroupKey, Arc<IndexGroup>>>,
    /// Parsed design documents by (bucket id, ddoc id), with the CAS they were parsed at.
    designs: Mutex<HashMap<(u32, String), (u64, ParsedDesign)>>,
    /// Serialises group id allocation (a read-modify-write of the `meta` counter).
    allocate: tokio::sync::Mutex<()>,
}

impl Views {
    pub fn new(engine: Arc<Engine>, config: ViewsConfig) -> Result<Arc<Views>, ViewError> {
        let js = Arc::new(JsPool::new(config.js.clone())?);
        Ok(Arc::new(Views {
            engine,
            js,
            config,
            groups: Mutex::new(HashMap::new()),
            designs: Mutex::new(HashMap::new()),
            allocate: tokio::sync::Mutex::new(()),
        }))
    }

    pub fn js(&self) -> &Arc<JsPool> {
        &self.js
    }

    fn store(&self) -> &Arc<Store> {
        self.engine.store()
    }

    /// Checks a design document before it is stored: CouchDB's structural rules, then every
    /// map and JavaScript reduce function must compile.
    pub async fn check_design(&self, id: &str, body: &Value) -> Result<(), ViewError> {
        let Some(design) = Design::parse(id, body)? else {
            return Ok(());
        };
        let program = Arc::new(Program::new(&design.program_spec()));
        self.js.check(program).result().await?;
        Ok(())
    }

    /// The design document `ddoc_id` of `bucket` parsed, `None` when it is missing, deleted or
    /// has no JavaScript views.
    pub fn design(
        &self,
        bucket: &Bucket,
        ddoc_id: &str,
    ) -> Result<Option<ParsedDesign>, ViewError> {
        let Some((header, body)) = bucket.read_winner(ddoc_id.as_bytes())? else {
            return Ok(None);
        };
        if header.deleted || !header.json {
            return Ok(None);
        }
        let cache_key = (bucket.id(), ddoc_id.to_string());
        if let Some((cas, parsed)) = self.designs.lock().get(&cache_key) {
            if *cas == header.cas {
                return Ok(Some(parsed.clone()));
            }
        }
        let body: Value = serde_json::from_slice(&body)
            .map_err(|error| ViewError::InvalidDesign(error.to_string()))?;
        let Some(design) = Design::parse(ddoc_id, &body)? else {
            return Ok(None);
        };
        let design = Arc::new(design);
        let program = Arc::new(Program::new(&design.program_spec()));
        self.designs
            .lock()
            .insert(cache_key, (header.cas, (design.clone(), program.clone())));
        Ok(Some((design, program)))
    }

    /// The design document's views and their index group (opened, not yet built).
    pub async fn design_views(
        &self,
        bucket: &Arc<Bucket>,
        ddoc_id: &str,
    ) -> Result<Option<DesignViews>, ViewError> {
        let Some((design, program)) = self.design(bucket, ddoc_id)? else {
            return Ok(None);
        };
        let mapper = Arc::new(JsMapper::new(
            self.js.clone(),
            program.clone(),
            ddoc_id.to_string(),
        ));
        let group = self
            .open_group(
                bucket,
                GroupSpec {
                    signature: design.signature,
                    name: ddoc_id.to_string(),
                    view_names: design.view_names(),
                    include_design: design.include_design,
                    mapper,
                },
            )
            .await?;
        Ok(Some(DesignViews {
            design,
            program,
            group,
        }))
    }

    /// The index group for `spec` in `bucket`: the open one with that signature, or the one
    /// stored on disk, or a new empty one. Building starts with the first
    /// [`IndexGroup::wait_for`] or [`IndexGroup::ensure_builder`].
    pub async fn open_group(
        &self,
        bucket: &Arc<Bucket>,
        spec: GroupSpec,
    ) -> Result<Arc<IndexGroup>, ViewError> {
        let key = (bucket.id(), spec.signature);
        if let Some(group) = self.groups.lock().get(&key) {
            return Ok(group.clone());
        }
        let _allocating = self.allocate.lock().await;
        if let Some(group) = self.groups.lock().get(&key) {
            return Ok(group.clone());
        }
        let store = self.store();
        let signature_key = keys::meta_signature(bucket.id(), &spec.signature);
        let id = match store.get(Cf::Meta, &signature_key)? {
            Some(raw) => u32::from_be_bytes(
                raw.as_slice()
                    .try_into()
                    .map_err(|_| ViewError::Storage("view group id".into()))?,
            ),
            None => {
                let next = match store.get(Cf::Meta, keys::META_NEXT_GROUP_ID)? {
                    Some(raw) => u32::from_be_bytes(
                        raw.as_slice()
                            .try_into()
                            .map_err(|_| ViewError::Storage("next view group id".into()))?,
                    ),
                    None => 1,
                };
                let mut batch = Batch::new();
                batch.put(
                    Cf::Meta,
                    keys::META_NEXT_GROUP_ID,
                    (next + 1).to_be_bytes().to_vec(),
                );
                batch.put(Cf::Meta, signature_key, next.to_be_bytes().to_vec());
                batch.put(
                    Cf::Meta,
                    keys::meta_group(bucket.id(), next),
                    json!({"signature": hex(&spec.signature), "name": spec.name, "views": spec.view_names})
                        .to_string()
                        .into_bytes(),
                );
                store.commit(batch).await?;
                next
            }
        };
        let group = Arc::new(IndexGroup::load(GroupParts {
            bucket: bucket.clone(),
            store: store.clone(),
            id,
            signature: spec.signature,
            name: spec.name,
            view_names: spec.view_names,
            include_design: spec.include_design,
            mapper: spec.mapper,
            threads: self.config.map_threads,
        })?);
        let mut groups = self.groups.lock();
        // A bucket of the same name re-created: its old groups stop.
        groups.retain(|(bucket_id, _), old| {
            let same_name_other_id =
                old.bucket.name() == bucket.name() && *bucket_id != bucket.id();
            if same_name_other_id {
                old.stop();
            }
            !same_name_other_id
        });
        groups.insert(key, group.clone());
        Ok(group)
    }

    /// Deletes the index data of every group of `bucket` whose signature is not in `keep`
    /// (CouchDB's `_view_cleanup`). Returns how many groups were removed.
    pub async fn cleanup(
        &self,
        bucket: &Bucket,
        keep: &HashSet<[u8; 16]>,
    ) -> Result<usize, ViewError> {
        let _allocating = self.allocate.lock().await;
        let store = self.store();
        let prefix = keys::meta_signature_prefix(bucket.id());
        let mut doomed = Vec::new();
        for item in store.scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix), false) {
            let (key, value) = item?;
            let Ok(signature) = <[u8; 16]>::try_from(&key[prefix.len()..]) else {
                continue;
            };
            let Ok(id) = <[u8; 4]>::try_from(value.as_ref()) else {
                continue;
            };
            if !keep.contains(&signature) {
                doomed.push((signature, u32::from_be_bytes(id)));
            }
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut batch = Batch::new();
        for (signature, id) in &doomed {
            if let Some(group) = self.groups.lock().remove(&(bucket.id(), *signature)) {
                group.stop();
            }
            let range = keys::group_prefix(bucket.id(), *id);
            batch.delete_range(Cf::View, range.clone(), keys::prefix_end(&range));
            batch.delete(Cf::Meta, keys::meta_signature(bucket.id(), signature));
            batch.delete(Cf::Meta, keys::meta_group(bucket.id(), *id));
        }
        store.commit(batch).await?;
        Ok(doomed.len())
    }

    /// `/_active_tasks` entries for groups being built, as CouchDB shows indexers.
    pub fn active_tasks(&self) -> Vec<Value> {
        let groups: Vec<Arc<IndexGroup>> = self.groups.lock().values().cloned().collect();
        groups
            .iter()
            .filter_map(|group| {
                let task = group.task();
                task.running.then(|| {
                    let progress = (task.changes_done * 100)
                        .checked_div(task.total_changes)
                        .unwrap_or(0)
                        .min(100);
                    json!({
                        "type": "indexer",
                        "node": "settee@127.0.0.1",
                        "pid": format!("<0.{}.0>", group.id),
                        "database": group.bucket.name(),
                        "design_document": group.name,
                        "changes_done": task.changes_done,
                        "total_changes": task.total_changes,
                        "progress": progress,
                        "started_on": task.started_on,
                        "updated_on": task.updated_on,
                    })
                })
            })
            .collect()
    }
}

pub fn hex(bytes: &[u8]) -> String {
    settee_engine::hex(bytes)
}
