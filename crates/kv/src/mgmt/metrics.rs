//! `GET /metrics` on the management port: the KV door's figures under Couchbase Server 7's
//! Prometheus names (`kv_ops`, `kv_curr_items`, `kv_curr_connections`,
//! `kv_cmd_duration_seconds` with an `opcode` label), then the process's and the storage
//! engine's (`settee-metrics`). Latencies come from the door's per-opcode histograms, which
//! connections merge into the node's totals at most once a second, so a scrape may miss the
//! last second of an open connection.

use settee_kv_codec::opcode;
use settee_metrics::text::{Exposition, Kind};

use crate::KvState;

/// Couchbase's `op` label of `kv_ops` for an opcode, `None` for opcodes it does not count.
fn op_label(code: u8) -> Option<&'static str> {
    let (code, _) = opcode::unquiet(code);
    match opcode::name(code) {
        "GET" | "GETK" | "GAT" | "GET_REPLICA" | "GET_LOCKED" => Some("get"),
        "SET" | "ADD" | "REPLACE" | "APPEND" | "PREPEND" => Some("set"),
        "DELETE" => Some("del"),
        "INCREMENT" => Some("incr"),
        "DECREMENT" => Some("decr"),
        "TOUCH" => Some("touch"),
        _ => None,
    }
}

pub(super) fn render(state: &KvState) -> String {
    let mut out = Exposition::default();
    let snapshots = state.timings.snapshots();
    let mut ops: std::collections::BTreeMap<&str, u64> = ["get", "set", "del"]
        .into_iter()
        .map(|op| (op, 0))
        .collect();
    for (code, snapshot) in &snapshots {
        if let Some(op) = op_label(*code) {
            *ops.entry(op).or_insert(0) += snapshot.count();
        }
    }
    out.family("kv_ops", Kind::Counter, "Number of operations, by kind");
    for (op, count) in ops {
        out.sample("kv_ops", &[("op", op)], count as f64);
    }
    out.family(
        "kv_curr_items",
        Kind::Gauge,
        "Number of live documents, by bucket",
    );
    for name in state.engine.bucket_names() {
        if name.starts_with('_') {
            continue;
        }
        if let Some(bucket) = state.engine.bucket(&name) {
            let (live, _deleted) = bucket.doc_counts();
            out.sample("kv_curr_items", &[("bucket", &name)], live as f64);
        }
    }
    out.gauge(
        "kv_curr_connections",
        "Number of KV connections open now",
        state.slots.open() as f64,
    );
    out.family(
        "kv_cmd_duration_seconds",
        Kind::Histogram,
        "Time from a request's decoding to its reply, by opcode",
    );
    for (code, snapshot) in &snapshots {
        out.histogram_samples(
            "kv_cmd_duration_seconds",
            &[("opcode", opcode::name(*code))],
            snapshot,
        );
    }
    state.metrics.write_common(&mut out);
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_and_loud_opcodes_count_as_one_kind() {
        assert_eq!(op_label(opcode::GETQ), Some("get"));
        assert_eq!(op_label(opcode::SETQ), Some("set"));
        assert_eq!(op_label(opcode::DELETEQ), Some("del"));
        assert_eq!(op_label(opcode::HELLO), None);
    }
}
