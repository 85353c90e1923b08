//! A rebalance's vbucket moves on the cluster port (kinds 0x40 ..= 0x47,
//! docs/format/rebalance.md, "The transfer protocol"): the source sends MoveOpen, MoveChunk,
//! MoveCommit or MoveAbort with [`crate::TcpTransport::move_frame`]; the target's server hands
//! each to the node's [`MoveHandler`] and sends back its answer, MoveOpened, MoveChunkAck,
//! MoveIngested or MoveAborted (the request's kind + 1), or the Error frame of its refusal.
//! The bodies' codec is `settee-forward-wire` `moves.rs`; this file only frames them.

use std::future::Future;
use std::pin::Pin;

use settee_cluster::map::NodeId;
use settee_cluster::wire::{self, ErrorCode};
pub use settee_forward_wire::moves::{
    GroupOffer, MoveFrame, MoveId, KIND_MOVE_ABORT, KIND_MOVE_ABORTED, KIND_MOVE_CHUNK,
    KIND_MOVE_CHUNK_ACK, KIND_MOVE_COMMIT, KIND_MOVE_INGESTED, KIND_MOVE_OPEN, KIND_MOVE_OPENED,
};

use crate::forward::{bad_body, refuse, Refusal};
use crate::frame;
use crate::stream::FrameStream;
use crate::NetError;

/// How long a source waits for one answer (dial and handshake included): a MoveCommit's
/// answer comes after the target checked and ingested every file.
pub const MOVE_TIMEOUT_MS: u64 = 120_000;

pub type MoveFuture<'a> = Pin<Box<dyn Future<Output = Result<MoveFrame, Refusal>> + Send + 'a>>;

/// Answers the moves other nodes send this one (the binary implements it: staging, ingest).
pub trait MoveHandler: Send + Sync + 'static {
    /// `from` is the node id the sender proved in the handshake; `request` is a MoveOpen,
    /// MoveChunk, MoveCommit or MoveAbort, checked within its bounds. The answer must be the
    /// request's own (MoveOpened for a MoveOpen, ...).
    fn handle(&self, from: NodeId, request: MoveFrame) -> MoveFuture<'_>;
}

/// Whether frames of `kind` are move requests ([`answer`] answers them).
pub(crate) fn is_move_request(kind: u8) -> bool {
    matches!(
        kind,
        KIND_MOVE_OPEN | KIND_MOVE_CHUNK | KIND_MOVE_COMMIT | KIND_MOVE_ABORT
    )
}

/// The answer's kind to a request of `kind`.
fn reply_kind(kind: u8) -> u8 {
    kind + 1
}

/// Answers one move request (`kind`) on `connection`: a body that does not decode is Error 1
/// and ends the connection (`Err`); a refusal is its Error frame and the connection goes on.
pub(crate) async fn answer(
    connection: &mut FrameStream,
    handler: Option<&dyn MoveHandler>,
    from: NodeId,
    kind: u8,
    request_id: u64,
    body: &[u8],
) -> Result<(), NetError> {
    let request = match MoveFrame::decode(kind, body) {
        Ok(request) => request,
        Err(error) => {
            let what = format!("a move's body (kind {kind:#04x})");
            return Err(bad_body(connection, request_id, &what, &error.to_string()).await);
        }
    };
    let Some(handler) = handler else {
        let refusal = Refusal::new(ErrorCode::UnknownKind, "this node takes no moves");
        return refuse(connection, request_id, &refusal).await;
    };
    let answered = handler.handle(from, request).await.and_then(|reply| {
        let encoded = reply.encode();
        let fits = reply.check().is_ok() && frame::fits(encoded.len());
        if reply.kind() == reply_kind(kind) && fits {
            Ok((reply.kind(), encoded))
        } else {
            Err(Refusal::new(
                ErrorCode::Refused,
                format!("no answer of kind {:#04x} to give", reply_kind(kind)),
            ))
        }
    });
    match answered {
        Ok((reply_kind, encoded)) => {
            connection
                .write_frame(reply_kind, request_id, &encoded)
                .await
        }
        Err(refusal) => refuse(connection, request_id, &refusal).await,
    }
}

/// What the source got back: the target's answer, or its refusal (its Error frame).
pub type Moved = Result<MoveFrame, Refusal>;

/// An answer frame's meaning for the source of a request of kind `request_kind`.
pub(crate) fn decode_reply(request_kind: u8, kind: u8, body: &[u8]) -> Result<Moved, NetError> {
    if kind == wire::KIND_ERROR {
        let (code, message) =
            wire::decode_error(body).map_err(|error| NetError::Handshake(error.to_string()))?;
        return match ErrorCode::from_u16(code) {
            Some(code @ (ErrorCode::Refused | ErrorCode::UnknownKind | ErrorCode::StaleEpoch)) => {
                Ok(Err(Refusal { code, message }))
            }
            _ => Err(NetError::Remote { code, message }),
        };
    }
    if kind != reply_kind(request_kind) {
        return Err(NetError::Handshake(format!(
            "reply kind {kind:#04x} to a move request of kind {request_kind:#04x}"
        )));
    }
    MoveFrame::decode(kind, body)
        .map(Ok)
        .map_err(|error| NetError::Handshake(format!("a move's answer: {error}")))
}
