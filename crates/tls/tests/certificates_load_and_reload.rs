//! Certificates as the node uses them: clear errors for missing or wrong files, handshakes
//! with the loaded certificate, a reload that new connections see (old ones keep theirs), a
//! failed reload that keeps the old certificate, and a client that does not trust the CA
//! refused. Certificates are made by the `openssl` command (scripts/lib.sh installs it).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use settee_tls::{Certificates, TlsError, TlsFiles};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::{self, pki_types::ServerName, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl (installed by scripts/lib.sh)");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA (`{ca}.crt`, `{ca}.key`) in `dir`.
fn make_ca(dir: &Path, ca: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={ca}"),
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
        ],
    );
}

/// A server certificate for 127.0.0.1 signed by the CA: `{name}.crt`, `{name}.key`.
fn make_server_cert(dir: &Path, ca: &str, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    std::fs::write(
        dir.join(format!("{name}.ext")),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

fn client_trusting(ca_pem: &Path) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    let bytes = std::fs::read(ca_pem).unwrap();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&bytes) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// Serves one echo per connection with the certificates of the moment.
async fn echo_server(certificates: Arc<Certificates>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let certificates = certificates.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = certificates.accept(stream).await else {
                    return;
                };
                let mut byte = [0u8; 1];
                if tls.read_exact(&mut byte).await.is_ok() {
                    let _ = tls.write_all(&byte).await;
                    let _ = tls.flush().await;
                }
            });
        }
    });
    addr
}

/// The certificate the server presented (DER), after one echo.
async fn served_certificate(
    connector: &TlsConnector,
    addr: std::net::SocketAddr,
) -> std::io::Result<Vec<u8>> {
    let stream = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, stream).await?;
    tls.write_all(b"x").await?;
    let mut byte = [0u8; 1];
    tls.read_exact(&mut byte).await?;
    let (_, session) = tls.get_ref();
    Ok(session.peer_certificates().unwrap()[0].as_ref().to_vec())
}

fn der_of(pem: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(pem)
        .unwrap()
        .as_ref()
        .to_vec()
}

#[tokio::test]
async fn a_reload_gives_new_connections_the_new_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    make_ca(path, "ca");
    make_server_cert(path, "ca", "first");
    make_server_cert(path, "ca", "second");
    let files = TlsFiles {
        cert: path.join("node.crt"),
        key: path.join("node.key"),
    };
    std::fs::copy(path.join("first.crt"), &files.cert).unwrap();
    std::fs::copy(path.join("first.key"), &files.key).unwrap();
    let certificates = Certificates::load(files.clone()).unwrap();
    let addr = echo_server(certificates.clone()).await;
    let trusting = client_trusting(&path.join("ca.crt"));
    assert_eq!(
        served_certificate(&trusting, addr).await.unwrap(),
        der_of(&path.join("first.crt"))
    );

    std::fs::copy(path.join("second.crt"), &files.cert).unwrap();
    std::fs::copy(path.join("second.key"), &files.key).unwrap();
    certificates.reload().unwrap();
    assert_eq!(
        served_certificate(&trusting, addr).await.unwrap(),
        der_of(&path.join("second.crt"))
    );

    // A reload that fails (a key that is not a key) keeps the certificate in use.
    std::fs::write(&files.key, "not a key").unwrap();
    assert!(matches!(certificates.reload(), Err(TlsError::NoKey { .. })));
    assert_eq!(
        served_certificate(&trusting, addr).await.unwrap(),
        der_of(&path.join("second.crt"))
    );

    // A client that does not trust the CA is refused.
    make_ca(path, "other");
    let distrusting = client_trusting(&path.join("other.crt"));
    let refused = served_certificate(&distrusting, addr).await.unwrap_err();
    assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
}

#[test]
fn bad_files_give_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    make_ca(path, "ca");
    make_server_cert(path, "ca", "node");
    make_server_cert(path, "ca", "other");
    let load = |cert: &str, key: &str| {
        Certificates::load(TlsFiles {
            cert: path.join(cert),
            key: path.join(key),
        })
        .err()
        .map(|error| (error.to_string(), error))
    };
    let (text, error) = load("missing.crt", "node.key").unwrap();
    assert!(matches!(error, TlsError::ReadCertificate { .. }));
    assert!(
        text.contains("missing.crt") && text.contains("No such file"),
        "{text}"
    );
    let (text, error) = load("node.crt", "missing.key").unwrap();
    assert!(matches!(error, TlsError::ReadKey { .. }), "{text}");
    let (text, error) = load("node.key", "node.key").unwrap();
    assert!(matches!(error, TlsError::NoCertificate { .. }), "{text}");
    let (text, error) = load("node.crt", "node.crt").unwrap();
    assert!(matches!(error, TlsError::NoKey { .. }), "{text}");
    let (text, error) = load("node.crt", "other.key").unwrap();
    assert!(matches!(error, TlsError::Unusable { .. }), "{text}");
    assert!(load("node.crt", "node.key").is_none());
}
