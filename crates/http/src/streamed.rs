//! A JSON response written on a blocking thread and sent in chunks, as CouchDB sends its
//! delayed responses (`chttpd:start_delayed_json_response`): the producer (a view query) writes
//! into a [`ChunkWriter`], which hands the body on in chunks of [`STREAM_CHUNK_BYTES_MAX`]
//! through a channel of [`CHUNKS_IN_FLIGHT`]; hyper takes the next chunk only when the socket
//! has room, so a client that reads slowly, or not at all, makes the producer wait instead of
//! making the node hold the whole answer (issue 18).
//!
//! The status is decided by the first chunk: a failure before it is an ordinary error response
//! (an answer that fits in one chunk is sent whole, with a `Content-Length`, as before); a
//! failure after it ends the body without its last chunk, so the client sees an aborted
//! response rather than a short valid one.

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use crate::error::{ApiError, ApiResult};
use crate::response::{full, HttpResponse, STREAM_CHUNK_BYTES_MAX};

/// Chunks waiting for the client: with the one being written and hyper's own buffer, what a
/// client that stops reading holds in the node.
pub const CHUNKS_IN_FLIGHT: usize = 4;

/// What the producer hands on.
enum Piece {
    /// A part of the body; more follows.
    Chunk(Bytes),
    /// The last part: the body is complete.
    End(Bytes),
    /// The answer failed: an error response if nothing was sent, else an aborted body.
    Failed(ApiError),
}

/// Where a producer writes the body.
pub struct ChunkWriter {
    buffer: Vec<u8>,
    sender: mpsc::Sender<Piece>,
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
        if self.sender.blocking_send(Piece::Chunk(chunk)).is_err() {
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
        let _ = self.sender.blocking_send(piece);
    }
}

/// Runs `produce` on a blocking thread and answers with what it writes (see the module
/// documentation).
pub async fn delayed_json<F>(produce: F) -> ApiResult<HttpResponse>
where
    F: FnOnce(&mut ChunkWriter) -> ApiResult<()> + Send + 'static,
{
    let (sender, mut receiver) = mpsc::channel::<Piece>(CHUNKS_IN_FLIGHT);
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
fn chunked(first: Bytes, receiver: mpsc::Receiver<Piece>) -> crate::response::Body {
    type Frames = Option<mpsc::Receiver<Piece>>;
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
