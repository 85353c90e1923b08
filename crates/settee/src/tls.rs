//! TLS for `settee serve`: the HTTPS handshake the CouchDB door runs on each connection, and
//! the certificate reload on SIGHUP (new connections get the new certificate; a reload that
//! fails is logged and keeps the old one).

use std::sync::Arc;

use settee_tls::Certificates;
use tokio::net::TcpStream;

/// The CouchDB door's handshake for HTTPS.
#[derive(Clone)]
pub struct Https(pub Arc<Certificates>);

impl settee_http::handshake::Handshake for Https {
    type Io = settee_tls::TlsStream;

    async fn handshake(&self, stream: TcpStream) -> std::io::Result<Self::Io> {
        self.0.accept(stream).await
    }

    fn answers_refusals(&self) -> bool {
        false
    }
}

/// Reloads `certificates` on every SIGHUP until `shutdown` resolves.
pub async fn reload_on_hangup(
    certificates: Option<Arc<Certificates>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => signal,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            received = hangups.recv() => if received.is_none() { return },
        }
        match &certificates {
            None => println!("settee: SIGHUP, nothing to reload (no TLS configured)"),
            Some(certificates) => match certificates.reload() {
                Ok(()) => println!(
                    "settee: TLS certificate reloaded from {}",
                    certificates.files().cert.display()
                ),
                Err(error) => {
                    eprintln!("settee: TLS certificate NOT reloaded, the old one stays: {error}")
                }
            },
        }
    }
}
