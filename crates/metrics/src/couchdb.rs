//! The CouchDB door's metrics and CouchDB's three ways of showing them:
//! `/_node/{node}/_prometheus` (CouchDB 3.2+'s metric names, text format 0.0.4),
//! `/_node/{node}/_stats` (`{"couchdb": {"httpd_request_methods": {"GET": {"value": .., "type":
//! "counter", "desc": ..}}, ...}}`) and `/_node/{node}/_system` (the Erlang VM's figures, of
//! which a settee node has the process-wide ones).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};
use std::sync::Mutex;

use crate::histogram::{Histogram, Snapshot, LATENCY_BOUNDS_MICROS};
use crate::node::NodeMetrics;
use crate::process::ProcessSample;
use crate::text::{Exposition, Kind};
use crate::{Counter, Gauge};

/// The methods CouchDB counts (`httpd_request_methods`); any other is counted as `OTHER`.
pub const METHODS: [&str; 8] = [
    "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "OTHER",
];

/// The status codes CouchDB's `_stats` lists (`httpd_status_codes`), each always shown.
pub const STATUS_CODES: [u16; 22] = [
    200, 201, 202, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 406, 409, 412, 413, 414, 415,
    416, 417, 500,
];

/// Quantiles of `couchdb_request_time_seconds`, as CouchDB's summary has them.
const QUANTILES: [f64; 6] = [0.5, 0.75, 0.9, 0.95, 0.99, 0.999];

/// Counted on every request of the CouchDB door.
pub struct HttpMetrics {
    requests: Counter,
    methods: [Counter; METHODS.len()],
    statuses: [Counter; STATUS_CODES.len()],
    /// Codes outside [`STATUS_CODES`] (503 from a full door, 507 from a full disk...).
    other_statuses: Mutex<BTreeMap<u16, u64>>,
    /// Time to the response head, per method.
    request_time: [Histogram; METHODS.len()],
    /// Documents read and written through the door (a `_bulk_docs` counts each document).
    pub database_reads: Counter,
    pub database_writes: Counter,
    pub bulk_requests: Counter,
    pub connections_open: Gauge,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics {
            requests: Counter::default(),
            methods: std::array::from_fn(|_| Counter::default()),
            statuses: std::array::from_fn(|_| Counter::default()),
            other_statuses: Mutex::new(BTreeMap::new()),
            request_time: std::array::from_fn(|_| Histogram::default()),
            database_reads: Counter::default(),
            database_writes: Counter::default(),
            bulk_requests: Counter::default(),
            connections_open: Gauge::default(),
        }
    }
}

