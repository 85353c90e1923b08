//! The indexer's one error type.

use settee_engine::EngineError;
use settee_js::JsError;
use settee_storage::StoreError;

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The design document is not a valid view definition (400 at PUT or query time).
    #[error("{0}")]
    InvalidDesign(String),
    /// A function does not compile (CouchDB `compilation_error`).
    #[error("{0}")]
    Compilation(String),
    /// The index could not be brought up to date: the map function ran past a limit, or
    /// similar (CouchDB answers `os_process_error`).
    #[error("{0}")]
    Build(String),
    /// A reduce function failed (JavaScript error or bad input for a built-in).
    #[error("{0}")]
    Reduce(String),
    /// A built-in reduce met a value it cannot reduce (CouchDB `builtin_reduce_error`).
    #[error("{0}")]
    BuiltinReduce(String, serde_json::Value),
    /// A JavaScript reduce's output did not shrink (CouchDB `reduce_overflow_error`).
    #[error("{0}")]
    ReduceOverflow(String),
    #[error("{0}")]
    Storage(String),
    /// The disk is full; the index catches up once space is freed (CouchDB answers 507
    /// `insufficient_storage`).
    #[error("not enough room to update index")]
    InsufficientStorage,
    #[error("{0}")]
    Internal(String),
}

impl From<JsError> for ViewError {
    fn from(error: JsError) -> ViewError {
        match error {
            JsError::Compile(reason) => ViewError::Compilation(reason),
            JsError::Script(reason) => ViewError::Reduce(reason),
            other => ViewError::Build(other.to_string()),
        }
    }
}

impl From<EngineError> for ViewError {
    fn from(error: EngineError) -> ViewError {
        if error.is_insufficient_storage() {
            return ViewError::InsufficientStorage;
        }
        ViewError::Storage(error.to_string())
    }
}

impl From<StoreError> for ViewError {
    fn from(error: StoreError) -> ViewError {
        if error.is_retryable() {
            return ViewError::InsufficientStorage;
        }
        ViewError::Storage(error.to_string())
    }
}
