//! The per-connection loop: read whatever arrived, decode every whole frame in it, answer
//! cheap requests inline and queue the rest, then write all replies that are ready with one
//! `write` call. Without UnorderedExecution, replies leave in request order (queued requests
//! still run concurrently, so a pipeline of writes shares group commits); in order, a request
//! on a key that a queued request writes waits for the queue to drain, so a pipelined GET after
//! a SET of the same key sees the SET.
//!
//! With UnorderedExecution one connection uses every core: the data requests of one read are
//! collected into a batch, and a batch big enough to be worth it is split into parts answered
//! in parallel — the first on this task, the others on other worker threads — each part's
//! replies written as soon as it is done. Requests that wait (writes, heavy lookups) are
//! spawned and answered when they finish.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use settee_kv_codec::{decode, Decoded, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::lanes::BusyMeter;
use crate::session::{self, Handled, Session, SharedView};
use crate::timings::ConnTimings;
use crate::KvState;

/// Requests a connection may have queued before the server stops reading from it.
const MAX_IN_FLIGHT: usize = 4096;
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Frame headroom over the largest value: extras, key, framing extras.
const FRAME_OVERHEAD_MAX: usize = 64 * 1024;
/// Fewest data requests per part when an unordered batch is split across threads: a batch
/// smaller than two parts is answered by the connection's own task. Each hand-off costs a
/// wake-up on another core and a reply write of its own. On two cores, splitting batches of
/// 48+ instead of 32+ made one unordered connection's CPU-heavy lookup mix 1.72x -> 1.79x its
/// ordered rate, and pipelined GETs and indexed lookups ~10% faster (BENCHMARKS.md, issue 4).
const PART_REQUESTS_MIN: usize = 24;
/// Requests of a split batch the connection's own task answers before it waits for the parts.
const INLINE_REQUESTS: usize = 16;

type ReplyFuture = futures_util::future::BoxFuture<'static, Vec<u8>>;

/// Replies produced off the connection's task, and the requests they left waiting.
struct Part {
    replies: Vec<u8>,
    /// (opcode, time taken) of every request answered here, for the connection's histograms.
    timed: Vec<(u8, Duration)>,
    spawned: Vec<JoinHandle<Part>>,
}

/// Work of an unordered connection in flight: a part of a batch on the heavy pool, or a
/// request that waits on its own task. `None` if it panicked (its requests get no reply).
type PartFuture = futures_util::future::BoxFuture<'static, Option<Part>>;

enum Queue {
    Ordered(FuturesOrdered<ReplyFuture>),
    Unordered(FuturesUnordered<PartFuture>),
}

impl Queue {
    fn len(&self) -> usize {
        match self {
            Queue::Ordered(queue) => queue.len(),
            Queue::Unordered(queue) => queue.len(),
        }
    }

    async fn next(&mut self, timings: &mut TimingsGuard) -> Option<Vec<u8>> {
        match self {
            Queue::Ordered(queue) => queue.next().await,
            Queue::Unordered(queue) => {
                // A part that panicked leaves no replies; the queue goes on.
                let Some(part) = queue.next().await? else {
                    return Some(Vec::new());
                };
                for (opcode, took) in part.timed {
                    timings
                        .local
                        .record_took(&timings.state.timings, opcode, took);
                }
                queue.extend(part.spawned.into_iter().map(joined));
                Some(part.replies)
            }
        }
    }

    /// Replies already finished, without waiting.
    fn drain_ready(&mut self, out: &mut Vec<u8>, timings: &mut TimingsGuard) {
        while self.len() > 0 {
            match self.next(timings).now_or_never() {
                Some(Some(reply)) => out.extend_from_slice(&reply),
                _ => return,
            }
        }
    }
}

/// Merges a connection's latency histograms into the node's when the connection ends.
struct TimingsGuard {
    local: ConnTimings,
    state: Arc<KvState>,
}

impl Drop for TimingsGuard {
    fn drop(&mut self) {
        self.local.merge(&self.state.timings);
    }
}

/// A request's task as queued work.
fn joined(task: JoinHandle<Part>) -> PartFuture {
    Box::pin(task.map(Result::ok))
}

