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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

pub use chains::{majority, Chains, NodeId};
pub use level::Level;

/// How long a sync write waits when the request names no timeout (or 0).
pub const DURABILITY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// How often [`Tracker::wait_possible`] looks again for an expected stream.
const EXPECTED_STREAM_POLL: Duration = Duration::from_millis(20);
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
    /// Keys with a sync write not yet durable, as (vbucket, caller's key bytes). A key stays
    /// here after an ambiguous wait, until a majority holds its seqno or no replica is left
    /// that could be promoted without it ([`Tracker::resolved`]): until then it is hidden from
    /// readers, who could otherwise see a write that a failover then loses. Locked only when
    /// `pending_count` is not 0 or a sync write starts or ends.
    pending: Mutex<HashMap<(u16, Vec<u8>), Pending>>,
    pending_count: AtomicUsize,
}

/// A key's sync write that is not durable yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    /// The seqno it stored (0 while it is being written).
    seqno: u64,
    /// Its writer still waits: other writes to the key are refused (SYNC_WRITE_IN_PROGRESS).
    /// Once it answered (ambiguous) the key takes writes again but stays hidden from readers.
    waiting: bool,
}

/// A started sync write: its key is in progress until this is dropped, and hidden from
/// readers after that until its seqno is durable.
pub struct SyncWrite {
    tracker: Arc<Tracker>,
    key: Option<(u16, Vec<u8>)>,
    /// The seqno it stored, once known (0 before).
    seqno: std::sync::atomic::AtomicU64,
}

impl Drop for SyncWrite {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let seqno = self.seqno.load(Ordering::Acquire);
        let mut pending = self.tracker.pending.lock();
        let mine = Pending {
            seqno,
            waiting: true,
        };
        // Only this write's own entry (a later sync write may have taken the key over).
        if pending.get(&key) != Some(&mine) {
            return;
        }
        if seqno == 0 || self.tracker.resolved(key.0, seqno) {
            pending.remove(&key);
            self.tracker.pending_count.fetch_sub(1, Ordering::Release);
        } else if let Some(entry) = pending.get_mut(&key) {
            entry.waiting = false;
        }
    }
}

impl SyncWrite {
    /// Waits until a majority of `vb`'s chain holds `seqno` (the seqno this write stored), or
    /// `timeout` passes.
    pub async fn wait(&self, vb: u16, seqno: u64, timeout: Duration) -> Waited {
        if let Some(key) = &self.key {
            if let Some(entry) = self.tracker.pending.lock().get_mut(key) {
                if entry.waiting && entry.seqno == 0 {
                    entry.seqno = seqno;
                    self.seqno.store(seqno, Ordering::Release);
                }
            }
        }
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
            pending: Mutex::new(HashMap::new()),
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
        drop(held);
        // Writes left pending by an ambiguous wait whose vbucket moved on (no longer active
        // here, or its replicas gone) are resolved now.
        if self.pending_count.load(Ordering::Acquire) > 0 {
            let mut pending = self.pending.lock();
            let before = pending.len();
            pending.retain(|(vb, _), entry| entry.waiting || !self.resolved(*vb, entry.seqno));
            self.pending_count
                .fetch_sub(before - pending.len(), Ordering::Release);
        }
    }

