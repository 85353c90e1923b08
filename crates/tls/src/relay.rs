//! KV over TLS: each TLS connection accepted here is relayed, bytes both ways, to a loopback
//! listener of the KV door that serves only relayed connections (and so offers SASL PLAIN, as
//! Couchbase Server does over TLS). The KV door's connection loop is written for a
//! `TcpStream` (it moves sockets between runtimes and writes with `try_write`), so this
//! costs one loopback hop instead of a second connection loop. The relay first sends
//! `settee_door::relay_preface`: the client's address and the one it reached, so the door
//! counts failed logins by the real client and names the right host in cluster configs.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::Certificates;

/// Accepts TLS connections on `listener` until `shutdown` resolves, at most
/// `max_connections` at once (more are closed on accept, as the KV door closes them), and
/// relays each to `plain` (the KV listener's address; an unspecified host means loopback).
pub async fn serve(
    listener: TcpListener,
    certificates: Arc<Certificates>,
    plain: SocketAddr,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let plain = loopback_if_unspecified(plain);
    let permits = Arc::new(Semaphore::new(max_connections));
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "kv tls accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let certificates = certificates.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
                return;
            };
            let mut tls = match certificates.accept(stream).await {
                Ok(tls) => tls,
                Err(error) => {
                    tracing::debug!(%error, "kv tls handshake failed");
                    return;
                }
            };
            let Ok(mut inner) = TcpStream::connect(plain).await else {
                return;
            };
            let _ = inner.set_nodelay(true);
            let preface = settee_door::relay_preface::encode(peer.ip(), local.ip());
            if inner.write_all(&preface).await.is_err() {
                return;
            }
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
        });
    }
}

fn loopback_if_unspecified(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(v4) if v4.ip().is_unspecified() => {
            SocketAddr::from(([127, 0, 0, 1], v4.port()))
        }
        SocketAddr::V6(v6) if v6.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, v6.port()))
        }
        other => other,
    }
}
