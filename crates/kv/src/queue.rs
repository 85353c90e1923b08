//! The replies a connection owes: requests answered later (writes, heavy lookups) and, on an
//! ordered connection, inline answers waiting behind them; on an unordered one, parts of a
//! batch answered on other threads. The queue also keeps the counts the output budget needs
//! (`budget.rs`): bytes of finished replies it holds, requests whose reply can carry a
//! document, and requests handed back unanswered because a part reached its budget.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::task::JoinHandle;

use crate::timings::ConnTimings;
use crate::KvState;

pub(crate) type ReplyFuture = futures_util::future::BoxFuture<'static, Vec<u8>>;

/// Replies produced off the connection's task, and the requests they left waiting.
pub(crate) struct Part {
    pub replies: Vec<u8>,
    /// (opcode, time taken) of every request answered here, for the connection's histograms.
    pub timed: Vec<(u8, Duration)>,
    pub spawned: Vec<JoinHandle<Part>>,
    /// Requests not answered because the part reached its share of the output budget or the
    /// connection its document replies in flight; the connection answers them later.
    pub leftover: Vec<Bytes>,
    /// Replies here that were counted in [`Owed::documents`] when their request was taken.
    pub documents: usize,
}

impl Part {
    pub(crate) fn with_capacity(requests: usize) -> Part {
        Part {
            replies: Vec::with_capacity(requests * 64),
            timed: Vec::with_capacity(requests),
            spawned: Vec::new(),
            leftover: Vec::new(),
            documents: 0,
        }
    }
}

/// Work of an unordered connection in flight: a part of a batch on the heavy pool, or a
/// request that waits on its own task. `None` if it panicked (its requests get no reply).
pub(crate) type PartFuture = futures_util::future::BoxFuture<'static, Option<Part>>;

/// Requests in flight whose reply can carry a document, counted across the threads that
/// answer a connection's requests.
#[derive(Clone, Default)]
pub(crate) struct Documents(Arc<AtomicUsize>);

impl Documents {
    pub(crate) fn in_flight(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn taken(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn answered(&self, count: usize) {
        if count > 0 {
            self.0.fetch_sub(count, Ordering::Relaxed);
        }
    }
}

/// What an ordered queue knows of each entry, in the same order.
#[derive(Clone, Copy)]
struct Entry {
    /// Bytes of an inline answer queued behind earlier requests (0 for a request answered
    /// later: its size is not known until it finishes).
    ready_bytes: usize,
    document: bool,
}

enum Pending {
    Ordered(FuturesOrdered<ReplyFuture>, VecDeque<Entry>),
    Unordered(FuturesUnordered<PartFuture>),
}

/// What the connection owes, with the counts for its output budget.
pub(crate) struct Queue {
    pending: Pending,
    /// Bytes of finished replies held in the queue (ordered inline answers behind a write).
    ready_bytes: usize,
    pub documents: Documents,
    /// Requests of an unordered connection handed back by parts, answered before any new one.
    pub deferred: Vec<Bytes>,
}

/// Merges a connection's latency histograms into the node's when the connection ends.
pub(crate) struct TimingsGuard {
    pub local: ConnTimings,
    pub state: Arc<KvState>,
}

impl Drop for TimingsGuard {
    fn drop(&mut self) {
        self.local.merge(&self.state.timings);
    }
}

/// A request's task as queued work.
pub(crate) fn joined(task: JoinHandle<Part>) -> PartFuture {
    Box::pin(task.map(Result::ok))
}

/// A queued request answered on its own task once its future finishes; `document`: its
/// reply was counted in [`Owed::documents`] when the request was taken.
pub(crate) fn spawn_later(
    node: Arc<KvState>,
    future: ReplyFuture,
    opcode: u8,
    key: Bytes,
    started: Instant,
    document: bool,
) -> JoinHandle<Part> {
    tokio::spawn(async move {
        let replies = future.await;
        node.timings.record(opcode, &key, started);
        Part {
            replies,
            timed: Vec::new(),
            spawned: Vec::new(),
            leftover: Vec::new(),
            documents: usize::from(document),
        }
    })
}

impl Queue {
    pub(crate) fn new(unordered: bool, documents: Documents) -> Queue {
        Queue {
            pending: if unordered {
                Pending::Unordered(FuturesUnordered::new())
            } else {
                Pending::Ordered(FuturesOrdered::new(), VecDeque::new())
            },
            ready_bytes: 0,
            documents,
            deferred: Vec::new(),
        }
    }

    pub(crate) fn is_unordered(&self) -> bool {
        matches!(self.pending, Pending::Unordered(_))
    }

    pub(crate) fn len(&self) -> usize {
        match &self.pending {
            Pending::Ordered(queue, _) => queue.len(),
            Pending::Unordered(queue) => queue.len(),
        }
    }

    /// Bytes of finished replies the queue holds.
    pub(crate) fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    /// Queues an ordered connection's reply: a future, or an inline answer that must wait
    /// behind earlier requests (`ready_bytes` its size).
    pub(crate) fn push_ordered(&mut self, reply: ReplyFuture, ready_bytes: usize, document: bool) {
        if let Pending::Ordered(queue, entries) = &mut self.pending {
            queue.push_back(reply);
            entries.push_back(Entry {
                ready_bytes,
                document,
            });
            self.ready_bytes += ready_bytes;
            if document {
                self.documents.taken();
            }
        }
    }

    /// Queues an unordered connection's work.
    pub(crate) fn push_unordered(&mut self, work: PartFuture) {
        if let Pending::Unordered(queue) = &mut self.pending {
            queue.push(work);
        }
    }

    /// The next reply owed (an unordered part's replies at once), `None` when nothing is.
    pub(crate) async fn next(&mut self, timings: &mut TimingsGuard) -> Option<Vec<u8>> {
        match &mut self.pending {
            Pending::Ordered(queue, entries) => {
                let reply = queue.next().await?;
                if let Some(entry) = entries.pop_front() {
                    self.ready_bytes -= entry.ready_bytes;
                    self.documents.answered(usize::from(entry.document));
                }
                Some(reply)
            }
            Pending::Unordered(queue) => {
                // A part that panicked leaves no replies; the queue goes on.
                let Some(part) = queue.next().await? else {
                    return Some(Vec::new());
                };
                for (opcode, took) in part.timed {
                    timings
                        .local
                        .record_took(&timings.state.timings, opcode, took);
                }
                self.documents.answered(part.documents);
                queue.extend(part.spawned.into_iter().map(joined));
                self.deferred.extend(part.leftover);
                Some(part.replies)
            }
        }
    }

    /// Replies already finished, without waiting.
    pub(crate) fn drain_ready(&mut self, out: &mut Vec<u8>, timings: &mut TimingsGuard) {
        while self.len() > 0 {
            match self.next(timings).now_or_never() {
                Some(Some(reply)) => out.extend_from_slice(&reply),
                _ => return,
            }
        }
    }
}
