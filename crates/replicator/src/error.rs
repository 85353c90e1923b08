//! The replicator's one error type. `BadRequest` is the caller's mistake (HTTP 400); the others
//! mean a peer could not be reached or answered something a replication cannot go on from.

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicatorError {
    #[error("{0}")]
    BadRequest(String),
    /// The peer answered with an HTTP error: status and CouchDB's `error` / `reason`.
    #[error("{url}: {status} {error}: {reason}")]
    Http {
        url: String,
        status: u16,
        error: String,
        reason: String,
    },
    /// Connecting, sending or reading failed (after the retries).
    #[error("{url}: {reason}")]
    Transport { url: String, reason: String },
    /// The peer's answer was not what the protocol says.
    #[error("{url}: unexpected answer: {reason}")]
    Protocol { url: String, reason: String },
    #[error("database {0} does not exist")]
    DbNotFound(String),
    /// The user the job runs as may not read the source or write the target (CouchDB's text).
    #[error("unauthorized: unauthorized to access or create database {0}")]
    Unauthorized(String),
    #[error("{0}")]
    Engine(#[from] settee_engine::EngineError),
    #[error("{0}")]
    NotFound(String),
    #[error("replication cancelled")]
    Cancelled,
}

impl ReplicatorError {
    /// Whether trying the same request again may help (network trouble, 5xx, 429, 408).
    pub fn is_transient(&self) -> bool {
        match self {
            ReplicatorError::Transport { .. } => true,
            ReplicatorError::Http { status, .. } => {
                *status >= 500 || *status == 429 || *status == 408
            }
            _ => false,
        }
    }
}
