//! One KV connection: connect, the handshake (HELLO, SASL, SELECT_BUCKET, cluster config) as
//! one request at a time, and then the socket and read buffer the load loop (`load.rs`) drives.
//!
//! Against plain memcached the handshake is empty: no HELLO, because memcached 1.6 answers an
//! unknown opcode that has a body with "unknown command" and then mis-frames the rest of the
//! stream (seen with 1.6.18), and no SASL.

use std::time::Duration;

use anyhow::{bail, Context};
use base64::Engine as _;
use settee_auth::scram::{Mechanism, ScramClient};
use settee_kv_codec::{datatype, decode, encode_request, feature, opcode, status, Decoded, Magic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A reply body larger than this is a broken stream, not a document (Couchbase's value limit is
/// 20 MiB).
pub(crate) const REPLY_BODY_MAX: usize = 32 * 1024 * 1024;
/// Socket reads go into a buffer with at least this much room.
pub(crate) const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How long connecting plus the handshake may take.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshake requests use opaques from here up, so they can never be mistaken for a load slot.
const HANDSHAKE_OPAQUE_BASE: u32 = 0x8000_0000;
/// HELLO's key: the agent name the server may log.
const AGENT: &str = concat!("settee-bench/", env!("CARGO_PKG_VERSION"));

/// SASL mechanisms the bench can authenticate with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    #[value(name = "SCRAM-SHA512")]
    ScramSha512,
    #[value(name = "SCRAM-SHA256")]
    ScramSha256,
    #[value(name = "SCRAM-SHA1")]
    ScramSha1,
    /// The password in clear text; Couchbase and settee refuse it on plain TCP by default.
    #[value(name = "PLAIN")]
    Plain,
}

/// What a connection does before the load, resolved once from the flags.
#[derive(Clone, Debug)]
pub(crate) struct Handshake {
    pub(crate) address: String,
    /// User and password. `None`: the plain memcached dialect (no HELLO, no SASL).
    pub(crate) credentials: Option<(String, String)>,
    pub(crate) mechanism: SaslMechanism,
    pub(crate) bucket: Option<String>,
    /// Ask for HELLO UnorderedExecution.
    pub(crate) unordered: bool,
    /// `scope.collection`: ask for HELLO Collections and resolve the collection's id.
    pub(crate) collection: Option<String>,
}

/// What the server agreed to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// HELLO features the server accepted (empty without HELLO).
    pub(crate) features: Vec<u16>,
    /// The length of the bucket config's `vBucketServerMap.vBucketMap`, when the server sent one.
    pub(crate) vbuckets: Option<u16>,
    /// The collection id in LEB128, to put before every key (empty: bare keys).
    pub(crate) collection_prefix: Vec<u8>,
    /// Per vbucket, whether the cluster map names the addressed node its active (`None`: no
    /// map, or the node is not in its serverList).
    pub(crate) active_here: Option<Vec<bool>>,
}

/// A reply read during the handshake, copied out of the read buffer.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) extras: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

pub(crate) struct Client {
    pub(crate) stream: TcpStream,
    /// Bytes read but not yet decoded.
    pub(crate) input: Vec<u8>,
    next_opaque: u32,
}

impl Client {
    /// Connects with TCP_NODELAY and runs the handshake.
    pub(crate) async fn connect(handshake: &Handshake) -> anyhow::Result<(Client, Negotiated)> {
        let stream = TcpStream::connect(&handshake.address)
            .await
            .with_context(|| format!("connecting to {}", handshake.address))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let mut client = Client {
            stream,
            input: Vec::with_capacity(READ_CHUNK_BYTES),
            next_opaque: HANDSHAKE_OPAQUE_BASE,
        };
        let negotiated = client.handshake(handshake).await?;
        Ok((client, negotiated))
    }

    async fn handshake(&mut self, handshake: &Handshake) -> anyhow::Result<Negotiated> {
        let mut negotiated = Negotiated::default();
        let Some((user, password)) = &handshake.credentials else {
            return Ok(negotiated);
        };
        negotiated.features = self
            .hello(handshake.unordered, handshake.collection.is_some())
            .await?;
        self.authenticate(handshake.mechanism, user, password)
            .await?;
        if let Some(bucket) = &handshake.bucket {
            let reply = self
                .call(opcode::SELECT_BUCKET, bucket.as_bytes(), &[])
                .await?;
            if reply.status != status::SUCCESS {
                bail!(
                    "SELECT_BUCKET {bucket:?}: status 0x{:04x} {}",
                    reply.status,
                    String::from_utf8_lossy(&reply.value)
                );
            }
        }
        if let Some(path) = &handshake.collection {
            if !negotiated.features.contains(&feature::COLLECTIONS) {
                bail!("the server did not accept HELLO Collections");
            }
            let reply = self
                .call(opcode::GET_COLLECTION_ID, b"", path.as_bytes())
                .await?;
            if reply.status != status::SUCCESS || reply.extras.len() != 12 {
                bail!(
                    "GET_COLLECTION_ID {path:?}: status 0x{:04x} {}",
                    reply.status,
                    String::from_utf8_lossy(&reply.value)
                );
            }
            let cid = u32::from_be_bytes([
                reply.extras[8],
                reply.extras[9],
                reply.extras[10],
                reply.extras[11],
            ]);
            settee_kv_codec::leb128::encode_u32(cid, &mut negotiated.collection_prefix);
        }
        let reply = self.call(opcode::GET_CLUSTER_CONFIG, b"", &[]).await?;
        if reply.status == status::SUCCESS {
            negotiated.vbuckets = vbucket_count(&reply.value)?;
            negotiated.active_here = active_vbuckets(&reply.value, &handshake.address);
        }
        Ok(negotiated)
    }

