//! The per-connection loop: read whatever arrived, decode every whole frame in it, answer
//! cheap requests inline and queue the rest, then write all replies that are ready with one
//! `write` call. Without UnorderedExecution, replies leave in request order (queued requests
//! still run concurrently, so a pipeline of writes shares group commits); with it, queued
//! requests are spawned onto the runtime's worker threads and answered as they finish.
//! In order, a request on a key that a queued request writes waits for the queue to drain,
//! so a pipelined GET after a SET of the same key sees the SET.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use settee_kv_codec::{decode, Decoded, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::session::{Handled, Session};
use crate::timings::ConnTimings;
use crate::KvState;

/// Requests a connection may have queued before the server stops reading from it.
const MAX_IN_FLIGHT: usize = 4096;
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Frame headroom over the largest value: extras, key, framing extras.
const FRAME_OVERHEAD_MAX: usize = 64 * 1024;

type ReplyFuture = futures_util::future::BoxFuture<'static, Vec<u8>>;

enum Queue {
    Ordered(FuturesOrdered<ReplyFuture>),
    Unordered(FuturesUnordered<tokio::task::JoinHandle<Vec<u8>>>),
}

impl Queue {
    fn len(&self) -> usize {
        match self {
            Queue::Ordered(queue) => queue.len(),
            Queue::Unordered(queue) => queue.len(),
        }
    }

    async fn next(&mut self) -> Option<Vec<u8>> {
        match self {
            Queue::Ordered(queue) => queue.next().await,
            Queue::Unordered(queue) => queue.next().await.map(|joined| joined.unwrap_or_default()),
        }
    }

    /// Replies already finished, without waiting.
    fn drain_ready(&mut self, out: &mut Vec<u8>) {
        while self.len() > 0 {
            match self.next().now_or_never() {
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

pub(crate) async fn run(stream: TcpStream, state: Arc<KvState>) {
    let max_body = state.config.max_value_bytes + FRAME_OVERHEAD_MAX;
    let (mut reader, mut writer) = stream.into_split();
    let mut timings = TimingsGuard {
        local: ConnTimings::new(),
        state: state.clone(),
    };
    let mut session = Session::new(state.clone());
    let mut input = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUFFER_BYTES);
    let mut queue = Queue::Ordered(FuturesOrdered::new());
    // Keys (as sent) of the requests queued in order; cleared whenever the queue is empty.
    let mut pending_keys: HashSet<Bytes> = HashSet::new();
    let mut closing = false;
    let mut eof = false;
    loop {
        if !closing && !eof {
            // Decode and handle every whole frame already buffered; requests are timed from
            // the moment their bytes were read.
            let batch_started = Instant::now();
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
                let Ok(Decoded::Frame(frame, _)) = decode(&bytes, max_body) else {
                    closing = true;
                    break;
                };
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
                    Handled::Later(future) => {
                        let (node, opcode, key) =
                            (state.clone(), frame.opcode, bytes.slice_ref(frame.key));
                        let future: ReplyFuture = Box::pin(async move {
                            let reply = future.await;
                            node.timings.record(opcode, &key, started);
                            reply
                        });
                        match &mut queue {
                            Queue::Ordered(pending) => {
                                if !frame.key.is_empty() {
                                    pending_keys.insert(bytes.slice_ref(frame.key));
                                }
                                pending.push_back(future)
                            }
                            Queue::Unordered(pending) => pending.push(tokio::spawn(future)),
                        }
                    }
                }
                if session.features.unordered != was_unordered {
                    // HELLO switched the execution mode; earlier queued requests finish first.
                    while let Some(reply) = queue.next().await {
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
        }
        queue.drain_ready(&mut out);
        if !out.is_empty() {
            if writer.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if closing || eof {
            // Finish what was accepted (writes in flight are completed either way), then go.
            while let Some(reply) = queue.next().await {
                out.extend_from_slice(&reply);
            }
            if !out.is_empty() {
                let _ = writer.write_all(&out).await;
            }
            let _ = writer.shutdown().await;
            return;
        }
        let can_read = queue.len() < MAX_IN_FLIGHT;
        tokio::select! {
            read = reader.read_buf(&mut input), if can_read => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(_) => {}
            },
            Some(reply) = queue.next(), if queue.len() > 0 => out.extend_from_slice(&reply),
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
