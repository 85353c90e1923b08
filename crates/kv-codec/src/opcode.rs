//! Opcodes settee understands (kv_engine `docs/BinaryProtocol.md`). Quiet variants answer only
//! on failure (GETQ/GETKQ: only on success).

pub const GET: u8 = 0x00;
pub const SET: u8 = 0x01;
pub const ADD: u8 = 0x02;
pub const REPLACE: u8 = 0x03;
pub const DELETE: u8 = 0x04;
pub const INCREMENT: u8 = 0x05;
pub const DECREMENT: u8 = 0x06;
pub const QUIT: u8 = 0x07;
pub const FLUSH: u8 = 0x08;
pub const GETQ: u8 = 0x09;
pub const NOOP: u8 = 0x0a;
pub const VERSION: u8 = 0x0b;
pub const GETK: u8 = 0x0c;
pub const GETKQ: u8 = 0x0d;
pub const APPEND: u8 = 0x0e;
pub const PREPEND: u8 = 0x0f;
pub const STAT: u8 = 0x10;
pub const SETQ: u8 = 0x11;
pub const ADDQ: u8 = 0x12;
pub const REPLACEQ: u8 = 0x13;
pub const DELETEQ: u8 = 0x14;
pub const INCREMENTQ: u8 = 0x15;
pub const DECREMENTQ: u8 = 0x16;
pub const QUITQ: u8 = 0x17;
pub const FLUSHQ: u8 = 0x18;
pub const APPENDQ: u8 = 0x19;
pub const PREPENDQ: u8 = 0x1a;
pub const VERBOSITY: u8 = 0x1b;
pub const TOUCH: u8 = 0x1c;
pub const GAT: u8 = 0x1d;
pub const GATQ: u8 = 0x1e;
pub const HELLO: u8 = 0x1f;
pub const SASL_LIST_MECHS: u8 = 0x20;
pub const SASL_AUTH: u8 = 0x21;
pub const SASL_STEP: u8 = 0x22;
pub const GET_ALL_VB_SEQNOS: u8 = 0x48;
pub const DCP_OPEN: u8 = 0x50;
pub const DCP_ADD_STREAM: u8 = 0x51;
pub const DCP_CLOSE_STREAM: u8 = 0x52;
pub const DCP_STREAM_REQ: u8 = 0x53;
pub const DCP_GET_FAILOVER_LOG: u8 = 0x54;
pub const DCP_STREAM_END: u8 = 0x55;
pub const DCP_SNAPSHOT_MARKER: u8 = 0x56;
pub const DCP_MUTATION: u8 = 0x57;
pub const DCP_DELETION: u8 = 0x58;
pub const DCP_EXPIRATION: u8 = 0x59;
pub const DCP_FLUSH: u8 = 0x5a;
pub const DCP_SET_VBUCKET_STATE: u8 = 0x5b;
pub const DCP_NOOP: u8 = 0x5c;
pub const DCP_BUFFER_ACKNOWLEDGEMENT: u8 = 0x5d;
pub const DCP_CONTROL: u8 = 0x5e;
pub const DCP_SYSTEM_EVENT: u8 = 0x5f;
pub const DCP_PREPARE: u8 = 0x60;
pub const DCP_SEQNO_ACKNOWLEDGED: u8 = 0x61;
pub const DCP_COMMIT: u8 = 0x62;
pub const DCP_ABORT: u8 = 0x63;
pub const DCP_SEQNO_ADVANCED: u8 = 0x64;
pub const DCP_OSO_SNAPSHOT: u8 = 0x65;
pub const DCP_CACHE_TRANSFER: u8 = 0x66;
pub const DCP_CACHE_TRANSFER_END: u8 = 0x67;
/// settee's own: a purge marker on a `settee_records` stream (kv-frames.md, "Opcodes settee
/// adds"; kv_engine leaves 0x68-0x6f unassigned).
pub const DCP_PURGE: u8 = 0x6f;
pub const GET_REPLICA: u8 = 0x83;
pub const SELECT_BUCKET: u8 = 0x89;
pub const OBSERVE_SEQNO: u8 = 0x91;
pub const OBSERVE: u8 = 0x92;
pub const GET_LOCKED: u8 = 0x94;
pub const UNLOCK_KEY: u8 = 0x95;
pub const GET_META: u8 = 0xa0;
pub const GET_CLUSTER_CONFIG: u8 = 0xb5;
pub const GET_COLLECTIONS_MANIFEST: u8 = 0xba;
pub const GET_COLLECTION_ID: u8 = 0xbb;
pub const GET_SCOPE_ID: u8 = 0xbc;
pub const SUBDOC_MULTI_LOOKUP: u8 = 0xd0;
pub const SUBDOC_MULTI_MUTATION: u8 = 0xd1;
pub const GET_ERROR_MAP: u8 = 0xfe;

