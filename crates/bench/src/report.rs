//! Per-phase results of every load generator (`bench http`, `bench kv`): counting while the load
//! runs, and printing once it is over, in one table and one JSON shape.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Latencies above this are clamped; a request slower than a minute is broken, not slow.
const LATENCY_MAX_US: u64 = 60_000_000;
/// Three significant digits: 0.1% resolution at every magnitude.
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// The result of one phase (`get`, `put`, `set`, `load`) of a load generator's run.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    pub name: String,
    /// Requests that succeeded (HTTP: a 2xx status; KV: status 0 and the expected value).
    pub ops: u64,
    /// Requests answered with any other status, plus failed connects and requests lost with a
    /// broken connection.
    pub errors: u64,
    /// Wall time of the phase, from the first request to the last response.
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
}

impl PhaseReport {
    /// The report as one JSON object; field names are the struct's.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "ops": self.ops,
            "errors": self.errors,
            "seconds": self.seconds,
            "ops_per_sec": self.ops_per_sec,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "p999_us": self.p999_us,
        })
    }
}

/// What one connection's task counted. Merged across tasks into a [`PhaseReport`].
pub(crate) struct Tally {
    pub(crate) ops: u64,
    pub(crate) errors: u64,
    /// Latency of every request (successful or not) that got a response, in microseconds.
    pub(crate) latency_us: Histogram<u64>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            ops: 0,
            errors: 0,
            latency_us: Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid"),
        }
    }

    pub(crate) fn record_latency(&mut self, micros: u64) {
        self.latency_us
            .saturating_record(micros.clamp(1, LATENCY_MAX_US));
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.errors += other.errors;
        // Both histograms share the same bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
    }

    pub(crate) fn into_report(self, name: &str, seconds: f64) -> PhaseReport {
        let quantile = |q: f64| {
            if self.latency_us.is_empty() {
                0
            } else {
                self.latency_us.value_at_quantile(q)
            }
        };
        PhaseReport {
            name: name.to_string(),
            ops: self.ops,
            errors: self.errors,
            seconds,
            ops_per_sec: if seconds > 0.0 {
                self.ops as f64 / seconds
            } else {
                0.0
            },
            p50_us: quantile(0.50),
            p99_us: quantile(0.99),
            p999_us: quantile(0.999),
        }
    }
}

/// One JSON object per phase, one per line.
pub fn format_json_lines(reports: &[PhaseReport]) -> String {
    let mut out = String::new();
    for report in reports {
        let _ = writeln!(out, "{}", report.to_json());
    }
    out
}

/// A fixed-width table, one row per phase.
pub fn format_table(reports: &[PhaseReport]) -> String {
    let mut out = format!(
        "{:<6} {:>12} {:>10} {:>9} {:>9} {:>9} {:>8}\n",
        "phase", "ops/s", "ops", "p50 us", "p99 us", "p999 us", "errors"
    );
    for report in reports {
        let _ = writeln!(
            out,
            "{:<6} {:>12.1} {:>10} {:>9} {:>9} {:>9} {:>8}",
            report.name,
            report.ops_per_sec,
            report.ops,
            report.p50_us,
            report.p99_us,
            report.p999_us,
            report.errors
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_tallies_report_quantiles_and_rate() {
        let mut total = Tally::new();
        for micros in [100, 200] {
            let mut tally = Tally::new();
            for _ in 0..50 {
                tally.ops += 1;
                tally.record_latency(micros);
            }
            tally.errors = 1;
            total.merge(&tally);
        }
        let report = total.into_report("get", 2.0);
        assert_eq!(report.ops, 100);
        assert_eq!(report.errors, 2);
        assert_eq!(report.ops_per_sec, 50.0);
        assert_eq!(report.p50_us, 100);
        assert_eq!(report.p99_us, 200);
        let line = format_json_lines(std::slice::from_ref(&report));
        let parsed: serde_json::Value = serde_json::from_str(line.trim()).expect("valid JSON");
        assert_eq!(parsed["name"], "get");
        assert!(format_table(&[report]).contains("get"));
    }

    #[test]
    fn empty_tally_reports_zeroes() {
        let report = Tally::new().into_report("put", 0.0);
        assert_eq!(
            (report.ops, report.ops_per_sec, report.p999_us),
            (0, 0.0, 0)
        );
    }
}
