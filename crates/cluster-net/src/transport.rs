//! [`TcpTransport`]: settee-cluster's `Transport` over TCP. A request takes an idle connection
//! to its peer or dials a new one (with the handshake), sends one frame, reads one reply, and
//! puts the connection back for the next request; a connection that failed is dropped, and
//! the next request dials again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use settee_cluster::map::NodeId;
use settee_cluster::network::{Request, Response, SendFuture, Transport, TransportError};
use settee_cluster::wire;
use tokio::net::TcpStream;

use crate::handshake::{self, Secret};
use crate::stream::{FrameStream, OwnedFrame};
use crate::{forward, frame, NetError};

pub const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// A request's whole exchange (dial, handshake, reply) for callers without a budget of their
/// own; openraft drops its calls sooner, on its own RPC budget.
pub const REQUEST_TIMEOUT_MS: u64 = 10_000;
/// Idle connections kept per peer for reuse. Forwarded HTTP requests run as many at once as
/// the HTTP door's clients send: with 4, 12 of 16 concurrent ones dialled and proved the secret
/// anew each time, and a forwarded GET had 0.41 of a direct one's throughput; with 16, 0.71
/// (scripts/bench-http-forwarding.sh, 16 clients).
pub const IDLE_CONNECTIONS_MAX: usize = 16;

/// Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct TcpTransport {
    shared: Arc<Shared>,
}

struct Shared {
    /// This node's id, sent in the handshake (0 before it has one).
    id: NodeId,
    secret: Secret,
    // Locked only to take or return a connection, never across an await.
    idle: Mutex<HashMap<String, Vec<FrameStream>>>,
    next_request_id: AtomicU64,
    // Peers whose last dial failed, so a peer going down and coming back is logged once each,
    // not at every retry. Locked briefly after a dial, never across an await.
    down: Mutex<HashSet<String>>,
}

impl TcpTransport {
    pub fn new(id: NodeId, secret: Secret) -> TcpTransport {
        TcpTransport {
            shared: Arc::new(Shared {
                id,
                secret,
                idle: Mutex::new(HashMap::new()),
                next_request_id: AtomicU64::new(1),
                down: Mutex::new(HashSet::new()),
            }),
        }
    }
}

impl Transport for TcpTransport {
    /// `target` 0 means "whoever answers at `addr`" (a join names an address, not a node).
    fn send(&self, _from: NodeId, target: NodeId, addr: &str, request: Request) -> SendFuture {
        let shared = self.shared.clone();
        let addr = addr.to_owned();
        Box::pin(async move {
            let budget = Duration::from_millis(REQUEST_TIMEOUT_MS);
            match tokio::time::timeout(budget, shared.exchange_request(target, &addr, &request))
                .await
            {
                Ok(result) => result.map_err(|error| error.into_transport(target)),
                Err(_) => Err(TransportError::Timeout(target)),
            }
        })
    }
}

impl NetError {
    fn into_transport(self, target: NodeId) -> TransportError {
        // What the peer said (a wrong secret among others) or proved wrong about itself is a
        // refusal with its reason; anything else is a peer that could not be reached.
        match self {
            NetError::Remote { message, .. } => TransportError::Refused {
                node: target,
                reason: message,
            },
            NetError::PeerUnproven | NetError::WrongPeer { .. } => TransportError::Refused {
                node: target,
                reason: self.to_string(),
            },
            _ => TransportError::Unreachable(target),
        }
    }
}

impl TcpTransport {
    /// Sends a forwarded HTTP request to node `target` at `addr` over the pooled connections
    /// and returns its reply or the receiver's refusal; [`crate::forward::FORWARD_TIMEOUT_MS`]
    /// bounds the whole exchange.
    pub async fn forward(
        &self,
        target: NodeId,
        addr: &str,
        request: &forward::ForwardHttp,
    ) -> Result<forward::Forwarded, NetError> {
        self.forward_http(target, addr, forward::KIND_FORWARD_HTTP, request)
            .await
    }

