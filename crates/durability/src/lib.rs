//! Sync writes on an active node (docs/format/replica.md, "Sync replication" and "Sync writes
//! on the active"). A bucket holds one [`Tracker`]: the cluster node tells it the bucket's
//! replica chains ([`Tracker::set_topology`]), the DCP producer tells it which replicas
//! stream and what they acknowledged (SEQNO_ACKNOWLEDGED: [`Tracker::ack`]), and the front
//! doors ask it whether a durable write is possible, register the write's key
//! ([`Tracker::begin`]: one sync write per key) and wait until a majority of the chain holds
//! the write's seqno ([`Tracker::wait`]).
//!
//! The majority rule itself is pure ([`chains::Chains`], tested without I/O); this file adds
//! the locks and a watch channel per vbucket carrying its durable seqno, so a waiting write
//! costs nothing until an acknowledgement moves its vbucket.
#![deny(clippy::unwrap_used)]

pub mod chains;
mod level;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

pub use chains::{majority, Chains, NodeId};
pub use level::Level;

/// How long a sync write waits when the request names no timeout (or 0).
pub const DURABILITY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Sync writes waiting at once per bucket; past it a durable write is refused (temporarily).
pub const SYNC_WRITES_PENDING_MAX: usize = 65_536;

/// Why a sync write cannot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Too few replicas stream to form a majority (DURABILITY_IMPOSSIBLE).
    Impossible,
    /// Another sync write to the key is waiting (SYNC_WRITE_IN_PROGRESS).
    InProgress,
    /// [`SYNC_WRITES_PENDING_MAX`] sync writes wait already (a temporary failure).
    TooMany,
}

/// How a sync write's wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// A majority of the chain holds the write.
    Durable,
    /// The timeout passed first: the write is on the active, maybe not beyond.
    Ambiguous,
}

/// One bucket's sync writes.
pub struct Tracker {
    /// The chains and acknowledgements; held only to update or read them, never across an
    /// await, so a parking_lot mutex is right.
    chains: Mutex<Chains>,
    /// Per vbucket, its durable seqno (`Chains::durable_seqno`), sent after every change.
    durable: Vec<watch::Sender<u64>>,
    /// The bucket's minimum level (`Level` as u8): every write is raised to it.
    min_level: AtomicU8,
    /// Keys with a sync write waiting, as (vbucket, caller's key bytes). Locked only when
    /// `pending_count` is not 0 or a sync write starts or ends.
    pending: Mutex<HashSet<(u16, Vec<u8>)>>,
    pending_count: AtomicUsize,
}

/// A started sync write: its key stays pending until this is dropped.
pub struct SyncWrite {
    tracker: Arc<Tracker>,
    key: Option<(u16, Vec<u8>)>,
}

impl Drop for SyncWrite {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut pending = self.tracker.pending.lock();
            if pending.remove(&key) {
                self.tracker.pending_count.fetch_sub(1, Ordering::Release);
            }
        }
    }
}

impl SyncWrite {
    /// Waits until a majority of `vb`'s chain holds `seqno`, or `timeout` passes.
    pub async fn wait(&self, vb: u16, seqno: u64, timeout: Duration) -> Waited {
        self.tracker.wait(vb, seqno, timeout).await
    }
}

impl Tracker {
    /// A tracker for a bucket of `vbuckets` vbuckets, with no replicas and no minimum level:
    /// every sync write is durable at once (a node outside a cluster).
    pub fn new(vbuckets: u16) -> Tracker {
        let chains = Chains::new(vbuckets);
        let durable = (0..vbuckets)
            .map(|vb| watch::Sender::new(chains.durable_seqno(vb)))
            .collect();
        Tracker {
            chains: Mutex::new(chains),
            durable,
            min_level: AtomicU8::new(0),
            pending: Mutex::new(HashSet::new()),
            pending_count: AtomicUsize::new(0),
        }
    }

    /// Publishes the durable seqno of every vbucket in `vbs` (after a change under `chains`).
    fn publish(&self, chains: &Chains, vbs: impl IntoIterator<Item = u16>) {
        for vb in vbs {
            if let Some(sender) = self.durable.get(usize::from(vb)) {
                let seqno = chains.durable_seqno(vb);
                sender.send_if_modified(|held| {
                    let changed = *held != seqno;
                    *held = seqno;
                    changed
                });
            }
        }
    }

    /// The bucket's replica count, each vbucket's replica chain (its replica nodes that are
    /// active members) and the bucket's minimum level, from the cluster map.
    pub fn set_topology(&self, replicas: u8, chains: &[Vec<NodeId>], min_level: Level) {
        self.min_level.store(min_level.wire(), Ordering::Relaxed);
        let mut held = self.chains.lock();
        held.set_topology(replicas, chains);
        let vbuckets = u16::try_from(held.vbucket_count()).unwrap_or(u16::MAX);
        self.publish(&held, 0..vbuckets);
    }

    /// The bucket's configured replica count (0 outside a cluster).
    pub fn replicas(&self) -> u8 {
        self.chains.lock().replicas()
    }

    /// The bucket's minimum level.
    pub fn min_level(&self) -> Level {
        Level::from_wire(self.min_level.load(Ordering::Relaxed)).unwrap_or_default()
    }

    /// The level a write asking for `requested` gets: raised to the bucket's minimum.
    pub fn effective(&self, requested: Level) -> Level {
        requested.max(self.min_level())
    }

