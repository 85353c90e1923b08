//! The Couchbase KV wire format (memcached binary protocol with Couchbase's extensions), byte
//! layout in `docs/format/kv-frames.md`.
//!
//! Decoding borrows from the caller's buffer and never allocates; encoding appends to a
//! caller-owned `Vec<u8>` so that many replies share one buffer and one `write` call. The crate
//! knows frames only: no sockets, no documents, no authentication.

pub mod dcp;
pub mod dcp_records;
mod frame;
pub mod framing_extras;
pub mod leb128;
pub mod opcode;
pub mod status;
pub mod subdoc;
pub mod validate;

pub use frame::{
    decode, encode_request, encode_response, encode_server_request, finish_response,
    start_response, Decoded, Frame, FrameError, Magic, HEADER_LEN,
};
pub use framing_extras::{FramingExtra, FramingExtras, FramingExtrasError};

/// HELLO feature codes (kv_engine `docs/BinaryProtocol.md`, "HELLO").
pub mod feature {
    pub const DATATYPE: u16 = 0x01;
    pub const TLS: u16 = 0x02;
    pub const TCP_NODELAY: u16 = 0x03;
    pub const MUTATION_SEQNO: u16 = 0x04;
    pub const TCP_DELAY: u16 = 0x05;
    pub const XATTR: u16 = 0x06;
    pub const XERROR: u16 = 0x07;
    pub const SELECT_BUCKET: u16 = 0x08;
    pub const SNAPPY: u16 = 0x0a;
    pub const JSON: u16 = 0x0b;
    pub const DUPLEX: u16 = 0x0c;
    pub const CLUSTERMAP_CHANGE_NOTIFICATION: u16 = 0x0d;
    pub const UNORDERED_EXECUTION: u16 = 0x0e;
    pub const TRACING: u16 = 0x0f;
    pub const ALT_REQUEST_SUPPORT: u16 = 0x10;
    pub const SYNC_REPLICATION: u16 = 0x11;
    pub const COLLECTIONS: u16 = 0x12;
    pub const PRESERVE_TTL: u16 = 0x14;
    pub const VATTR: u16 = 0x15;
    pub const SUBDOC_CREATE_AS_DELETED: u16 = 0x17;
    /// Pushes carry only the map's epoch and revision (kv_engine `feature.h`); a client that
    /// asks for both forms gets this one.
    pub const CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF: u16 = 0x1f;
}

/// Datatype bits (header byte 5).
pub mod datatype {
    pub const RAW: u8 = 0x00;
    pub const JSON: u8 = 0x01;
    pub const SNAPPY: u8 = 0x02;
    pub const XATTR: u8 = 0x04;
}
