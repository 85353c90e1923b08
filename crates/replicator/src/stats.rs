//! Counters a replication keeps, named as CouchDB names them in checkpoints and
//! `_active_tasks`.

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Revisions the target was asked about (`_revs_diff`); `revisions_checked` in tasks.
    pub missing_checked: u64,
    /// Revisions the target lacked.
    pub missing_found: u64,
    pub docs_read: u64,
    pub docs_written: u64,
    pub doc_write_failures: u64,
    pub bulk_get_docs: u64,
    pub bulk_get_attempts: u64,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.missing_checked += other.missing_checked;
        self.missing_found += other.missing_found;
        self.docs_read += other.docs_read;
        self.docs_written += other.docs_written;
        self.doc_write_failures += other.doc_write_failures;
        self.bulk_get_docs += other.bulk_get_docs;
        self.bulk_get_attempts += other.bulk_get_attempts;
    }

    /// Starts from a checkpoint's newest history entry, so counts carry across restarts.
    pub fn from_history(entry: Option<&serde_json::Value>) -> Stats {
        let field = |name: &str| {
            entry
                .and_then(|entry| entry.get(name))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        Stats {
            missing_checked: field("missing_checked"),
            missing_found: field("missing_found"),
            docs_read: field("docs_read"),
            docs_written: field("docs_written"),
            doc_write_failures: field("doc_write_failures"),
            bulk_get_docs: field("bulk_get_docs"),
            bulk_get_attempts: field("bulk_get_attempts"),
        }
    }
}
