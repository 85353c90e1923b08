//! A JSON response written on a blocking thread and sent in chunks, as CouchDB sends its
//! delayed responses (`chttpd:start_delayed_json_response`): the producer (a view query) writes
//! into a [`ChunkWriter`], which hands the body on in chunks of [`STREAM_CHUNK_BYTES_MAX`]
//! through a channel of [`CHUNKS_IN_FLIGHT`]; hyper takes the next chunk only when the socket
//! has room, so a client that reads slowly, or not at all, makes the producer wait instead of
//! making the node hold the whole answer (issue 18).
//!
//! The chunks waiting for their clients are also counted for the whole door ([`StreamBudget`],
//! as the KV door counts its unsent replies): while the door holds more than its maximum, an
//! answer may queue one chunk at a time only, so clients that stop reading cannot make the
//! node hold `CHUNKS_IN_FLIGHT` chunks for each of them.
//!
//! The status is decided by the first chunk: a failure before it is an ordinary error response
//! (an answer that fits in one chunk is sent whole, with a `Content-Length`, as before); a
//! failure after it ends the body without its last chunk, so the client sees an aborted
//! response rather than a short valid one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, Semaphore};

use crate::error::{ApiError, ApiResult};
use crate::response::{full, HttpResponse, STREAM_CHUNK_BYTES_MAX};

/// Chunks waiting for the client: with the one being written and hyper's own buffer, what a
/// client that stops reading holds in the node. Two keep the socket busy while the next is
/// written.
pub const CHUNKS_IN_FLIGHT: usize = 2;

/// The door's default [`StreamBudget`] maximum: the KV door's total for unsent replies.
pub const STREAM_BYTES_MAX_DEFAULT: usize = 256 << 20;

/// Bytes of streamed answers produced and not yet taken by their connections, for the whole
/// door.
#[derive(Debug)]
pub struct StreamBudget {
    queued: AtomicUsize,
    max: usize,
}

impl StreamBudget {
    pub fn new(max: usize) -> StreamBudget {
        StreamBudget {
            queued: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes queued now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.queued() >= self.max
    }

    fn add(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::Relaxed);
    }

    fn remove(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Default for StreamBudget {
    fn default() -> Self {
        StreamBudget::new(STREAM_BYTES_MAX_DEFAULT)
    }
}

/// What the producer hands on.
enum Piece {
    /// A part of the body; more follows.
    Chunk(Bytes),
    /// The last part: the body is complete.
    End(Bytes),
    /// The answer failed: an error response if nothing was sent, else an aborted body.
    Failed(ApiError),
}

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Chunk(bytes) | Piece::End(bytes) => bytes.len(),
            Piece::Failed(_) => 0,
        }
    }
}

/// The producer's side of an answer's queue: a piece is sent once a slot is free (the
/// consumer frees one per piece it takes), and counted in the door's budget until taken.
struct Sender {
    pieces: mpsc::UnboundedSender<Piece>,
    /// Free slots of the answer's queue; closed when the client has gone.
    slots: Arc<Semaphore>,
    budget: Arc<StreamBudget>,
    runtime: Handle,
}

impl Sender {
    /// Waits for a slot (for every slot, so for an empty queue, while the door is over its
    /// budget), then queues `piece`. An error when the client has gone.
    fn send(&self, piece: Piece) -> Result<(), ()> {
        let wanted = if self.budget.over() {
            CHUNKS_IN_FLIGHT
        } else {
            1
        };
        let permits = self
            .runtime
            .block_on(self.slots.acquire_many(wanted as u32))
            .map_err(|_| ())?;
        permits.forget();
        self.slots.add_permits(wanted - 1);
        let bytes = piece.len();
        self.budget.add(bytes);
        self.pieces
            .send(piece)
            .map_err(|_| self.budget.remove(bytes))
    }
}

/// The response's side of an answer's queue.
struct Receiver {
    pieces: mpsc::UnboundedReceiver<Piece>,
    slots: Arc<Semaphore>,
    budget: Arc<StreamBudget>,
}

impl Receiver {
    async fn recv(&mut self) -> Option<Piece> {
        let piece = self.pieces.recv().await?;
        self.budget.remove(piece.len());
        self.slots.add_permits(1);
        Some(piece)
    }
}

impl Drop for Receiver {
    /// The client has gone (or the answer is complete): the producer stops at its next piece,
    /// and what it had queued leaves the budget.
    fn drop(&mut self) {
        self.slots.close();
        self.pieces.close();
        while let Ok(piece) = self.pieces.try_recv() {
            self.budget.remove(piece.len());
        }
    }
}

/// A queue for one answer's pieces.
fn queue(budget: Arc<StreamBudget>) -> (Sender, Receiver) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let slots = Arc::new(Semaphore::new(CHUNKS_IN_FLIGHT));
    let sender = Sender {
        pieces: sender,
        slots: slots.clone(),
        budget: budget.clone(),
        runtime: Handle::current(),
    };
    let receiver = Receiver {
        pieces: receiver,
        slots,
        budget,
    };
    (sender, receiver)
}

/// Where a producer writes the body.
pub struct ChunkWriter {
    buffer: Vec<u8>,
    sender: Sender,
    /// The client went away: producing more is pointless.
    gone: bool,
}

