//! CouchDB's `_rewrite` (`/{db}/_design/{ddoc}/_rewrite/...`) as CouchDB 3.5 has it, as pure
//! functions: what a design document's `rewrites` say a request becomes. The HTTP door reads
//! the design document, asks this crate for the new request target, and dispatches that
//! request again through its router as the same user (settee-http `rewrite_api.rs`).
//!
//! Two forms, as CouchDB:
//! - an array of rules ([`Rules`], `rules.rs`): `from` matched against the path after
//!   `_rewrite` (`:name` binds a segment, a trailing `*` the rest), `method`, `to` with the
//!   bindings substituted, `query` values substituted from the bindings and the request's
//!   query string (`formats` turns them into integers or booleans), the result relative to
//!   the design document;
//! - a JavaScript function (run by settee-js, not here) whose answer [`answer::read`] checks
//!   and turns into a target ([`Rewrite::Dispatch`]) or an early response
//!   ([`Rewrite::Respond`]).
//!
//! Paths are relative to `/{db}/_design/{ddoc}` and may climb with `..` out of the design
//! document and the database to the server root, never above it ([`path`]). With CouchDB's
//! `[chttpd] secure_rewrites` (on by default) a rule may hold at most two `..` segments, so
//! it stays in its database. Everything here takes input from the network (the request and
//! a design document a database writer stored): nothing panics, and the target built is at
//! most [`TARGET_BYTES_MAX`] long.
#![deny(clippy::unwrap_used)]

pub mod answer;
mod error;
pub mod path;
pub mod rules;

pub use answer::Rewrite;
pub use error::RewriteError;
pub use rules::Rules;

/// The longest request target a rewrite may build (path and query string), in bytes: a rule
/// that repeats a long binding many times fails instead of building a huge path.
pub const TARGET_BYTES_MAX: usize = 1 << 20;

/// The request a rewrite applies to, as the door decoded it.
#[derive(Clone, Copy, Debug)]
pub struct RewriteRequest<'a> {
    /// The request's method (`GET`, `PUT`...).
    pub method: &'a str,
    /// The database name, decoded (it may hold `/`).
    pub db: &'a str,
    /// The design document's name (without `_design/`), decoded.
    pub ddoc: &'a str,
    /// The decoded path segments after `_rewrite`.
    pub rest: &'a [String],
    /// The decoded query string parameters, in order.
    pub query: &'a [(String, String)],
}