/// A queued request answered on its own task once its future finishes.
fn spawn_later(
    node: Arc<KvState>,
    future: futures_util::future::BoxFuture<'static, Vec<u8>>,
    opcode: u8,
    key: Bytes,
    started: Instant,
) -> JoinHandle<Part> {
    tokio::spawn(async move {
        let replies = future.await;
        node.timings.record(opcode, &key, started);
        Part {
            replies,
            timed: Vec::new(),
            spawned: Vec::new(),
        }
    })
}

/// Answers a part of a batch of data requests on whatever thread runs it.
fn answer_part(shared: &SharedView, frames: &[Bytes], started: Instant, max_body: usize) -> Part {
    let mut part = Part {
        replies: Vec::with_capacity(frames.len() * 64),
        timed: Vec::with_capacity(frames.len()),
        spawned: Vec::new(),
    };
    let node = shared.state();
    for bytes in frames {
        let Ok(Decoded::Frame(frame, _)) = decode(bytes, max_body) else {
            continue;
        };
        match session::handle_data(shared.view(), &frame, bytes, &mut part.replies) {
            Handled::Done | Handled::Close => {
                let took = started.elapsed();
                node.timings.log_if_slow(frame.opcode, frame.key, took);
                part.timed.push((frame.opcode, took));
            }
            Handled::Later(future) => part.spawned.push(spawn_later(
                node.clone(),
                future,
                frame.opcode,
                bytes.slice_ref(frame.key),
                started,
            )),
        }
    }
    part
}

/// Fixed for a connection's life.
#[derive(Clone, Copy)]
struct Limits {
    /// Largest frame body accepted.
    max_body: usize,
    /// Threads an unordered batch may be split across.
    workers: usize,
}

/// Answers a batch of data requests of an unordered connection: split across up to
/// `limits.workers` threads when it is big enough, this task taking the first part.
fn dispatch_batch(
    batch: &mut Vec<Bytes>,
    session: &Session,
    queue: &mut FuturesUnordered<PartFuture>,
    out: &mut Vec<u8>,
    timings: &mut TimingsGuard,
    started: Instant,
    limits: Limits,
) {
    let Limits { max_body, workers } = limits;
    if batch.is_empty() {
        return;
    }
    let parts = (batch.len() / PART_REQUESTS_MIN).clamp(1, workers.max(1));
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
        for frames in batch[inline..].chunks(per_part) {
            let (shared, frames, runtime) = (shared.clone(), frames.to_vec(), runtime.clone());
            // Awaited by this task itself (no task of its own): the pool thread's answer wakes
            // the connection directly.
            queue.push(Box::pin(async move {
                let node = shared.state().clone();
                let permits = shared.heavy_permits().clone();
                let job = move || {
                    // Requests that wait (writes, heavy lookups) are spawned on the runtime.
                    let _runtime = runtime.enter();
                    answer_part(&shared, &frames, started, max_body)
                };
                let part = node.heavy.run(&permits, job).await;
                if part.is_none() {
                    tracing::error!("a batch of requests panicked; they get no reply");
                }
                part
            }));
        }
    }
    let state = timings.state.clone();
    for bytes in &batch[..inline] {
        let Ok(Decoded::Frame(frame, _)) = decode(bytes, max_body) else {
            continue;
        };
        match session::handle_data(session.view(), &frame, bytes, out) {
            Handled::Done | Handled::Close => {
                timings
                    .local
                    .record(&state.timings, frame.opcode, frame.key, started)
            }
            Handled::Later(future) => queue.push(joined(spawn_later(
                state.clone(),
                future,
                frame.opcode,
                bytes.slice_ref(frame.key),
                started,
            ))),
        }
    }
    batch.clear();
}

/// What a connection carries from one lane to the other.
struct Carried {
    session: Session,
    /// Bytes read and not yet decoded (a partial frame, or frames left when reading paused).
    input: BytesMut,
    timings: TimingsGuard,
}

