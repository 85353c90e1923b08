//! A blocking Couchbase KV client over the shared frame codec, for black-box tests that
//! drive the KV door at the wire level (handshake, SCRAM, single requests, pipelines).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use settee_auth::scram::{Mechanism, ScramClient};
use settee_kv_codec::{decode, encode_request, feature, opcode, status, Decoded};

pub struct Reply {
    pub status: u16,
    pub cas: u64,
    pub extras: Vec<u8>,
    pub value: Vec<u8>,
    pub opaque: u32,
    pub datatype: u8,
}

pub struct Kv {
    pub stream: TcpStream,
    pub buffer: Vec<u8>,
    pub opaque: u32,
    pub vbuckets: u16,
    /// Datatype of the requests sent (e.g. snappy-compressed values).
    pub datatype: u8,
}

impl Kv {
    pub fn connect(addr: &str) -> Kv {
        let stream = TcpStream::connect(addr).expect("connect kv");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Kv {
            stream,
            buffer: Vec::new(),
            opaque: 0,
            vbuckets: 64,
            datatype: 0,
        }
    }

    pub fn send(&mut self, op: u8, key: &[u8], extras: &[u8], value: &[u8], cas: u64) -> u32 {
        let mut frame = Vec::new();
        let opaque = self.encode(&mut frame, op, key, extras, value, cas);
        self.stream.write_all(&frame).unwrap();
        opaque
    }

    /// Appends a request to `out` (to be sent later, with others); returns its opaque.
    pub fn encode(
        &mut self,
        out: &mut Vec<u8>,
        op: u8,
        key: &[u8],
        extras: &[u8],
        value: &[u8],
        cas: u64,
    ) -> u32 {
        self.opaque += 1;
        let vbucket = settee_engine::vbucket::vbucket_of(key, self.vbuckets);
        encode_request(
            out,
            op,
            vbucket,
            self.opaque,
            cas,
            self.datatype,
            &[],
            extras,
            key,
            value,
        );
        self.opaque
    }

    pub fn read(&mut self) -> Option<Reply> {
        loop {
            if let Ok(Decoded::Frame(frame, used)) = decode(&self.buffer, 1 << 26) {
                let reply = Reply {
                    status: frame.status(),
                    cas: frame.cas,
                    extras: frame.extras.to_vec(),
                    value: frame.value.to_vec(),
                    opaque: frame.opaque,
                    datatype: frame.datatype,
                };
                self.buffer.drain(..used);
                return Some(reply);
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }

    /// True when the server closed the connection (EOF), false on a reply or a read timeout.
    pub fn closed_by_server(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut chunk = [0u8; 1024];
        matches!(self.stream.read(&mut chunk), Ok(0))
            || matches!(self.stream.read(&mut chunk), Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset)
    }

    pub fn call(&mut self, op: u8, key: &[u8], extras: &[u8], value: &[u8], cas: u64) -> Reply {
        let opaque = self.send(op, key, extras, value, cas);
        let reply = self.read().expect("reply");
        assert_eq!(reply.opaque, opaque);
        reply
    }

    pub fn hello(&mut self, features: &[u16]) -> Vec<u16> {
        let value: Vec<u8> = features
            .iter()
            .flat_map(|code| code.to_be_bytes())
            .collect();
        let reply = self.call(opcode::HELLO, b"kv_door test", &[], &value, 0);
        assert_eq!(reply.status, 0);
        reply
            .value
            .chunks(2)
            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
            .collect()
    }

    pub fn auth(&mut self, user: &str, password: &str) -> u16 {
        let mut client = ScramClient::new(
            Mechanism::Sha512,
            user,
            password,
            "fyko+d2lbbFgONRv9qkxdawL",
        );
        let first = self.call(
            opcode::SASL_AUTH,
            b"SCRAM-SHA512",
            &[],
            client.client_first().as_bytes(),
            0,
        );
        if first.status != status::AUTH_CONTINUE {
            return first.status;
        }
        let server_first = String::from_utf8(first.value).unwrap();
        let last = client.client_final(&server_first).unwrap();
        let reply = self.call(opcode::SASL_STEP, b"SCRAM-SHA512", &[], last.as_bytes(), 0);
        if reply.status == 0 {
            assert!(client.verify_server(std::str::from_utf8(&reply.value).unwrap()));
        }
        reply.status
    }

    pub fn open(addr: &str, user: &str, password: &str, bucket: &str) -> Kv {
        let mut kv = Kv::connect(addr);
        kv.hello(&[feature::XERROR, feature::SELECT_BUCKET, feature::JSON]);
        assert_eq!(kv.auth(user, password), 0);
        assert_eq!(
            kv.call(opcode::SELECT_BUCKET, bucket.as_bytes(), &[], &[], 0)
                .status,
            0
        );
        kv
    }
}

pub fn store_extras(flags: u32, expiry: u32) -> Vec<u8> {
    let mut extras = flags.to_be_bytes().to_vec();
    extras.extend_from_slice(&expiry.to_be_bytes());
    extras
}

pub fn counter_extras(delta: u64, initial: u64, expiry: u32) -> Vec<u8> {
    let mut extras = delta.to_be_bytes().to_vec();
    extras.extend_from_slice(&initial.to_be_bytes());
    extras.extend_from_slice(&expiry.to_be_bytes());
    extras
}

/// GET_ALL_VB_SEQNOS for vbuckets in `state` (0 any, 1 active, 2 replica): vbucket -> high seqno.
#[allow(dead_code)]
pub fn all_vb_seqnos(kv: &mut Kv, state: u32) -> std::collections::BTreeMap<u16, u64> {
    let reply = kv.call(opcode::GET_ALL_VB_SEQNOS, &[], &state.to_be_bytes(), &[], 0);
    assert_eq!(reply.status, status::SUCCESS);
    reply
        .value
        .chunks_exact(10)
        .map(|entry| {
            let vbucket = u16::from_be_bytes([entry[0], entry[1]]);
            let seqno = u64::from_be_bytes(entry[2..].try_into().expect("8 bytes"));
            (vbucket, seqno)
        })
        .collect()
}

/// (serverList as KV addresses, each vbucket's row of indexes into it, active first) of the
/// terse cluster config a node gives `kv`'s connection.
#[allow(dead_code)]
pub fn vbucket_map(kv: &mut Kv) -> (Vec<String>, Vec<Vec<i64>>) {
    let reply = kv.call(opcode::GET_CLUSTER_CONFIG, b"", &[], &[], 0);
    assert_eq!(reply.status, status::SUCCESS);
    let config: serde_json::Value = serde_json::from_slice(&reply.value).expect("a JSON config");
    let map = &config["vBucketServerMap"];
    let servers = map["serverList"]
        .as_array()
        .expect("serverList")
        .iter()
        .map(|entry| entry.as_str().expect("host:port").to_string())
        .collect();
    let rows = map["vBucketMap"]
        .as_array()
        .expect("vBucketMap")
        .iter()
        .map(|row| {
            row.as_array()
                .expect("a row")
                .iter()
                .map(|slot| slot.as_i64().expect("an index"))
                .collect()
        })
        .collect();
    (servers, rows)
}