impl HttpMetrics {
    /// One answered request: its method, status and the time to its response head.
    pub fn record(&self, method: &str, status: u16, took: Duration) {
        let method = METHODS
            .iter()
            .position(|known| *known == method)
            .unwrap_or(METHODS.len() - 1);
        self.requests.inc();
        self.methods[method].inc();
        self.request_time[method].record(took);
        match STATUS_CODES.iter().position(|known| *known == status) {
            Some(index) => self.statuses[index].inc(),
            None => {
                if let Ok(mut others) = self.other_statuses.lock() {
                    *others.entry(status).or_insert(0) += 1;
                }
            }
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests.get()
    }

    fn statuses(&self) -> Vec<(u16, u64)> {
        let mut all: BTreeMap<u16, u64> = STATUS_CODES
            .iter()
            .zip(self.statuses.iter())
            .map(|(code, counter)| (*code, counter.get()))
            .collect();
        if let Ok(others) = self.other_statuses.lock() {
            all.extend(others.iter().map(|(code, count)| (*code, *count)));
        }
        all.into_iter().collect()
    }

    fn request_time_total(&self) -> Snapshot {
        let mut total = Snapshot::default();
        for histogram in &self.request_time {
            total.add(&histogram.snapshot());
        }
        total
    }
}

/// What the door knows that the metrics do not count.
#[derive(Clone, Copy, Debug, Default)]
pub struct DoorFacts {
    /// Databases (buckets) the node has; all are open while it runs.
    pub open_databases: u64,
}

/// `GET /_node/{node}/_prometheus`.
pub fn prometheus(node: &NodeMetrics, facts: DoorFacts) -> String {
    let http = &node.http;
    let mut out = Exposition::default();
    out.counter(
        "couchdb_uptime_seconds",
        "couchdb uptime",
        node.uptime_seconds(),
    );
    out.counter(
        "couchdb_httpd_requests_total",
        "number of HTTP requests",
        http.requests.get(),
    );
    out.family(
        "couchdb_httpd_request_methods",
        Kind::Counter,
        "number of HTTP requests by method",
    );
    for (method, counter) in METHODS.iter().zip(http.methods.iter()) {
        out.sample(
            "couchdb_httpd_request_methods",
            &[("method", method)],
            counter.get() as f64,
        );
    }
    out.family(
        "couchdb_httpd_status_codes",
        Kind::Counter,
        "number of HTTP responses by status code",
    );
    for (code, count) in http.statuses() {
        out.sample(
            "couchdb_httpd_status_codes",
            &[("code", &code.to_string())],
            count as f64,
        );
    }
    out.counter(
        "couchdb_httpd_bulk_requests_total",
        "number of bulk requests",
        http.bulk_requests.get(),
    );
    out.family(
        "couchdb_request_time_seconds",
        Kind::Summary,
        "length of a request inside CouchDB without MochiWeb",
    );
    out.summary_samples(
        "couchdb_request_time_seconds",
        &QUANTILES,
        &http.request_time_total(),
    );
    out.counter(
        "couchdb_database_reads_total",
        "number of times a document was read from a database",
        http.database_reads.get(),
    );
    out.counter(
        "couchdb_database_writes_total",
        "number of times a database was changed",
        http.database_writes.get(),
    );
    out.gauge(
        "couchdb_open_databases_total",
        "number of open databases",
        facts.open_databases as f64,
    );
    if let Some(fds) = ProcessSample::read().open_fds {
        out.gauge(
            "couchdb_open_os_files_total",
            "number of file descriptors CouchDB has open",
            fds as f64,
        );
    }
    out.family(
        "settee_http_request_duration_seconds",
        Kind::Histogram,
        "time from a request's arrival to its response head, by method",
    );
    for (method, histogram) in METHODS.iter().zip(http.request_time.iter()) {
        out.histogram_samples(
            "settee_http_request_duration_seconds",
            &[("method", method)],
            &histogram.snapshot(),
        );
    }
    out.gauge(
        "settee_http_open_connections",
        "HTTP connections open now",
        http.connections_open.get() as f64,
    );
    // The KV door's histograms under the management port's name, so one scrape of this door
    // (the web console's) sees both doors.
    let kv = node.kv_latencies();
    if !kv.is_empty() {
        out.family(
            "kv_cmd_duration_seconds",
            Kind::Histogram,
            "Time from a request's decoding to its reply, by opcode",
        );
        for (opcode, snapshot) in &kv {
            out.histogram_samples("kv_cmd_duration_seconds", &[("opcode", opcode)], snapshot);
        }
    }
    node.write_common(&mut out);
    out.finish()
}

fn counter_json(value: u64, desc: &str) -> Value {
    json!({"value": value, "type": "counter", "desc": desc})
}

fn gauge_json(value: u64, desc: &str) -> Value {
    json!({"value": value, "type": "gauge", "desc": desc})
}

/// CouchDB's histogram value, in milliseconds, from bucket bounds: `min`, `max`, `median`
/// and the percentiles are the upper bounds of the buckets they fall in; the mean is exact.
fn histogram_json(snapshot: &Snapshot, desc: &str) -> Value {
    let count = snapshot.count();
    let ms = |quantile: f64| snapshot.quantile_seconds(quantile).map_or(0.0, |s| s * 1e3);
    let mean = if count == 0 {
        0.0
    } else {
        snapshot.sum_micros as f64 / 1e3 / count as f64
    };
    let histogram: Vec<Value> = snapshot
        .buckets
        .iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .map(|(slot, count)| {
            let bound_ms = LATENCY_BOUNDS_MICROS
                .get(slot)
                .map_or(f64::MAX, |micros| *micros as f64 / 1e3);
            json!([bound_ms, count])
        })
        .collect();
    json!({
        "value": {
            "min": ms(0.0),
            "max": ms(1.0),
            "arithmetic_mean": mean,
            "median": ms(0.5),
            "percentile": [[50, ms(0.5)], [75, ms(0.75)], [90, ms(0.9)], [95, ms(0.95)],
                           [99, ms(0.99)], [999, ms(0.999)]],
            "histogram": histogram,
            "n": count,
        },
        "type": "histogram",
        "desc": desc,
    })
}

/// `GET /_node/{node}/_stats`: the CouchDB section of CouchDB's statistics tree.
pub fn stats(node: &NodeMetrics, facts: DoorFacts) -> Value {
    let http = &node.http;
    let methods: Map<String, Value> = METHODS
        .iter()
        .zip(http.methods.iter())
        .map(|(method, counter)| {
            (
                method.to_string(),
                counter_json(counter.get(), &format!("number of HTTP {method} requests")),
            )
        })
        .collect();
    let statuses: Map<String, Value> = http
        .statuses()
        .into_iter()
        .map(|(code, count)| {
            (
                code.to_string(),
                counter_json(count, &format!("number of HTTP {code} responses")),
            )
        })
        .collect();
    let open_files = ProcessSample::read().open_fds.unwrap_or(0);
    json!({
        "couchdb": {
            "database_reads": counter_json(http.database_reads.get(),
                "number of times a document was read from a database"),
            "database_writes": counter_json(http.database_writes.get(),
                "number of times a database was changed"),
            "open_databases": gauge_json(facts.open_databases, "number of open databases"),
            "open_os_files": gauge_json(open_files, "number of file descriptors CouchDB has open"),
            "request_time": histogram_json(&http.request_time_total(),
                "length of a request inside CouchDB without MochiWeb"),
            "httpd": {
                "requests": counter_json(http.requests.get(), "number of HTTP requests"),
                "bulk_requests": counter_json(http.bulk_requests.get(), "number of bulk requests"),
            },
            "httpd_request_methods": methods,
            "httpd_status_codes": statuses,
        }
    })
}

/// `GET /_node/{node}/_system`: CouchDB's keys; what only an Erlang VM has (atoms, ETS
/// tables, reductions, message queues) is 0 or empty, the process's figures come from
/// `/proc` (`memory.other` is the resident set, `process_count` the OS threads).
/// `system_stats` is settee's: the machine's CPU per core, memory and the data directory's
/// disk ([`crate::host`]), for the web console.
pub fn system(node: &NodeMetrics) -> Value {
    let sample = ProcessSample::read();
    let io = read_io();
    json!({
        "uptime": node.uptime_seconds(),
        "memory": {
            "other": sample.resident_bytes.unwrap_or(0),
            "atom": 0, "atom_used": 0, "processes": 0, "processes_used": 0,
            "binary": 0, "code": 0, "ets": 0,
        },
        "run_queue": 0,
        "ets_table_count": 0,
        "context_switches": context_switches().unwrap_or(0),
        "reductions": 0,
        "garbage_collection_count": 0,
        "words_reclaimed": 0,
        "io_input": io.0,
        "io_output": io.1,
        "os_proc_count": 0,
        "stale_proc_count": 0,
        "process_count": sample.threads.unwrap_or(0),
        "process_limit": 0,
        "message_queues": {},
        "internal_replication_jobs": 0,
        "distribution": {},
        "system_stats": crate::host::HostSample::read(node.data_dir()).to_json(),
    })
}

/// Bytes the process read and wrote through system calls (`/proc/self/io` rchar, wchar).
fn read_io() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else {
        return (0, 0);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("rchar:"), field("wchar:"))
}

