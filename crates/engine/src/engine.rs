//! The node's document engine: opens the store, keeps the registry of buckets, creates and
//! drops them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use settee_storage::{Batch, Cf, Store, StoreOptions};

use crate::access_epoch::AccessEpoch;
use crate::bucket::{Bucket, BucketAccess, BucketConfig, NodeParts};
use crate::clock::{Clock, Hlc, SystemClock};
use crate::collections::{Manifest, ManifestChange, ManifestLimits, FORMAT_VERSION};
use crate::error::EngineError;
use crate::keys;
use crate::limits::DocLimits;
use crate::skips::{SkipCounters, SkipStats};
use crate::vbucket::VBUCKETS_MAX;

/// CouchDB's default `_revs_limit`.
pub const REVS_LIMIT_DEFAULT: u32 = 1000;

/// The bucket whose documents are the node's accounts (CouchDB's users database): a write to it
/// moves the [`AccessEpoch`].
pub const USERS_BUCKET: &str = "_users";

#[derive(Clone)]
pub struct EngineOptions {
    pub store: StoreOptions,
    pub clock: Arc<dyn Clock>,
    /// Buckets whose committed writes move the [`AccessEpoch`] (their documents decide who
    /// may do what).
    pub access_buckets: Vec<String>,
    /// The document limits of every bucket, for writes through either door.
    pub limits: DocLimits,
    /// Most scopes a bucket may hold, `_default` included.
    pub scopes_per_bucket_max: usize,
    /// Most collections a bucket may hold, `_default._default` included.
    pub collections_per_bucket_max: usize,
}

/// Couchbase's default limit on collections (per cluster there; per bucket here), and the
/// same for scopes.
pub const COLLECTIONS_PER_BUCKET_MAX: usize = 1000;
pub const SCOPES_PER_BUCKET_MAX: usize = 1000;

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            store: StoreOptions::default(),
            clock: Arc::new(SystemClock),
            access_buckets: vec![USERS_BUCKET.to_string()],
            limits: DocLimits::default(),
            scopes_per_bucket_max: SCOPES_PER_BUCKET_MAX,
            collections_per_bucket_max: COLLECTIONS_PER_BUCKET_MAX,
        }
    }
}

impl EngineOptions {
    fn manifest_limits(&self) -> ManifestLimits {
        ManifestLimits {
            scopes_max: self.scopes_per_bucket_max,
            collections_max: self.collections_per_bucket_max,
        }
    }
}

