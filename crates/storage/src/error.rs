use std::path::PathBuf;

/// Why a storage operation could not run. Not-found is a value (`Ok(None)`), never an error.
///
/// Every variant's `Display` is fit to show a client: RocksDB's own messages name files of the
/// data directory, so the conversion from them ([`StoreError::from`]) logs the full message
/// and keeps only its kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The disk holding the data directory is full (`ENOSPC`). Nothing of the failed write was
    /// applied, and writes succeed again by themselves once space is free (see `health.rs`).
    #[error("insufficient storage: the disk holding the data directory is full")]
    NoSpace,
    /// RocksDB failed for another reason (I/O error, corruption, ...); `kind` is its status code.
    #[error("storage failure: {kind} (details in the server log)")]
    Engine { kind: &'static str },
    /// Only at start-up, on the operator's console.
    #[error("cannot create data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An earlier write or fsync failed for a reason other than a full disk; the store refuses
    /// further writes until reopened. The reason is a [`StoreError`]'s display, never a path.
    #[error("store is poisoned after a failed write: {0}")]
    Poisoned(String),
    #[error("store is shutting down")]
    Closed,
    /// A caller's mistake the store refused before touching anything (keys of a sorted file
    /// out of order, a file to ingest that is missing).
    #[error("refused: {0}")]
    Invalid(String),
}

impl StoreError {
    /// Whether the failure ends by itself: a full disk, once space is freed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::NoSpace)
    }

    /// The same answer again, for every writer of a failed group (`io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> StoreError {
        match self {
            StoreError::NoSpace => StoreError::NoSpace,
            StoreError::Engine { kind } => StoreError::Engine { kind },
            StoreError::Poisoned(reason) => StoreError::Poisoned(reason.clone()),
            StoreError::Closed => StoreError::Closed,
            other => StoreError::Poisoned(other.to_string()),
        }
    }
}

/// RocksDB's message for `IOStatus::NoSpace` (ENOSPC) and `SpaceLimit` (an SstFileManager's
/// cap): `Status::ToString` is "IO error: <subcode message>[: <context naming a file>]".
const NO_SPACE_PREFIXES: [&str; 2] = [
    "IO error: No space left on device",
    "IO error: Space limit reached",
];

impl From<rocksdb::Error> for StoreError {
    fn from(error: rocksdb::Error) -> StoreError {
        StoreError::from_message(error.as_ref())
    }
}

/// RocksDB's status codes as `Status::ToString` spells them (the text before the first colon).
const KINDS: [&str; 14] = [
    "NotFound",
    "Corruption",
    "Not implemented",
    "Invalid argument",
    "IO error",
    "Merge in progress",
    "Result incomplete",
    "Shutdown in progress",
    "Operation timed out",
    "Operation aborted",
    "Resource busy",
    "Operation expired",
    "Operation failed. Try again.",
    "Column family dropped",
];

impl StoreError {
    fn from_message(message: &str) -> StoreError {
        if NO_SPACE_PREFIXES
            .iter()
            .any(|prefix| message.starts_with(prefix))
        {
            // Logged once per episode by the committer (health.rs), not once per failed call.
            return StoreError::NoSpace;
        }
        tracing::error!(error = %message, "storage error");
        let code = message.split(':').next().unwrap_or_default();
        StoreError::Engine {
            kind: KINDS
                .iter()
                .find(|kind| **kind == code)
                .copied()
                .unwrap_or("unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_retryable_and_names_no_file() {
        let error = StoreError::from_message(
            "IO error: No space left on device: While appending to file: /srv/data/db/000012.log: No space left on device",
        );
        assert!(matches!(error, StoreError::NoSpace), "{error:?}");
        assert!(error.is_retryable());
        assert!(!error.to_string().contains('/'), "{error}");
    }

    #[test]
    fn other_errors_keep_only_their_kind() {
        let error = StoreError::from_message(
            "Corruption: block checksum mismatch in file /srv/data/db/000042.sst",
        );
        assert!(!error.is_retryable());
        assert_eq!(
            error.to_string(),
            "storage failure: Corruption (details in the server log)"
        );
        let error = StoreError::from_message(
            "IO error: While fsync: a file named /srv/data/db/000004.log: Input/output error",
        );
        assert!(!error.is_retryable());
        assert!(!error.to_string().contains("/srv"), "{error}");
    }
}
