//! Load generators for settee, run as `settee bench ...` by the main binary.
//!
//! [`http`] is a CouchDB-API HTTP/1.1 load generator: [`http::HttpArgs`] holds its command-line
//! flags, [`http::run`] (re)creates a database, preloads documents, then runs a GET phase and a PUT
//! phase over N keep-alive connections and returns one [`http::PhaseReport`] per phase. It speaks
//! only the public CouchDB HTTP API, so the same numbers can be taken from settee, CouchDB or
//! pouchdb-server (see `scripts/bench-http-vs-pouchdb.sh`). Start reading at `http/mod.rs`.
#![deny(clippy::unwrap_used)]

pub mod http;
pub mod ids;
