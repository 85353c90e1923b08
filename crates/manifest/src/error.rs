/// Why a manifest lookup or change is refused, or why a stored manifest does not decode. The
/// engine turns each into its own error of the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The stored record does not decode or breaks an invariant.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A scope or collection name (or a `scope.collection` path) that is not well formed.
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// A scope the manifest does not hold (Couchbase `UNKNOWN_SCOPE`).
    #[error("unknown scope (manifest uid {manifest_uid:x})")]
    UnknownScope { manifest_uid: u64 },
    /// A collection the manifest does not hold (Couchbase `UNKNOWN_COLLECTION`).
    #[error("unknown collection (manifest uid {manifest_uid:x})")]
    UnknownCollection { manifest_uid: u64 },
    #[error("scope {0} already exists")]
    ScopeExists(String),
    #[error("collection {0} already exists")]
    CollectionExists(String),
    /// A create beyond a per-bucket limit, or past the last id.
    #[error("limit reached: {0}")]
    LimitReached(String),
}
