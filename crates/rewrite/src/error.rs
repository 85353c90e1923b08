//! Why a rewrite could not produce a request.

/// A rewrite that fails. Each is one CouchDB answer; the HTTP door maps them (settee-http
/// `rewrite_api.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    /// No rule matches the request (CouchDB: 404 `not_found`).
    #[error("missing")]
    NoMatchingRule,
    /// A rule without a `to` (CouchDB: 500 `error` / `invalid_rewrite_target`).
    #[error("invalid_rewrite_target")]
    InvalidTarget,
    /// A rule with a third `..` while `secure_rewrites` is on (CouchDB: 500
    /// `insecure_rewrite_rule`).
    #[error("too many ../.. segments")]
    InsecureRule,
    /// A query parameter CouchDB reads as JSON (`key`, `startkey`...) that is not JSON
    /// (CouchDB: 400 `bad_request`).
    #[error("invalid JSON in query parameter {0}")]
    InvalidQueryJson(String),
    /// The rewritten path climbs above the server root.
    #[error("the rewritten path leaves the server root")]
    AboveRoot,
    /// The rewritten target would be longer than [`crate::TARGET_BYTES_MAX`].
    #[error("the rewritten path is longer than {} bytes", crate::TARGET_BYTES_MAX)]
    TooLong,
    /// A rewrite function's answer CouchDB refuses (500 `rewrite_error`, the reason as
    /// CouchDB words it: `bad path`, `bad code`...).
    #[error("{0}")]
    BadAnswer(String),
}
