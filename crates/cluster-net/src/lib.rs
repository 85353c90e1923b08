//! settee's node-to-node transport: the cluster's Raft messages, heartbeats and join requests
//! over TCP, as docs/format/cluster-transport.md specifies them.
//!
//! [`frame`] cuts the byte stream into frames (pure, fuzzed); [`handshake`] opens every
//! connection with a mutual proof of the cluster secret (HMAC-SHA256 over both sides' nonces);
//! [`transport::TcpTransport`] is settee-cluster's `Transport` with pooled connections, and
//! [`server::serve`] answers peers with `ClusterNode::handle`; [`forward`] carries the HTTP
//! door's forwarded document requests (`TcpTransport::forward` out, a `ForwardHandler` in);
//! [`moves`] a rebalance's vbucket moves (`TcpTransport::move_frame` out, a `MoveHandler` in). The frames' bodies are encoded by
//! `settee_cluster::wire`, so this crate never names an openraft type. Start at `frame.rs`.
#![deny(clippy::unwrap_used)]

pub mod forward;
pub mod frame;
pub mod handshake;
pub mod moves;
pub mod server;
pub mod stream;
pub mod transport;

pub use handshake::Secret;
pub use server::{serve, serve_with_forwarding, serve_with_handlers, Handlers};
pub use transport::TcpTransport;

/// The whole handshake, on either side, must finish within this.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 5_000;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    #[error("connection closed")]
    Closed,
    #[error("timed out")]
    Timeout,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame: {0}")]
    Frame(frame::FrameError),
    #[error("protocol: {0}")]
    Handshake(String),
    /// The peer answered with an Error frame (docs/format/cluster-transport.md codes).
    #[error("{message}")]
    Remote { code: u16, message: String },
    #[error("the peer does not know the cluster secret")]
    PeerUnproven,
    #[error("expected node {expected} at this address, found node {found}")]
    WrongPeer { expected: u64, found: u64 },
}
