//! One index group: the views of one design document (or one Mango index), indexed together
//! by one pass over the bucket's change streams.
//!
//! A builder task (started by the first query, then kept running) repeats
//! [`IndexGroup::index_batch`]: take up to [`BATCH_DOCS`] change entries across the vbuckets
//! from the seqnos the group has reached, split them into one part per core and, on scoped
//! threads, read each document, map it ([`Mapper`]), encode the emitted keys and diff them
//! against the document's back index; then write every part's rows, back index entries and
//! the new seqnos as ONE unsynced batch. Queries wait on [`IndexGroup::wait_for`] until the
//! reached seqnos cover what they need.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use settee_engine::{Bucket, ChangeEntry, Keyspace, SeqVector};
use settee_storage::{Batch, Cf, Store};
use tokio::sync::watch;

use crate::error::ViewError;
use crate::keys::{self, BackEntry, GroupState};
use crate::mapper::{DocInput, Mapper};

/// Change entries indexed per batch (one atomic write).
pub const BATCH_DOCS: usize = 4000;
/// Rows one document may emit into one view; more are dropped (and logged).
pub const EMITS_PER_DOC_MAX: usize = u16::MAX as usize;
/// How often an idle builder looks at its stop flag.
const IDLE_RECHECK: Duration = Duration::from_secs(1);
/// An idle builder indexes new writes this long after they arrive, unless a query waits for
/// them first: as with CouchDB's background indexer, a `stale=ok` / `update=false` reader
/// right after a write sees the index as it was, and a burst of writes is indexed in fewer,
/// larger batches.
const BACKGROUND_DELAY: Duration = Duration::from_secs(1);

/// Indexer progress for `/_active_tasks`.
#[derive(Debug, Clone, Default)]
pub struct TaskProgress {
    pub running: bool,
    pub changes_done: u64,
    pub total_changes: u64,
    pub started_on: u64,
    pub updated_on: u64,
}

pub struct IndexGroup {
    keyspace: Keyspace,
    store: Arc<Store>,
    pub(crate) id: u32,
    pub(crate) signature: [u8; 16],
    /// `_design/name` (or the Mango index's design document), for tasks and logs.
    pub(crate) name: String,
    pub(crate) view_names: Vec<String>,
    include_design: bool,
    partitioned: bool,
    /// Per view, whether its keys are in raw order (`encode_raw_key`), not view collation.
    raw_collation: Vec<bool>,
    /// Map functions see `_local_seq`.
    local_seq: bool,
    mapper: Arc<dyn Mapper>,
    threads: usize,
    /// What the index holds; replaced by the builder after each batch is written.
    state: Mutex<GroupState>,
    /// Held by whatever writes the group's state (an indexing batch, a vbucket's adoption), so
    /// that neither writes a state made from one the other has replaced.
    writer: Mutex<()>,
    /// Bumped after every batch and on failure; waiters watch it.
    progress: watch::Sender<u64>,
    /// Why the last build stopped, until the next one starts.
    error: Mutex<Option<ViewError>>,
    builder_running: AtomicBool,
    /// A [`ViewGroup::compact`] is running (`_info`'s `compact_running`).
    compacting: AtomicBool,
    /// Queries waiting for the index now ([`IndexGroup::wait_for`]) and an `update_after`
    /// nudge: either makes the builder skip its background delay; `wanted` wakes it.
    waiting: AtomicUsize,
    nudged: AtomicBool,
    wanted: tokio::sync::Notify,
    stopped: AtomicBool,
    /// Vbucket the next batch starts reading at, so batches take turns across vbuckets.
    next_vbucket: AtomicUsize,
    task: Mutex<TaskProgress>,
}

pub(crate) struct GroupParts {
    pub keyspace: Keyspace,
    pub store: Arc<Store>,
    pub id: u32,
    pub signature: [u8; 16],
    pub name: String,
    pub view_names: Vec<String>,
    pub include_design: bool,
    pub partitioned: bool,
    pub raw_collation: Vec<bool>,
    pub local_seq: bool,
    pub mapper: Arc<dyn Mapper>,
    pub threads: usize,
}

