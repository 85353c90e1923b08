//! The listening side: every accepted connection runs the handshake, then answers requests one
//! at a time with `ClusterNode::handle` until the peer closes it or the node shuts down.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use settee_cluster::node::ClusterNode;
use settee_cluster::wire::{self, ErrorCode, WireError};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::forward::{self, ForwardHandler};
use crate::frame::FrameError;
use crate::handshake::{self, Secret};
use crate::moves::{self, MoveHandler};
use crate::stream::FrameStream;
use crate::NetError;

/// Connections a node holds at once; a new one past this is closed on accept. Room for each
/// of 63 peers' idle pool (`IDLE_CONNECTIONS_MAX`) and the requests in flight beside it.
pub const CONNECTIONS_MAX: usize = 1_024;

/// Serves `listener` until `shutdown` resolves; then stops accepting and ends every connection.
/// Forwarded HTTP requests are refused (Error 2): see [`serve_with_forwarding`].
pub async fn serve(
    listener: TcpListener,
    node: Arc<ClusterNode>,
    secret: Secret,
    shutdown: impl Future<Output = ()>,
) {
    serve_with_forwarding(listener, node, None, secret, shutdown).await
}

/// [`serve`], with forwarded HTTP requests (kind 0x20) answered by `forward`.
pub async fn serve_with_forwarding(
    listener: TcpListener,
    node: Arc<ClusterNode>,
    forward: Option<Arc<dyn ForwardHandler>>,
    secret: Secret,
    shutdown: impl Future<Output = ()>,
) {
    let handlers = Handlers {
        forward,
        moves: None,
    };
    serve_with_handlers(listener, node, handlers, secret, shutdown).await
}

/// What answers the requests that are not the cluster node's own: forwarded HTTP requests
/// (0x20 ..= 0x23) and a rebalance's moves (0x40 ..= 0x47); a kind without its handler is
/// refused (Error 2).
#[derive(Clone, Default)]
pub struct Handlers {
    pub forward: Option<Arc<dyn ForwardHandler>>,
    pub moves: Option<Arc<dyn MoveHandler>>,
}

/// [`serve`], with the requests of [`Handlers`] answered by them.
pub async fn serve_with_handlers(
    listener: TcpListener,
    node: Arc<ClusterNode>,
    handlers: Handlers,
    secret: Secret,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((socket, peer)) = accepted else {
            // Out of file descriptors and the like: the next accept may succeed.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "cluster connection refused: {CONNECTIONS_MAX} open");
            continue;
        };
        let node = node.clone();
        let handlers = handlers.clone();
        let secret = secret.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let connection = FrameStream::new(socket);
            tokio::select! {
                outcome = connection_loop(connection, &node, &handlers, &secret) => {
                    if let Err(error) = outcome {
                        tracing::info!(%peer, %error, "cluster connection closed");
                    }
                }
                _ = stopped.wait_for(|stop| *stop) => {}
            }
            drop(slot);
        });
    }
    let _ = stop.send(true);
}

async fn connection_loop(
    mut connection: FrameStream,
    node: &ClusterNode,
    handlers: &Handlers,
    secret: &Secret,
) -> Result<(), NetError> {
    let budget = Duration::from_millis(crate::HANDSHAKE_TIMEOUT_MS);
    let handshake = handshake::server(&mut connection, secret, node.id());
    let peer = match tokio::time::timeout(budget, handshake).await {
        Err(_) => return Err(NetError::Timeout),
        Ok(Err(error)) => {
            refuse(&mut connection, &error).await;
            return Err(error);
        }
        Ok(Ok(peer)) => peer,
    };
    loop {
        let frame = match connection.read_frame().await {
            Ok(frame) => frame,
            Err(NetError::Closed) => return Ok(()),
            Err(error) => {
                refuse(&mut connection, &error).await;
                return Err(error);
            }
        };
        if forward::is_forwarded(frame.kind) {
            forward::answer(
                &mut connection,
                handlers.forward.as_deref(),
                peer,
                frame.kind,
                frame.request_id,
                &frame.body,
            )
            .await?;
            continue;
        }
        if moves::is_move_request(frame.kind) {
            moves::answer(
                &mut connection,
                handlers.moves.as_deref(),
                peer,
                frame.kind,
                frame.request_id,
                &frame.body,
            )
            .await?;
            continue;
        }
        let request = match wire::decode_request(frame.kind, &frame.body) {
            Ok(request) => request,
            Err(WireError::UnknownKind(kind)) => {
                let body = wire::encode_error(
                    ErrorCode::UnknownKind,
                    &format!("unknown kind {kind:#04x}"),
                );
                connection
                    .write_frame(wire::KIND_ERROR, frame.request_id, &body)
                    .await?;
                continue;
            }
            Err(error) => {
                let body = wire::encode_error(ErrorCode::BadFrame, &error.to_string());
                let _ = connection
                    .write_frame(wire::KIND_ERROR, frame.request_id, &body)
                    .await;
                return Err(NetError::Handshake(error.to_string()));
            }
        };
        let response = node.handle(request).await;
        let (kind, body) = wire::encode_response(&response);
        connection
            .write_frame(kind, frame.request_id, &body)
            .await?;
    }
}

/// Tells the peer why the connection ends, when the stream still allows a frame.
async fn refuse(connection: &mut FrameStream, error: &NetError) {
    let code = match error {
        NetError::Frame(FrameError::Version(_)) => ErrorCode::UnsupportedVersion,
        NetError::Frame(_) | NetError::Handshake(_) => ErrorCode::BadFrame,
        _ => return,
    };
    let body = wire::encode_error(code, &error.to_string());
    let _ = connection.write_frame(wire::KIND_ERROR, 0, &body).await;
}
