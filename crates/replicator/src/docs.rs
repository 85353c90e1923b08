//! The `_replicator` database: every document describes a replication. A watcher follows the
//! database's change stream in-process (the node's own system database, not a peer) and
//! starts, restarts or stops the document's job; a one-shot job that completes, or a document
//! that cannot be a replication, gets its terminal state written back into the document.
//!
//! As in CouchDB 3.x (`[replicator] update_docs = false`), only the terminal states go into
//! the document: `_replication_state` (`completed` / `failed`), `_replication_state_time`,
//! `_replication_stats` or `_replication_state_reason`. Everything else (`running`,
//! `crashing`, errors) is shown by `/_scheduler/docs` only.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};
use settee_engine::{AttachmentInput, Bucket, DocUpdate, Engine, SeqVector, UpdateOutcome};

use crate::job::unix_secs;
use crate::params::ReplicationParams;
use crate::scheduler::{iso8601, DocDone, DocRef, JobState, Replicator};

/// The database CouchDB watches.
pub const REPLICATOR_DB: &str = "_replicator";
/// Members the replicator itself writes; a change to only these is not a new replication.
const STATE_MEMBERS: [&str; 6] = [
    "_replication_state",
    "_replication_state_time",
    "_replication_state_reason",
    "_replication_id",
    "_replication_stats",
    "_replication_start_time",
];

/// Follows `_replicator` until `shutdown` resolves.
pub async fn watch(
    replicator: Arc<Replicator>,
    engine: Arc<Engine>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let Some(bucket) = engine.bucket(REPLICATOR_DB) else {
        return;
    };
    let mut changed = bucket.subscribe();
    let mut position = SeqVector::zero(bucket.vbuckets());
    let on_done: DocDone = {
        let bucket = bucket.clone();
        Arc::new(move |doc: DocRef, state: JobState| {
            let bucket = bucket.clone();
            tokio::spawn(async move { write_state(&bucket, &doc.doc_id, &state).await });
        })
    };
    loop {
        changed.borrow_and_update();
        let mut entries = Vec::new();
        {
            let mut cursor = bucket.changes(position.clone());
            for entry in cursor.by_ref() {
                match entry {
                    Ok(entry) => entries.push(entry),
                    Err(error) => {
                        tracing::warn!(%error, "reading _replicator changes");
                        break;
                    }
                }
            }
            position = cursor.position().clone();
        }
        for entry in entries {
            let doc_id = String::from_utf8_lossy(&entry.key).into_owned();
            if doc_id.starts_with("_design/") {
                continue;
            }
            let doc = DocRef {
                db: REPLICATOR_DB.to_string(),
                doc_id,
            };
            handle_doc(&replicator, &bucket, doc, &on_done);
        }
        tokio::select! {
            _ = &mut shutdown => return,
            result = changed.changed() => if result.is_err() { return },
        }
    }
}

fn handle_doc(replicator: &Arc<Replicator>, bucket: &Bucket, doc: DocRef, on_done: &DocDone) {
    let record = match bucket.read_record(doc.doc_id.as_bytes()) {
        Ok(Some(record)) => record,
        Ok(None) => {
            replicator.stop_doc_job(&doc);
            return;
        }
        Err(error) => {
            tracing::warn!(%error, doc = doc.doc_id, "reading a _replicator document");
            return;
        }
    };
    let Some(winner) = record.winner().filter(|winner| !winner.deleted) else {
        replicator.stop_doc_job(&doc);
        return;
    };
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&winner.body) else {
        return;
    };
    let parsed = ReplicationParams::parse(&body);
    match body.get("_replication_state").and_then(Value::as_str) {
        Some("completed") => {
            let stats = body
                .get("_replication_stats")
                .cloned()
                .unwrap_or(Value::Null);
            let parsed = parsed.map_err(|error| error.to_string());
            replicator.record_finished_doc(doc, parsed, JobState::Completed { stats });
            return;
        }
        Some("failed") => {
            let error = body
                .get("_replication_state_reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let parsed = parsed.map_err(|_| error.clone());
            replicator.record_finished_doc(doc, parsed, JobState::Failed { error });
            return;
        }
        _ => {}
    }
    match parsed {
        Ok(params) => {
            let same = replicator
                .doc_job_params(&doc)
                .is_some_and(|running| same_request(&running, &params));
            if !same {
                replicator.start_doc_job(doc, params, on_done.clone());
            }
        }
        Err(error) => {
            replicator.stop_doc_job(&doc);
            on_done(
                doc,
                JobState::Failed {
                    error: error.to_string(),
                },
            );
        }
    }
}

/// Whether two parses describe the same replication (the id inputs and the options).
fn same_request(a: &ReplicationParams, b: &ReplicationParams) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// Writes a terminal state into the document (retrying on a concurrent edit).
async fn write_state(bucket: &Bucket, doc_id: &str, state: &JobState) {
    for _ in 0..5 {
        let Ok(Some(record)) = bucket.read_record(doc_id.as_bytes()) else {
            return;
        };
        let Some(winner) = record.winner().filter(|winner| !winner.deleted).cloned() else {
            return;
        };
        let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&winner.body) else {
            return;
        };
        apply_state(&mut body, state, unix_secs());
        let update = DocUpdate {
            key: doc_id.as_bytes().to_vec(),
            parent: Some(winner.rev.clone()),
            history: Vec::new(),
            deleted: false,
            body: Bytes::from(Value::Object(body).to_string()),
            attachments: winner
                .attachments
                .iter()
                .map(|meta| AttachmentInput::Stub {
                    name: meta.name.clone(),
                    revpos: None,
                })
                .collect(),
        };
        match bucket.update_doc(update, true).await {
            Ok(UpdateOutcome::Conflict) => continue,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, doc = doc_id, "writing replication state");
                return;
            }
        }
    }
}

/// The document body with `state` recorded the way CouchDB records it.
pub fn apply_state(body: &mut Map<String, Value>, state: &JobState, now: u64) {
    for member in STATE_MEMBERS {
        if member != "_replication_state" && member != "_replication_state_time" {
            body.remove(member);
        }
    }
    let name = state.name();
    if body.get("_replication_state").and_then(Value::as_str) != Some(name) {
        body.insert("_replication_state".into(), json!(name));
        body.insert("_replication_state_time".into(), json!(iso8601(now)));
    }
    match state {
        JobState::Completed { stats } => {
            body.insert("_replication_stats".into(), stats.clone());
        }
        JobState::Failed { error } => {
            body.insert("_replication_state_reason".into(), json!(error));
        }
        _ => {}
    }
}
