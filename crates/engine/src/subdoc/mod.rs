//! Sub-document lookups and mutations on stored documents (Couchbase's `lookup_in` /
//! `mutate_in`), for both doors: `path.rs` parses paths, `scan.rs` walks stored JSON without
//! building anything, `json.rs` resolves every path of a request in one pass and splices
//! mutations into the bytes (everything outside the edited spans stays byte for byte). This
//! module decides what the paths apply to — the body, the extended attributes, or the virtual
//! `$document` — and makes a mutation one atomic, CAS-checked write of the record.

pub mod json;
pub mod path;
pub mod scan;

use bytes::Bytes;
use settee_revtree::RevId;

/// The outcome of one spec, as Couchbase names them (the KV door maps them to its status
/// codes, the HTTP door to error names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Success,
    PathEnoent,
    PathMismatch,
    PathEinval,
    PathE2big,
    DocE2deep,
    ValueCantinsert,
    DocNotJson,
    NumErange,
    DeltaEinval,
    PathEexists,
    ValueEtoodeep,
    XattrUnknownVattr,
}

pub use Status as SubdocStatus;

/// What a lookup spec asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupOp {
    Get,
    Exists,
    Count,
    /// The whole body (path empty).
    WholeDoc,
}

#[derive(Clone, Copy, Debug)]
pub struct LookupSpec<'a> {
    pub op: LookupOp,
    pub xattr: bool,
    pub path: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutateOp {
    DictAdd,
    DictUpsert,
    Delete,
    Replace,
    ArrayPushLast,
    ArrayPushFirst,
    ArrayInsert,
    ArrayAddUnique,
    Counter,
    /// Replace the whole body with the value.
    SetDoc,
    /// Delete the document.
    DeleteDoc,
}

#[derive(Clone, Debug)]
pub struct MutateSpec {
    pub op: MutateOp,
    pub xattr: bool,
    pub mkdir_p: bool,
    pub expand_macros: bool,
    pub path: Bytes,
    pub value: Bytes,
}

/// How a mutation treats a missing document (Couchbase's store semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CreateMode {
    /// The document must exist.
    #[default]
    Replace,
    /// Create it if missing (`MKDOC`).
    Upsert,
    /// It must not exist (`ADD`).
    Insert,
}

#[derive(Clone, Debug, Default)]
pub struct MutateIn {
    pub specs: Vec<MutateSpec>,
    pub create: CreateMode,
    /// Operate on a deleted document's xattrs (`ACCESS_DELETED`).
    pub access_deleted: bool,
    /// 0 = any version.
    pub cas: u64,
    /// `None` keeps the document's expiry; `Some(0)` clears it.
    pub expiry: Option<u32>,
}

/// What a lookup found out about the document itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupMeta {
    pub cas: u64,
    pub deleted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MutateInOutcome {
    Done {
        cas: u64,
        seqno: u64,
        rev: RevId,
        /// Values some specs return (counters), by spec index.
        values: Vec<(u8, Vec<u8>)>,
        deleted: bool,
    },
    NotFound,
    Exists,
    CasMismatch,
    Locked,
    /// One spec failed; nothing was written.
    SpecFailed {
        index: u8,
        status: SubdocStatus,
    },
    /// The body is not JSON, so paths in it mean nothing.
    NotJson,
    /// The result would exceed the document size limit.
    TooBig,
}