fn context_switches() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let total = text
        .lines()
        .filter_map(|line| {
            line.strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
        })
        .filter_map(|value| value.trim().parse::<u64>().ok())
        .sum();
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_moves_its_method_status_and_time() {
        let node = NodeMetrics::default();
        node.http.record("GET", 200, Duration::from_millis(2));
        node.http.record("PUT", 201, Duration::from_millis(20));
        node.http.record("BREW", 507, Duration::from_micros(10));
        node.http.database_writes.inc();
        let text = prometheus(&node, DoorFacts { open_databases: 3 });
        assert!(text.contains("couchdb_httpd_requests_total 3\n"), "{text}");
        assert!(text.contains("couchdb_httpd_request_methods{method=\"GET\"} 1\n"));
        assert!(text.contains("couchdb_httpd_request_methods{method=\"OTHER\"} 1\n"));
        assert!(text.contains("couchdb_httpd_status_codes{code=\"201\"} 1\n"));
        assert!(text.contains("couchdb_httpd_status_codes{code=\"507\"} 1\n"));
        assert!(text.contains("couchdb_httpd_status_codes{code=\"404\"} 0\n"));
        assert!(text.contains("couchdb_request_time_seconds_count 3\n"));
        assert!(text.contains("couchdb_database_writes_total 1\n"));
        assert!(text.contains("couchdb_open_databases_total 3\n"));
        assert!(text.contains(
            "settee_http_request_duration_seconds_bucket{method=\"PUT\",le=\"0.025\"} 1\n"
        ));
        let stats = stats(&node, DoorFacts { open_databases: 3 });
        assert_eq!(stats["couchdb"]["httpd_request_methods"]["PUT"]["value"], 1);
        assert_eq!(stats["couchdb"]["httpd_status_codes"]["200"]["value"], 1);
        assert_eq!(stats["couchdb"]["httpd"]["requests"]["value"], 3);
        assert_eq!(stats["couchdb"]["request_time"]["value"]["n"], 3);
        assert_eq!(stats["couchdb"]["request_time"]["value"]["max"], 25.0);
        assert_eq!(stats["couchdb"]["request_time"]["type"], "histogram");
    }

    #[test]
    fn system_has_couchdbs_keys() {
        let node = NodeMetrics::default();
        let system = system(&node);
        for key in [
            "uptime",
            "memory",
            "run_queue",
            "context_switches",
            "io_input",
            "io_output",
            "process_count",
            "message_queues",
            "distribution",
        ] {
            assert!(system.get(key).is_some(), "{key} missing from {system}");
        }
        assert!(system["memory"]["other"]
            .as_u64()
            .is_some_and(|bytes| bytes > 0));
    }
}