    /// `node` acknowledged `seqno` in `vb` (SEQNO_ACKNOWLEDGED).
    pub fn ack(&self, vb: u16, node: NodeId, seqno: u64) {
        let mut held = self.chains.lock();
        if held.ack(vb, node, seqno) {
            self.publish(&held, [vb]);
        }
    }

    /// A sync-replication stream of `vb` to `node` opened on this node's producer.
    pub fn stream_opened(&self, vb: u16, node: NodeId) {
        self.chains.lock().stream_opened(vb, node);
    }

    /// That stream closed (or its connection ended).
    pub fn stream_closed(&self, vb: u16, node: NodeId) {
        self.chains.lock().stream_closed(vb, node);
    }

    /// Whether a sync write to `vb` could form a majority now.
    pub fn possible(&self, vb: u16) -> bool {
        self.chains.lock().possible(vb)
    }

    /// Whether a sync write to `key` in `vb` is waiting (one atomic load when none is).
    pub fn is_pending(&self, vb: u16, key: &[u8]) -> bool {
        if self.pending_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.pending.lock().contains(&(vb, key.to_vec()))
    }

    /// Starts a sync write to `key` in `vb`: refused when no majority can be formed, when
    /// another sync write to the key waits, or when too many wait.
    pub fn begin(self: &Arc<Self>, vb: u16, key: &[u8]) -> Result<SyncWrite, Refused> {
        if !self.possible(vb) {
            return Err(Refused::Impossible);
        }
        let mut pending = self.pending.lock();
        if pending.len() >= SYNC_WRITES_PENDING_MAX {
            return Err(Refused::TooMany);
        }
        let entry = (vb, key.to_vec());
        if pending.contains(&entry) {
            return Err(Refused::InProgress);
        }
        pending.insert(entry.clone());
        self.pending_count.fetch_add(1, Ordering::Release);
        Ok(SyncWrite {
            tracker: self.clone(),
            key: Some(entry),
        })
    }

    /// Waits until a majority of `vb`'s chain holds `seqno`, or `timeout` passes.
    pub async fn wait(&self, vb: u16, seqno: u64, timeout: Duration) -> Waited {
        let Some(sender) = self.durable.get(usize::from(vb)) else {
            return Waited::Ambiguous;
        };
        let mut receiver = sender.subscribe();
        let reached = tokio::time::timeout(timeout, receiver.wait_for(|held| *held >= seqno))
            .await
            .is_ok_and(|waited| waited.is_ok());
        if reached {
            Waited::Durable
        } else {
            Waited::Ambiguous
        }
    }

    /// The durable seqno of `vb` as last published.
    pub fn durable_seqno(&self, vb: u16) -> u64 {
        self.durable
            .get(usize::from(vb))
            .map_or(0, |sender| *sender.borrow())
    }
}

/// The timeout of a request's durability framing extra: its milliseconds, or the default
/// when absent or 0.
pub fn timeout_of(timeout_ms: Option<u16>) -> Duration {
    match timeout_ms {
        Some(ms) if ms > 0 => Duration::from_millis(u64::from(ms)),
        _ => DURABILITY_TIMEOUT_DEFAULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_single_node_write_is_durable_at_once() {
        let tracker = Arc::new(Tracker::new(8));
        let write = tracker.begin(3, b"k").expect("possible");
        assert_eq!(
            write.wait(3, 100, Duration::from_secs(1)).await,
            Waited::Durable
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_waits_for_the_replica_then_times_out_ambiguous() {
        let tracker = Arc::new(Tracker::new(2));
        tracker.set_topology(1, &[vec![5], vec![5]], Level::None);
        assert_eq!(tracker.begin(0, b"k").err(), Some(Refused::Impossible));
        tracker.stream_opened(0, 5);
        let write = tracker.begin(0, b"k").expect("possible");
        assert!(tracker.is_pending(0, b"k"));
        assert!(!tracker.is_pending(1, b"k"));
        assert_eq!(tracker.begin(0, b"k").err(), Some(Refused::InProgress));
        let waiting = {
            let tracker = tracker.clone();
            tokio::spawn(async move { tracker.wait(0, 4, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        tracker.ack(0, 5, 3);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        tracker.ack(0, 5, 4);
        assert_eq!(waiting.await.expect("joined"), Waited::Durable);
        // A later seqno is not acknowledged: the wait ends ambiguous.
        assert_eq!(
            write.wait(0, 9, Duration::from_secs(2)).await,
            Waited::Ambiguous
        );
        drop(write);
        assert!(!tracker.is_pending(0, b"k"));
        assert!(tracker.begin(0, b"k").is_ok());
    }

    #[test]
    fn the_minimum_level_raises_writes() {
        let tracker = Tracker::new(1);
        assert_eq!(tracker.effective(Level::None), Level::None);
        tracker.set_topology(0, &[], Level::Majority);
        assert_eq!(tracker.effective(Level::None), Level::Majority);
        assert_eq!(
            tracker.effective(Level::PersistToMajority),
            Level::PersistToMajority
        );
    }

    #[test]
    fn timeouts_default_when_absent_or_zero() {
        assert_eq!(timeout_of(None), DURABILITY_TIMEOUT_DEFAULT);
        assert_eq!(timeout_of(Some(0)), DURABILITY_TIMEOUT_DEFAULT);
        assert_eq!(timeout_of(Some(1500)), Duration::from_millis(1500));
    }
}
