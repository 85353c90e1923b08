//! What turns an accepted socket into the stream HTTP is spoken on: nothing for plain HTTP,
//! a TLS handshake for HTTPS (the binary implements it over `settee-tls`, the only crate that
//! links rustls, so this crate stays free of it).

use std::future::Future;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

pub trait Handshake: Clone + Send + Sync + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    fn handshake(
        &self,
        stream: TcpStream,
    ) -> impl Future<Output = std::io::Result<Self::Io>> + Send;

    /// Whether a connection refused past the maximum is sent CouchDB's plain-text 503 (a TLS
    /// client could not read it: it is closed instead).
    fn answers_refusals(&self) -> bool;
}

/// Plain HTTP: the socket as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl Handshake for Plain {
    type Io = TcpStream;

    async fn handshake(&self, stream: TcpStream) -> std::io::Result<TcpStream> {
        Ok(stream)
    }

    fn answers_refusals(&self) -> bool {
        true
    }
}
