//! TLS for both doors: the only crate that links rustls (with the `ring` provider).
//!
//! [`Certificates`] loads the node's certificate chain and private key from PEM files, with an
//! error that names the file and what is wrong with it, and holds the server configuration
//! every new connection's handshake uses. [`Certificates::reload`] (the binary calls it on
//! SIGHUP) reads the files again and swaps the configuration: connections open already keep
//! the certificate they were made with, new ones get the new one; a reload that fails keeps
//! the old one. [`Certificates::accept`] runs a handshake within [`HANDSHAKE_TIMEOUT`].
//!
//! The CouchDB door serves its HTTP over the TLS stream itself; the KV door's connection loop
//! works on a `TcpStream`, so KV over TLS is relayed ([`relay`]) to the plain KV listener.
//!
//! Must not know: HTTP, the KV protocol, documents.
#![deny(clippy::unwrap_used)]

pub mod relay;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A server-side TLS connection over TCP.
pub type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// A client must finish its handshake this quickly, or the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate chain and its private key are (PEM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read the TLS certificate file {}: {source}", path.display())]
    ReadCertificate {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the TLS key file {}: {source}", path.display())]
    ReadKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no PEM certificate (-----BEGIN CERTIFICATE-----) in {}", path.display())]
    NoCertificate { path: PathBuf },
    #[error("no PEM private key (PKCS#8, PKCS#1 or SEC1) in {}", path.display())]
    NoKey { path: PathBuf },
    #[error("the TLS certificate {} and key {} cannot be used together: {reason}", cert.display(), key.display())]
    Unusable {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

/// The node's certificate, swapped by [`Certificates::reload`].
pub struct Certificates {
    files: TlsFiles,
    /// Read on every accept and replaced whole on reload; a reader clones the `Arc` and lets
    /// go at once, so a reload never waits for a handshake.
    current: RwLock<Arc<ServerConfig>>,
}

impl Certificates {
    pub fn load(files: TlsFiles) -> Result<Arc<Certificates>, TlsError> {
        let config = server_config(&files)?;
        Ok(Arc::new(Certificates {
            files,
            current: RwLock::new(config),
        }))
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again; on success new connections get the new certificate, on
    /// failure the old one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files)?;
        match self.current.write() {
            Ok(mut current) => *current = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }

    fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The server side of a handshake on `stream`, with the certificate of this moment.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream> {
        let acceptor = TlsAcceptor::from(self.config());
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
            Ok(accepted) => accepted,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = read_certificates(&files.cert)?;
    let key = read_key(&files.key)?;
    let unusable = |reason: String| TlsError::Unusable {
        cert: files.cert.clone(),
        key: files.key.clone(),
        reason,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| unusable(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|error| unusable(error.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::ReadCertificate {
        path: path.to_owned(),
        source,
    })?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::ReadKey {
        path: path.to_owned(),
        source,
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| TlsError::NoKey {
        path: path.to_owned(),
    })
}
