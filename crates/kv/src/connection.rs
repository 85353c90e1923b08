//! The per-connection loop: read whatever arrived, decode every whole frame in it, answer
//! cheap requests inline and queue the rest, then write all replies that are ready with one
//! `write` call. Without UnorderedExecution, replies leave in request order (queued requests
//! still run concurrently, so a pipeline of writes shares group commits); in order, a request
//! on a key that a queued request writes waits for the queue to drain, so a pipelined GET after
//! a SET of the same key sees the SET.
//!
//! With UnorderedExecution one connection uses every core: the data requests of one read are
//! collected into a batch, and a batch big enough to be worth it is split into parts answered
//! in parallel (`batch.rs`) — the first on this task, the others on other worker threads —
//! each part's replies written as soon as it is done. Requests that wait (writes, heavy
//! lookups) are spawned and answered when they finish.
//!
//! The loop takes no new request while the replies it holds are over its output budget
//! (`budget.rs`), and closes a connection silent for longer than its limits allow, or whose
//! client has stopped reading its replies (`deadlines.rs`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use settee_kv_codec::{decode, Decoded, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::batch::{dispatch_batch, Limits};
use crate::budget::{reply_may_carry_document, DOCUMENT_REPLIES_IN_FLIGHT_MAX};
use crate::deadlines::{write_unless_stuck, Deadlines, Silence};
use crate::lanes::BusyMeter;
use crate::queue::{joined, spawn_later, Documents, Queue, TimingsGuard};
use crate::session::{Handled, Session};
use crate::timings::ConnTimings;
use crate::KvState;
use settee_door::Slot;

/// Requests a connection may have queued before the server stops reading from it.
const MAX_IN_FLIGHT: usize = 4096;
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Frame headroom over the largest value: extras, key, framing extras.
const FRAME_OVERHEAD_MAX: usize = 64 * 1024;

/// What a connection carries from one lane to the other.
struct Carried {
    session: Session,
    /// Bytes read and not yet decoded (a partial frame, or frames left when reading paused).
    input: BytesMut,
    timings: TimingsGuard,
    documents: Documents,
    connected_at: Instant,
    last_read: Instant,
}