    /// Sends a `/_node/_local/...` request to the member `target` (whose member name is
    /// `request.bucket`), as [`TcpTransport::forward`] sends a document request.
    pub async fn node_http(
        &self,
        target: NodeId,
        addr: &str,
        request: &forward::ForwardHttp,
    ) -> Result<forward::Forwarded, NetError> {
        self.forward_http(target, addr, forward::KIND_NODE_HTTP, request)
            .await
    }

    /// A ForwardHttp body sent as a frame of `kind` (ForwardHttp or NodeHttp).
    async fn forward_http(
        &self,
        target: NodeId,
        addr: &str,
        kind: u8,
        request: &forward::ForwardHttp,
    ) -> Result<forward::Forwarded, NetError> {
        request
            .check()
            .map_err(|error| NetError::Handshake(format!("a forwarded request: {error}")))?;
        self.forward_kind(target, addr, kind, &request.encode())
            .await
    }

    /// Sends a whole-bucket request for the vbuckets it names to node `target`, as
    /// [`TcpTransport::forward`] sends a document request.
    pub async fn scatter(
        &self,
        target: NodeId,
        addr: &str,
        request: &forward::ScatterHttp,
    ) -> Result<forward::Forwarded, NetError> {
        request
            .check()
            .map_err(|error| NetError::Handshake(format!("a ScatterHttp: {error}")))?;
        let body = request.encode();
        self.forward_kind(target, addr, forward::KIND_SCATTER_HTTP, &body)
            .await
    }

    /// Sends a move's request (MoveOpen, MoveChunk, MoveCommit or MoveAbort) to node `target`
    /// at `addr` over the pooled connections and returns the target's answer or its refusal;
    /// [`crate::moves::MOVE_TIMEOUT_MS`] bounds the whole exchange.
    pub async fn move_frame(
        &self,
        target: NodeId,
        addr: &str,
        request: &crate::moves::MoveFrame,
    ) -> Result<crate::moves::Moved, NetError> {
        let kind = request.kind();
        if !crate::moves::is_move_request(kind) {
            return Err(NetError::Handshake(format!(
                "kind {kind:#04x} is not a move request"
            )));
        }
        request
            .check()
            .map_err(|error| NetError::Handshake(format!("a move request: {error}")))?;
        let budget = Duration::from_millis(crate::moves::MOVE_TIMEOUT_MS);
        let body = request.encode();
        let exchange =
            self.shared
                .exchange(target, addr, kind, &body, kind + 1, move |reply, body| {
                    crate::moves::decode_reply(kind, reply, body)
                });
        tokio::time::timeout(budget, exchange)
            .await
            .map_err(|_| NetError::Timeout)?
    }

    /// One forwarded request of `kind` (its encoded `body`) and its ForwardHttpReply.
    async fn forward_kind(
        &self,
        target: NodeId,
        addr: &str,
        kind: u8,
        body: &[u8],
    ) -> Result<forward::Forwarded, NetError> {
        let budget = Duration::from_millis(forward::FORWARD_TIMEOUT_MS);
        let exchange = self.shared.exchange(
            target,
            addr,
            kind,
            body,
            forward::KIND_FORWARD_HTTP_REPLY,
            forward::decode_reply,
        );
        tokio::time::timeout(budget, exchange)
            .await
            .map_err(|_| NetError::Timeout)?
    }
}

impl Shared {
    async fn exchange_request(
        &self,
        target: NodeId,
        addr: &str,
        request: &Request,
    ) -> Result<Response, NetError> {
        let (kind, body) = wire::encode_request(request);
        let reply_kind = wire::reply_kind(kind).unwrap_or(wire::KIND_ERROR);
        self.exchange(target, addr, kind, &body, reply_kind, |kind, body| {
            match wire::decode_response(kind, body) {
                Ok(Ok(response)) => Ok(response),
                Ok(Err((code, message))) => Err(NetError::Remote { code, message }),
                Err(error) => Err(NetError::Handshake(error.to_string())),
            }
        })
        .await
    }

