//! Forwarded HTTP document requests (kinds 0x20 `ForwardHttp` / 0x21 `ForwardHttpReply`,
//! docs/format/cluster-transport.md), whole-bucket requests for one node's vbuckets (0x22
//! `ScatterHttp`) and node API requests for one member (0x23 `NodeHttp`), both answered with
//! 0x21, on the cluster port: the server hands a decoded request to
//! the node's [`ForwardHandler`] (the binary's, which runs it through the HTTP door as the
//! identity it carries), and [`crate::TcpTransport::forward`] sends one over the pooled
//! connections. The bodies' codec is `settee-forward-wire`; this file only frames them.

use std::future::Future;
use std::pin::Pin;

use settee_cluster::map::NodeId;
use settee_cluster::wire::{self, ErrorCode};
pub use settee_forward_wire::{
    AuthMethod, ForwardHttp, ForwardHttpReply, Identity, ScatterHttp, KIND_FORWARD_HTTP,
    KIND_FORWARD_HTTP_REPLY, KIND_NODE_HTTP, KIND_SCATTER_HTTP, SCATTER_VBUCKETS_MAX,
};

use crate::frame;
use crate::stream::FrameStream;
use crate::NetError;

/// How long a sender waits for a forwarded request's reply (dial and handshake included).
pub const FORWARD_TIMEOUT_MS: u64 = 30_000;

/// Why the receiver did not run a forwarded request: an Error frame's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

pub type ForwardFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ForwardHttpReply, Refusal>> + Send + 'a>>;

/// Runs forwarded requests on the receiving node (the binary implements it).
pub trait ForwardHandler: Send + Sync + 'static {
    /// `from` is the node id the sender proved in the handshake.
    fn forward(&self, from: NodeId, request: ForwardHttp) -> ForwardFuture<'_>;
    /// A whole-bucket request, answered for the vbuckets it names.
    fn scatter(&self, from: NodeId, request: ScatterHttp) -> ForwardFuture<'_>;
    /// A node API request for the member `request.bucket` names (NodeHttp).
    fn node(&self, from: NodeId, request: ForwardHttp) -> ForwardFuture<'_>;
}

/// A ForwardHttp, ScatterHttp or NodeHttp frame's body, decoded.
enum Incoming {
    Forward(ForwardHttp),
    Scatter(ScatterHttp),
    Node(ForwardHttp),
}

/// Whether frames of `kind` are forwarded HTTP requests ([`answer`] answers them).
pub(crate) fn is_forwarded(kind: u8) -> bool {
    matches!(kind, KIND_FORWARD_HTTP | KIND_SCATTER_HTTP | KIND_NODE_HTTP)
}

/// Answers one ForwardHttp, ScatterHttp or NodeHttp frame (`kind`) on `connection`: a body that does
/// not decode is Error 1 and ends the connection (`Err`); a refusal is its Error frame and the
/// connection goes on.
pub(crate) async fn answer(
    connection: &mut FrameStream,
    handler: Option<&dyn ForwardHandler>,
    from: NodeId,
    kind: u8,
    request_id: u64,
    body: &[u8],
) -> Result<(), NetError> {
    let decoded = match kind {
        KIND_SCATTER_HTTP => ScatterHttp::decode(body).map(Incoming::Scatter),
        KIND_NODE_HTTP => ForwardHttp::decode(body).map(Incoming::Node),
        _ => ForwardHttp::decode(body).map(Incoming::Forward),
    };
    let request = match decoded {
        Ok(request) => request,
        Err(error) => {
            let what = format!("a forwarded request's body (kind {kind:#04x})");
            return Err(bad_body(connection, request_id, &what, &error.to_string()).await);
        }
    };
    let Some(handler) = handler else {
        let refusal = Refusal::new(ErrorCode::UnknownKind, "this node does not forward");
        return refuse(connection, request_id, &refusal).await;
    };
    let replied = match request {
        Incoming::Forward(request) => handler.forward(from, request).await,
        Incoming::Scatter(request) => handler.scatter(from, request).await,
        Incoming::Node(request) => handler.node(from, request).await,
    };
    let reply = replied.and_then(|reply| {
        let encoded = reply.encode();
        match reply.check() {
            Ok(()) if frame::fits(encoded.len()) => Ok(encoded),
            _ => Err(Refusal::new(
                ErrorCode::Refused,
                format!(
                    "reply too large to forward ({} body bytes)",
                    reply.body.len()
                ),
            )),
        }
    });
    match reply {
        Ok(encoded) => {
            connection
                .write_frame(KIND_FORWARD_HTTP_REPLY, request_id, &encoded)
                .await
        }
        Err(refusal) => refuse(connection, request_id, &refusal).await,
    }
}

/// Answers request `request_id` with the Error frame of `refusal`; the connection goes on.
pub(crate) async fn refuse(
    connection: &mut FrameStream,
    request_id: u64,
    refusal: &Refusal,
) -> Result<(), NetError> {
    let body = wire::encode_error(refusal.code, &refusal.message);
    connection
        .write_frame(wire::KIND_ERROR, request_id, &body)
        .await
}

/// Answers a request whose body (`what`) does not decode with Error 1 (the connection then
/// ends): the error to end it with.
pub(crate) async fn bad_body(
    connection: &mut FrameStream,
    request_id: u64,
    what: &str,
    reason: &str,
) -> NetError {
    let refusal = Refusal::new(ErrorCode::BadFrame, reason);
    let _ = refuse(connection, request_id, &refusal).await;
    NetError::Handshake(format!("{what}: {reason}"))
}

/// What the sender got back: the reply, or the receiver's refusal (its Error frame).
pub type Forwarded = Result<ForwardHttpReply, Refusal>;

/// A reply frame's meaning for the sender.
pub(crate) fn decode_reply(kind: u8, body: &[u8]) -> Result<Forwarded, NetError> {
    match kind {
        KIND_FORWARD_HTTP_REPLY => ForwardHttpReply::decode(body)
            .map(Ok)
            .map_err(|error| NetError::Handshake(format!("a ForwardHttpReply body: {error}"))),
        wire::KIND_ERROR => {
            let (code, message) =
                wire::decode_error(body).map_err(|error| NetError::Handshake(error.to_string()))?;
            match ErrorCode::from_u16(code) {
                Some(
                    code @ (ErrorCode::StaleEpoch
                    | ErrorCode::NotMyVbucket
                    | ErrorCode::Refused
                    | ErrorCode::UnknownKind),
                ) => Ok(Err(Refusal { code, message })),
                _ => Err(NetError::Remote { code, message }),
            }
        }
        other => Err(NetError::Handshake(format!(
            "reply kind {other:#04x} to a ForwardHttp"
        ))),
    }
}