impl IndexGroup {
    pub(crate) fn load(parts: GroupParts) -> Result<IndexGroup, ViewError> {
        let views = parts.view_names.len();
        let vbuckets = parts.keyspace.bucket().vbuckets();
        let state = match parts.store.get(
            Cf::View,
            &keys::state_key(parts.keyspace.bucket().id(), parts.id),
        )? {
            Some(raw) => GroupState::decode(&raw)
                .filter(|state| {
                    state.seqnos.len() == vbuckets as usize && state.row_counts.len() == views
                })
                .ok_or_else(|| ViewError::Storage("view group state is corrupt".into()))?,
            None => GroupState {
                // Documents purged before the group existed left nothing to index.
                purge_seq: parts.keyspace.purge_seq()?,
                ..GroupState::new(vbuckets, views)
            },
        };
        let (progress, _) = watch::channel(0);
        Ok(IndexGroup {
            keyspace: parts.keyspace,
            store: parts.store,
            id: parts.id,
            signature: parts.signature,
            name: parts.name,
            view_names: parts.view_names,
            include_design: parts.include_design,
            partitioned: parts.partitioned,
            raw_collation: parts.raw_collation,
            local_seq: parts.local_seq,
            mapper: parts.mapper,
            threads: parts.threads.max(1),
            state: Mutex::new(state),
            writer: Mutex::new(()),
            progress,
            error: Mutex::new(None),
            builder_running: AtomicBool::new(false),
            compacting: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            nudged: AtomicBool::new(false),
            wanted: tokio::sync::Notify::new(),
            stopped: AtomicBool::new(false),
            next_vbucket: AtomicUsize::new(0),
            task: Mutex::new(TaskProgress::default()),
        })
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the group's rows are keyed by partition first (only partition queries read it).
    pub fn is_partitioned(&self) -> bool {
        self.partitioned
    }

    pub fn bucket(&self) -> &Arc<Bucket> {
        self.keyspace.bucket()
    }

    /// The collection the group indexes.
    pub fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    pub fn view_names(&self) -> &[String] {
        &self.view_names
    }

    /// The group's id on this node (views.md: ids are per node, signatures are not).
    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn signature(&self) -> [u8; 16] {
        self.signature
    }

    /// The seqnos the index has reached (CouchDB's view `update_seq`).
    pub fn update_seq(&self) -> SeqVector {
        SeqVector::from_seqnos(self.state.lock().seqnos.clone())
    }

    /// Rows in view `view` (`total_rows`).
    pub fn total_rows(&self, view: usize) -> u64 {
        self.state.lock().row_counts.get(view).copied().unwrap_or(0)
    }

    /// (`sizes.file`, `sizes.active`) of the group's rows, back index and state, flushed or
    /// not: see [`settee_storage::RangeBytes`].
    pub fn sizes(&self) -> (u64, u64) {
        let prefix = keys::group_prefix(self.bucket().id(), self.id);
        match self
            .store
            .range_bytes(Cf::View, &prefix, &keys::prefix_end(&prefix))
        {
            Ok(bytes) => (bytes.file(), bytes.active()),
            Err(error) => {
                tracing::warn!(%error, "view index sizes unreadable");
                (0, 0)
            }
        }
    }

    /// CouchDB's view compaction: the group's rows, back index and state compacted in full,
    /// so their overwritten and deleted versions leave the disk. Blocks until done.
    pub fn compact(&self) {
        self.compacting.store(true, Ordering::Release);
        let prefix = keys::group_prefix(self.bucket().id(), self.id);
        self.store
            .compact(Cf::View, &prefix, &keys::prefix_end(&prefix));
        self.compacting.store(false, Ordering::Release);
    }

    pub fn is_compacting(&self) -> bool {
        self.compacting.load(Ordering::Acquire)
    }

    pub fn task(&self) -> TaskProgress {
        self.task.lock().clone()
    }

    pub fn is_updater_running(&self) -> bool {
        self.builder_running.load(Ordering::Acquire)
    }

    fn covers(&self, target: &SeqVector) -> bool {
        // A collection dropped meanwhile has no purge sequence: nothing more to apply.
        let purged = self.keyspace.purge_seq().unwrap_or(0);
        let state = self.state.lock();
        state.purge_seq >= purged
            && target
                .seqnos()
                .iter()
                .zip(&state.seqnos)
                .all(|(want, have)| have >= want)
    }

    /// Stops the builder (design document gone, bucket dropped).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.progress.send_modify(|version| *version += 1);
    }