    /// One request frame out, one reply frame (of `reply_kind` or an Error) back, read by
    /// `decode`.
    async fn exchange<T>(
        &self,
        target: NodeId,
        addr: &str,
        kind: u8,
        body: &[u8],
        reply_kind: u8,
        decode: impl Fn(u8, &[u8]) -> Result<T, NetError>,
    ) -> Result<T, NetError> {
        if !frame::fits(body.len()) {
            return Err(NetError::Handshake(format!(
                "a request of {} bytes does not fit in a frame",
                body.len()
            )));
        }
        // An idle connection may have been closed by the peer (a restart) since its last use:
        // if it fails before any reply, the request goes once more on a new connection.
        let idle = self.idle.lock().get_mut(addr).and_then(Vec::pop);
        if let Some(mut connection) = idle {
            match self
                .round_trip(&mut connection, kind, body, reply_kind)
                .await
            {
                Ok(reply) => {
                    self.put_back(addr, connection);
                    return decode(reply.kind, &reply.body);
                }
                Err(NetError::Closed | NetError::Io(_)) => {}
                Err(error) => return Err(error),
            }
        }
        let dialed = self.dial(target, addr).await;
        self.note_reachability(target, addr, dialed.as_ref().err());
        let mut connection = dialed?;
        let reply = self
            .round_trip(&mut connection, kind, body, reply_kind)
            .await?;
        self.put_back(addr, connection);
        decode(reply.kind, &reply.body)
    }

    async fn dial(&self, target: NodeId, addr: &str) -> Result<FrameStream, NetError> {
        let connect = TcpStream::connect(addr);
        let stream = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), connect)
            .await
            .map_err(|_| NetError::Timeout)??;
        let mut stream = FrameStream::new(stream);
        let handshake_budget = Duration::from_millis(crate::HANDSHAKE_TIMEOUT_MS);
        let peer = tokio::time::timeout(
            handshake_budget,
            handshake::client(&mut stream, &self.secret, self.id),
        )
        .await
        .map_err(|_| NetError::Timeout)??;
        if target != 0 && peer != target {
            return Err(NetError::WrongPeer {
                expected: target,
                found: peer,
            });
        }
        Ok(stream)
    }

    /// Writes the request and reads its reply, checked to answer it: the same request id, and
    /// `reply_kind` or an Error frame. Anything else leaves the connection out of step (`Err`,
    /// so the caller drops it).
    async fn round_trip(
        &self,
        connection: &mut FrameStream,
        kind: u8,
        body: &[u8],
        reply_kind: u8,
    ) -> Result<OwnedFrame, NetError> {
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        connection.write_frame(kind, request_id, body).await?;
        let reply = connection.read_frame().await?;
        if reply.request_id != request_id {
            return Err(NetError::Handshake(format!(
                "reply to request {} where {request_id} was asked",
                reply.request_id
            )));
        }
        if reply.kind != wire::KIND_ERROR && reply.kind != reply_kind {
            return Err(NetError::Handshake(format!(
                "reply kind {:#04x} to a request of kind {kind:#04x}",
                reply.kind
            )));
        }
        Ok(reply)
    }

    fn note_reachability(&self, target: NodeId, addr: &str, error: Option<&NetError>) {
        match error {
            Some(error) => {
                if self.down.lock().insert(addr.to_owned()) {
                    tracing::warn!(node = target, addr, %error, "cluster peer unreachable");
                }
            }
            None => {
                if self.down.lock().remove(addr) {
                    tracing::warn!(node = target, addr, "cluster peer reachable again");
                }
            }
        }
    }

    fn put_back(&self, addr: &str, connection: FrameStream) {
        let mut idle = self.idle.lock();
        let connections = idle.entry(addr.to_owned()).or_default();
        if connections.len() < IDLE_CONNECTIONS_MAX {
            connections.push(connection);
        }
    }
}
