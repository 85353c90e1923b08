//! One HTTP connection's limits in time and the door's limit in number (issue 18 point 4).
//!
//! Timeouts follow CouchDB (mochiweb): a connection waiting for a request may stay silent
//! 300 s (`REQUEST_RECV_TIMEOUT`), a request's headers must be complete 30 s after its
//! first byte (`HEADERS_RECV_TIMEOUT`), and a request body may stall 300 s between two
//! reads (`Req::body_bytes`, mochiweb's `recv` idle timeout). While a request is being
//! answered no timeout runs: a continuous `_changes` feed or a longpoll is never cut.
//!
//! The connection's [`Clock`] is told when bytes arrive (by [`TimedIo`]), when a request
//! starts (the service) and when its response has been sent (its body, [`TrackedBody`], is
//! dropped); a watchdog asks the pure policy [`Timeouts::check`] whenever its timer fires.
//!
//! Past `max_connections` a new connection gets a 503 with CouchDB's JSON error body and is
//! closed; refusals are logged at most every 10 s.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// mochiweb's wait for a request line (CouchDB keeps an idle keep-alive connection this long).
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// mochiweb's `HEADERS_RECV_TIMEOUT`: "CouchDB closes after 30 s without complete headers".
pub const HEADER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// mochiweb's idle timeout for each read of a request body.
pub const BODY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// mochiweb's default `max` connections (CouchDB `[chttpd] server_options`).
pub const MAX_CONNECTIONS_DEFAULT: usize = 2048;
/// Refused connections being answered at once; past this they are closed without a reply.
const REFUSALS_ANSWERING_MAX: usize = 64;
/// How long a refused connection is given to read its 503 before it is closed.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);
/// The watchdog wakes at least this often while it has nothing to time, so a request
/// starting after a long response is timed soon enough.
const CHECK_PERIOD_MIN: Duration = Duration::from_millis(10);

/// The HTTP door's timeouts; `None` or zero turns one off.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub idle: Option<Duration>,
    pub header: Option<Duration>,
}

/// Where a connection is, as its clock last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a request since this instant.
    Idle(Instant),
    /// A request's first bytes arrived at this instant; its headers are not complete.
    Head(Instant),
    /// A request is being answered.
    Busy,
    /// A response is being sent, and the socket has taken none of its bytes since this
    /// instant: the client is not reading.
    Stalled(Instant),
}

impl Timeouts {
    fn enabled(timeout: Option<Duration>) -> Option<Duration> {
        timeout.filter(|timeout| !timeout.is_zero())
    }

    /// Whether a connection in `phase` has been silent too long at `now`, and otherwise when
    /// to look again.
    pub fn check(&self, phase: Phase, now: Instant) -> Result<Instant, &'static str> {
        let (idle, header) = (Self::enabled(self.idle), Self::enabled(self.header));
        // A phase can change without waking the watchdog (a request begins, its response
        // ends): look again at least once per header timeout, the shortest new deadline.
        let soon = now
            + header
                .or(idle)
                .unwrap_or(Duration::from_secs(60))
                .max(CHECK_PERIOD_MIN);
        match phase {
            Phase::Busy => Ok(soon),
            // A client that stops reading a response holds it (and, for a streamed answer,
            // the thread writing it): the idle timeout applies to it as to a silent one.
            Phase::Stalled(since) => match idle {
                Some(timeout) if now.saturating_duration_since(since) >= timeout => {
                    Err("client not reading its response")
                }
                Some(timeout) => Ok((since + timeout).min(soon)),
                None => Ok(soon),
            },
            Phase::Head(since) => match header {
                Some(timeout) if now.saturating_duration_since(since) >= timeout => {
                    Err("request headers incomplete")
                }
                Some(timeout) => Ok(since + timeout),
                None => Ok(soon),
            },
            Phase::Idle(since) => match idle {
                Some(timeout) if now.saturating_duration_since(since) >= timeout => Err("idle"),
                Some(timeout) => Ok((since + timeout).min(soon)),
                None => Ok(soon),
            },
        }
    }
}

/// A connection's phase, shared by its reader, its service and its response bodies, all
/// run by the connection's task (atomics only because hyper needs `Send`).
pub struct Clock {
    started: Instant,
    /// Requests being answered (hyper answers one at a time; counted so a response that
    /// ends after the next request began cannot mark the connection idle).
    in_flight: AtomicU32,
    /// Bytes arrived with no request being answered and no request started since.
    head: AtomicU32,
    /// Milliseconds since `started` when the current idle or head phase began.
    since_ms: AtomicU64,
    /// 1 + milliseconds since `started` when a write to the socket was refused for want of
    /// room, with no write accepted since; 0 when writes go through.
    write_blocked_ms: AtomicU64,
}