/// Refuses a data directory written by a newer binary (`node/format_version` above
/// [`FORMAT_VERSION`]; absent = 1).
fn check_format_version(store: &Store) -> Result<(), EngineError> {
    let Some(raw) = store.get(Cf::Meta, keys::meta::FORMAT_VERSION)? else {
        return Ok(());
    };
    let version = raw
        .as_slice()
        .try_into()
        .map(u32::from_be_bytes)
        .map_err(|_| EngineError::Corrupt("format version".into()))?;
    if version > FORMAT_VERSION {
        return Err(EngineError::Invalid(format!(
            "the data directory has format version {version}; this binary reads up to \
             {FORMAT_VERSION}"
        )));
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    Exists,
}

pub struct Engine {
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    hlc: Arc<Hlc>,
    /// Read on every request, written on create/delete: a RwLock over the name map.
    buckets: RwLock<BTreeMap<String, Arc<Bucket>>>,
    /// Serialises create/delete so bucket ids and names are assigned one at a time.
    admin: tokio::sync::Mutex<()>,
    /// Moves when access decisions may have changed (`access_epoch.rs`); shared with every
    /// bucket.
    access_epoch: Arc<AccessEpoch>,
    /// The node's serving lease, shared with every bucket (`lease.rs`).
    lease: Arc<crate::lease::Lease>,
    /// Read when a bucket is created or dropped, written when the node's accounts database
    /// changes (`set_access_buckets`).
    access_buckets: RwLock<Vec<String>>,
    limits: DocLimits,
    manifest_limits: ManifestLimits,
    /// Woken by a dropped collection: the background purger (`run_expiry_purger`) starts on
    /// it without waiting for its next tick.
    purge_wake: Arc<tokio::sync::Notify>,
    purge_hooks: Arc<crate::collections::PurgeHooks>,
    /// The write validator every bucket asks (`validate.rs`).
    validator: Arc<crate::validate::ValidatorSlot>,
    /// Records skipped by readers of every bucket, dropped ones included.
    skip_total: Arc<SkipCounters>,
    /// The listener of design document writes (`designs.rs`, `set_designs_listener`).
    designs: Arc<crate::designs::DesignsSlot>,
    /// Where the manifest changes of a cluster's buckets are decided (`set_manifest_router`).
    manifest_router: std::sync::OnceLock<Arc<dyn crate::collections::ManifestRouter>>,
}

impl Engine {
    pub fn open(path: &Path, options: EngineOptions) -> Result<Engine, EngineError> {
        let store = Arc::new(Store::open(path, &options.store)?);
        check_format_version(&store)?;
        let hlc = Arc::new(Hlc::default());
        let skip_total = Arc::new(SkipCounters::default());
        let mut buckets = BTreeMap::new();
        let prefix = keys::meta::BUCKET_NAME_PREFIX;
        let upper = keys::prefix_end(prefix);
        let access_epoch = Arc::new(AccessEpoch::default());
        let lease = Arc::new(crate::lease::Lease::default());
        let purge_wake = Arc::new(tokio::sync::Notify::new());
        let purge_hooks: Arc<crate::collections::PurgeHooks> = Arc::default();
        let validator: Arc<crate::validate::ValidatorSlot> = Arc::default();
        let designs: Arc<crate::designs::DesignsSlot> = Arc::default();
        let mut found = Vec::new();
        for item in store.scan(Cf::Meta, prefix, &upper, false) {
            let (key, value) = item?;
            let name = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            let id = u32::from_be_bytes(
                value
                    .as_ref()
                    .try_into()
                    .map_err(|_| EngineError::Corrupt("bucket id".into()))?,
            );
            found.push((name, id));
        }
        for (name, id) in found {
            let raw = store
                .get(Cf::Meta, &keys::meta::bucket_conf(id))?
                .ok_or_else(|| EngineError::Corrupt(format!("bucket {name} has no config")))?;
            let config: BucketConfig = serde_json::from_slice(&raw)
                .map_err(|error| EngineError::Corrupt(format!("bucket config: {error}")))?;
            let access = BucketAccess {
                epoch: access_epoch.clone(),
                writes_move_epoch: options.access_buckets.contains(&name).into(),
            };
            let node = NodeParts {
                store: store.clone(),
                clock: options.clock.clone(),
                hlc: hlc.clone(),
                limits: options.limits,
                skip_total: skip_total.clone(),
                manifest_limits: options.manifest_limits(),
                purge_wake: purge_wake.clone(),
                purge_hooks: purge_hooks.clone(),
                validator: validator.clone(),
                lease: lease.clone(),
                designs: designs.clone(),
            };
            let bucket = Bucket::load(node, id, config, access)?;
            buckets.insert(name, Arc::new(bucket));
        }
        let manifest_limits = options.manifest_limits();
        Ok(Engine {
            store,
            clock: options.clock,
            hlc,
            buckets: RwLock::new(buckets),
            admin: tokio::sync::Mutex::new(()),
            manifest_router: std::sync::OnceLock::new(),
            designs,
            access_epoch,
            lease,
            manifest_limits,
            purge_wake,
            purge_hooks,
            validator,
            access_buckets: RwLock::new(options.access_buckets),
            limits: options.limits,
            skip_total,
        })
    }

    /// The document limits every bucket enforces (`limits.rs`).
    pub fn doc_limits(&self) -> DocLimits {
        self.limits
    }

    /// Records readers skipped since the node started (`skips.rs`): the total, and per bucket
    /// in name order.
    pub fn skip_stats(&self) -> (SkipStats, Vec<(String, SkipStats)>) {
        let per_bucket = self
            .buckets
            .read()
            .iter()
            .map(|(name, bucket)| (name.clone(), bucket.skip_stats()))
            .collect();
        (self.skip_total.stats(), per_bucket)
    }

    /// The node's serving lease: a cluster node enforces it (`lease.rs`).
    pub fn lease(&self) -> &Arc<crate::lease::Lease> {
        &self.lease
    }

    /// Moves whenever access decisions may have changed (see `access_epoch.rs`).
    pub fn access_epoch(&self) -> &AccessEpoch {
        &self.access_epoch
    }

    /// After bucket `name` was created or dropped.
    fn advance_epoch_for(&self, name: &str) {
        if self
            .access_buckets
            .read()
            .iter()
            .any(|bucket| bucket == name)
        {
            self.access_epoch.advance_accounts();
        } else {
            self.access_epoch.advance();
        }
    }

    /// Names the buckets whose writes move the accounts epoch from now on (the node's
    /// accounts database changed: CouchDB's `[chttpd_auth] authentication_db`).
    pub fn set_access_buckets(&self, names: Vec<String>) {
        let buckets = self.buckets.read();
        let mut access = self.access_buckets.write();
        for (name, bucket) in buckets.iter() {
            bucket.set_writes_move_epoch(names.contains(name));
        }
        *access = names;
        self.access_epoch.advance_accounts();
    }

    pub fn bucket(&self, name: &str) -> Option<Arc<Bucket>> {
        self.buckets.read().get(name).cloned()
    }

    /// All bucket names in sorted order.
    pub fn bucket_names(&self) -> Vec<String> {
        self.buckets.read().keys().cloned().collect()
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Bytes of SST and blob files per column family (what each kind of record costs on disk).
    pub fn disk_bytes_by_kind(&self) -> Vec<(&'static str, u64)> {
        Cf::ALL
            .iter()
            .map(|cf| {
                let sst = self
                    .store
                    .property(*cf, "rocksdb.total-sst-files-size")
                    .unwrap_or(0);
                let blob = self
                    .store
                    .property(*cf, "rocksdb.total-blob-file-size")
                    .unwrap_or(0);
                (cf.name(), sst + blob)
            })
            .collect()
    }

    /// Whether writes can succeed now (the disk may be full, or the store failed for good).
    pub fn storage_health(&self) -> settee_storage::StoreHealth {
        self.store.health()
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A consistent copy of the node's whole store at `dir` (a RocksDB checkpoint, for
    /// backups: `docs/format/backup.md`); the files it holds with their sizes. Blocking.
    pub fn checkpoint(&self, dir: &Path) -> Result<Vec<(String, u64)>, EngineError> {
        Ok(self.store.checkpoint(dir)?)
    }

    pub async fn create_bucket(
        &self,
        name: &str,
        vbuckets: u16,
    ) -> Result<CreateOutcome, EngineError> {
        self.create_bucket_with(name, vbuckets, false).await
    }

    /// [`Engine::create_bucket`] of a CouchDB partitioned database when `partitioned`.
    pub async fn create_bucket_with(
        &self,
        name: &str,
        vbuckets: u16,
        partitioned: bool,
    ) -> Result<CreateOutcome, EngineError> {
        if vbuckets == 0 || vbuckets > VBUCKETS_MAX {
            return Err(EngineError::Invalid(format!(
                "vbucket count must be 1..={VBUCKETS_MAX}"
            )));
        }
        let _admin = self.admin.lock().await;
        if self.buckets.read().contains_key(name) {
            return Ok(CreateOutcome::Exists);
        }
        if self.is_collection_door_name(name) {
            return Err(EngineError::InvalidName(format!(
                "{name} is the CouchDB-door name of a collection"
            )));
        }
        let id = match self.store.get(Cf::Meta, keys::meta::NEXT_BUCKET_ID)? {
            Some(raw) => u32::from_be_bytes(
                raw.as_slice()
                    .try_into()
                    .map_err(|_| EngineError::Corrupt("next bucket id".into()))?,
            ),
            None => 1,
        };
        let config = BucketConfig {
            name: name.to_string(),
            vbuckets,
            created_ms: self.clock.now_ns() / 1_000_000,
            revs_limit: REVS_LIMIT_DEFAULT,
            max_ttl: 0,
            partitioned,
        };
        let mut batch = Batch::new();
        batch.put(
            Cf::Meta,
            keys::meta::NEXT_BUCKET_ID,
            (id + 1).to_be_bytes().to_vec(),
        );
        batch.put(
            Cf::Meta,
            keys::meta::bucket_name(name),
            id.to_be_bytes().to_vec(),
        );
        batch.put(
            Cf::Meta,
            keys::meta::bucket_conf(id),
            serde_json::to_vec(&config).unwrap_or_default(),
        );
        self.store.commit(batch).await?;
        let access = BucketAccess {
            epoch: self.access_epoch.clone(),
            writes_move_epoch: self
                .access_buckets
                .read()
                .iter()
                .any(|bucket| bucket == name)
                .into(),
        };
        let node = NodeParts {
            store: self.store.clone(),
            clock: self.clock.clone(),
            hlc: self.hlc.clone(),
            limits: self.limits,
            skip_total: self.skip_total.clone(),
            manifest_limits: self.manifest_limits,
            purge_wake: self.purge_wake.clone(),
            purge_hooks: self.purge_hooks.clone(),
            validator: self.validator.clone(),
            lease: self.lease.clone(),
            designs: self.designs.clone(),
        };
        let bucket = Bucket::load(node, id, config, access)?;
        self.buckets
            .write()
            .insert(name.to_string(), Arc::new(bucket));
        self.advance_epoch_for(name);
        Ok(CreateOutcome::Created)
    }

    /// Registers what a dropped collection's purge must also delete (see
    /// [`crate::collections::CollectionPurgeHook`]).
    pub fn add_collection_purge_hook(
        &self,
        hook: Arc<dyn crate::collections::CollectionPurgeHook>,
    ) {
        self.purge_hooks.write().push(hook);
    }

    /// Registers where the manifest changes of a cluster's buckets are decided (see
    /// [`crate::collections::ManifestRouter`]); only the first call counts.
    pub fn set_manifest_router(&self, router: Arc<dyn crate::collections::ManifestRouter>) {
        let _ = self.manifest_router.set(router);
    }

    /// Registers the listener told of every design document written on this node (see
    /// [`crate::DesignsListener`]); a second call replaces the first.
    pub fn set_designs_listener(&self, listener: Arc<dyn crate::DesignsListener>) {
        *self.designs.write() = Some(listener);
    }

    /// Registers the validator of every document write (see [`crate::WriteValidator`]); a
    /// second call replaces the first.
    pub fn set_write_validator(&self, validator: Arc<dyn crate::WriteValidator>) {
        *self.validator.write() = Some(validator);
    }

    /// Whether `name` is the CouchDB-door name of a live collection (`docs/format/collections.md`:
    /// no bucket may take such a name, and no collection a bucket's).
    fn is_collection_door_name(&self, name: &str) -> bool {
        settee_manifest::split_door_name(name).is_some_and(|door| {
            self.bucket(door.bucket).is_some_and(|bucket| {
                bucket
                    .manifest()
                    .find(&door.scope, &door.collection)
                    .is_some()
            })
        })
    }

    /// Changes a bucket's manifest ([`Bucket::change_manifest`]), refusing a collection whose
    /// CouchDB-door name is a bucket's name. The doors change manifests through here: a
    /// cluster's bucket through the [`crate::collections::ManifestRouter`], which answers once
    /// this node's bucket has the changed manifest.
    pub async fn change_manifest(
        &self,
        bucket: &Bucket,
        change: ManifestChange,
    ) -> Result<Arc<Manifest>, EngineError> {
        let routed = self.manifest_router.get().and_then(|router| {
            router.route(
                bucket.name().to_owned(),
                change.clone(),
                self.manifest_limits,
            )
        });
        let _admin = self.admin.lock().await;
        if let ManifestChange::CreateCollection { scope, name, .. } = &change {
            let door = settee_manifest::door_name(bucket.name(), scope, name);
            if self.buckets.read().contains_key(&door) {
                return Err(EngineError::InvalidName(format!(
                    "the CouchDB-door name of {scope}.{name}, {door}, is a bucket's name"
                )));
            }
        }
        match routed {
            // Not under the admin lock: following the map that carries the change may
            // create or drop buckets.
            Some(routed) => {
                drop(_admin);
                routed.await?;
                Ok(bucket.manifest())
            }
            None => bucket.change_manifest(change).await,
        }
    }

    /// Drops a bucket and all its data. Returns false when there was no such bucket.
    pub async fn delete_bucket(&self, name: &str) -> Result<bool, EngineError> {
        let _admin = self.admin.lock().await;
        let Some(bucket) = self.bucket(name) else {
            return Ok(false);
        };
        bucket
            .dropped
            .store(true, std::sync::atomic::Ordering::Release);
        let id = bucket.id;
        let (lower, upper) = keys::bucket_range(id);
        let mut batch = Batch::new();
        batch.delete(Cf::Meta, keys::meta::bucket_name(name));
        for cf in [Cf::Doc, Cf::Seq, Cf::Local, Cf::Att, Cf::Exp] {
            batch.delete_range(cf, lower.clone(), upper.clone());
        }
        for key in keys::meta::bucket_owned(id) {
            let end = keys::prefix_end(&key);
            batch.delete_range(Cf::Meta, key, end);
        }
        self.store.commit(batch).await?;
        self.buckets.write().remove(name);
        self.advance_epoch_for(name);
        Ok(true)
    }

    /// Runs the node's background purgers until `shutdown` resolves: expired documents every
    /// `interval`; dropped collections' data as soon as a collection is dropped (or pending at
    /// start, after a restart), in rounds of [`PURGE_VBUCKETS_PER_ROUND`] vbuckets with
    /// [`PURGE_ROUND_PAUSE`] between them, so the purge never takes the disk from the doors.
    pub async fn run_expiry_purger(
        self: Arc<Self>,
        interval: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut ticker = tokio::time::interval(interval);
        // Drops left pending by the previous run are resumed at once.
        let mut drops_pending = true;
        loop {
            let wake = self.purge_wake.notified();
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ticker.tick() => {
                    self.purge_expired_documents().await;
                    // A round that failed is tried again from here.
                    drops_pending |= self.has_pending_drops();
                }
                _ = wake, if !drops_pending => drops_pending = true,
                _ = tokio::time::sleep(PURGE_ROUND_PAUSE), if drops_pending => {
                    drops_pending = self.purge_dropped_round().await;
                }
            }
        }
    }

    fn has_pending_drops(&self) -> bool {
        self.buckets
            .read()
            .values()
            .any(|bucket| !bucket.dropped_collections().is_empty())
    }

    async fn purge_expired_documents(&self) {
        let buckets: Vec<Arc<Bucket>> = self.buckets.read().values().cloned().collect();
        for bucket in buckets {
            if let Err(error) = bucket.purge_expired().await {
                tracing::warn!(bucket = bucket.name(), %error, "expiry purge failed");
            }
        }
    }

    /// One round of the drop purger in every bucket with pending drops; whether any remain.
    async fn purge_dropped_round(&self) -> bool {
        let buckets: Vec<Arc<Bucket>> = self.buckets.read().values().cloned().collect();
        let mut pending = false;
        for bucket in buckets {
            match bucket.purge_dropped_round(PURGE_VBUCKETS_PER_ROUND).await {
                Ok(more) => pending |= more,
                // Tried again at the next tick, not in a loop.
                Err(error) => {
                    tracing::warn!(bucket = bucket.name(), %error, "collection purge failed")
                }
            }
        }
        pending
    }
}

/// Vbuckets one round of the drop purger covers in a bucket.
pub const PURGE_VBUCKETS_PER_ROUND: u16 = 16;
/// The pause between two rounds of the drop purger.
pub const PURGE_ROUND_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
