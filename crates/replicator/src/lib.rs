//! settee's CouchDB replicator: copies documents between any two CouchDB-compatible
//! databases over HTTP, speaking the replication protocol (`_changes` with `style=all_docs`,
//! `_revs_diff`, `_bulk_get`, `_bulk_docs` with `new_edits=false`, `_local` checkpoints).
//!
//! Key types: [`params::Request`] (a `POST /_replicate` body or `_replicator` document,
//! parsed with CouchDB's defaults), [`ids::replication_id`] (CouchDB 3.x's version-4 ids,
//! built on the Erlang term encoder in [`term`]), [`job::Job`] (one run: changes reader,
//! parallel workers in [`worker`], ordered checkpoints in [`checkpoint`]) and
//! [`scheduler::Replicator`] (the node's jobs, restarts with backoff, `_scheduler` and
//! `_active_tasks` views). [`docs::watch`] turns `_replicator` documents into jobs.
//!
//! Start reading at `job.rs`. The replicator reaches even this node's own databases through
//! HTTP (local names become URLs of the node, authenticated as the requesting user), so the
//! protocol path is the one path there is.
#![deny(clippy::unwrap_used)]

pub mod changes;
pub mod checkpoint;
pub mod client;
pub mod docs;
mod encoded;
pub mod endpoint;
pub mod error;
pub mod ids;
pub mod job;
pub mod params;
pub mod scheduler;
pub mod stats;
pub use settee_etf as term;
pub mod worker;

pub use error::ReplicatorError;
pub use job::{JobEnv, LocalAuth};
pub use params::Request;
pub use scheduler::Replicator;
