//! Group commit.
//!
//! Every [`crate::Store::commit`] sends its batch to one committer thread. The thread blocks for
//! the first waiting batch, then takes every other batch already queued (up to
//! `group_commit_bytes_max`), applies them as ONE RocksDB write with `sync = true`, and only then
//! answers all their waiters. While that fsync runs, new batches queue up and form the next group,
//! so under load many writes share each fsync and with no load a write pays exactly one.
//!
//! The row cache is updated in the same order, after the write and before the answers
//! ([`update_row_cache`]).
//!
//! A group whose write fails is answered as failed to every writer in it, and batches staged
//! before that failure are refused unwritten (`health.rs`); a full disk ends by itself.
//!
//! Batches are applied in the order they were queued, and a group becomes visible to readers
//! atomically; callers that need an order (the engine's per-vbucket seqnos) enqueue in that order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::batch::{Batch, Op};
use crate::error::StoreError;
use crate::health::{StoreHealth, PROBE_INTERVAL};
use crate::row_cache::RowCache;
use crate::store::{Cf, Inner};

pub(crate) struct Request {
    pub batch: Batch,
    /// The store's epoch when the batch was staged (`health.rs`): a batch from before the
    /// latest failed write is refused, never written.
    pub epoch: u64,
    pub done: oneshot::Sender<Result<(), StoreError>>,
}

/// Counters that let tests and benchmarks see group commit working.
#[derive(Default)]
pub(crate) struct Counters {
    pub batches: AtomicU64,
    pub groups: AtomicU64,
}

pub(crate) struct Committer {
    /// `None` once shutdown has begun; the mutex only guards the swap, sends clone the sender.
    pub sender: Mutex<Option<mpsc::Sender<Request>>>,
    pub thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub counters: Arc<Counters>,
}

pub(crate) fn start(inner: Arc<Inner>, group_bytes_max: usize) -> std::io::Result<Committer> {
    let (sender, receiver) = mpsc::channel::<Request>();
    let counters = Arc::new(Counters::default());
    let thread_counters = counters.clone();
    let thread = std::thread::Builder::new()
        .name("settee-committer".into())
        .spawn(move || run(inner, receiver, group_bytes_max, thread_counters))?;
    Ok(Committer {
        sender: Mutex::new(Some(sender)),
        thread: Mutex::new(Some(thread)),
        counters,
    })
}

