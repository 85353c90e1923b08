//! What every exposition of the node carries besides its door's own metrics: the process's
//! resource use and the storage engine's figures.

use std::sync::OnceLock;
use std::time::Instant;

use crate::process::ProcessSample;
use crate::text::{Exposition, Kind};

/// The storage engine's figures at one moment (filled by the binary from `settee-storage`,
/// which is the only crate that links RocksDB; this crate only names and prints them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoreSample {
    /// RocksDB's estimate of the bytes compaction still has to rewrite.
    pub compaction_pending_bytes: u64,
    /// Memtables of every column family, active and immutable.
    pub memtable_bytes: u64,
    pub block_cache_usage_bytes: u64,
    pub block_cache_capacity_bytes: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Bytes of every SST file of every column family.
    pub sst_files_bytes: u64,
    /// Flushes and compactions running now.
    pub background_jobs_running: u64,
}

type StoreReader = Box<dyn Fn() -> StoreSample + Send + Sync>;
/// The KV door's latencies per opcode name (the names are the door's, this crate prints them).
type KvLatencyReader = Box<dyn Fn() -> Vec<(&'static str, crate::Snapshot)> + Send + Sync>;

/// The node's metrics shared by both doors.
pub struct NodeMetrics {
    /// The CouchDB door's counters.
    pub http: crate::couchdb::HttpMetrics,
    pub started: Instant,
    /// Set once at start by the binary, when the engine is open.
    store: OnceLock<StoreReader>,
    /// Set once at start by the binary, when the KV door exists.
    kv_latencies: OnceLock<KvLatencyReader>,
    /// The data directory, whose filesystem `_system` reports; set once by the binary.
    data_dir: OnceLock<std::path::PathBuf>,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics {
            http: crate::couchdb::HttpMetrics::default(),
            started: Instant::now(),
            store: OnceLock::new(),
            kv_latencies: OnceLock::new(),
            data_dir: OnceLock::new(),
        }
    }
}

impl NodeMetrics {
    /// Where the storage figures come from; a second call is ignored.
    pub fn set_store_reader(&self, reader: impl Fn() -> StoreSample + Send + Sync + 'static) {
        let _ = self.store.set(Box::new(reader));
    }

    /// The storage figures now; all zero before a reader is set.
    pub fn store(&self) -> StoreSample {
        self.store.get().map(|reader| reader()).unwrap_or_default()
    }

    /// Where the KV door's per-opcode latencies come from; a second call is ignored.
    pub fn set_kv_latency_reader(
        &self,
        reader: impl Fn() -> Vec<(&'static str, crate::Snapshot)> + Send + Sync + 'static,
    ) {
        let _ = self.kv_latencies.set(Box::new(reader));
    }

    /// The KV door's latencies per opcode now; empty before a reader is set.
    pub fn kv_latencies(&self) -> Vec<(&'static str, crate::Snapshot)> {
        self.kv_latencies
            .get()
            .map(|reader| reader())
            .unwrap_or_default()
    }

    /// The data directory whose filesystem `_system` reports; a second call is ignored.
    pub fn set_data_dir(&self, path: std::path::PathBuf) {
        let _ = self.data_dir.set(path);
    }

    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.data_dir.get().map(std::path::PathBuf::as_path)
    }

    pub fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// `process_*` (Prometheus client libraries' names) and `settee_rocksdb_*`.
    pub fn write_common(&self, out: &mut Exposition) {
        write_process(out, &ProcessSample::read());
        write_store(out, &self.store());
    }
}

fn write_process(out: &mut Exposition, sample: &ProcessSample) {
    let families: [(&str, Kind, &str, Option<f64>); 6] = [
        (
            "process_cpu_seconds_total",
            Kind::Counter,
            "Total user and system CPU time spent in seconds.",
            sample.cpu_seconds,
        ),
        (
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory size in bytes.",
            sample.resident_bytes.map(|bytes| bytes as f64),
        ),
        (
            "process_virtual_memory_bytes",
            Kind::Gauge,
            "Virtual memory size in bytes.",
            sample.virtual_bytes.map(|bytes| bytes as f64),
        ),
        (
            "process_open_fds",
            Kind::Gauge,
            "Number of open file descriptors.",
            sample.open_fds.map(|fds| fds as f64),
        ),
        (
            "process_threads",
            Kind::Gauge,
            "Number of OS threads in the process.",
            sample.threads.map(|threads| threads as f64),
        ),
        (
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process since unix epoch in seconds.",
            sample.start_time_seconds,
        ),
    ];
    for (name, kind, help, value) in families {
        if let Some(value) = value {
            out.family(name, kind, help);
            out.sample(name, &[], value);
        }
    }
}

fn write_store(out: &mut Exposition, store: &StoreSample) {
    let gauges = [
        (
            "settee_rocksdb_compaction_pending_bytes",
            "Bytes RocksDB estimates compaction still has to rewrite.",
            store.compaction_pending_bytes,
        ),
        (
            "settee_rocksdb_memtable_bytes",
            "Bytes of all memtables, active and immutable, of every column family.",
            store.memtable_bytes,
        ),
        (
            "settee_rocksdb_block_cache_usage_bytes",
            "Bytes held by the shared block cache.",
            store.block_cache_usage_bytes,
        ),
        (
            "settee_rocksdb_block_cache_capacity_bytes",
            "Capacity of the shared block cache.",
            store.block_cache_capacity_bytes,
        ),
        (
            "settee_rocksdb_sst_files_bytes",
            "Bytes of the SST files of every column family.",
            store.sst_files_bytes,
        ),
        (
            "settee_rocksdb_background_jobs_running",
            "Flushes and compactions RocksDB is running now.",
            store.background_jobs_running,
        ),
    ];
    for (name, help, value) in gauges {
        out.gauge(name, help, value as f64);
    }
    out.counter(
        "settee_rocksdb_block_cache_hits_total",
        "Block cache lookups that found their block.",
        store.block_cache_hits,
    );
    out.counter(
        "settee_rocksdb_block_cache_misses_total",
        "Block cache lookups that read their block from disk.",
        store.block_cache_misses,
    );
}
