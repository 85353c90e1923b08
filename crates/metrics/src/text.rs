//! The Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE` once per
//! metric family, then one `name{label="value",...} number` line per sample.

use std::fmt::Write as _;

use crate::histogram::Snapshot;

/// The `Content-Type` of an exposition (what Prometheus asks for and CouchDB answers).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// An exposition being written.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a metric family. Each family must be started once, before its samples.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = write!(
            self.text,
            "# HELP {name} {help}\n# TYPE {name} {}\n",
            kind.name()
        );
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (index, (label, text)) in labels.iter().enumerate() {
                if index > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                for character in text.chars() {
                    match character {
                        '\\' => self.text.push_str("\\\\"),
                        '"' => self.text.push_str("\\\""),
                        '\n' => self.text.push_str("\\n"),
                        other => self.text.push(other),
                    }
                }
                self.text.push('"');
            }
            self.text.push('}');
        }
        self.text.push(' ');
        push_number(&mut self.text, value);
        self.text.push('\n');
    }

    /// A family of one unlabelled counter.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.family(name, Kind::Counter, help);
        self.sample(name, &[], value as f64);
    }

    /// A family of one unlabelled gauge.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, Kind::Gauge, help);
        self.sample(name, &[], value);
    }

    /// One histogram's `_bucket`, `_sum` and `_count` samples (the family started already).
    pub fn histogram_samples(&mut self, name: &str, labels: &[(&str, &str)], snapshot: &Snapshot) {
        let bucket_name = format!("{name}_bucket");
        for (bound, count) in snapshot.cumulative() {
            let le = if bound.is_infinite() {
                "+Inf".to_string()
            } else {
                format_number(bound)
            };
            let mut bucket_labels = labels.to_vec();
            bucket_labels.push(("le", &le));
            self.sample(&bucket_name, &bucket_labels, count as f64);
        }
        self.sample(&format!("{name}_sum"), labels, snapshot.sum_seconds());
        self.sample(&format!("{name}_count"), labels, snapshot.count() as f64);
    }

    /// One summary's quantile samples (bucket upper bounds), `_sum` and `_count`.
    pub fn summary_samples(&mut self, name: &str, quantiles: &[f64], snapshot: &Snapshot) {
        for quantile in quantiles {
            let label = format_number(*quantile);
            let value = snapshot.quantile_seconds(*quantile).unwrap_or(f64::NAN);
            self.sample(name, &[("quantile", &label)], value);
        }
        self.sample(&format!("{name}_sum"), &[], snapshot.sum_seconds());
        self.sample(&format!("{name}_count"), &[], snapshot.count() as f64);
    }

    pub fn finish(self) -> String {
        self.text
    }
}

fn format_number(value: f64) -> String {
    let mut text = String::new();
    push_number(&mut text, value);
    text
}

/// Integers without a fraction (counts stay exact up to 2^53), others as Rust prints them
/// (shortest round-trip), and Prometheus's spellings of the special values.
fn push_number(text: &mut String, value: f64) {
    if value.is_nan() {
        text.push_str("NaN");
    } else if value.is_infinite() {
        text.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 9.007_199_254_740_992e15 {
        let _ = write!(text, "{}", value as i64);
    } else {
        let _ = write!(text, "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Histogram;

    #[test]
    fn families_samples_and_escapes() {
        let mut out = Exposition::default();
        out.counter("a_total", "Things.\nCounted", 3);
        out.family("b", Kind::Gauge, "B");
        out.sample("b", &[("path", "x\"y\\z")], 0.5);
        assert_eq!(
            out.finish(),
            "# HELP a_total Things.\\nCounted\n# TYPE a_total counter\na_total 3\n\
             # HELP b B\n# TYPE b gauge\nb{path=\"x\\\"y\\\\z\"} 0.5\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_in_inf() {
        let histogram = Histogram::default();
        histogram.record_micros(50);
        histogram.record_micros(2_000_000);
        let mut out = Exposition::default();
        out.family("t_seconds", Kind::Histogram, "T");
        out.histogram_samples("t_seconds", &[("op", "get")], &histogram.snapshot());
        let text = out.finish();
        assert!(text.contains("t_seconds_bucket{op=\"get\",le=\"0.0001\"} 1\n"));
        assert!(text.contains("t_seconds_bucket{op=\"get\",le=\"2.5\"} 2\n"));
        assert!(text.contains("t_seconds_bucket{op=\"get\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("t_seconds_sum{op=\"get\"} 2.00005\n"));
        assert!(text.contains("t_seconds_count{op=\"get\"} 2\n"));
    }
}
