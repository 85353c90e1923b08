//! Checkpoints: the `_local/<replication id>` document both sides keep, in CouchDB's format,
//! and how a starting job finds where to resume from them.
//!
//! ```json
//! {"session_id": "...", "source_last_seq": <seq>, "replication_id_version": 4,
//!  "history": [{"session_id", "start_time", "end_time", "start_last_seq", "end_last_seq",
//!               "recorded_seq", "missing_checked", "missing_found", "docs_read",
//!               "docs_written", "doc_write_failures", "bulk_get_docs", "bulk_get_attempts"},
//!              ... at most 50, newest first]}
//! ```
//!
//! A job resumes from `source_last_seq` when both documents carry the same `session_id`
//! (the last checkpoint reached both sides); otherwise from the newest history entry whose
//! session appears in the other side's history too; otherwise from the start.

use serde_json::{json, Value};

use crate::ids::REP_ID_VERSION;
use crate::stats::Stats;

/// History entries kept (CouchDB keeps 50).
pub const HISTORY_MAX: usize = 50;

/// Where to start and the history to extend, from the two sides' checkpoint documents.
/// `None` as the sequence means "no common checkpoint".
pub fn compare_logs(source: Option<&Value>, target: Option<&Value>) -> (Option<Value>, Vec<Value>) {
    let (Some(source), Some(target)) = (source, target) else {
        return (None, Vec::new());
    };
    let session = |doc: &Value| doc.get("session_id").cloned();
    let history = |doc: &Value| -> Vec<Value> {
        doc.get("history")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    if session(source).is_some() && session(source) == session(target) {
        let seq = source.get("source_last_seq").cloned();
        return (seq, history(source));
    }
    compare_histories(&history(source), &history(target))
}

fn compare_histories(source: &[Value], target: &[Value]) -> (Option<Value>, Vec<Value>) {
    let has_session = |session: Option<&Value>, entries: &[Value]| {
        session.is_some()
            && entries
                .iter()
                .any(|entry| entry.get("session_id") == session)
    };
    let (mut source, mut target) = (source, target);
    while let (Some(first_source), Some(first_target)) = (source.first(), target.first()) {
        if has_session(first_source.get("session_id"), target) {
            return (
                first_source.get("recorded_seq").cloned(),
                source[1..].to_vec(),
            );
        }
        if has_session(first_target.get("session_id"), &source[1..]) {
            return (
                first_target.get("recorded_seq").cloned(),
                target[1..].to_vec(),
            );
        }
        source = &source[1..];
        target = &target[1..];
    }
    (None, Vec::new())
}

/// What one checkpoint writes on both sides.
pub struct CheckpointRecord<'a> {
    pub session_id: &'a str,
    pub start_seq: &'a Value,
    pub through_seq: &'a Value,
    pub start_time: &'a str,
    pub end_time: &'a str,
    pub stats: &'a Stats,
    pub previous_history: &'a [Value],
    /// Replications by `doc_ids` repeat some fields at the top level (CouchDB 1.0 format).
    pub by_doc_ids: bool,
}

impl CheckpointRecord<'_> {
    pub fn body(&self) -> Value {
        let stats = self.stats;
        let entry = json!({
            "session_id": self.session_id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "start_last_seq": self.start_seq,
            "end_last_seq": self.through_seq,
            "recorded_seq": self.through_seq,
            "missing_checked": stats.missing_checked,
            "missing_found": stats.missing_found,
            "docs_read": stats.docs_read,
            "docs_written": stats.docs_written,
            "doc_write_failures": stats.doc_write_failures,
            "bulk_get_docs": stats.bulk_get_docs,
            "bulk_get_attempts": stats.bulk_get_attempts,
        });
        let mut history = vec![entry];
        history.extend(self.previous_history.iter().take(HISTORY_MAX - 1).cloned());
        let mut body = json!({
            "session_id": self.session_id,
            "source_last_seq": self.through_seq,
            "replication_id_version": REP_ID_VERSION,
        });
        if self.by_doc_ids {
            body["start_time"] = json!(self.start_time);
            body["end_time"] = json!(self.end_time);
            body["docs_read"] = json!(stats.docs_read);
            body["docs_written"] = json!(stats.docs_written);
            body["doc_write_failures"] = json!(stats.doc_write_failures);
        }
        body["history"] = Value::Array(history);
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(session: &str, seq: u64) -> Value {
        json!({"session_id": session, "recorded_seq": seq})
    }

    #[test]
    fn same_session_resumes_from_source_last_seq() {
        let doc =
            json!({"session_id": "s2", "source_last_seq": "9-x", "history": [entry("s2", 9)]});
        let (seq, history) = compare_logs(Some(&doc), Some(&doc));
        assert_eq!(seq, Some(json!("9-x")));
        assert_eq!(history.len(), 1);
        assert_eq!(compare_logs(None, Some(&doc)).0, None);
    }

    #[test]
    fn diverged_sessions_resume_from_the_common_ancestor() {
        // The target missed the source's last checkpoint (s3), e.g. it was restored from a
        // backup: resume from s2, which both sides recorded.
        let source = json!({"session_id": "s3", "history": [entry("s3", 30), entry("s2", 20), entry("s1", 10)]});
        let target = json!({"session_id": "s2", "history": [entry("s2", 20), entry("s1", 10)]});
        let (seq, history) = compare_logs(Some(&source), Some(&target));
        assert_eq!(seq, Some(json!(20)));
        assert_eq!(history, vec![entry("s1", 10)]);
        let stranger = json!({"session_id": "x", "history": [entry("x", 5)]});
        assert_eq!(
            compare_logs(Some(&source), Some(&stranger)),
            (None, Vec::new())
        );
    }

    #[test]
    fn history_is_capped() {
        let old: Vec<Value> = (0..60).map(|n| entry(&format!("s{n}"), n)).collect();
        let stats = Stats::default();
        let record = CheckpointRecord {
            session_id: "new",
            start_seq: &json!(0),
            through_seq: &json!("5-a"),
            start_time: "t0",
            end_time: "t1",
            stats: &stats,
            previous_history: &old,
            by_doc_ids: false,
        };
        let body = record.body();
        assert_eq!(body["history"].as_array().map(Vec::len), Some(HISTORY_MAX));
        assert_eq!(body["history"][0]["session_id"], "new");
        assert_eq!(body["source_last_seq"], "5-a");
        assert_eq!(body["replication_id_version"], 4);
    }
}
