//! The handshake that opens every connection: both sides prove they know the cluster secret
//! with an HMAC-SHA256 over fresh nonces from both (docs/format/cluster-transport.md). The
//! secret never crosses the wire, and the server sends nothing computed with it until the
//! client has proved itself.

use hmac::{Hmac, Mac};
use settee_cluster::map::NodeId;
use settee_cluster::wire::{encode_error, ErrorCode, KIND_ERROR};
use sha2::Sha256;

use crate::stream::FrameStream;
use crate::NetError;

pub const KIND_HELLO: u8 = 0x01;
pub const KIND_CHALLENGE: u8 = 0x02;
pub const KIND_PROOF: u8 = 0x03;
pub const KIND_WELCOME: u8 = 0x04;
pub const NONCE_BYTES: usize = 32;
pub const MAC_BYTES: usize = 32;
/// The shortest secret `settee serve` accepts.
pub const SECRET_BYTES_MIN: usize = 16;
const CLIENT_LABEL: &[u8] = b"settee-cluster/1 client";
const SERVER_LABEL: &[u8] = b"settee-cluster/1 server";
pub const WRONG_SECRET: &str = "wrong cluster secret";

/// The cluster secret; never printed.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// What both MACs cover besides their label.
struct Transcript {
    client_nonce: [u8; NONCE_BYTES],
    server_nonce: [u8; NONCE_BYTES],
    client_id: NodeId,
    server_id: NodeId,
}

impl Transcript {
    fn hmac(&self, secret: &Secret, label: &[u8]) -> Result<Hmac<Sha256>, NetError> {
        // HMAC takes a key of any length (a long one is hashed); the error cannot happen.
        let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0)
            .map_err(|_| NetError::Handshake("the secret cannot key an HMAC".into()))?;
        mac.update(label);
        mac.update(&self.client_nonce);
        mac.update(&self.server_nonce);
        mac.update(&self.client_id.to_be_bytes());
        mac.update(&self.server_id.to_be_bytes());
        Ok(mac)
    }

    fn mac(&self, secret: &Secret, label: &[u8]) -> Result<[u8; MAC_BYTES], NetError> {
        Ok(self.hmac(secret, label)?.finalize().into_bytes().into())
    }

    /// Compares in constant time (hmac's `verify_slice`).
    fn verify(&self, secret: &Secret, label: &[u8], mac: &[u8]) -> Result<bool, NetError> {
        Ok(self.hmac(secret, label)?.verify_slice(mac).is_ok())
    }
}

fn nonce() -> [u8; NONCE_BYTES] {
    let mut nonce = [0; NONCE_BYTES];
    rand::fill(&mut nonce);
    nonce
}

/// Hello and Challenge bodies: a nonce and a node id.
pub fn decode_nonce_and_id(body: &[u8]) -> Result<([u8; NONCE_BYTES], NodeId), NetError> {
    if body.len() != NONCE_BYTES + 8 {
        return Err(NetError::Handshake("bad nonce message".into()));
    }
    let mut nonce = [0; NONCE_BYTES];
    nonce.copy_from_slice(&body[..NONCE_BYTES]);
    let mut id = [0; 8];
    id.copy_from_slice(&body[NONCE_BYTES..]);
    Ok((nonce, u64::from_be_bytes(id)))
}

fn encode_nonce_and_id(nonce: &[u8; NONCE_BYTES], id: NodeId) -> Vec<u8> {
    let mut body = nonce.to_vec();
    body.extend_from_slice(&id.to_be_bytes());
    body
}

/// A frame of `kind` with request id 0, or the reason it is not one. An Error frame from the
/// peer is returned as [`NetError::Remote`].
async fn expect(stream: &mut FrameStream, kind: u8) -> Result<Vec<u8>, NetError> {
    let frame = stream
        .read_frame_within(crate::frame::HANDSHAKE_FRAME_BYTES_MAX)
        .await?;
    if frame.kind == KIND_ERROR {
        let (code, message) = settee_cluster::wire::decode_error(&frame.body)
            .map_err(|error| NetError::Handshake(error.to_string()))?;
        return Err(NetError::Remote { code, message });
    }
    if frame.kind != kind || frame.request_id != 0 {
        return Err(NetError::Handshake(format!(
            "expected handshake frame {kind:#04x}, got {:#04x}",
            frame.kind
        )));
    }
    Ok(frame.body)
}

/// The client's side; returns the server's node id.
pub async fn client(
    stream: &mut FrameStream,
    secret: &Secret,
    client_id: NodeId,
) -> Result<NodeId, NetError> {
    let client_nonce = nonce();
    stream
        .write_frame(
            KIND_HELLO,
            0,
            &encode_nonce_and_id(&client_nonce, client_id),
        )
        .await?;
    let (server_nonce, server_id) = decode_nonce_and_id(&expect(stream, KIND_CHALLENGE).await?)?;
    let transcript = Transcript {
        client_nonce,
        server_nonce,
        client_id,
        server_id,
    };
    stream
        .write_frame(KIND_PROOF, 0, &transcript.mac(secret, CLIENT_LABEL)?)
        .await?;
    let welcome = expect(stream, KIND_WELCOME).await?;
    if !transcript.verify(secret, SERVER_LABEL, &welcome)? {
        return Err(NetError::PeerUnproven);
    }
    Ok(server_id)
}

/// The server's side; returns the client's node id. A client whose proof fails is told so
/// (Error 3) before the caller closes the connection.
pub async fn server(
    stream: &mut FrameStream,
    secret: &Secret,
    server_id: NodeId,
) -> Result<NodeId, NetError> {
    let (client_nonce, client_id) = decode_nonce_and_id(&expect(stream, KIND_HELLO).await?)?;
    let server_nonce = nonce();
    stream
        .write_frame(
            KIND_CHALLENGE,
            0,
            &encode_nonce_and_id(&server_nonce, server_id),
        )
        .await?;
    let transcript = Transcript {
        client_nonce,
        server_nonce,
        client_id,
        server_id,
    };
    let proof = expect(stream, KIND_PROOF).await?;
    if !transcript.verify(secret, CLIENT_LABEL, &proof)? {
        let body = encode_error(ErrorCode::WrongSecret, WRONG_SECRET);
        let _ = stream.write_frame(KIND_ERROR, 0, &body).await;
        return Err(NetError::Remote {
            code: ErrorCode::WrongSecret as u16,
            message: format!("node {client_id} sent a wrong proof of the cluster secret"),
        });
    }
    stream
        .write_frame(KIND_WELCOME, 0, &transcript.mac(secret, SERVER_LABEL)?)
        .await?;
    Ok(client_id)
}
