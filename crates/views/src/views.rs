//! The node's view registry: index groups by (bucket, signature), design documents parsed once
//! per revision, group ids allocated in `meta`, `_view_cleanup`, and `/_active_tasks`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use settee_engine::{CollectionPurgeHook, Engine, EngineError, Keyspace};
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
    /// A partitioned index (docs/format/partitions.md): each row's key starts with its
    /// document's partition, and documents without one are not mapped.
    pub partitioned: bool,
    /// Per view, whether its keys are in raw (Erlang term) order; missing entries are not.
    pub raw_collation: Vec<bool>,
    /// Map functions see `_local_seq` (a design document's `options.local_seq`).
    pub local_seq: bool,
    pub mapper: Arc<dyn Mapper>,
}

/// A design document's JavaScript views, ready to query.
pub struct DesignViews {
    pub design: Arc<Design>,
    pub program: Arc<Program>,
    pub group: Arc<IndexGroup>,
}

/// (bucket id, collection id, signature).
pub(crate) type GroupKey = (u32, u32, [u8; 16]);
/// (bucket id, collection id, design document id).
type DesignKey = (u32, u32, String);

/// Which version of a design document a cached parse is of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stamp {
    /// This node's copy, at its CAS.
    Stored(u64),
    /// A copy another node carried with a scattered query: a hash of its JSON.
    Carried(u64),
}
/// A parsed design document and its compiled-on-demand program.
pub type ParsedDesign = (Arc<Design>, Arc<Program>);

pub struct Views {
    engine: Arc<Engine>,
    js: Arc<JsPool>,
    config: ViewsConfig,
    /// Open groups; read on every query, written when a group opens or is cleaned up.
    pub(crate) groups: Mutex<HashMap<GroupKey, Arc<IndexGroup>>>,
    /// Parsed design documents by (bucket id, collection id, ddoc id), with the CAS they were
    /// parsed at.
    designs: Mutex<HashMap<DesignKey, (Stamp, ParsedDesign)>>,
    /// Serialises group id allocation (a read-modify-write of the `meta` counter) and group
    /// opening.
    pub(crate) allocate: tokio::sync::Mutex<()>,
}

impl Views {
    pub fn new(engine: Arc<Engine>, config: ViewsConfig) -> Result<Arc<Views>, ViewError> {
        let js = Arc::new(JsPool::new(config.js.clone())?);
        let views = Arc::new(Views {
            engine,
            js,
            config,
            groups: Mutex::new(HashMap::new()),
            designs: Mutex::new(HashMap::new()),
            allocate: tokio::sync::Mutex::new(()),
        });
        views
            .engine
            .add_collection_purge_hook(Arc::new(GroupPurger {
                views: Arc::downgrade(&views),
            }));
        views
            .engine
            .set_write_validator(Arc::new(crate::validate::DesignValidators::new(
                views.js.clone(),
            )));
        Ok(views)
    }

    pub fn js(&self) -> &Arc<JsPool> {
        &self.js
    }

    pub(crate) fn store(&self) -> &Arc<Store> {
        self.engine.store()
    }

    /// Checks a design document before it is stored: CouchDB's structural rules, then every
    /// map and JavaScript reduce function must compile.
    pub async fn check_design(&self, id: &str, body: &Value) -> Result<(), ViewError> {
        let parsed = Design::parse(id, body)?;
        if let Some(source) = body.get("validate_doc_update").and_then(Value::as_str) {
            let program = Arc::new(Program::new(&settee_js::ProgramSpec {
                validate: Some(source.to_string()),
                lib: body.clone(),
                ..settee_js::ProgramSpec::default()
            }));
            self.js.check(program).result().await?;
        }
        let Some(design) = parsed else {
            return Ok(());
        };
        let program = Arc::new(Program::new(&design.program_spec()));
        self.js.check(program).result().await?;
        Ok(())
    }

    /// The design document `ddoc_id` of `keyspace` parsed, `None` when it is missing, deleted
    /// or has no JavaScript views.
    pub fn design(
        &self,
        keyspace: &Keyspace,
        ddoc_id: &str,
    ) -> Result<Option<ParsedDesign>, ViewError> {
        let Some((header, body)) = keyspace.read_winner(ddoc_id.as_bytes())? else {
            return Ok(None);
        };
        if header.deleted || !header.json {
            return Ok(None);
        }
        self.parsed(keyspace, ddoc_id, Stamp::Stored(header.cas), &body)
    }

