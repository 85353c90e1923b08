//! Sub-document paths and JSON edits on document bytes, as Couchbase's sub-document API has
//! them: path parsing (`path`), a scanner that finds values without parsing the document
//! (`scan`), lookups and byte-preserving edits (`json`), and the structural index that lets a
//! lookup skip what it does not need (`index`). Pure functions over bytes: the engine reads and
//! writes documents around them.

pub mod index;
pub mod json;
pub mod path;
pub mod scan;

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