    /// Starts the background builder unless it runs; it then keeps the index up to date.
    /// Clears the error of a build that failed, so the next one tries again.
    pub fn ensure_builder(self: &Arc<Self>) {
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        if self.builder_running.swap(true, Ordering::AcqRel) {
            return;
        }
        self.error.lock().take();
        tokio::spawn(self.clone().run_builder());
    }

    /// `update=lazy` (`stale=update_after`): the builder starts at once, without the
    /// background delay, while the reader is answered from the index as it is.
    pub fn update_after(self: &Arc<Self>) {
        self.ensure_builder();
        self.nudged.store(true, Ordering::Release);
        self.wanted.notify_waiters();
    }

    /// Waits until the index covers `target` (the bucket's seqnos when a query arrived).
    pub async fn wait_for(self: &Arc<Self>, target: &SeqVector) -> Result<(), ViewError> {
        let mut progress = self.progress.subscribe();
        self.ensure_builder();
        let _waiting = Waiting::register(&self.waiting);
        self.wanted.notify_waiters();
        loop {
            if self.covers(target) {
                return Ok(());
            }
            if let Some(error) = self.error.lock().clone() {
                return Err(error);
            }
            if self.stopped.load(Ordering::Acquire) {
                return Err(ViewError::Build("the index was removed".into()));
            }
            if progress.changed().await.is_err() {
                return Err(ViewError::Internal("index builder went away".into()));
            }
        }
    }