/// Server-initiated request (magic 0x82): the cluster map changed.
pub const CLUSTERMAP_CHANGE_NOTIFICATION: u8 = 0x01;

/// The non-quiet opcode a quiet one stands for, and whether `opcode` is quiet.
pub fn unquiet(opcode: u8) -> (u8, bool) {
    match opcode {
        GETQ => (GET, true),
        GETKQ => (GETK, true),
        SETQ => (SET, true),
        ADDQ => (ADD, true),
        REPLACEQ => (REPLACE, true),
        DELETEQ => (DELETE, true),
        INCREMENTQ => (INCREMENT, true),
        DECREMENTQ => (DECREMENT, true),
        QUITQ => (QUIT, true),
        FLUSHQ => (FLUSH, true),
        APPENDQ => (APPEND, true),
        PREPENDQ => (PREPEND, true),
        GATQ => (GAT, true),
        other => (other, false),
    }
}

/// A short name for logs and statistics.
pub fn name(opcode: u8) -> &'static str {
    match opcode {
        GET => "GET",
        SET => "SET",
        ADD => "ADD",
        REPLACE => "REPLACE",
        DELETE => "DELETE",
        INCREMENT => "INCREMENT",
        DECREMENT => "DECREMENT",
        QUIT => "QUIT",
        FLUSH => "FLUSH",
        GETQ => "GETQ",
        NOOP => "NOOP",
        VERSION => "VERSION",
        GETK => "GETK",
        GETKQ => "GETKQ",
        APPEND => "APPEND",
        PREPEND => "PREPEND",
        STAT => "STAT",
        SETQ => "SETQ",
        ADDQ => "ADDQ",
        REPLACEQ => "REPLACEQ",
        DELETEQ => "DELETEQ",
        INCREMENTQ => "INCREMENTQ",
        DECREMENTQ => "DECREMENTQ",
        QUITQ => "QUITQ",
        FLUSHQ => "FLUSHQ",
        APPENDQ => "APPENDQ",
        PREPENDQ => "PREPENDQ",
        VERBOSITY => "VERBOSITY",
        TOUCH => "TOUCH",
        GAT => "GAT",
        GATQ => "GATQ",
        HELLO => "HELLO",
        SASL_LIST_MECHS => "SASL_LIST_MECHS",
        SASL_AUTH => "SASL_AUTH",
        SASL_STEP => "SASL_STEP",
        GET_REPLICA => "GET_REPLICA",
        SELECT_BUCKET => "SELECT_BUCKET",
        OBSERVE_SEQNO => "OBSERVE_SEQNO",
        OBSERVE => "OBSERVE",
        GET_LOCKED => "GET_LOCKED",
        UNLOCK_KEY => "UNLOCK_KEY",
        GET_META => "GET_META",
        GET_CLUSTER_CONFIG => "GET_CLUSTER_CONFIG",
        GET_COLLECTIONS_MANIFEST => "GET_COLLECTIONS_MANIFEST",
        GET_COLLECTION_ID => "GET_COLLECTION_ID",
        GET_SCOPE_ID => "GET_SCOPE_ID",
        SUBDOC_MULTI_LOOKUP => "SUBDOC_MULTI_LOOKUP",
        SUBDOC_MULTI_MUTATION => "SUBDOC_MULTI_MUTATION",
        GET_ERROR_MAP => "GET_ERROR_MAP",
        _ => "UNKNOWN",
    }
}