impl Clock {
    pub fn new() -> Arc<Clock> {
        Arc::new(Clock {
            started: Instant::now(),
            in_flight: AtomicU32::new(0),
            head: AtomicU32::new(0),
            since_ms: AtomicU64::new(0),
            write_blocked_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn phase(&self) -> Phase {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return match self.write_blocked_ms.load(Ordering::Relaxed) {
                0 => Phase::Busy,
                blocked => Phase::Stalled(self.started + Duration::from_millis(blocked - 1)),
            };
        }
        let since = self.started + Duration::from_millis(self.since_ms.load(Ordering::Relaxed));
        if self.head.load(Ordering::Relaxed) > 0 {
            Phase::Head(since)
        } else {
            Phase::Idle(since)
        }
    }

    /// Whether bytes arriving now begin a request: none is being answered and none has begun.
    fn at_request_start(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0 && self.head.load(Ordering::Relaxed) == 0
    }

    /// Bytes arrived.
    fn bytes_arrived(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0 && self.head.load(Ordering::Relaxed) == 0 {
            self.since_ms.store(self.now_ms(), Ordering::Relaxed);
            self.head.store(1, Ordering::Relaxed);
        }
    }

    /// A write to the socket was `Pending` (no room) or went through.
    fn write_polled<T>(&self, polled: &Poll<T>) {
        let blocked = self.write_blocked_ms.load(Ordering::Relaxed);
        match (polled.is_pending(), blocked) {
            (true, 0) => self
                .write_blocked_ms
                .store(self.now_ms() + 1, Ordering::Relaxed),
            (false, blocked) if blocked != 0 => self.write_blocked_ms.store(0, Ordering::Relaxed),
            _ => {}
        }
    }

    /// A request's headers are complete: it is being answered until its response is sent.
    pub fn request_started(self: &Arc<Self>) -> Answering {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head.store(0, Ordering::Relaxed);
        Answering {
            clock: self.clone(),
        }
    }
}

/// A request being answered; when dropped (its response body sent or abandoned) the
/// connection is idle again unless another request is being answered.
pub struct Answering {
    clock: Arc<Clock>,
}

impl Drop for Answering {
    fn drop(&mut self) {
        if self.clock.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.clock
                .since_ms
                .store(self.clock.now_ms(), Ordering::Relaxed);
        }
    }
}

/// A response body that keeps its request [`Answering`] until hyper has sent it and drops it.
pub struct TrackedBody {
    inner: crate::response::Body,
    _answering: Answering,
}

impl TrackedBody {
    pub fn new(inner: crate::response::Body, answering: Answering) -> TrackedBody {
        TrackedBody {
            inner,
            _answering: answering,
        }
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's socket, telling its clock when bytes arrive, and percent-encoding the
/// bytes of a request target hyper would refuse ([`settee_http_wire::request_line`]).
pub struct TimedIo<S = TcpStream> {
    stream: S,
    clock: Arc<Clock>,
    quoter: settee_http_wire::request_line::RequestLineQuoter,
    /// Rewritten bytes that did not fit hyper's buffer yet (a few bytes of a request line).
    pending: Vec<u8>,
}

impl<S> TimedIo<S> {
    pub fn new(stream: S, clock: Arc<Clock>) -> TimedIo<S> {
        TimedIo {
            stream,
            clock,
            quoter: settee_http_wire::request_line::RequestLineQuoter::default(),
            pending: Vec::new(),
        }
    }

    /// Hands hyper as much of `pending` as fits.
    fn drain_pending(&mut self, buf: &mut ReadBuf<'_>) {
        let fit = self.pending.len().min(buf.remaining());
        buf.put_slice(&self.pending[..fit]);
        self.pending.drain(..fit);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TimedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.pending.is_empty() {
            self.drain_pending(buf);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let starts_request = self.clock.at_request_start();
            self.clock.bytes_arrived();
            if starts_request || self.quoter.active() {
                let this = &mut *self;
                if let Some(rewritten) = this.quoter.feed(&buf.filled()[before..], starts_request) {
                    buf.set_filled(before);
                    this.pending = rewritten;
                    this.drain_pending(buf);
                }
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.clock.write_polled(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.clock.write_polled(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Runs `connection` until it ends, or until its clock says it has been silent too long
/// (then it is dropped, which closes the socket; `None`).
pub async fn watch<F: Future>(
    connection: F,
    clock: &Clock,
    timeouts: Timeouts,
) -> Option<F::Output> {
    tokio::pin!(connection);
    loop {
        let next = match timeouts.check(clock.phase(), Instant::now()) {
            Ok(next) => next,
            Err(reason) => {
                tracing::debug!(reason, "closing a silent http connection");
                return None;
            }
        };
        tokio::select! {
            output = &mut connection => return Some(output),
            () = tokio::time::sleep_until(next.into()) => {}
        }
    }
}

/// Answers connections the door has no room for ([`settee_door::Slots`] counts and logs
/// them): 503 with CouchDB's error body, then close; at most [`REFUSALS_ANSWERING_MAX`] at
/// once, past that they are closed at once.
pub struct Refusals {
    answering: Arc<tokio::sync::Semaphore>,
}

impl Default for Refusals {
    fn default() -> Refusals {
        Refusals {
            answering: Arc::new(tokio::sync::Semaphore::new(REFUSALS_ANSWERING_MAX)),
        }
    }
}

impl Refusals {
    pub fn answer(&self, stream: TcpStream) {
        let Ok(permit) = self.answering.clone().try_acquire_owned() else {
            return;
        };
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(REFUSAL_LINGER, answer_refusal(stream)).await;
        });
    }
}

/// The 503 a refused connection reads before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Server: CouchDB/3.5.0 (settee 0.1)\r\n\
Content-Type: application/json\r\n\
Cache-Control: must-revalidate\r\n\
Connection: close\r\n\
Content-Length: 82\r\n\
\r\n\
{\"error\":\"service_unavailable\",\"reason\":\"Too many connections, try again later.\"}\n";

async fn answer_refusal(mut stream: TcpStream) {
    if stream.write_all(REFUSAL).await.is_err() {
        return;
    }
    // Closing with the client's request unread would reset the connection before the client
    // reads the answer: half-close, then read until it closes (or the linger runs out).
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_body_is_couchdb_json_of_the_announced_length() {
        let text = std::str::from_utf8(REFUSAL).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .and_then(|value| value.parse().ok())
            .expect("length");
        assert_eq!(body.len(), length);
        let json: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(json["error"], "service_unavailable");
    }

    #[test]
    fn phases_expire_after_their_own_timeouts_and_busy_never() {
        let timeouts = Timeouts {
            idle: Some(Duration::from_secs(300)),
            header: Some(Duration::from_secs(30)),
        };
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        assert!(timeouts.check(Phase::Idle(start), at(299)).is_ok());
        assert_eq!(timeouts.check(Phase::Idle(start), at(300)), Err("idle"));
        // An idle connection is looked at again within a header timeout, in case a request
        // starts meanwhile.
        assert_eq!(timeouts.check(Phase::Idle(start), at(10)), Ok(at(40)));
        assert_eq!(timeouts.check(Phase::Idle(start), at(290)), Ok(at(300)));
        assert_eq!(timeouts.check(Phase::Head(at(10)), at(20)), Ok(at(40)));
        assert_eq!(
            timeouts.check(Phase::Head(at(10)), at(40)),
            Err("request headers incomplete")
        );
        assert_eq!(timeouts.check(Phase::Busy, at(100_000)), Ok(at(100_030)));
        let off = Timeouts {
            idle: None,
            header: Some(Duration::ZERO),
        };
        assert!(off.check(Phase::Idle(start), at(1_000_000)).is_ok());
        assert!(off.check(Phase::Head(start), at(1_000_000)).is_ok());
    }

    #[test]
    fn the_clock_follows_bytes_requests_and_responses() {
        let clock = Clock::new();
        assert!(matches!(clock.phase(), Phase::Idle(_)));
        clock.bytes_arrived();
        let Phase::Head(first_byte) = clock.phase() else {
            panic!("head expected");
        };
        // More bytes of the same head do not restart its timeout.
        clock.bytes_arrived();
        assert_eq!(clock.phase(), Phase::Head(first_byte));
        let answering = clock.request_started();
        assert_eq!(clock.phase(), Phase::Busy);
        // Body bytes and the next request's bytes while answering keep it busy.
        clock.bytes_arrived();
        let next = clock.request_started();
        drop(answering);
        assert_eq!(clock.phase(), Phase::Busy);
        drop(next);
        assert!(matches!(clock.phase(), Phase::Idle(_)));
    }
}