/// Serves one connection: on the main runtime, and on the bulk lane if it gets busy there
/// (`lanes.rs`).
pub(crate) async fn run(stream: TcpStream, state: Arc<KvState>) {
    let carried = Carried {
        session: Session::new(state.clone(), stream.peer_addr().ok().map(|addr| addr.ip())),
        input: BytesMut::with_capacity(READ_BUFFER_BYTES),
        timings: TimingsGuard {
            local: ConnTimings::new(),
            state: state.clone(),
        },
    };
    let Some((stream, carried)) = run_on_lane(stream, state.clone(), carried, true).await else {
        return;
    };
    let Some((lane, seat)) = state.bulk.as_ref().and_then(|bulk| bulk.seat()) else {
        return;
    };
    lane.spawn(async move {
        let _seat = seat;
        // Registered with the bulk lane thread's reactor from here on.
        match TcpStream::from_std(stream) {
            Ok(stream) => {
                if let Some(bulk) = &state.bulk {
                    bulk.count_move();
                }
                let _ = run_on_lane(stream, state, carried, false).await;
            }
            Err(error) => tracing::warn!(%error, "moving a connection to the bulk lane failed"),
        }
    });
}

/// The connection loop. With `may_move`, returns the socket and the connection's state at a
/// quiet point once the connection has been busy enough to move to the bulk lane; otherwise
/// runs until the connection ends and returns `None`.
async fn run_on_lane(
    stream: TcpStream,
    state: Arc<KvState>,
    carried: Carried,
    may_move: bool,
) -> Option<(std::net::TcpStream, Carried)> {
    let max_body = state.config.max_value_bytes + FRAME_OVERHEAD_MAX;
    let limits = Limits {
        max_body,
        workers: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
    };
    let (mut reader, mut writer) = stream.into_split();
    let Carried {
        mut session,
        mut input,
        mut timings,
    } = carried;
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUFFER_BYTES);
    let mut queue = if session.features.unordered {
        Queue::Unordered(FuturesUnordered::new())
    } else {
        Queue::Ordered(FuturesOrdered::new())
    };
    let mut meter = state
        .bulk
        .as_ref()
        .filter(|_| may_move)
        .map(|bulk| BusyMeter::new(bulk.config));
    let mut moving = false;
    // Keys (as sent) of the requests queued in order; cleared whenever the queue is empty.
    let mut pending_keys: HashSet<Bytes> = HashSet::new();
    // Data requests of an unordered connection collected from one read, answered together.
    let mut batch: Vec<Bytes> = Vec::new();
    let mut closing = false;
    let mut eof = false;
    loop {
        let working_since = Instant::now();
        let mut requests_read = 0usize;
        if !closing && !eof && !moving {
            // Decode and handle every whole frame already buffered; requests are timed from
            // the moment their bytes were read.
            let batch_started = working_since;
            loop {
                let (frame_len, needed) = match decode(&input, max_body) {
                    Ok(Decoded::Frame(_, used)) => (Some(used), 0),
                    Ok(Decoded::Incomplete(needed)) => (None, needed),
                    Err(error) => {
                        // The stream cannot be resynchronised: answer nothing more, close
                        // this connection only. Nothing acknowledged is lost.
                        tracing::debug!(%error, "malformed frame, closing the connection");
                        closing = true;
                        break;
                    }
                };
                let Some(frame_len) = frame_len else {
                    if needed > input.capacity() {
                        input.reserve(needed - input.len());
                    }
                    break;
                };
                let bytes = input.split_to(frame_len).freeze();
                requests_read += 1;
                let Ok(Decoded::Frame(frame, _)) = decode(&bytes, max_body) else {
                    closing = true;
                    break;
                };
                if let Queue::Unordered(pending) = &mut queue {
                    if session::is_data_request(&frame) {
                        batch.push(bytes.clone());
                        if batch.len() + pending.len() >= MAX_IN_FLIGHT {
                            break;
                        }
                        continue;
                    }
                    // Anything else may change what data requests see: answer the batch first.
                    dispatch_batch(
                        &mut batch,
                        &session,
                        pending,
                        &mut out,
                        &mut timings,
                        batch_started,
                        limits,
                    );
                }
                let was_unordered = session.features.unordered;
                let started = batch_started;
                if let Queue::Ordered(pending) = &mut queue {
                    if pending.is_empty() {
                        pending_keys.clear();
                    } else if !frame.key.is_empty() && pending_keys.contains(frame.key) {
                        // Without UnorderedExecution a request sees every earlier one's effect:
                        // a request on a key with a write still in flight waits for it.
                        while let Some(reply) = pending.next().await {
                            out.extend_from_slice(&reply);
                        }
                        pending_keys.clear();
                    }
                }
                let handled = match &mut queue {
                    Queue::Ordered(pending) if !pending.is_empty() => {
                        // Keep order: even an inline answer waits behind queued ones.
                        let mut inline = Vec::new();
                        let handled = session.handle(&frame, &bytes, &mut inline);
                        if !inline.is_empty() {
                            pending.push_back(Box::pin(async move { inline }));
                        }
                        handled
                    }
                    _ => session.handle(&frame, &bytes, &mut out),
                };
                match handled {
                    Handled::Done => {
                        timings
                            .local
                            .record(&state.timings, frame.opcode, frame.key, started)
                    }
                    Handled::Close => {
                        closing = true;
                        break;
                    }
                    Handled::Later(future) => match &mut queue {
                        Queue::Ordered(pending) => {
                            if !frame.key.is_empty() {
                                pending_keys.insert(bytes.slice_ref(frame.key));
                            }
                            let (node, opcode, key) =
                                (state.clone(), frame.opcode, bytes.slice_ref(frame.key));
                            pending.push_back(Box::pin(async move {
                                let reply = future.await;
                                node.timings.record(opcode, &key, started);
                                reply
                            }));
                        }
                        Queue::Unordered(pending) => pending.push(joined(spawn_later(
                            state.clone(),
                            future,
                            frame.opcode,
                            bytes.slice_ref(frame.key),
                            started,
                        ))),
                    },
                }
                if session.features.unordered != was_unordered {
                    // HELLO switched the execution mode; earlier queued requests finish first.
                    while let Some(reply) = queue.next(&mut timings).await {
                        out.extend_from_slice(&reply);
                    }
                    queue = if session.features.unordered {
                        Queue::Unordered(FuturesUnordered::new())
                    } else {
                        Queue::Ordered(FuturesOrdered::new())
                    };
                }
                if queue.len() >= MAX_IN_FLIGHT {
                    break;
                }
            }
            if let Queue::Unordered(pending) = &mut queue {
                dispatch_batch(
                    &mut batch,
                    &session,
                    pending,
                    &mut out,
                    &mut timings,
                    batch_started,
                    limits,
                );
            }
        }
        queue.drain_ready(&mut out, &mut timings);
        if !out.is_empty() {
            if writer.write_all(&out).await.is_err() {
                return None;
            }
            out.clear();
        }
        if closing || eof {
            // Finish what was accepted (writes in flight are completed either way), then go.
            while let Some(reply) = queue.next(&mut timings).await {
                out.extend_from_slice(&reply);
            }
            if !out.is_empty() {
                let _ = writer.write_all(&out).await;
            }
            let _ = writer.shutdown().await;
            return None;
        }
        if let Some(meter) = &mut meter {
            moving = moving || meter.worked_since(working_since, requests_read);
        }
        if moving && queue.len() == 0 {
            // Quiet: every reply owed has been written; the rest continues on the bulk lane.
            let stream = reader.reunite(writer).ok()?.into_std().ok()?;
            let carried = Carried {
                session,
                input,
                timings,
            };
            return Some((stream, carried));
        }
        // While moving, only replies are awaited: nothing more is read here.
        let can_read = queue.len() < MAX_IN_FLIGHT && !moving;
        tokio::select! {
            read = reader.read_buf(&mut input), if can_read => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(_) => {}
            },
            Some(reply) = queue.next(&mut timings), if queue.len() > 0 => {
                out.extend_from_slice(&reply)
            }
        }
        if input.capacity() - input.len() < HEADER_LEN {
            input.reserve(READ_BUFFER_BYTES);
        }
        // After a large frame, give the memory back once the buffer is empty again.
        if input.is_empty() && input.capacity() > 4 * READ_BUFFER_BYTES {
            input = BytesMut::with_capacity(READ_BUFFER_BYTES);
        }
    }
}