/// Serves one connection: on the main runtime, and on the bulk lane if it gets busy there
/// (`lanes.rs`). `slot` is its place among the door's connections, given back when it ends.
pub(crate) async fn run(
    stream: TcpStream,
    state: Arc<KvState>,
    slot: Slot,
    transport: crate::Transport,
) {
    let now = Instant::now();
    // A relayed TLS connection's addresses are those the relay accepted, not this loopback
    // connection's.
    let (peer, local, tls) = match transport {
        crate::Transport::TlsRelayed { peer, local } => (Some(peer), Some(local), true),
        crate::Transport::Plain => (
            stream.peer_addr().ok().map(|addr| addr.ip()),
            stream.local_addr().ok().map(|addr| addr.ip()),
            false,
        ),
    };
    let carried = Carried {
        session: Session::new(state.clone(), peer, local, tls),
        input: BytesMut::with_capacity(READ_BUFFER_BYTES),
        timings: TimingsGuard {
            local: ConnTimings::new(),
            state: state.clone(),
        },
        documents: Documents::default(),
        connected_at: now,
        last_read: now,
    };
    let Some((stream, carried)) = run_on_lane(stream, state.clone(), carried, true).await else {
        return;
    };
    let Some((lane, seat)) = state.bulk.as_ref().and_then(|bulk| bulk.seat()) else {
        return;
    };
    lane.spawn(async move {
        let _seat = seat;
        let _slot = slot;
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

/// Why the loop stopped taking requests before the input ran out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paused {
    /// Not paused.
    No,
    /// The replies held reached the output budget: write them, then go on.
    Output,
    /// As many document replies in flight as allowed, or the queue is full: wait for one.
    Queue,
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
    let output_bytes_max = state.config.limits.output_bytes_max;
    let deadlines = Deadlines::new(&state.config.limits);
    let stuck_after = state.config.limits.send_queue_stuck_timeout;
    let check_every = deadlines.check_every();
    let check = tokio::time::sleep(check_every.unwrap_or(std::time::Duration::MAX / 4));
    tokio::pin!(check);
    let (mut reader, mut writer) = stream.into_split();
    let Carried {
        mut session,
        mut input,
        mut timings,
        documents,
        connected_at,
        mut last_read,
    } = carried;
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUFFER_BYTES);
    let mut queue = Queue::new(session.features.unordered, documents);
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
    // Set by a DCP_OPEN that succeeded: nothing more is read here.
    let mut dcp: Option<crate::dcp::Opened> = None;
    // Every cluster map the node applies, for a client that asked for pushes in HELLO.
    let mut map_changes = state.routing.subscribe();
    loop {
        let working_since = Instant::now();
        let mut requests_read = 0usize;
        let budget = state.output.budget(output_bytes_max);
        let mut paused = Paused::No;
        if !closing && !eof && dcp.is_none() {
            let batch_started = working_since;
            if !queue.deferred.is_empty() {
                // Requests a part handed back: answered before any new one is decoded.
                if queue.documents.in_flight() < DOCUMENT_REPLIES_IN_FLIGHT_MAX {
                    batch.append(&mut queue.deferred);
                    dispatch_batch(
                        &mut batch,
                        &session,
                        &mut queue,
                        &mut out,
                        &mut timings,
                        batch_started,
                        limits,
                        budget,
                    );
                }
                if out.len() >= budget {
                    paused = Paused::Output;
                } else if !queue.deferred.is_empty() {
                    paused = Paused::Queue;
                }
            }
            if moving && paused == Paused::No {
                // Moving: requests handed back are answered here, new ones on the bulk lane.
                paused = Paused::Queue;
            }
            // Decode and handle every whole frame already buffered; requests are timed from
            // the moment their bytes were read.
            while paused == Paused::No {
                let (frame_len, needed) = match decode(&input, max_body) {
                    Ok(Decoded::Frame(frame, used)) => {
                        if out.len() + queue.ready_bytes() >= budget {
                            paused = Paused::Output;
                            break;
                        }
                        if reply_may_carry_document(frame.opcode)
                            && queue.documents.in_flight() >= DOCUMENT_REPLIES_IN_FLIGHT_MAX
                        {
                            paused = Paused::Queue;
                            break;
                        }
                        (Some(used), 0)
                    }
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
                if queue.is_unordered() {
                    if session.batches(&frame) {
                        batch.push(bytes.clone());
                        if batch.len() + queue.len() >= MAX_IN_FLIGHT {
                            break;
                        }
                        continue;
                    }
                    // Anything else may change what data requests see: answer the batch first.
                    dispatch_batch(
                        &mut batch,
                        &session,
                        &mut queue,
                        &mut out,
                        &mut timings,
                        batch_started,
                        limits,
                        budget,
                    );
                } else if queue.len() == 0 {
                    pending_keys.clear();
                } else if !frame.key.is_empty() && pending_keys.contains(frame.key) {
                    // Without UnorderedExecution a request sees every earlier one's effect:
                    // a request on a key with a write still in flight waits for it.
                    while let Some(reply) = queue.next(&mut timings).await {
                        out.extend_from_slice(&reply);
                    }
                    pending_keys.clear();
                }
                let was_unordered = session.features.unordered;
                let started = batch_started;
                let handled = if !queue.is_unordered() && queue.len() > 0 {
                    // Keep order: even an inline answer waits behind queued ones.
                    let mut inline = Vec::new();
                    let handled = session.handle(&frame, &bytes, &mut inline);
                    if !inline.is_empty() {
                        let ready_bytes = inline.len();
                        queue.push_ordered(Box::pin(async move { inline }), ready_bytes, false);
                    }
                    handled
                } else {
                    session.handle(&frame, &bytes, &mut out)
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
                    Handled::Dcp(opened) => {
                        dcp = Some(opened);
                        break;
                    }
                    Handled::Later(future) => {
                        let document = reply_may_carry_document(frame.opcode);
                        let (opcode, key) = (frame.opcode, bytes.slice_ref(frame.key));
                        if queue.is_unordered() {
                            if document {
                                queue.documents.taken();
                            }
                            let task =
                                spawn_later(state.clone(), future, opcode, key, started, document);
                            queue.push_unordered(joined(task));
                        } else {
                            if !frame.key.is_empty() {
                                pending_keys.insert(key.clone());
                            }
                            let node = state.clone();
                            let reply = Box::pin(async move {
                                let reply = future.await;
                                node.timings.record(opcode, &key, started);
                                reply
                            });
                            queue.push_ordered(reply, 0, document);
                        }
                    }
                }
                if session.features.unordered != was_unordered {
                    // HELLO switched the execution mode; earlier queued requests finish first.
                    while let Some(reply) = queue.next(&mut timings).await {
                        out.extend_from_slice(&reply);
                    }
                    // Requests handed back by parts are answered in the old mode.
                    let mut handed_back = std::mem::take(&mut queue.deferred);
                    while !handed_back.is_empty() {
                        dispatch_batch(
                            &mut handed_back,
                            &session,
                            &mut queue,
                            &mut out,
                            &mut timings,
                            batch_started,
                            limits,
                            usize::MAX,
                        );
                        while let Some(reply) = queue.next(&mut timings).await {
                            out.extend_from_slice(&reply);
                        }
                        handed_back = std::mem::take(&mut queue.deferred);
                    }
                    queue = Queue::new(session.features.unordered, queue.documents.clone());
                }
                if queue.len() >= MAX_IN_FLIGHT {
                    break;
                }
            }
            if queue.is_unordered() {
                dispatch_batch(
                    &mut batch,
                    &session,
                    &mut queue,
                    &mut out,
                    &mut timings,
                    batch_started,
                    limits,
                    budget,
                );
                if paused == Paused::No && !queue.deferred.is_empty() {
                    paused = Paused::Output;
                }
            }
        }
        queue.drain_ready(&mut out, &mut timings);
        if !out.is_empty() {
            // Counted against the door's total while the socket takes them.
            let _held = state.output.hold(out.len());
            if write_unless_stuck(&mut writer, &out, stuck_after)
                .await
                .is_err()
            {
                return None;
            }
            out.clear();
            // Keep a buffer's worth, not the largest burst of replies ever written.
            if out.capacity() > 4 * READ_BUFFER_BYTES {
                out = Vec::with_capacity(READ_BUFFER_BYTES);
            }
        }
        if closing || eof || dcp.is_some() {
            // Finish what was accepted (writes in flight are completed either way), then go.
            let mut pending = Pending {
                queue: &mut queue,
                batch: &mut batch,
                out: &mut out,
                timings: &mut timings,
            };
            let finished = pending
                .finish(&session, &state, &mut writer, limits, budget)
                .await;
            if let (Some(opened), Ok(())) = (dcp, finished) {
                // Every reply owed, DCP_OPEN's last, is written: a producer from here on.
                crate::dcp::serve(reader, writer, session, input, opened, state).await;
                return None;
            }
            let _ = writer.shutdown().await;
            return None;
        }
        if let Some(meter) = &mut meter {
            moving = moving || meter.worked_since(working_since, requests_read);
        }
        if moving && queue.len() == 0 && queue.deferred.is_empty() {
            // Quiet: every reply owed has been written; the rest continues on the bulk lane.
            let stream = reader.reunite(writer).ok()?.into_std().ok()?;
            let carried = Carried {
                session,
                input,
                timings,
                documents: queue.documents.clone(),
                connected_at,
                last_read,
            };
            return Some((stream, carried));
        }
        if paused == Paused::Output && queue.ready_bytes() < budget {
            // The replies were written: go on with the requests already read.
            continue;
        }
        if !queue.deferred.is_empty()
            && queue.len() == 0
            && queue.documents.in_flight() < DOCUMENT_REPLIES_IN_FLIGHT_MAX
        {
            // Requests handed back and nothing to wait for: answer them now.
            continue;
        }
        // While moving, only replies are awaited: nothing more is read here; nor while paused
        // for a reply to come back.
        let can_read =
            queue.len() < MAX_IN_FLIGHT && !moving && (paused == Paused::No || queue.len() == 0);
        tokio::select! {
            read = reader.read_buf(&mut input), if can_read => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(_) => last_read = Instant::now(),
            },
            Some(reply) = queue.next(&mut timings), if queue.len() > 0 => {
                out.extend_from_slice(&reply)
            }
            Ok(()) = map_changes.changed(),
                if session.features.map_push != crate::map_push::MapPush::None =>
            {
                crate::map_push::push(&mut session, &mut out);
            }
            () = &mut check, if check_every.is_some() => {
                let now = Instant::now();
                let silence = Silence {
                    connected_at,
                    last_read,
                    authenticated: session.is_authenticated(),
                    partial_frame: can_read
                        && matches!(decode(&input, max_body), Ok(Decoded::Incomplete(_)))
                        && !input.is_empty(),
                    idle: can_read && input.is_empty() && queue.len() == 0,
                };
                if let Some(expired) = deadlines.expired(&silence, now) {
                    tracing::debug!(reason = expired.reason(), "closing a silent kv connection");
                    return None;
                }
                if let Some(period) = check_every {
                    check.as_mut().reset((now + period).into());
                }
            }
            else => {
                // Nothing to read or wait for (cannot happen while the counts are right):
                // look again shortly rather than spin.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
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

/// The replies a connection still owes when it stops taking requests.
struct Pending<'a> {
    queue: &'a mut Queue,
    batch: &'a mut Vec<Bytes>,
    out: &'a mut Vec<u8>,
    timings: &'a mut TimingsGuard,
}

impl Pending<'_> {
    /// Waits for every queued reply and answers the requests handed back, writing them as
    /// they come; `Err` if the socket failed or stopped taking them.
    async fn finish(
        &mut self,
        session: &Session,
        state: &Arc<KvState>,
        writer: &mut tokio::net::tcp::OwnedWriteHalf,
        limits: Limits,
        budget: usize,
    ) -> Result<(), ()> {
        let stuck_after = state.config.limits.send_queue_stuck_timeout;
        loop {
            while let Some(reply) = self.queue.next(self.timings).await {
                self.out.extend_from_slice(&reply);
                if self.out.len() >= budget {
                    let _held = state.output.hold(self.out.len());
                    write_unless_stuck(writer, self.out, stuck_after)
                        .await
                        .map_err(|_| ())?;
                    self.out.clear();
                }
            }
            if self.queue.deferred.is_empty() {
                break;
            }
            self.batch.append(&mut self.queue.deferred);
            let started = Instant::now();
            dispatch_batch(
                self.batch,
                session,
                self.queue,
                self.out,
                self.timings,
                started,
                limits,
                budget,
            );
        }
        if !self.out.is_empty() {
            let _held = state.output.hold(self.out.len());
            write_unless_stuck(writer, self.out, stuck_after)
                .await
                .map_err(|_| ())?;
            self.out.clear();
        }
        Ok(())
    }
}