    /// HELLO with TcpNoDelay, Xerror, SelectBucket, AltRequestSupport (durable SETs carry
    /// framing extras) and UnorderedExecution when asked; returns the features the server
    /// accepted.
    async fn hello(&mut self, unordered: bool, collections: bool) -> anyhow::Result<Vec<u16>> {
        let mut wanted = vec![
            feature::TCP_NODELAY,
            feature::XERROR,
            feature::SELECT_BUCKET,
            feature::ALT_REQUEST_SUPPORT,
        ];
        if unordered {
            wanted.push(feature::UNORDERED_EXECUTION);
        }
        if collections {
            wanted.push(feature::COLLECTIONS);
        }
        let value: Vec<u8> = wanted.iter().flat_map(|code| code.to_be_bytes()).collect();
        let reply = self.call(opcode::HELLO, AGENT.as_bytes(), &value).await?;
        if reply.status != status::SUCCESS {
            bail!("HELLO: status 0x{:04x}", reply.status);
        }
        if reply.value.len() % 2 != 0 {
            bail!(
                "HELLO reply has an odd length ({} bytes)",
                reply.value.len()
            );
        }
        Ok(reply
            .value
            .chunks_exact(2)
            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
            .collect())
    }

    async fn authenticate(
        &mut self,
        mechanism: SaslMechanism,
        user: &str,
        password: &str,
    ) -> anyhow::Result<()> {
        let scram = match mechanism {
            SaslMechanism::ScramSha512 => Mechanism::Sha512,
            SaslMechanism::ScramSha256 => Mechanism::Sha256,
            SaslMechanism::ScramSha1 => Mechanism::Sha1,
            SaslMechanism::Plain => {
                let value = format!("\0{user}\0{password}");
                let reply = self
                    .call(opcode::SASL_AUTH, b"PLAIN", value.as_bytes())
                    .await?;
                return expect_success("SASL_AUTH PLAIN", &reply);
            }
        };
        let name = scram.name().as_bytes();
        let mut client = ScramClient::new(scram, user, password, &client_nonce());
        let reply = self
            .call(opcode::SASL_AUTH, name, client.client_first().as_bytes())
            .await?;
        if reply.status != status::AUTH_CONTINUE {
            bail!(
                "SASL_AUTH {}: status 0x{:04x} (expected AUTH_CONTINUE 0x0021) {}",
                scram.name(),
                reply.status,
                String::from_utf8_lossy(&reply.value)
            );
        }
        let server_first =
            std::str::from_utf8(&reply.value).context("SCRAM server-first is not UTF-8")?;
        let client_final = client
            .client_final(server_first)
            .map_err(|error| anyhow::anyhow!("SCRAM server-first {server_first:?}: {error:?}"))?;
        let reply = self
            .call(opcode::SASL_STEP, name, client_final.as_bytes())
            .await?;
        expect_success("SASL_STEP", &reply)?;
        let server_final = String::from_utf8_lossy(&reply.value);
        if !client.verify_server(&server_final) {
            bail!("SCRAM: the server's signature {server_final:?} does not match the password");
        }
        Ok(())
    }

    /// Sends one request and waits for its reply.
    pub(crate) async fn call(
        &mut self,
        request_opcode: u8,
        key: &[u8],
        value: &[u8],
    ) -> anyhow::Result<Reply> {
        self.call_with(request_opcode, datatype::RAW, &[], key, value)
            .await
    }

    /// [`Client::call`] with extras and a datatype (a SET's flags and expiry, a JSON value).
    pub(crate) async fn call_with(
        &mut self,
        request_opcode: u8,
        value_datatype: u8,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> anyhow::Result<Reply> {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1) | HANDSHAKE_OPAQUE_BASE;
        let mut out = Vec::new();
        encode_request(
            &mut out,
            request_opcode,
            0,
            opaque,
            0,
            value_datatype,
            &[],
            extras,
            key,
            value,
        );
        let name = opcode::name(request_opcode);
        self.stream
            .write_all(&out)
            .await
            .with_context(|| format!("sending {name}"))?;
        loop {
            if let Decoded::Frame(frame, used) = decode(&self.input, REPLY_BODY_MAX)
                .with_context(|| format!("reading the reply to {name}"))?
            {
                if !matches!(frame.magic, Magic::Response | Magic::AltResponse)
                    || frame.opcode != request_opcode
                    || frame.opaque != opaque
                {
                    bail!(
                        "{name}: expected its reply, got magic {:?} opcode 0x{:02x} opaque 0x{:08x}",
                        frame.magic,
                        frame.opcode,
                        frame.opaque
                    );
                }
                let reply = Reply {
                    status: frame.status(),
                    extras: frame.extras.to_vec(),
                    value: frame.value.to_vec(),
                };
                self.input.drain(..used);
                return Ok(reply);
            }
            self.input.reserve(READ_CHUNK_BYTES);
            let read = self
                .stream
                .read_buf(&mut self.input)
                .await
                .with_context(|| format!("reading the reply to {name}"))?;
            if read == 0 {
                bail!("the server closed the connection instead of answering {name}");
            }
        }
    }
}

