//! Mango's one error type: every failure carries the HTTP status, the `error` name and the
//! `reason` text that Apache CouchDB's `mango_error.erl` gives the same failure, so the HTTP
//! door renders it without a second table.

use serde_json::Value;

/// A Mango request that cannot run. The variants are the statuses CouchDB answers with; the
/// `error` member is CouchDB's name for the failure (`bad_arg`, `no_usable_index`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MangoError {
    /// 400: the request, a selector or an index definition is malformed, or no index can
    /// answer the query as asked.
    #[error("{reason}")]
    BadRequest { error: &'static str, reason: String },
    /// 404: the index to delete does not exist.
    #[error("{reason}")]
    NotFound { error: &'static str, reason: String },
    /// 500: CouchDB's `error_saving_ddoc` and `invalid_list_index_params` (CouchDB answers
    /// those with 500, and clients such as PouchDB expect it).
    #[error("{reason}")]
    Internal { error: &'static str, reason: String },
}

pub type MangoResult<T> = Result<T, MangoError>;

impl MangoError {
    pub fn bad_request(error: &'static str, reason: impl Into<String>) -> MangoError {
        MangoError::BadRequest {
            error,
            reason: reason.into(),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            MangoError::BadRequest { .. } => 400,
            MangoError::NotFound { .. } => 404,
            MangoError::Internal { .. } => 500,
        }
    }

    /// The `error` member of the response body.
    pub fn error(&self) -> &'static str {
        match self {
            MangoError::BadRequest { error, .. }
            | MangoError::NotFound { error, .. }
            | MangoError::Internal { error, .. } => error,
        }
    }

    /// The `reason` member of the response body.
    pub fn reason(&self) -> &str {
        match self {
            MangoError::BadRequest { reason, .. }
            | MangoError::NotFound { reason, .. }
            | MangoError::Internal { reason, .. } => reason,
        }
    }

    /// `{"error": ..., "reason": ...}`.
    pub fn body(&self) -> Value {
        serde_json::json!({"error": self.error(), "reason": self.reason()})
    }
}
