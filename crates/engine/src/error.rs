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
    /// One document's stored record does not decode (damaged, or written by a version with a
    /// bug, such as 0.1.0's empty revision trees). Readers of many documents skip it
    /// (`skips.rs`); reading it by key answers this, and `Bucket::purge` removes it.
    #[error("the stored record of this document does not decode ({0})")]
    CorruptDocument(String),
    /// The engine refused to store a record that would not decode (an empty or inconsistent
    /// revision tree): a bug in the caller, caught before it reaches the disk.
    #[error("refusing to store an invalid document record: {0}")]
    InvalidRecord(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A front-door write to a vbucket that is not active on this node (replica.md; KV
    /// `NOT_MY_VBUCKET`, HTTP 503).
    #[error("vbucket {vbucket} is not active on this node")]
    NotMyVbucket { vbucket: u16 },
    /// A scope name or id the current manifest does not hold (Couchbase `UNKNOWN_SCOPE`; the
    /// door sends the manifest uid so the client refreshes its ids).
    #[error("unknown scope (manifest uid {manifest_uid:x})")]
    UnknownScope { manifest_uid: u64 },
    /// A collection name or id the current manifest does not hold, dropped ones included
    /// (Couchbase `UNKNOWN_COLLECTION`).
    #[error("unknown collection (manifest uid {manifest_uid:x})")]
    UnknownCollection { manifest_uid: u64 },
    #[error("scope {0} already exists")]
    ScopeExists(String),
    #[error("collection {0} already exists")]
    CollectionExists(String),
    /// A create beyond `scopes_per_bucket_max` / `collections_per_bucket_max`, or past the
    /// last id.
    #[error("limit reached: {0}")]
    LimitReached(String),
    /// A scope or collection name (or a `scope.collection` path) that is not well formed.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// What decides the change cannot be reached now (a cluster node's manifest change
    /// without the cluster's leadership); the client may retry (HTTP 503).
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl EngineError {
    /// The disk is full: the write failed cleanly and may be retried once space is freed
    /// (CouchDB's 507 `insufficient_storage`, Couchbase's temporary failure).
    pub fn is_insufficient_storage(&self) -> bool {
        matches!(self, EngineError::Store(StoreError::NoSpace))
    }
}

impl From<settee_manifest::ManifestError> for EngineError {
    fn from(error: settee_manifest::ManifestError) -> EngineError {
        use settee_manifest::ManifestError as M;
        match error {
            M::Corrupt(reason) => EngineError::Corrupt(reason),
            M::Invalid(reason) => EngineError::Invalid(reason),
            M::InvalidName(reason) => EngineError::InvalidName(reason),
            M::UnknownScope { manifest_uid } => EngineError::UnknownScope { manifest_uid },
            M::UnknownCollection { manifest_uid } => {
                EngineError::UnknownCollection { manifest_uid }
            }
            M::ScopeExists(name) => EngineError::ScopeExists(name),
            M::CollectionExists(name) => EngineError::CollectionExists(name),
            M::LimitReached(reason) => EngineError::LimitReached(reason),
        }
    }
}

impl From<settee_record::Corrupt> for EngineError {
    fn from(error: settee_record::Corrupt) -> EngineError {
        EngineError::Corrupt(error.0)
    }
}