    /// A design document another node carried with a scattered view query (its JSON, `_id`
    /// and `_rev` included; docs/format/cluster-transport.md), parsed as [`Views::design`]
    /// parses this node's copy. `None` when it is not `ddoc_id` or has no JavaScript views.
    pub fn carried_design(
        &self,
        keyspace: &Keyspace,
        ddoc_id: &str,
        json: &[u8],
    ) -> Result<Option<ParsedDesign>, ViewError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        json.hash(&mut hasher);
        self.parsed(keyspace, ddoc_id, Stamp::Carried(hasher.finish()), json)
    }

    fn parsed(
        &self,
        keyspace: &Keyspace,
        ddoc_id: &str,
        stamp: Stamp,
        body: &[u8],
    ) -> Result<Option<ParsedDesign>, ViewError> {
        let cache_key = (
            keyspace.bucket().id(),
            keyspace.collection(),
            ddoc_id.to_string(),
        );
        if let Some((cached, parsed)) = self.designs.lock().get(&cache_key) {
            if *cached == stamp {
                return Ok(Some(parsed.clone()));
            }
        }
        let body: Value = serde_json::from_slice(body)
            .map_err(|error| ViewError::InvalidDesign(error.to_string()))?;
        let carried = matches!(stamp, Stamp::Carried(_));
        if carried && body.get("_id").and_then(Value::as_str) != Some(ddoc_id) {
            return Ok(None);
        }
        let Some(design) = Design::parse(ddoc_id, &body)? else {
            return Ok(None);
        };
        let design = Arc::new(design);
        let program = Arc::new(Program::new(&design.program_spec()));
        self.designs
            .lock()
            .insert(cache_key, (stamp, (design.clone(), program.clone())));
        Ok(Some((design, program)))
    }

    /// The design document's views and their index group (opened, not yet built): this node's
    /// copy, or the `carried` one of a scattered query.
    pub async fn design_views(
        &self,
        keyspace: &Keyspace,
        ddoc_id: &str,
        carried: Option<&[u8]>,
    ) -> Result<Option<DesignViews>, ViewError> {
        let parsed = match carried {
            Some(json) => self.carried_design(keyspace, ddoc_id, json)?,
            None => self.design(keyspace, ddoc_id)?,
        };
        let Some((design, program)) = parsed else {
            return Ok(None);
        };
        let mapper = Arc::new(JsMapper::new(
            self.js.clone(),
            program.clone(),
            ddoc_id.to_string(),
        ));
        let group = self
            .open_group(
                keyspace,
                GroupSpec {
                    signature: design.signature,
                    name: ddoc_id.to_string(),
                    view_names: design.view_names(),
                    include_design: design.include_design,
                    partitioned: design.partitioned_in(keyspace.bucket().is_partitioned()),
                    raw_collation: design.raw_collation(),
                    local_seq: design.local_seq,
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

    /// The index group for `spec` in `keyspace`: the open one with that signature, or the one
    /// stored on disk, or a new empty one. Building starts with the first
    /// [`IndexGroup::wait_for`] or [`IndexGroup::ensure_builder`].
    pub async fn open_group(
        &self,
        keyspace: &Keyspace,
        spec: GroupSpec,
    ) -> Result<Arc<IndexGroup>, ViewError> {
        let bucket = keyspace.bucket();
        let collection = keyspace.collection();
        let key = (bucket.id(), collection, spec.signature);
        if let Some(group) = self.groups.lock().get(&key) {
            return Ok(group.clone());
        }
        let _allocating = self.allocate.lock().await;
        if let Some(group) = self.groups.lock().get(&key) {
            return Ok(group.clone());
        }
        let store = self.store();
        let record =
            json!({"signature": hex(&spec.signature), "name": spec.name, "views": spec.view_names});
        let id = self
            .stored_or_new_id(bucket.id(), collection, &spec.signature, record)
            .await?;
        let group = Arc::new(IndexGroup::load(GroupParts {
            keyspace: keyspace.clone(),
            store: store.clone(),
            id,
            signature: spec.signature,
            name: spec.name,
            view_names: spec.view_names,
            include_design: spec.include_design,
            partitioned: spec.partitioned,
            raw_collation: spec.raw_collation,
            local_seq: spec.local_seq,
            mapper: spec.mapper,
            threads: self.config.map_threads,
        })?);
        let mut groups = self.groups.lock();
        // A bucket of the same name re-created: its old groups stop.
        groups.retain(|(bucket_id, _, _), old| {
            let same_name_other_id =
                old.bucket().name() == bucket.name() && *bucket_id != bucket.id();
            if same_name_other_id {
                old.stop();
            }
            !same_name_other_id
        });
        groups.insert(key, group.clone());
        Ok(group)
    }

    /// The id of the group with `signature` in `collection` as `meta` records it, or a new
    /// one, recorded with `record` (its meta JSON; the collection is added when not the
    /// default). The caller holds `allocate`.
    pub(crate) async fn stored_or_new_id(
        &self,
        bucket: u32,
        collection: u32,
        signature: &[u8; 16],
        mut record: Value,
    ) -> Result<u32, ViewError> {
        let store = self.store();
        let signature_key = keys::meta_signature(bucket, collection, signature);
        if let Some(raw) = store.get(Cf::Meta, &signature_key)? {
            return Ok(u32::from_be_bytes(
                raw.as_slice()
                    .try_into()
                    .map_err(|_| ViewError::Storage("view group id".into()))?,
            ));
        }
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
        if collection != 0 {
            record["collection"] = json!(collection);
        }
        batch.put(
            Cf::Meta,
            keys::meta_group(bucket, next),
            record.to_string().into_bytes(),
        );
        store.commit(batch).await?;
        Ok(next)
    }

    /// Deletes the index data of every group of `keyspace` whose signature is not in `keep`
    /// (CouchDB's `_view_cleanup`). Returns how many groups were removed.
    pub async fn cleanup(
        &self,
        keyspace: &Keyspace,
        keep: &HashSet<[u8; 16]>,
    ) -> Result<usize, ViewError> {
        let _allocating = self.allocate.lock().await;
        let store = self.store();
        let (bucket, collection) = (keyspace.bucket(), keyspace.collection());
        let doomed: Vec<([u8; 16], u32)> = self
            .collection_groups(bucket.id(), collection)?
            .into_iter()
            .filter(|(signature, _)| !keep.contains(signature))
            .collect();
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut batch = Batch::new();
        for (signature, id) in &doomed {
            self.remove_group(&mut batch, (bucket.id(), collection, *signature), *id);
        }
        store.commit(batch).await?;
        Ok(doomed.len())
    }

    /// Stops the open group `key` and adds the deletion of its rows, back index, state and
    /// `meta` records to `batch`.
    fn remove_group(&self, batch: &mut Batch, key: GroupKey, id: u32) {
        let (bucket, collection, signature) = key;
        if let Some(group) = self.groups.lock().remove(&key) {
            group.stop();
        }
        let range = keys::group_prefix(bucket, id);
        batch.delete_range(Cf::View, range.clone(), keys::prefix_end(&range));
        batch.delete(
            Cf::Meta,
            keys::meta_signature(bucket, collection, &signature),
        );
        batch.delete(Cf::Meta, keys::meta_group(bucket, id));
    }

    /// Every group of one collection: (signature, group id), from its `meta` signature keys.
    fn collection_groups(
        &self,
        bucket: u32,
        collection: u32,
    ) -> Result<Vec<([u8; 16], u32)>, ViewError> {
        let prefix = keys::meta_signature_prefix(bucket, collection);
        let mut found = Vec::new();
        for item in self
            .store()
            .scan(Cf::Meta, &prefix, &keys::prefix_end(&prefix), false)
        {
            let (key, value) = item?;
            let (Ok(signature), Ok(id)) = (
                <[u8; 16]>::try_from(&key[prefix.len()..]),
                <[u8; 4]>::try_from(value.as_ref()),
            ) else {
                continue;
            };
            found.push((signature, u32::from_be_bytes(id)));
        }
        Ok(found)
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
                        "database": group.keyspace().name(),
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

/// Deletes a dropped collection's index groups with the end of its purge.
struct GroupPurger {
    views: std::sync::Weak<Views>,
}

impl CollectionPurgeHook for GroupPurger {
    fn purge_collection(
        &self,
        bucket: u32,
        collection: u32,
        batch: &mut Batch,
    ) -> Result<(), EngineError> {
        let Some(views) = self.views.upgrade() else {
            return Ok(());
        };
        let groups = views
            .collection_groups(bucket, collection)
            .map_err(|error| {
                EngineError::Invalid(format!("index groups of a dropped collection: {error}"))
            })?;
        for (signature, id) in groups {
            views.remove_group(batch, (bucket, collection, signature), id);
        }
        views
            .designs
            .lock()
            .retain(|(held_bucket, held, _), _| (*held_bucket, *held) != (bucket, collection));
        Ok(())
    }
}

pub fn hex(bytes: &[u8]) -> String {
    settee_engine::hex(bytes)
}
