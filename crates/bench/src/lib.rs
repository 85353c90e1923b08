//! Load generators for settee, run as `settee bench ...` by the main binary.
//!
//! [`http`] is a CouchDB-API HTTP/1.1 load generator: [`http::HttpArgs`] holds its command-line
//! flags, [`http::run`] (re)creates a database, preloads documents, then runs a GET phase and a PUT
//! phase over N keep-alive connections and returns one [`http::PhaseReport`] per phase. It speaks
//! only the public CouchDB HTTP API, so the same numbers can be taken from settee, CouchDB or
//! pouchdb-server (see `scripts/bench-http-vs-pouchdb.sh`). Start reading at `http/mod.rs`.
//!
//! [`kv`] does the same over the memcached binary protocol (frames from `settee-kv-codec`):
//! [`kv::KvArgs`], [`kv::run`], pipelined GET/SET against settee's Couchbase KV door or a plain
//! memcached (`scripts/bench-kv-vs-memcached.sh`). Start reading at `kv/mod.rs`.
//!
//! Both share the documents they write (`docs.rs`), the per-phase histograms and the table they
//! print (`report.rs`). [`ids`] drives the document engine in-process instead (seed 003),
//! [`views`] the engine and the view indexer (seed 001), and [`replicate`] times a
//! replication between two CouchDB-compatible databases and compares them. [`soak`] runs
//! legitimate clients on both doors beside hostile ones (issue 18) and compares the two.
#![deny(clippy::unwrap_used)]

mod cpu;
mod docs;
pub mod http;
pub mod ids;
pub mod kv;
pub mod replicate;
mod report;
pub mod soak;
pub mod subdoc;
pub mod views;
