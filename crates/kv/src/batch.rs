//! An unordered connection's batch of data requests: split across threads when big enough,
//! the connection's own task answering the first part. Every part answers requests until it
//! reaches its share of the connection's output budget, or meets a request whose reply can
//! carry a document while the connection has as many of those in flight as it may; the
//! requests left are handed back and answered once the replies before them are written
//! (`budget.rs`).

use std::time::Instant;

use bytes::Bytes;
use settee_kv_codec::{decode, Decoded};

use crate::budget::{reply_may_carry_document, DOCUMENT_REPLIES_IN_FLIGHT_MAX};
use crate::queue::{joined, spawn_later, Documents, Part, Queue, TimingsGuard};
use crate::session::{self, Handled, Session, SharedView};

/// Fewest data requests per part when an unordered batch is split across threads: a batch
/// smaller than two parts is answered by the connection's own task. Each hand-off costs a
/// wake-up on another core and a reply write of its own. On two cores, splitting batches of
/// 48+ instead of 32+ made one unordered connection's CPU-heavy lookup mix 1.72x -> 1.79x its
/// ordered rate, and pipelined GETs and indexed lookups ~10% faster (BENCHMARKS.md, issue 4).
const PART_REQUESTS_MIN: usize = 24;
/// Requests of a split batch the connection's own task answers before it waits for the parts.
const INLINE_REQUESTS: usize = 16;

/// Fixed for a connection's life.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Largest frame body accepted.
    pub max_body: usize,
    /// Threads an unordered batch may be split across.
    pub workers: usize,
}

/// Whether a part must stop before `frame`: its replies reached `bytes_max`, or the request
/// would add a document reply while the connection has the most it may have in flight.
fn must_stop(replies: usize, bytes_max: usize, opcode: u8, documents: &Documents) -> bool {
    replies >= bytes_max
        || (reply_may_carry_document(opcode)
            && documents.in_flight() >= DOCUMENT_REPLIES_IN_FLIGHT_MAX)
}

/// Answers a part of a batch of data requests on whatever thread runs it, up to `bytes_max`
/// bytes of replies.
fn answer_part(
    shared: &SharedView,
    frames: &[Bytes],
    started: Instant,
    limits: Limits,
    bytes_max: usize,
    documents: &Documents,
) -> Part {
    let mut part = Part::with_capacity(frames.len());
    let node = shared.state();
    for (index, bytes) in frames.iter().enumerate() {
        let Ok(Decoded::Frame(frame, _)) = decode(bytes, limits.max_body) else {
            continue;
        };
        if must_stop(part.replies.len(), bytes_max, frame.opcode, documents) {
            part.leftover = frames[index..].to_vec();
            break;
        }
        match session::handle_data(shared.view(), &frame, bytes, &mut part.replies) {
            Handled::Done | Handled::Close | Handled::Dcp(_) => {
                let took = started.elapsed();
                node.timings.log_if_slow(frame.opcode, frame.key, took);
                part.timed.push((frame.opcode, took));
            }
            Handled::Later(future) => {
                let document = reply_may_carry_document(frame.opcode);
                if document {
                    documents.taken();
                }
                part.spawned.push(spawn_later(
                    node.clone(),
                    future,
                    frame.opcode,
                    bytes.slice_ref(frame.key),
                    started,
                    document,
                ))
            }
        }
    }
    part
}

/// Answers a batch of data requests of an unordered connection: split across up to
/// `limits.workers` threads when it is big enough, this task taking the first part, the whole
/// within `budget` bytes of replies (beside what `out` holds already).
#[allow(clippy::too_many_arguments)]
pub(crate) fn dispatch_batch(
    batch: &mut Vec<Bytes>,
    session: &Session,
    queue: &mut Queue,
    out: &mut Vec<u8>,
    timings: &mut TimingsGuard,
    started: Instant,
    limits: Limits,
    budget: usize,
) {
    if batch.is_empty() {
        return;
    }
    let parts = (batch.len() / PART_REQUESTS_MIN).clamp(1, limits.workers.max(1));
    // Split, the connection's own task answers only the first INLINE_REQUESTS: on the main
    // lane it runs on a runtime worker, and answering half of a 200-request batch there kept
    // other connections waiting for ~300 us.
    let inline = if parts > 1 {
        INLINE_REQUESTS
    } else {
        batch.len()
    };
    let per_part = (batch.len() - inline).div_ceil(parts).max(1);
    if parts > 1 {
        // The other parts run on the heavy pool (nice 10, behind this connection's permits),
        // not on the runtime's workers: a connection pipelining hundreds of lookups must not
        // hold the threads that answer other connections' GETs. On the runtime's workers a
        // light client's GET p99 went from 64 us to 790 us while one unordered connection
        // hammered 10-path lookups; the pool yields the cores to them instead.
        let shared = session.shared_view();
        let runtime = tokio::runtime::Handle::current();
        // Each part and this task share the budget.
        let part_bytes_max = (budget / (parts + 1)).max(1);
        for frames in batch[inline..].chunks(per_part) {
            let (shared, frames, runtime) = (shared.clone(), frames.to_vec(), runtime.clone());
            let documents = queue.documents.clone();
            // Awaited by this task itself (no task of its own): the pool thread's answer wakes
            // the connection directly.
            queue.push_unordered(Box::pin(async move {
                let node = shared.state().clone();
                let permits = shared.heavy_permits().clone();
                let job = move || {
                    // Requests that wait (writes, heavy lookups) are spawned on the runtime.
                    let _runtime = runtime.enter();
                    answer_part(
                        &shared,
                        &frames,
                        started,
                        limits,
                        part_bytes_max,
                        &documents,
                    )
                };
                let part = node.heavy.run(&permits, job).await;
                if part.is_none() {
                    tracing::error!("a batch of requests panicked; they get no reply");
                }
                part
            }));
        }
    }
    let inline_bytes_max = if parts > 1 {
        budget / (parts + 1)
    } else {
        budget
    }
    .max(1);
    let state = timings.state.clone();
    for (index, bytes) in batch[..inline].iter().enumerate() {
        let Ok(Decoded::Frame(frame, _)) = decode(bytes, limits.max_body) else {
            continue;
        };
        if must_stop(out.len(), inline_bytes_max, frame.opcode, &queue.documents) {
            queue.deferred.extend_from_slice(&batch[index..inline]);
            break;
        }
        match session::handle_data(session.view(), &frame, bytes, out) {
            Handled::Done | Handled::Close | Handled::Dcp(_) => {
                timings
                    .local
                    .record(&state.timings, frame.opcode, frame.key, started)
            }
            Handled::Later(future) => {
                let document = reply_may_carry_document(frame.opcode);
                if document {
                    queue.documents.taken();
                }
                let task = spawn_later(
                    state.clone(),
                    future,
                    frame.opcode,
                    bytes.slice_ref(frame.key),
                    started,
                    document,
                );
                queue.push_unordered(joined(task));
            }
        }
    }
    batch.clear();
}
