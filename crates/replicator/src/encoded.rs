//! Revisions whose attachments the source stores compressed travel as CouchDB's replicator
//! moves them: read with `open_revs` as `multipart/mixed`, each revision written with
//! `PUT ?new_edits=false` carrying the `multipart/related` body the source sent. The bodies
//! arrive as stored (`encoding: gzip`, the source's digests) and the target keeps them so.
//! Inline JSON `data` is always the identity bytes (CouchDB decodes it), so the JSON path
//! (`_bulk_get` -> `_bulk_docs`) would store them decompressed.

use std::collections::HashSet;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_http_wire::multipart::{boundary, parse_multipart};

use crate::client::Peer;
use crate::error::ReplicatorError;
use crate::stats::Stats;
use crate::worker::Worker;

/// A revision fetched as JSON whose inline attachment data the source stores encoded
/// (`att_encoding_info=true` says so).
pub fn has_encoded_data(doc: &Value) -> bool {
    doc.get("_attachments")
        .and_then(Value::as_object)
        .is_some_and(|attachments| {
            attachments.values().any(|attachment| {
                attachment.get("data").is_some() && attachment.get("encoding").is_some()
            })
        })
}

/// What became of the revisions of one document sent as multipart.
#[derive(Default)]
pub struct Copied {
    /// Revisions the source answered as plain JSON (nothing follows): for `_bulk_docs`.
    pub json: Vec<Value>,
    /// The target lacked an attachment body a stub assumed it had.
    pub missing_stub: bool,
}

impl Worker<'_> {
    /// Copies `rev` of `id` with its attachments as the source stores them. `None` when the
    /// source does not answer `open_revs` with `multipart/mixed`: the caller writes the JSON.
    pub(crate) async fn copy_encoded(
        &self,
        id: &str,
        rev: &str,
        atts_since: &[String],
        stats: &mut Stats,
    ) -> Result<Option<Copied>, ReplicatorError> {
        let doc_path = Peer::doc_path(id);
        let mut path = format!(
            "{doc_path}?revs=true&latest=true&attachments=true&open_revs={}",
            Peer::encode_query(&json!([rev]).to_string())
        );
        if !atts_since.is_empty() {
            path.push_str(&format!(
                "&atts_since={}",
                Peer::encode_query(&json!(atts_since).to_string())
            ));
        }
        let answer = self
            .source
            .send(Method::GET, &path, None, "multipart/mixed", None)
            .await?;
        let mixed = answer
            .content_type
            .as_deref()
            .filter(|content_type| content_type.starts_with("multipart/mixed"))
            .and_then(boundary);
        let (StatusCode::OK, Some(mixed)) = (answer.status, mixed) else {
            return Ok(None);
        };
        let parts =
            parse_multipart(&answer.body, &mixed).map_err(|reason| ReplicatorError::Protocol {
                url: format!("{}{path}", self.source.url()),
                reason: format!("open_revs multipart: {reason}"),
            })?;
        let mut copied = Copied::default();
        let mut seen = HashSet::new();
        for part in parts {
            let content_type = part.header("content-type").unwrap_or("");
            if content_type.starts_with("multipart/related") {
                let put = format!("{doc_path}?new_edits=false");
                let body = Some((part.body.clone(), content_type.to_string()));
                let written = self
                    .target
                    .send_typed(Method::PUT, &put, body, "application/json", None)
                    .await?;
                if written.status.is_success() {
                    stats.docs_written += 1;
                    continue;
                }
                stats.doc_write_failures += 1;
                match self.target.http_error(&written, &put) {
                    ReplicatorError::Http { error, .. } if error == "missing_stub" => {
                        copied.missing_stub = true;
                    }
                    error => {
                        tracing::info!(doc = id, %error, "replicated document refused by the target")
                    }
                }
            } else if let Ok(doc) = serde_json::from_slice::<Value>(&part.body) {
                // `{"missing": rev}` for a revision the source no longer has: nothing to copy.
                let rev = doc.get("_rev").and_then(Value::as_str).map(str::to_string);
                if rev.is_some_and(|rev| seen.insert(rev)) {
                    copied.json.push(doc);
                }
            }
        }
        Ok(Some(copied))
    }
}
