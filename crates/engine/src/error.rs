use settee_storage::StoreError;

/// Why an engine operation could not run. Expected outcomes (not found, conflict, CAS mismatch)
/// are values of the operation's outcome type, not errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Bytes read from disk do not decode; the store is damaged or from a newer version.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl EngineError {
    /// The disk is full: the write failed cleanly and may be retried once space is freed
    /// (CouchDB's 507 `insufficient_storage`, Couchbase's temporary failure).
    pub fn is_insufficient_storage(&self) -> bool {
        matches!(self, EngineError::Store(StoreError::NoSpace))
    }
}