fn run(
    inner: Arc<Inner>,
    receiver: mpsc::Receiver<Request>,
    group_bytes_max: usize,
    counters: Arc<Counters>,
) {
    let mut group: Vec<Request> = Vec::new();
    while let Some(first) = next_request(&inner, &receiver) {
        let mut bytes = first.batch.size_bytes();
        group.push(first);
        while bytes < group_bytes_max {
            match receiver.try_recv() {
                Ok(next) => {
                    bytes += next.batch.size_bytes();
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        // Batches staged before the latest failure are answered without being written.
        let epoch = inner.health.epoch();
        let (mut current, stale): (Vec<Request>, Vec<Request>) =
            group.drain(..).partition(|request| request.epoch == epoch);
        let result = if current.is_empty() {
            Ok(())
        } else {
            write_group(&inner, &current, &counters)
        };
        if let Some(cache) = &inner.row_cache {
            update_row_cache(cache, &mut current, result.is_ok());
        }
        for request in current {
            let answer = match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(error.duplicate()),
            };
            // A waiter that went away (client disconnected) no longer needs the answer.
            let _ = request.done.send(answer);
        }
        for request in stale {
            let _ = request.done.send(Err(inner.health.refusal()));
        }
    }
}

/// The next request; while the disk is full and no request comes, probes every
/// [`PROBE_INTERVAL`] whether writes succeed again. `None` once the store is closing.
fn next_request(inner: &Inner, receiver: &mpsc::Receiver<Request>) -> Option<Request> {
    loop {
        match receiver.recv_timeout(PROBE_INTERVAL) {
            Ok(request) => return Some(request),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if inner.health.get() == StoreHealth::NoSpace {
                    probe(inner);
                }
            }
        }
    }
}

/// An empty synced write: RocksDB answers it with its background error while it has one.
fn probe(inner: &Inner) {
    if inner.no_space_injected() {
        return;
    }
    let mut options = rocksdb::WriteOptions::default();
    options.set_sync(true);
    if inner
        .db
        .write_opt(rocksdb::WriteBatch::default(), &options)
        .is_ok()
    {
        inner.health.write_succeeded();
    }
}

fn write_group(inner: &Inner, group: &[Request], counters: &Counters) -> Result<(), StoreError> {
    if let Some(poisoned) = inner.health.poisoned() {
        return Err(poisoned);
    }
    let mut write_batch = rocksdb::WriteBatch::default();
    for op in sorted_ops(group) {
        apply(inner, &mut write_batch, op);
    }
    let commit_index = counters.groups.fetch_add(1, Ordering::Relaxed);
    counters
        .batches
        .fetch_add(group.len() as u64, Ordering::Relaxed);
    if let Some(limit) = inner.fail_commits_after {
        if commit_index >= limit {
            inner
                .health
                .poison(format!("injected failure at commit {commit_index}"));
            return Err(inner.health.refusal());
        }
    }
    if inner.no_space_injected() {
        return Err(inner.health.commit_failed(StoreError::NoSpace));
    }
    let mut options = rocksdb::WriteOptions::default();
    options.set_sync(true);
    match inner.db.write_opt(write_batch, &options) {
        Ok(()) => {
            inner.health.write_succeeded();
            Ok(())
        }
        // A full disk: RocksDB applied nothing (the memtable insert follows a good log write)
        // and resumes by itself once space is freed. Anything else: the log may or may not
        // hold this group, and the only safe answer is to stop writing (health.rs).
        Err(error) => Err(inner.health.commit_failed(StoreError::from(error))),
    }
}

/// Brings the row cache up to date with a group just written (before any writer is answered):
/// every `doc` key written gets its new value or is forgotten. After a failed write nothing is
/// known about the keys, so they are all forgotten.
fn update_row_cache(cache: &RowCache, group: &mut [Request], written: bool) {
    for op in group
        .iter_mut()
        .flat_map(|request| request.batch.ops.iter_mut())
    {
        match op {
            Op::Put {
                cf: Cf::Doc,
                key,
                value,
            } => {
                let value = written.then(|| Bytes::from(std::mem::take(value)));
                cache.written(key, value);
            }
            Op::Delete { cf: Cf::Doc, key } => cache.written(key, None),
            Op::DeleteRange {
                cf: Cf::Doc,
                from,
                to,
            } => cache.forget_range(from, to),
            _ => {}
        }
    }
}

/// The group's operations in (column family, key) order, so RocksDB's memtable inserts walk the
/// skiplist forward instead of jumping around (profiled: random document ids spent most of
/// their insert time in `InlineSkipList::FindSpliceForLevel`). The sort is stable and range
/// deletions are barriers, so operations on the same key keep their order and the result of
/// the batch is unchanged.
fn sorted_ops(group: &[Request]) -> Vec<&Op> {
    let mut ops: Vec<&Op> = group
        .iter()
        .flat_map(|request| request.batch.ops.iter())
        .collect();
    let mut start = 0;
    while start < ops.len() {
        let end = ops[start..]
            .iter()
            .position(|op| matches!(op, Op::DeleteRange { .. }))
            .map_or(ops.len(), |offset| start + offset);
        ops[start..end].sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        start = end + 1;
    }
    ops
}

fn sort_key(op: &Op) -> (usize, &[u8]) {
    match op {
        Op::Put { cf, key, .. } | Op::Delete { cf, key } => (*cf as usize, key.as_slice()),
        Op::DeleteRange { cf, from, .. } => (*cf as usize, from.as_slice()),
    }
}

pub(crate) fn apply(inner: &Inner, write_batch: &mut rocksdb::WriteBatch, op: &Op) {
    let handle = |cf: &Cf| inner.handle(*cf);
    match op {
        Op::Put { cf, key, value } => write_batch.put_cf(handle(cf), key, value),
        Op::Delete { cf, key } => write_batch.delete_cf(handle(cf), key),
        Op::DeleteRange { cf, from, to } => write_batch.delete_range_cf(handle(cf), from, to),
    }
}