fn expect_success(what: &str, reply: &Reply) -> anyhow::Result<()> {
    if reply.status != status::SUCCESS {
        bail!(
            "{what}: status 0x{:04x} {}",
            reply.status,
            String::from_utf8_lossy(&reply.value)
        );
    }
    Ok(())
}

/// A fresh SCRAM client nonce: 24 random bytes in base64 (printable, never a comma).
fn client_nonce() -> String {
    let bytes: [u8; 24] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `vBucketServerMap.vBucketMap`'s length in a bucket config; `None` for a config without one
/// (the node-level config before SELECT_BUCKET).
pub(crate) fn vbucket_count(config: &[u8]) -> anyhow::Result<Option<u16>> {
    let config: serde_json::Value =
        serde_json::from_slice(config).context("GET_CLUSTER_CONFIG reply is not JSON")?;
    let Some(map) = config.pointer("/vBucketServerMap/vBucketMap") else {
        return Ok(None);
    };
    let Some(map) = map.as_array() else {
        bail!("vBucketServerMap.vBucketMap is not an array");
    };
    match u16::try_from(map.len()) {
        Ok(count) if count > 0 => Ok(Some(count)),
        _ => bail!("vBucketServerMap.vBucketMap has {} entries", map.len()),
    }
}

/// Which vbuckets the config's map names `address` ("host:port" of the KV door) the active of.
pub(crate) fn active_vbuckets(config: &[u8], address: &str) -> Option<Vec<bool>> {
    let config: serde_json::Value = serde_json::from_slice(config).ok()?;
    let map = config.get("vBucketServerMap")?;
    let here = map
        .get("serverList")?
        .as_array()?
        .iter()
        .position(|server| server.as_str() == Some(address))?;
    let rows = map.get("vBucketMap")?.as_array()?;
    Some(
        rows.iter()
            .map(|row| row.get(0).and_then(serde_json::Value::as_i64) == i64::try_from(here).ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_vbuckets_are_the_rows_naming_this_server_first() {
        let config = br#"{"vBucketServerMap":{"serverList":["a:1","b:2"],
            "vBucketMap":[[0,1],[1,0],[-1,0],[1,-1]]}}"#;
        assert_eq!(
            active_vbuckets(config, "b:2"),
            Some(vec![false, true, false, true])
        );
        assert_eq!(active_vbuckets(config, "c:3"), None);
        assert_eq!(active_vbuckets(b"{}", "a:1"), None);
    }

    #[test]
    fn vbucket_count_reads_the_map_length() {
        let config =
            br#"{"rev":1,"vBucketServerMap":{"hashAlgorithm":"CRC","vBucketMap":[[0],[0],[0]]}}"#;
        assert_eq!(vbucket_count(config).expect("parses"), Some(3));
        assert_eq!(
            vbucket_count(br#"{"rev":1,"nodesExt":[]}"#).expect("parses"),
            None
        );
        assert!(vbucket_count(br#"{"vBucketServerMap":{"vBucketMap":[]}}"#).is_err());
        assert!(vbucket_count(b"not json").is_err());
    }

    /// RFC 7677 section 3 (SCRAM-SHA-256: user "user", password "pencil"), and the same exchange
    /// with SHA-512, whose expected messages were computed independently with Python's `hmac`
    /// and `hashlib.pbkdf2_hmac` (which reproduce the RFC's SHA-256 messages exactly).
    #[test]
    fn scram_client_matches_rfc7677_and_an_independent_sha512_vector() {
        const SERVER_FIRST: &str =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        const WITHOUT_PROOF: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let cases = [
            (
                Mechanism::Sha256,
                "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            ),
            (
                Mechanism::Sha512,
                "gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
                "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
            ),
        ];
        for (mechanism, proof, server_final) in cases {
            let mut client = ScramClient::new(mechanism, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
            assert_eq!(client.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
            let client_final = client
                .client_final(SERVER_FIRST)
                .expect("valid server-first");
            assert_eq!(client_final, format!("{WITHOUT_PROOF},p={proof}"));
            assert!(client.verify_server(server_final), "{mechanism:?}");
            assert!(!client.verify_server("v=AAAA"), "{mechanism:?}");
        }
    }

    #[test]
    fn client_nonces_are_printable_and_differ() {
        let (first, second) = (client_nonce(), client_nonce());
        assert_ne!(first, second);
        assert!(first
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b','));
    }
}
