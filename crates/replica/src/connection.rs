//! One connection to the active node's KV port, up to the DCP stream (replica.md, "What the
//! consumer does"): HELLO, SASL SCRAM-SHA512 as the node account, SELECT_BUCKET,
//! GET_ALL_VB_SEQNOS, DCP_OPEN and the controls. Frames are settee-kv-codec's.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use settee_auth::scram::{Mechanism, ScramClient};
use settee_kv_codec::dcp::open_flags;
use settee_kv_codec::{decode, encode_request, feature, opcode, status, Decoded, Magic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ReplicaError;

/// The largest frame the consumer takes: a document record with its attachment bodies.
pub const FRAME_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Connecting and each handshake reply, at most.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Flow-control window the consumer asks for.
pub const BUFFER_BYTES: u32 = 4 * 1024 * 1024;
/// Seconds between the producer's NOOPs when idle.
pub const NOOP_INTERVAL_SECS: u64 = 20;

/// A response, owned.
pub(crate) struct Reply {
    pub status: u16,
    pub value: Bytes,
}

pub(crate) struct Connection {
    stream: TcpStream,
    pub input: BytesMut,
    opaque: u32,
}

impl Connection {
    pub async fn connect(addr: &str) -> Result<Connection, ReplicaError> {
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| ReplicaError::Protocol("connect timed out".into()))??;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            input: BytesMut::with_capacity(READ_BUFFER_BYTES),
            opaque: 0,
        })
    }

    /// Appends a request to `out`; returns its opaque.
    pub fn encode(
        &mut self,
        out: &mut Vec<u8>,
        code: u8,
        vbucket: u16,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> u32 {
        self.opaque = self.opaque.wrapping_add(1);
        encode_request(
            out,
            code,
            vbucket,
            self.opaque,
            0,
            0,
            &[],
            extras,
            key,
            value,
        );
        self.opaque
    }

    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), ReplicaError> {
        Ok(self.stream.write_all(bytes).await?)
    }

    /// The next whole frame already buffered, split off the input.
    pub fn next_buffered(&mut self) -> Result<Option<Bytes>, ReplicaError> {
        match decode(&self.input, FRAME_BYTES_MAX) {
            Ok(Decoded::Frame(_, used)) => Ok(Some(self.input.split_to(used).freeze())),
            Ok(Decoded::Incomplete(_)) => Ok(None),
            Err(error) => Err(ReplicaError::Protocol(format!("malformed frame: {error}"))),
        }
    }

    /// Reads more bytes from the socket; `Ok(false)` when the peer closed it.
    pub async fn fill(&mut self) -> Result<bool, ReplicaError> {
        if self.input.capacity() - self.input.len() < READ_BUFFER_BYTES {
            self.input.reserve(READ_BUFFER_BYTES);
        }
        Ok(self.stream.read_buf(&mut self.input).await? > 0)
    }

    /// Sends one request and waits (bounded) for its response: the handshake, before DCP.
    async fn call(
        &mut self,
        code: u8,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> Result<Reply, ReplicaError> {
        let mut out = Vec::new();
        let opaque = self.encode(&mut out, code, 0, extras, key, value);
        self.write(&out).await?;
        let frame = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            loop {
                if let Some(frame) = self.next_buffered()? {
                    return Ok(frame);
                }
                if !self.fill().await? {
                    return Err(ReplicaError::Closed);
                }
            }
        })
        .await
        .map_err(|_| ReplicaError::Protocol("no reply in time".into()))??;
        let Ok(Decoded::Frame(reply, _)) = decode(&frame, FRAME_BYTES_MAX) else {
            return Err(ReplicaError::Protocol("undecodable reply".into()));
        };
        if reply.magic != Magic::Response || reply.opcode != code || reply.opaque != opaque {
            return Err(ReplicaError::Protocol("unexpected reply".into()));
        }
        Ok(Reply {
            status: reply.status(),
            value: frame.slice_ref(reply.value),
        })
    }

    async fn expect_ok(
        &mut self,
        code: u8,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
        what: &'static str,
    ) -> Result<Bytes, ReplicaError> {
        let reply = self.call(code, extras, key, value).await?;
        match reply.status {
            status::SUCCESS => Ok(reply.value),
            code => Err(ReplicaError::Refused { what, status: code }),
        }
    }

    /// HELLO, then SCRAM-SHA512 as `user`.
    pub async fn login(&mut self, user: &str, password: &str) -> Result<(), ReplicaError> {
        let features: Vec<u8> = [
            feature::COLLECTIONS,
            feature::XATTR,
            feature::XERROR,
            feature::JSON,
        ]
        .iter()
        .flat_map(|code| code.to_be_bytes())
        .collect();
        self.expect_ok(opcode::HELLO, &[], b"settee-replica", &features, "HELLO")
            .await?;
        let nonce: String = (0..24)
            .map(|_| char::from(b'a' + rand::random_range(0..26u8)))
            .collect();
        let mechanism = Mechanism::Sha512;
        let mut client = ScramClient::new(mechanism, user, password, &nonce);
        let name = mechanism.name().as_bytes();
        let first = client.client_first();
        let reply = self
            .call(opcode::SASL_AUTH, &[], name, first.as_bytes())
            .await?;
        if reply.status != status::AUTH_CONTINUE {
            return Err(ReplicaError::AuthFailed);
        }
        let server_first =
            std::str::from_utf8(&reply.value).map_err(|_| ReplicaError::AuthFailed)?;
        let last = client
            .client_final(server_first)
            .map_err(|_| ReplicaError::AuthFailed)?;
        let reply = self
            .call(opcode::SASL_STEP, &[], name, last.as_bytes())
            .await?;
        let server_final = std::str::from_utf8(&reply.value).unwrap_or("");
        if reply.status != status::SUCCESS || !client.verify_server(server_final) {
            return Err(ReplicaError::AuthFailed);
        }
        Ok(())
    }

    /// SELECT_BUCKET, then the bucket's vbucket count: `known_count` if the caller knows it
    /// (on a cluster node GET_ALL_VB_SEQNOS lists only the vbuckets the node holds), else from
    /// GET_ALL_VB_SEQNOS.
    pub async fn select(
        &mut self,
        bucket: &str,
        known_count: Option<u16>,
    ) -> Result<u16, ReplicaError> {
        self.expect_ok(
            opcode::SELECT_BUCKET,
            &[],
            bucket.as_bytes(),
            &[],
            "SELECT_BUCKET",
        )
        .await?;
        let seqnos = self.all_vb_seqnos().await?;
        if let Some(count) = known_count {
            return Ok(count);
        }
        u16::try_from(seqnos.len() / 10)
            .ok()
            .filter(|count| *count > 0 && seqnos.len().is_multiple_of(10))
            .ok_or_else(|| ReplicaError::Protocol("bad GET_ALL_VB_SEQNOS reply".into()))
    }

    /// GET_ALL_VB_SEQNOS for every vbucket the node holds (active or replica): 10 bytes each,
    /// the vbucket then its high seqno.
    pub async fn all_vb_seqnos(&mut self) -> Result<Bytes, ReplicaError> {
        self.expect_ok(
            opcode::GET_ALL_VB_SEQNOS,
            &[],
            &[],
            &[],
            "GET_ALL_VB_SEQNOS",
        )
        .await
    }

    /// DCP_OPEN as a producer's consumer, then the controls of replica.md.
    pub async fn open_dcp(&mut self, name: &str, node_id: Option<u64>) -> Result<(), ReplicaError> {
        let flags =
            open_flags::PRODUCER | open_flags::INCLUDE_XATTRS | open_flags::INCLUDE_DELETE_TIMES;
        let mut extras = [0u8; 8];
        extras[4..].copy_from_slice(&flags.to_be_bytes());
        self.expect_ok(opcode::DCP_OPEN, &extras, name.as_bytes(), &[], "DCP_OPEN")
            .await?;
        let controls = [
            ("settee_records", "true".to_string()),
            ("enable_noop", "true".to_string()),
            ("set_noop_interval", NOOP_INTERVAL_SECS.to_string()),
            ("connection_buffer_size", BUFFER_BYTES.to_string()),
        ];
        // Sync replication (replica.md): who acknowledges, then the switch.
        let sync = node_id.map(|node| {
            [
                ("consumer_name", node.to_string()),
                ("enable_sync_writes", "true".to_string()),
            ]
        });
        for (key, value) in controls.into_iter().chain(sync.into_iter().flatten()) {
            self.expect_ok(
                opcode::DCP_CONTROL,
                &[],
                key.as_bytes(),
                value.as_bytes(),
                "DCP_CONTROL",
            )
            .await?;
        }
        Ok(())
    }
}