    async fn run_builder(self: Arc<Self>) {
        let mut changes = self.bucket().subscribe();
        loop {
            if self.stopped.load(Ordering::Acquire) {
                break;
            }
            let target = self.bucket().high_seqnos();
            if !self.covers(&target) {
                self.begin_task(&target);
                let group = self.clone();
                let outcome = tokio::task::spawn_blocking(move || group.index_batch()).await;
                let failure = match outcome {
                    Ok(Ok(_)) => None,
                    Ok(Err(error)) => Some(error),
                    Err(join) => Some(ViewError::Internal(format!("indexer panicked: {join}"))),
                };
                if let Some(error) = failure {
                    tracing::warn!(bucket = self.bucket().name(), design = %self.name, %error, "index build failed");
                    *self.error.lock() = Some(error);
                    self.task.lock().running = false;
                    self.builder_running.store(false, Ordering::Release);
                    self.progress.send_modify(|version| *version += 1);
                    return;
                }
                self.progress.send_modify(|version| *version += 1);
                continue;
            }
            self.task.lock().running = false;
            self.nudged.store(false, Ordering::Release);
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { break },
                _ = tokio::time::sleep(IDLE_RECHECK) => {}
            }
            self.background_delay().await;
        }
        self.task.lock().running = false;
        self.builder_running.store(false, Ordering::Release);
    }

    /// `key` as view `view` stores it: raw or view collation.
    pub(crate) fn encode_key(&self, view: usize, key: &serde_json::Value) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        self.encode_key_to(view, key, &mut out);
        out
    }

    pub(crate) fn encode_key_to(&self, view: usize, key: &serde_json::Value, out: &mut Vec<u8>) {
        if self.raw_collation.get(view).copied().unwrap_or(false) {
            settee_collate::encode_raw_key_to(key, out);
        } else {
            settee_collate::encode_key_to(key, out);
        }
    }

    /// Sleeps [`BACKGROUND_DELAY`], or less if a query waits or `update_after` asks.
    async fn background_delay(&self) {
        let deadline = tokio::time::Instant::now() + BACKGROUND_DELAY;
        loop {
            let wanted = self.wanted.notified();
            tokio::pin!(wanted);
            // Registered before the check, so a wake-up between the two is not lost.
            wanted.as_mut().enable();
            if self.waiting.load(Ordering::Acquire) > 0 || self.nudged.swap(false, Ordering::AcqRel)
            {
                return;
            }
            tokio::select! {
                _ = wanted => {}
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    fn begin_task(&self, target: &SeqVector) {
        let mut task = self.task.lock();
        let now = unix_secs();
        if !task.running {
            let state = self.state.lock();
            let behind: u64 = target
                .seqnos()
                .iter()
                .zip(&state.seqnos)
                .map(|(want, have)| want.saturating_sub(*have))
                .sum();
            *task = TaskProgress {
                running: true,
                changes_done: 0,
                total_changes: behind,
                started_on: now,
                updated_on: now,
            };
        }
    }

    /// Indexes one batch of changes; returns how many change entries it covered. Runs on a
    /// blocking thread.
    pub fn index_batch(&self) -> Result<usize, ViewError> {
        let _writing = self.writer.lock();
        let state = self.state.lock().clone();
        let purged = self.keyspace.purge_seq()?;
        if state.purge_seq < purged {
            return self.apply_purges(state, purged);
        }
        // Read before the entries: every seqno up to it is durable and readable, so a vbucket
        // read to its end has reached at least this.
        let high = self.bucket().high_seqnos();
        let vbuckets = self.bucket().vbuckets() as usize;
        let mut positions = state.seqnos.clone();
        let mut entries: Vec<ChangeEntry> = Vec::with_capacity(BATCH_DOCS);
        let start = self.next_vbucket.load(Ordering::Relaxed) % vbuckets.max(1);
        let mut resume_at = start;
        for step in 0..vbuckets {
            let vbucket = (start + step) % vbuckets;
            let from = positions[vbucket];
            let until = high.get(vbucket as u16);
            if from >= until {
                continue;
            }
            let want = BATCH_DOCS - entries.len();
            if want == 0 {
                resume_at = vbucket;
                break;
            }
            let read = self.keyspace.vbucket_changes(vbucket as u16, from, want)?;
            let last = read.last().map_or(from, |entry| entry.seqno);
            positions[vbucket] = if read.len() < want {
                last.max(until)
            } else {
                last
            };
            entries.extend(read);
            resume_at = vbucket;
        }
        self.next_vbucket.store(resume_at, Ordering::Relaxed);

        let read_done = std::time::Instant::now();
        let parts = self.process(&entries)?;
        let mapped_done = std::time::Instant::now();
        let mut batch = Batch::new();
        let mut row_counts = state.row_counts.clone();
        for (part_batch, deltas) in parts {
            batch.extend(part_batch);
            for (count, delta) in row_counts.iter_mut().zip(deltas) {
                *count = count.saturating_add_signed(delta);
            }
        }
        let new_state = GroupState {
            seqnos: positions,
            row_counts,
            purge_seq: state.purge_seq,
        };
        if new_state == state {
            return Ok(0);
        }
        batch.put(
            Cf::View,
            keys::state_key(self.bucket().id(), self.id),
            new_state.encode(),
        );
        // Row keys follow emitted keys, not the order documents arrived in: sorted, the
        // memtable inserts them in sequence. Unsorted, the insert cost depended on how well
        // arrival order happened to match key order, which the vbucket count changes (a batch
        // spans 1 vbucket at 16 and ~20 at 1024): 5% -> 9% of the build's CPU in the skip list.
        batch.sort_by_key();
        self.store.write_unsynced(batch)?;
        tracing::debug!(
            design = %self.name,
            entries = entries.len(),
            map_ms = (mapped_done - read_done).as_millis() as u64,
            write_ms = mapped_done.elapsed().as_millis() as u64,
            "indexed a batch"
        );
        *self.state.lock() = new_state;
        let mut task = self.task.lock();
        task.changes_done += entries.len() as u64;
        task.total_changes = task.total_changes.max(task.changes_done);
        task.updated_on = unix_secs();
        Ok(entries.len())
    }

    /// Takes on `vbucket`'s rows ingested from another node's export (rebalance.md, section 3,
    /// step 3): the vbucket counts as indexed up to `indexed_seqno` (or further, if this node
    /// indexed further meanwhile) and each view's row count rises by what was ingested. One
    /// durable write (the rows came durably; a lost count could not be derived again).
    /// Blocking.
    pub fn adopt_vbucket(
        &self,
        vbucket: u16,
        indexed_seqno: u64,
        rows: &[u64],
    ) -> Result<(), ViewError> {
        let _writing = self.writer.lock();
        let state = self.state.lock().clone();
        let vb = usize::from(vbucket);
        if vb >= state.seqnos.len() || rows.len() != state.row_counts.len() {
            return Err(ViewError::Internal(format!(
                "group {} has {} vbuckets and {} views: cannot adopt vbucket {vbucket} with {} views",
                self.name,
                state.seqnos.len(),
                state.row_counts.len(),
                rows.len()
            )));
        }
        let mut adopted = state.clone();
        adopted.seqnos[vb] = adopted.seqnos[vb].max(indexed_seqno);
        for (count, added) in adopted.row_counts.iter_mut().zip(rows) {
            *count = count.saturating_add(*added);
        }
        let mut batch = Batch::new();
        batch.put(
            Cf::View,
            keys::state_key(self.bucket().id(), self.id),
            adopted.encode(),
        );
        self.store
            .commit_blocking(batch)
            .map_err(|error| ViewError::Storage(error.to_string()))?;
        *self.state.lock() = adopted;
        self.progress.send_modify(|version| *version += 1);
        Ok(())
    }

    /// Removes `vbucket`'s entries (`ids`: its documents of the group's collection) under the
    /// writer lock (`drop.rs`).
    pub fn drop_vbucket(&self, vbucket: u16, ids: &[Vec<u8>]) -> Result<(), ViewError> {
        let _writing = self.writer.lock();
        let mut state = self.state.lock().clone();
        let mut batch = Batch::new();
        crate::drop::stage_vbucket_drop(
            &self.store,
            &mut batch,
            (self.bucket().id(), self.id),
            &mut state,
            vbucket,
            ids,
        )?;
        self.store
            .commit_blocking(batch)
            .map_err(|error| ViewError::Storage(error.to_string()))?;
        *self.state.lock() = state;
        self.progress.send_modify(|version| *version += 1);
        Ok(())
    }

    /// Catches up with the purges after `state`'s up to purge sequence `until` (partitions.md):
    /// each purged document is indexed again from its current record, in one batch with the
    /// new purge sequence; a log that no longer reaches back to `state` rebuilds the group.
    fn apply_purges(&self, state: GroupState, until: u64) -> Result<usize, ViewError> {
        let bucket_id = self.bucket().id();
        let Some(keys) = self.keyspace.purged_since(state.purge_seq, until)? else {
            tracing::info!(design = %self.name, "the purge log does not reach back to this index: rebuilding it");
            let mut batch = Batch::new();
            let range = keys::group_prefix(bucket_id, self.id);
            batch.delete_range(Cf::View, range.clone(), keys::prefix_end(&range));
            let fresh = GroupState {
                purge_seq: until,
                ..GroupState::new(self.bucket().vbuckets(), self.view_names.len())
            };
            batch.put(
                Cf::View,
                keys::state_key(bucket_id, self.id),
                fresh.encode(),
            );
            self.store.write_unsynced(batch)?;
            *self.state.lock() = fresh;
            return Ok(1);
        };
        let mut seen = std::collections::HashSet::new();
        let mut entries = Vec::new();
        for key in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            // Indexed as a change to the document's current winner; gone or deleted, its
            // rows go.
            let winner = self
                .keyspace
                .read_record_or_skip(&key)?
                .and_then(|record| record.winner().map(|leaf| (leaf.rev.clone(), leaf.deleted)));
            let (rev, deleted) = winner.unwrap_or_else(|| (settee_engine::RevId::new(0, ""), true));
            entries.push(ChangeEntry {
                vbucket: 0,
                seqno: 0,
                cas: 0,
                deleted,
                collection: self.keyspace.collection(),
                key,
                rev,
            });
        }
        let mut batch = Batch::new();
        let mut row_counts = state.row_counts.clone();
        for (part_batch, deltas) in self.process(&entries)? {
            batch.extend(part_batch);
            for (count, delta) in row_counts.iter_mut().zip(deltas) {
                *count = count.saturating_add_signed(delta);
            }
        }
        let new_state = GroupState {
            row_counts,
            purge_seq: until,
            ..state
        };
        batch.put(
            Cf::View,
            keys::state_key(bucket_id, self.id),
            new_state.encode(),
        );
        self.store.write_unsynced(batch)?;
        *self.state.lock() = new_state;
        Ok(entries.len().max(1))
    }

    /// Maps `entries` on one scoped thread per core; each returns its writes and row-count
    /// changes per view.
    fn process(&self, entries: &[ChangeEntry]) -> Result<Vec<(Batch, Vec<i64>)>, ViewError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let part_len = entries.len().div_ceil(self.threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(part_len)
                .map(|part| scope.spawn(move || self.process_part(part)))
                .collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|_| Err(ViewError::Internal("map thread panicked".into())))
                })
                .collect()
        })
    }

    fn process_part(&self, entries: &[ChangeEntry]) -> Result<(Batch, Vec<i64>), ViewError> {
        let bucket_id = self.bucket().id();
        // The documents to map: (entry index, id, full JSON).
        let mut docs: Vec<(usize, String, String)> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            if entry.deleted {
                continue;
            }
            let Ok(id) = std::str::from_utf8(&entry.key) else {
                continue;
            };
            if id.starts_with("_design/") && !self.include_design {
                continue;
            }
            if self.partitioned
                && (id.starts_with("_design/")
                    || settee_engine::partition::partition_of(id).is_none())
            {
                continue;
            }
            // A record that does not decode reads as absent (counted by the engine), and a body
            // past the document limits is never handed to a mapper: a 100,000-deep value would
            // fail the JavaScript map of the whole batch, so of every query (issue 18). Either
            // way the document emits no rows and the build goes on.
            let Some((header, body, record)) = self.keyspace.read_for_map(&entry.key)? else {
                continue;
            };
            if header.deleted || !header.json {
                continue;
            }
            if let Err(error) = self.bucket().doc_limits().check(&body, true, 0) {
                self.bucket().skip_over_limit(&entry.key, &error);
                continue;
            }
            let mut json = document_json(id, &entry.rev.to_string(), &body);
            let local_seq = self.local_seq.then_some(header.seqno);
            crate::map_doc::add_meta(&mut json, record.as_ref(), local_seq);
            docs.push((index, id.to_string(), json));
        }
        let inputs: Vec<DocInput<'_>> = docs
            .iter()
            .map(|(_, id, json)| DocInput { id, json })
            .collect();
        let mapped = if inputs.is_empty() {
            Vec::new()
        } else {
            self.mapper.map(&inputs)?
        };
        let mut emitted: Vec<Option<Vec<Vec<crate::mapper::Emitted>>>> =
            (0..entries.len()).map(|_| None).collect();
        for ((index, _, _), rows) in docs.iter().zip(mapped) {
            emitted[*index] = Some(rows);
        }

        let back_keys: Vec<Vec<u8>> = entries
            .iter()
            .map(|entry| keys::back_key(bucket_id, self.id, &entry.key))
            .collect();
        let old_backs = self.store.multi_get(Cf::View, &back_keys)?;
        let views = self.view_names.len();
        let view_prefixes: Vec<Vec<u8>> = (0..views)
            .map(|view| keys::view_prefix(bucket_id, self.id, view as u16))
            .collect();
        // A partitioned group's rows of this document start with its partition.
        let row_prefix = |view: usize, id: &[u8]| -> Vec<u8> {
            let mut prefix = view_prefixes[view].clone();
            if self.partitioned {
                if let Some(partition) = std::str::from_utf8(id)
                    .ok()
                    .and_then(settee_engine::partition::partition_of)
                {
                    keys::push_escaped_id(partition.as_bytes(), &mut prefix);
                }
            }
            prefix
        };
        let mut deltas = vec![0i64; views];
        let mut batch = Batch::new();
        for (((entry, rows), back_key), old) in
            entries.iter().zip(emitted).zip(back_keys).zip(old_backs)
        {
            let old_entries = match old {
                Some(raw) => keys::decode_back(&raw)
                    .ok_or_else(|| ViewError::Storage("back index entry is corrupt".into()))?,
                None => Vec::new(),
            };
            let mut new_entries: Vec<BackEntry> = Vec::new();
            for (view, view_rows) in rows.unwrap_or_default().into_iter().enumerate().take(views) {
                if view_rows.len() > EMITS_PER_DOC_MAX {
                    tracing::warn!(design = %self.name, view, "document emitted more than {EMITS_PER_DOC_MAX} rows; the rest are dropped");
                }
                for (emit, (key, value)) in
                    view_rows.into_iter().take(EMITS_PER_DOC_MAX).enumerate()
                {
                    let encoded = self.encode_key(view, &key);
                    let key_json = serde_json::to_vec(&key).unwrap_or_default();
                    batch.put(
                        Cf::View,
                        keys::row_key(
                            &row_prefix(view, &entry.key),
                            &encoded,
                            &entry.key,
                            emit as u16,
                        ),
                        keys::row_value(encoded.len(), &key_json, value.get().as_bytes()),
                    );
                    deltas[view] += 1;
                    new_entries.push(BackEntry {
                        view: view as u16,
                        emit: emit as u16,
                        encoded_key: encoded,
                    });
                }
            }
            for old_entry in &old_entries {
                let view = old_entry.view as usize;
                if view >= views {
                    continue;
                }
                deltas[view] -= 1;
                if !new_entries.contains(old_entry) {
                    batch.delete(
                        Cf::View,
                        keys::row_key(
                            &row_prefix(view, &entry.key),
                            &old_entry.encoded_key,
                            &entry.key,
                            old_entry.emit,
                        ),
                    );
                }
            }
            if new_entries.is_empty() {
                if !old_entries.is_empty() {
                    batch.delete(Cf::View, back_key);
                }
            } else if new_entries != old_entries {
                batch.put(Cf::View, back_key, keys::encode_back(&new_entries));
            }
        }
        Ok((batch, deltas))
    }
}

/// `{"_id":..,"_rev":..,<body members>}` from a stored body (an object without the underscore
/// members), as map functions expect the document.
pub(crate) fn document_json(id: &str, rev: &str, body: &[u8]) -> String {
    let id_json = serde_json::to_string(id).unwrap_or_default();
    let mut out = String::with_capacity(body.len() + id.len() + rev.len() + 24);
    out.push_str("{\"_id\":");
    out.push_str(&id_json);
    out.push_str(",\"_rev\":\"");
    out.push_str(rev);
    out.push('"');
    let text = std::str::from_utf8(body).unwrap_or("{}").trim();
    let inner = text
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or("")
        .trim();
    if !inner.is_empty() {
        out.push(',');
        out.push_str(inner);
    }
    out.push('}');
    out
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Counts a query in [`IndexGroup::wait_for`] for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn register(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