impl ChunkWriter {
    /// The part of the body not handed on yet; append to it.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buffer
    }

    /// Hands the buffer on once it holds a chunk's worth, waiting while the client has not
    /// taken the chunks before it. An error when the client has gone (stop producing).
    pub fn flush_when_full(&mut self) -> ApiResult<()> {
        if self.buffer.len() < STREAM_CHUNK_BYTES_MAX {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(STREAM_CHUNK_BYTES_MAX + STREAM_CHUNK_BYTES_MAX / 4),
        ));
        if self.sender.send(Piece::Chunk(chunk)).is_err() {
            self.gone = true;
            return Err(ApiError::Internal("the client went away".into()));
        }
        Ok(())
    }

    fn finish(mut self, outcome: ApiResult<()>) {
        let piece = match outcome {
            Ok(()) => {
                self.buffer.push(b'\n');
                Piece::End(Bytes::from(std::mem::take(&mut self.buffer)))
            }
            Err(_) if self.gone => return,
            Err(error) => Piece::Failed(error),
        };
        let _ = self.sender.send(piece);
    }
}

/// Runs `produce` on a blocking thread and answers with what it writes, counted in `budget`
/// (see the module documentation).
pub async fn delayed_json<F>(budget: &Arc<StreamBudget>, produce: F) -> ApiResult<HttpResponse>
where
    F: FnOnce(&mut ChunkWriter) -> ApiResult<()> + Send + 'static,
{
    let (sender, mut receiver) = queue(budget.clone());
    let task = tokio::task::spawn_blocking(move || {
        let mut writer = ChunkWriter {
            buffer: Vec::with_capacity(16 << 10),
            sender,
            gone: false,
        };
        let outcome = produce(&mut writer);
        writer.finish(outcome);
    });
    let body = match receiver.recv().await {
        Some(Piece::End(whole)) => full(whole),
        Some(Piece::Chunk(first)) => chunked(first, receiver),
        Some(Piece::Failed(error)) => return Err(error),
        None => {
            let reason = match task.await {
                Err(error) => format!("the query panicked: {error}"),
                Ok(()) => "the query ended without an answer".to_string(),
            };
            return Err(ApiError::Internal(reason));
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("must-revalidate"));
    Ok(response)
}

/// A body of `first`, then the producer's chunks up to its last one; aborted (an error for
/// hyper, which then does not end the chunked body) on a failure or if the producer stops
/// without a last chunk.
fn chunked(first: Bytes, receiver: Receiver) -> crate::response::Body {
    type Frames = Option<Receiver>;
    let first = futures_util::stream::once(async move { Ok(hyper::body::Frame::data(first)) });
    let rest = futures_util::stream::unfold(Some(receiver), |receiver: Frames| async move {
        let mut receiver = receiver?;
        let frame = match receiver.recv().await {
            Some(Piece::Chunk(chunk)) => Ok(hyper::body::Frame::data(chunk)),
            Some(Piece::End(last)) => return Some((Ok(hyper::body::Frame::data(last)), None)),
            Some(Piece::Failed(error)) => {
                tracing::warn!(%error, "a streamed response failed after its first chunk");
                return Some((Err(std::io::Error::other(error.to_string())), None));
            }
            None => Err(std::io::Error::other("the response ended early")),
        };
        let next = frame.is_ok().then_some(receiver);
        Some((frame, next))
    });
    StreamBody::new(futures_util::StreamExt::chain(first, rest)).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const CHUNK: usize = 1000;

    /// A producer of `chunks` pieces of CHUNK bytes on a blocking thread; the count it sent.
    fn produce(sender: Sender, chunks: usize) -> tokio::task::JoinHandle<usize> {
        tokio::task::spawn_blocking(move || {
            (0..chunks)
                .take_while(|_| {
                    sender
                        .send(Piece::Chunk(Bytes::from(vec![7; CHUNK])))
                        .is_ok()
                })
                .count()
        })
    }

    async fn until_queued(budget: &StreamBudget, bytes: usize) {
        let waiting = async {
            while budget.queued() != bytes {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .is_err()
        {
            panic!("{} bytes queued, never {bytes}", budget.queued());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn under_its_budget_an_answer_queues_chunks_in_flight() {
        let budget = Arc::new(StreamBudget::new(usize::MAX));
        let (sender, mut receiver) = queue(budget.clone());
        let producer = produce(sender, 10);
        until_queued(&budget, CHUNKS_IN_FLIGHT * CHUNK).await;
        let mut taken = 0;
        while let Some(piece) = receiver.recv().await {
            assert_eq!(piece.len(), CHUNK);
            taken += 1;
        }
        assert_eq!((taken, producer.await.expect("the producer")), (10, 10));
        assert_eq!(budget.queued(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn over_its_budget_an_answer_queues_one_chunk_at_a_time() {
        let budget = Arc::new(StreamBudget::new(0));
        let (sender, mut receiver) = queue(budget.clone());
        let producer = produce(sender, 10);
        until_queued(&budget, CHUNK).await;
        // Were the producer not held, it would have queued more by now.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(budget.queued(), CHUNK);
        for _ in 0..3 {
            assert!(receiver.recv().await.is_some());
            until_queued(&budget, CHUNK).await;
        }
        // The client goes away: the producer stops, and its queued chunk leaves the budget.
        drop(receiver);
        assert!(producer.await.expect("the producer") < 10);
        assert_eq!(budget.queued(), 0);
    }
}
