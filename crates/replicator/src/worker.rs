//! One batch of changes copied: ask the target which revisions it lacks (`_revs_diff`), read
//! them from the source with their histories and attachments (`_bulk_get`, or per-document
//! `open_revs` GETs for servers without it), write them with `new_edits=false`.
//!
//! Attachments travel inline (base64) in the JSON bodies, except bodies the source stores
//! compressed, which go as multipart (`encoded.rs`); `atts_since` with the target's
//! possible ancestors lets the source send stubs for bodies the target already holds. If the
//! target cannot resolve a stub (`missing_stub`) the document is fetched again in full.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

use crate::changes::ChangeRow;
use crate::client::Peer;
use crate::encoded::has_encoded_data;
use crate::error::ReplicatorError;
use crate::stats::Stats;

/// Largest `_bulk_docs` body sent at once; a batch with big attachments is split.
const BULK_DOCS_BYTES_MAX: usize = 16 << 20;

/// What the target is missing for one document.
#[derive(Clone, Debug)]
struct Missing {
    id: String,
    revs: Vec<String>,
    ancestors: Vec<String>,
}

pub struct Worker<'a> {
    pub source: &'a Peer,
    pub target: &'a Peer,
    pub use_bulk_get: bool,
}

impl Worker<'_> {
    /// Copies what the target lacks of `rows`; returns the counters of this batch.
    pub async fn copy(&self, rows: &[ChangeRow]) -> Result<Stats, ReplicatorError> {
        let mut stats = Stats::default();
        if rows.is_empty() {
            return Ok(stats);
        }
        let mut request: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for row in rows {
            let revs = request.entry(row.id.as_str()).or_default();
            for rev in &row.revs {
                if !revs.contains(&rev.as_str()) {
                    revs.push(rev);
                    stats.missing_checked += 1;
                }
            }
        }
        let diff = self.target.revs_diff(&json!(request)).await?;
        let missing = parse_revs_diff(&diff);
        stats.missing_found = missing.iter().map(|doc| doc.revs.len() as u64).sum();
        if missing.is_empty() {
            return Ok(stats);
        }
        let docs = self.fetch(&missing, true, &mut stats).await?;
        let stub_failures = self.write_all(docs, &missing, true, &mut stats).await?;
        if !stub_failures.is_empty() {
            // The target lacked an attachment body `atts_since` assumed it had: send them whole.
            let again: Vec<Missing> = missing
                .into_iter()
                .filter(|doc| stub_failures.contains(&doc.id))
                .collect();
            stats.doc_write_failures -= stub_failures.len() as u64;
            let docs = self.fetch(&again, false, &mut stats).await?;
            self.write_all(docs, &again, false, &mut stats).await?;
        }
        Ok(stats)
    }

    async fn fetch(
        &self,
        missing: &[Missing],
        with_atts_since: bool,
        stats: &mut Stats,
    ) -> Result<Vec<Value>, ReplicatorError> {
        if self.use_bulk_get {
            stats.bulk_get_attempts += missing.len() as u64;
            if let Some((docs, unreadable)) = self.bulk_get(missing, with_atts_since).await? {
                stats.bulk_get_docs += docs.len() as u64;
                // Revisions the source could not send (a document past its limits, a record
                // that does not decode): not copied, counted as failures like refused writes.
                stats.doc_write_failures += unreadable;
                stats.docs_read += docs.len() as u64;
                return Ok(docs);
            }
        }
        let mut docs = Vec::new();
        for doc in missing {
            docs.extend(self.open_revs(doc, with_atts_since).await?);
        }
        stats.docs_read += docs.len() as u64;
        Ok(docs)
    }

    /// `POST _bulk_get`: the documents, and how many revisions the source answered with an
    /// error other than `not_found`; `None` when the source does not have the endpoint.
    async fn bulk_get(
        &self,
        missing: &[Missing],
        with_atts_since: bool,
    ) -> Result<Option<(Vec<Value>, u64)>, ReplicatorError> {
        let mut specs = Vec::new();
        for doc in missing {
            for rev in &doc.revs {
                let mut spec = json!({"id": doc.id, "rev": rev});
                if with_atts_since && !doc.ancestors.is_empty() {
                    spec["atts_since"] = json!(doc.ancestors);
                }
                specs.push(spec);
            }
        }
        let path = "_bulk_get?revs=true&attachments=true&latest=true&att_encoding_info=true";
        let body = Bytes::from(json!({ "docs": specs }).to_string());
        let answer = self
            .source
            .send(Method::POST, path, Some(body), "application/json", None)
            .await?;
        if matches!(
            answer.status,
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED
        ) {
            return Ok(None);
        }
        let value = self.source.expect_ok(answer, path)?;
        let results = value
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| ReplicatorError::Protocol {
                url: format!("{}{path}", self.source.url()),
                reason: "no results array".into(),
            })?;
        let mut docs = Vec::new();
        let mut seen = HashSet::new();
        let mut unreadable = 0;
        for result in results {
            for entry in result
                .get("docs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                // `not_found` errors are revisions the source no longer has (purged, or stemmed
                // and compacted since the change was read): nothing to copy, as in CouchDB.
                // Any other error is one document the source cannot send; the rest go on.
                if let Some(doc) = entry.get("ok") {
                    push_unique(&mut docs, &mut seen, doc);
                } else if let Some(error) = entry.get("error") {
                    if error.get("error").and_then(Value::as_str) != Some("not_found") {
                        unreadable += 1;
                        tracing::warn!(doc = ?error.get("id"), reason = ?error.get("reason"),
                            "the source could not send a document; it is not replicated");
                    }
                }
            }
        }
        Ok(Some((docs, unreadable)))
    }

    /// `GET /db/doc?open_revs=[...]` answered as JSON.
    async fn open_revs(
        &self,
        doc: &Missing,
        with_atts_since: bool,
    ) -> Result<Vec<Value>, ReplicatorError> {
        let mut path = format!(
            "{}?revs=true&latest=true&attachments=true&att_encoding_info=true&open_revs={}",
            Peer::doc_path(&doc.id),
            Peer::encode_query(&json!(doc.revs).to_string())
        );
        if with_atts_since && !doc.ancestors.is_empty() {
            path.push_str(&format!(
                "&atts_since={}",
                Peer::encode_query(&json!(doc.ancestors).to_string())
            ));
        }
        let answer = self
            .source
            .send(Method::GET, &path, None, "application/json", None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        let value = self.source.expect_ok(answer, &path)?;
        let mut docs = Vec::new();
        let mut seen = HashSet::new();
        for entry in value.as_array().into_iter().flatten() {
            if let Some(doc) = entry.get("ok") {
                push_unique(&mut docs, &mut seen, doc);
            }
        }
        Ok(docs)
    }

    /// Writes fetched revisions: those with attachment bodies the source stores encoded one
    /// by one as multipart (`encoded.rs`), the rest with `_bulk_docs`. Returns the ids refused
    /// for a missing attachment stub.
    async fn write_all(
        &self,
        docs: Vec<Value>,
        missing: &[Missing],
        with_atts_since: bool,
        stats: &mut Stats,
    ) -> Result<HashSet<String>, ReplicatorError> {
        let (encoded, mut plain): (Vec<Value>, Vec<Value>) =
            docs.into_iter().partition(has_encoded_data);
        let mut stub_failures = HashSet::new();
        for doc in encoded {
            let text = |name: &str| doc.get(name).and_then(Value::as_str).unwrap_or("");
            let (id, rev) = (text("_id").to_string(), text("_rev").to_string());
            let ancestors = match missing.iter().find(|entry| entry.id == id) {
                Some(entry) if with_atts_since => entry.ancestors.clone(),
                _ => Vec::new(),
            };
            match self.copy_encoded(&id, &rev, &ancestors, stats).await? {
                Some(copied) => {
                    plain.extend(copied.json);
                    if copied.missing_stub {
                        stub_failures.insert(id);
                    }
                }
                None => plain.push(doc),
            }
        }
        stub_failures.extend(self.write(plain, stats).await?);
        Ok(stub_failures)
    }

    /// Writes with `new_edits=false`; returns the ids refused for a missing attachment stub.
    async fn write(
        &self,
        docs: Vec<Value>,
        stats: &mut Stats,
    ) -> Result<HashSet<String>, ReplicatorError> {
        let mut stub_failures = HashSet::new();
        let mut chunk: Vec<Value> = Vec::new();
        let mut chunk_bytes = 0usize;
        let mut chunks = Vec::new();
        for doc in docs {
            let size = doc.to_string().len();
            if !chunk.is_empty() && chunk_bytes + size > BULK_DOCS_BYTES_MAX {
                chunks.push(std::mem::take(&mut chunk));
                chunk_bytes = 0;
            }
            chunk_bytes += size;
            chunk.push(doc);
        }
        if !chunk.is_empty() {
            chunks.push(chunk);
        }
        for chunk in chunks {
            let count = chunk.len() as u64;
            let body = json!({"docs": chunk, "new_edits": false});
            let value = self
                .target
                .json(Method::POST, "_bulk_docs", Some(&body))
                .await?;
            let mut failures = 0u64;
            for row in value.as_array().into_iter().flatten() {
                let Some(error) = row.get("error").and_then(Value::as_str) else {
                    continue;
                };
                failures += 1;
                if error == "missing_stub" {
                    if let Some(id) = row.get("id").and_then(Value::as_str) {
                        stub_failures.insert(id.to_string());
                    }
                } else {
                    tracing::info!(doc = ?row.get("id"), error, "replicated document refused by the target");
                }
            }
            stats.docs_written += count.saturating_sub(failures);
            stats.doc_write_failures += failures;
        }
        Ok(stub_failures)
    }
}

fn push_unique(docs: &mut Vec<Value>, seen: &mut HashSet<(String, String)>, doc: &Value) {
    let key = (
        doc.get("_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        doc.get("_rev")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    );
    if seen.insert(key) {
        docs.push(doc.clone());
    }
}

/// `{"id": {"missing": [...], "possible_ancestors": [...]}}`; anything malformed is skipped.
fn parse_revs_diff(diff: &Value) -> Vec<Missing> {
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let empty = Map::new();
    diff.as_object()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|(id, entry)| {
            let revs = strings(entry.get("missing"));
            (!revs.is_empty()).then(|| Missing {
                id: id.clone(),
                revs,
                ancestors: strings(entry.get("possible_ancestors")),
            })
        })
        .collect()
}
