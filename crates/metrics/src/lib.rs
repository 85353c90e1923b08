//! The node's metrics: what the doors count and how they show it.
//!
//! A tiny core instead of a metrics crate: [`Counter`] (atomics sharded per thread, so request
//! threads on different cores never bump one cache line), [`Gauge`], and [`Histogram`] with
//! fixed latency buckets (sharded the same way; recording takes no lock and allocates
//! nothing), written out in the Prometheus text format by [`text::Exposition`]. The process's
//! CPU time and memory come from `/proc` ([`process`]); the storage engine's figures are
//! handed in by the binary ([`NodeMetrics::set_store_reader`]), so this crate links neither
//! RocksDB nor anything of the doors.
//!
//! Start with [`NodeMetrics`] (what both doors share) and [`couchdb`] (the CouchDB door's
//! counters and its `_prometheus`, `_stats` and `_system` answers). The KV door keeps its
//! own per-opcode histograms and writes its `/metrics` with [`text::Exposition`]; the binary
//! hands them to [`NodeMetrics::set_kv_latency_reader`] so `_prometheus` shows them too (the
//! web console reads both doors there). The machine's CPU per core, memory and disk are in
//! [`host`].
//!
//! Must not know: sockets, HTTP, the KV protocol, RocksDB.
#![deny(clippy::unwrap_used)]

pub mod couchdb;
mod counter;
mod histogram;
pub mod host;
mod node;
pub mod process;
pub mod text;

pub use counter::{Counter, Gauge, GaugeHold};
pub use histogram::{Histogram, Snapshot, LATENCY_BOUNDS_MICROS};
pub use node::{NodeMetrics, StoreSample};
