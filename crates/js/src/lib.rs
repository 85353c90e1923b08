//! settee's JavaScript sandbox: the only crate that links QuickJS (`rquickjs`).
//!
//! A [`JsPool`] owns one QuickJS runtime per worker thread, sized to the machine's cores (not
//! to vbuckets or design documents). A design document's functions become a [`Program`]
//! ([`ProgramSpec`]: map and reduce sources of its views, filter functions, the members
//! `require` may load); each worker compiles a program once, the first time it runs it, and
//! keeps it. Calls cross the Rust/JS boundary once per batch, as JSON text:
//! [`JsPool::map`] maps many documents through every view of a program, [`JsPool::reduce`]
//! runs a JavaScript reduce (with `rereduce`), [`JsPool::filter`] a changes filter, and
//! [`JsPool::check`] compiles a program to reject a bad design document at PUT time.
//!
//! Sandbox (`runtime.rs`, `prelude.js`): the globals CouchDB's query server offers (`emit`,
//! `log`, `sum`, `toJSON`, `isArray`, CommonJS `require`), documents frozen before map
//! functions see them, a wall-clock limit per call (an interrupt handler; a caller may give a
//! shorter one, what is left of its own budget) and a memory limit
//! per runtime. A map function that throws emits nothing for that document and the error is
//! reported with the output (CouchDB skips the document and logs); running past the time or
//! memory limit fails the whole call with [`JsError::Timeout`] / [`JsError::OutOfMemory`] and
//! the worker starts a fresh runtime.
#![deny(clippy::unwrap_used)]

mod pool;
mod runtime;

pub use pool::{JsPool, Pending};

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::value::RawValue;
use serde_json::Value;

/// Limits and size of a [`JsPool`].
#[derive(Clone, Debug)]
pub struct JsConfig {
    /// Worker threads, each with its own runtime (default: the number of cores).
    pub threads: usize,
    /// Longest one call may run (CouchDB's `os_process_timeout`, 5 s).
    pub timeout_ms: u64,
    /// Heap limit of each runtime.
    pub memory_bytes_max: usize,
    /// Stack limit of each runtime (deep recursion becomes a catchable RangeError).
    pub stack_bytes_max: usize,
    /// Calls waiting for a worker before callers are told the pool is busy... by waiting:
    /// submitting blocks (or awaits) when this many are queued.
    pub queue_max: usize,
}

impl Default for JsConfig {
    fn default() -> Self {
        JsConfig {
            threads: std::thread::available_parallelism().map_or(2, usize::from),
            timeout_ms: 5_000,
            memory_bytes_max: 256 << 20,
            stack_bytes_max: 1 << 20,
            queue_max: 1024,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsError {
    /// A function of the program does not compile (the reason names the function).
    #[error("{0}")]
    Compile(String),
    #[error("JavaScript call stopped after {0} ms (time limit)")]
    Timeout(u64),
    #[error("JavaScript ran out of memory (memory limit)")]
    OutOfMemory,
    /// A reduce or filter function threw; the message is the error's.
    #[error("{0}")]
    Script(String),
    #[error("JavaScript engine: {0}")]
    Internal(String),
    #[error("the JavaScript pool is shut down")]
    Closed,
}

/// What a design document's JavaScript consists of. Sources are function texts as stored in
/// the design document.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ProgramSpec {
    /// View names, for error messages; same order as `maps`.
    pub names: Vec<String>,
    pub maps: Vec<String>,
    /// JavaScript reduce sources by view, `None` for no reduce or a built-in one.
    pub reduces: Vec<Option<String>>,
    /// Changes filter functions by name.
    pub filters: std::collections::BTreeMap<String, String>,
    /// The tree `require` resolves paths in (CouchDB: `{"views": {"lib": ...}}` for views).
    pub lib: Value,
    /// The design document's `validate_doc_update`, run with the design document as `this`
    /// (`lib` then holds the whole design document).
    pub validate: Option<String>,
}

/// What a `validate_doc_update` function decided ([`JsPool::validate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validation {
    Allowed,
    /// `throw({forbidden: message})`.
    Forbidden(String),
    /// `throw({unauthorized: message})`.
    Unauthorized(String),
    /// Anything else thrown: a non-error value (CouchDB's `unknown_error`) or an error.
    Failed(String),
}

/// A compiled-on-demand program: an id the workers know it by, and its spec as JSON.
#[derive(Debug)]
pub struct Program {
    id: u64,
    spec: String,
    views: usize,
}

static NEXT_PROGRAM_ID: AtomicU64 = AtomicU64::new(1);

impl Program {
    pub fn new(spec: &ProgramSpec) -> Program {
        Program {
            id: NEXT_PROGRAM_ID.fetch_add(1, Ordering::Relaxed),
            spec: serde_json::to_string(spec).unwrap_or_default(),
            views: spec.maps.len(),
        }
    }

    /// How many map functions (views) the program has.
    pub fn views(&self) -> usize {
        self.views
    }
}

/// One emitted row: the key (parsed, to be collated) and the value (kept as JSON text).
pub type Emit = (Value, Box<RawValue>);

/// The output of [`JsPool::map`] for a batch of documents.
#[derive(Debug, Default, serde::Deserialize)]
pub struct MapOutput {
    /// Per document, per view, the rows it emitted in `emit` order.
    pub rows: Vec<Vec<Vec<Emit>>>,
    /// (document index, view index, message) for every map call that threw.
    pub errors: Vec<(usize, usize, String)>,
    /// What `log()` wrote during the call.
    pub logs: Vec<String>,
}
