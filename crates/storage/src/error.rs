use std::path::PathBuf;

/// Why a storage operation could not run. Not-found is a value (`Ok(None)`), never an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("rocksdb: {0}")]
    Engine(#[from] rocksdb::Error),
    #[error("cannot create data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An earlier write or fsync failed; the store refuses further writes until reopened.
    #[error("store is poisoned after a failed write: {0}")]
    Poisoned(String),
    #[error("store is shutting down")]
    Closed,
}