    /// Whether a write of `vb` at `seqno` no longer needs hiding: a majority of the chain
    /// holds it, or the chain holds no replica (this node alone has `vb`'s data: no failover
    /// can promote a copy without it).
    fn resolved(&self, vb: u16, seqno: u64) -> bool {
        self.durable_seqno(vb) >= seqno || self.chains.lock().alone(vb)
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

    /// Whether a sync write to `vb` can form a majority, waiting at most `timeout` while the
    /// only missing replicas are ones that never streamed yet ([`Chains::expected`]): right
    /// after a bucket is created its replicas take a moment to connect.
    pub async fn wait_possible(&self, vb: u16, timeout: Duration) -> bool {
        self.wait_possible_within(vb, timeout, Duration::ZERO).await
    }

    /// [`Tracker::wait_possible`], waiting besides up to `grace` (within `timeout`) for
    /// replicas whose streams ended: a replica reconnects when the vbuckets it follows change
    /// (a rebalance moves them), and is streaming again a moment later.
    pub async fn wait_possible_within(&self, vb: u16, timeout: Duration, grace: Duration) -> bool {
        let now = tokio::time::Instant::now();
        let (deadline, graced) = (now + timeout, now + grace.min(timeout));
        loop {
            if self.possible(vb) {
                return true;
            }
            let now = tokio::time::Instant::now();
            let expected = self.chains.lock().expected(vb);
            if now >= deadline || (!expected && now >= graced) {
                return false;
            }
            tokio::time::sleep(EXPECTED_STREAM_POLL).await;
        }
    }

    /// Whether any key of the bucket has a sync write that is not durable yet (one atomic
    /// load): callers skip building a key when none has.
    pub fn any_pending(&self) -> bool {
        self.pending_count.load(Ordering::Acquire) > 0
    }

    /// Whether any sync write of `vb` is still waiting for its majority: a takeover waits
    /// for none to be left (rebalance.md), so no writer is answered by an old active.
    pub fn waiting_in(&self, vb: u16) -> bool {
        if self.pending_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let pending = self.pending.lock();
        pending
            .iter()
            .any(|((held, _), entry)| *held == vb && entry.waiting)
    }

    /// The seqno `node` last acknowledged of `vb` on its open stream (in the chain or not:
    /// a rebalance's copy catching up); `None` while it streams nothing or acknowledged none.
    pub fn latest_ack(&self, vb: u16, node: NodeId) -> Option<u64> {
        self.chains.lock().latest_ack(vb, node)
    }

    /// Whether a sync write to `key` in `vb` is waiting (one atomic load when none is): other
    /// writes to the key are refused meanwhile.
    pub fn is_pending(&self, vb: u16, key: &[u8]) -> bool {
        if self.pending_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let pending = self.pending.lock();
        pending
            .get(&(vb, key.to_vec()))
            .is_some_and(|entry| entry.waiting)
    }

    /// Whether `key` in `vb` has a sync write that is not durable yet, waiting or left
    /// ambiguous (one atomic load when none is): readers must not see it.
    pub fn is_hidden(&self, vb: u16, key: &[u8]) -> bool {
        if self.pending_count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let entry = (vb, key.to_vec());
        let mut pending = self.pending.lock();
        let Some(held) = pending.get(&entry).copied() else {
            return false;
        };
        if held.waiting || !self.resolved(vb, held.seqno) {
            return true;
        }
        pending.remove(&entry);
        self.pending_count.fetch_sub(1, Ordering::Release);
        false
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
        let fresh = Pending {
            seqno: 0,
            waiting: true,
        };
        match pending.get_mut(&entry) {
            Some(held) if held.waiting => return Err(Refused::InProgress),
            // Left ambiguous: this write takes the key over. Once it is durable, so is the
            // older one (a lower seqno of the same vbucket).
            Some(held) => *held = fresh,
            None => {
                pending.insert(entry.clone(), fresh);
                self.pending_count.fetch_add(1, Ordering::Release);
            }
        }
        Ok(SyncWrite {
            tracker: self.clone(),
            key: Some(entry),
            seqno: std::sync::atomic::AtomicU64::new(0),
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

    /// The lowest seqno of `vb` every replica of its chain acknowledged: 0 while one has not
    /// acknowledged since this node started, `u64::MAX` with no replica in the chain (what
    /// compaction may forget of `vb`'s purge markers, replica.md).
    pub fn oldest_acknowledged(&self, vb: u16) -> u64 {
        self.chains.lock().oldest_ack(vb)
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
        // Left ambiguous, the write takes writes again but stays hidden from readers until
        // a majority holds it.
        assert!(tracker.is_hidden(0, b"k"));
        drop(write);
        assert!(!tracker.is_pending(0, b"k"));
        assert!(tracker.is_hidden(0, b"k"));
        tracker.ack(0, 5, 9);
        assert!(!tracker.is_hidden(0, b"k"));
        let write = tracker.begin(0, b"k").expect("resolved");
        drop(write);
        assert!(
            !tracker.is_hidden(0, b"k"),
            "nothing stored: nothing hidden"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_sync_write_takes_over_a_key_left_ambiguous() {
        let tracker = Arc::new(Tracker::new(1));
        tracker.set_topology(1, &[vec![5]], Level::None);
        tracker.stream_opened(0, 5);
        let first = tracker.begin(0, b"k").expect("possible");
        let short = Duration::from_millis(10);
        assert_eq!(first.wait(0, 3, short).await, Waited::Ambiguous);
        drop(first);
        let second = tracker.begin(0, b"k").expect("not in progress any more");
        assert!(tracker.is_pending(0, b"k"));
        assert_eq!(tracker.begin(0, b"k").err(), Some(Refused::InProgress));
        // Durable at 7: so is the first write (3).
        tracker.ack(0, 5, 7);
        assert_eq!(second.wait(0, 7, short).await, Waited::Durable);
        drop(second);
        assert!(!tracker.is_hidden(0, b"k") && !tracker.is_pending(0, b"k"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_ambiguous_write_is_resolved_when_no_replica_is_left() {
        let tracker = Arc::new(Tracker::new(1));
        tracker.set_topology(1, &[vec![5]], Level::None);
        tracker.stream_opened(0, 5);
        let write = tracker.begin(0, b"k").expect("possible");
        assert_eq!(
            write.wait(0, 3, Duration::from_millis(10)).await,
            Waited::Ambiguous
        );
        drop(write);
        assert!(tracker.is_hidden(0, b"k"));
        // A map change that keeps the replica keeps it hidden ...
        tracker.set_topology(1, &[vec![5]], Level::None);
        assert!(tracker.is_hidden(0, b"k"));
        // ... one that leaves the chain empty (the replica failed over, or the vbucket moved
        // away) resolves it: no copy without it can be promoted.
        tracker.set_topology(1, &[vec![]], Level::None);
        assert!(!tracker.is_hidden(0, b"k"));
        assert!(
            tracker.begin(0, b"k").is_err(),
            "impossible, not in progress"
        );
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
