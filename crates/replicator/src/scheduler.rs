//! The node's replications: `POST /_replicate` requests and `_replicator` documents become
//! jobs; continuous and document-driven jobs that crash are restarted with exponential
//! backoff; `_scheduler/jobs`, `_scheduler/docs` and `_active_tasks` read their state here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::error::ReplicatorError;
use crate::job::{unix_secs, Job, JobEnv};
use crate::params::{ReplicationParams, Request};

/// First wait before a crashed job is started again; doubled per consecutive crash.
pub const RESTART_WAIT_FIRST: Duration = Duration::from_millis(500);
/// Longest wait between restarts (CouchDB's scheduler penalises up to hours; settee keeps a
/// single node's jobs closer to their peers).
pub const RESTART_WAIT_MAX: Duration = Duration::from_secs(300);
/// Scheduler events kept per job (`history` in `_scheduler/jobs`).
const EVENTS_MAX: usize = 20;

/// Where a replication is in its life, as `_scheduler/docs` names it.
#[derive(Clone, Debug, PartialEq)]
pub enum JobState {
    Initializing,
    Running,
    Crashing { error: String },
    Completed { stats: Value },
    Failed { error: String },
}

impl JobState {
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Initializing => "initializing",
            JobState::Running => "running",
            JobState::Crashing { .. } => "crashing",
            JobState::Completed { .. } => "completed",
            JobState::Failed { .. } => "failed",
        }
    }

    fn info(&self) -> Value {
        match self {
            JobState::Crashing { error } | JobState::Failed { error } => json!({ "error": error }),
            JobState::Completed { stats } => stats.clone(),
            _ => Value::Null,
        }
    }
}

/// Where a job came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRef {
    pub db: String,
    pub doc_id: String,
}

/// One registered replication (running, waiting to restart, or finished doc job).
pub struct JobHandle {
    pub params: ReplicationParams,
    pub doc: Option<DocRef>,
    pub user: Option<String>,
    pub start_time: u64,
    /// The id once known (computing it may need the source, for filters).
    pub id: Mutex<Option<String>>,
    pub state: Mutex<JobState>,
    pub error_count: Mutex<u32>,
    pub last_updated: Mutex<u64>,
    pub events: Mutex<Vec<Value>>,
    /// The current run, for live numbers.
    pub current: Mutex<Option<Arc<Job>>>,
    cancel: watch::Sender<bool>,
}

impl JobHandle {
    fn new(params: ReplicationParams, doc: Option<DocRef>, user: Option<String>) -> Arc<JobHandle> {
        let now = unix_secs();
        Arc::new(JobHandle {
            params,
            doc,
            user,
            start_time: now,
            id: Mutex::new(None),
            state: Mutex::new(JobState::Initializing),
            error_count: Mutex::new(0),
            last_updated: Mutex::new(now),
            events: Mutex::new(vec![json!({"timestamp": iso8601(now), "type": "added"})]),
            current: Mutex::new(None),
            cancel: watch::channel(false).0,
        })
    }

    fn set_state(&self, state: JobState) {
        let now = unix_secs();
        let event = match &state {
            JobState::Running => Some(json!({"timestamp": iso8601(now), "type": "started"})),
            JobState::Crashing { error } => {
                Some(json!({"timestamp": iso8601(now), "type": "crashed", "reason": error}))
            }
            _ => None,
        };
        if let Some(event) = event {
            let mut events = self.events.lock();
            events.insert(0, event);
            events.truncate(EVENTS_MAX);
        }
        *self.state.lock() = state;
        *self.last_updated.lock() = now;
    }

    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
    }

    fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC), the format of CouchDB's scheduler timestamps.
pub fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// Called when a document-driven one-shot job ends, to write its terminal state.
pub type DocDone = Arc<dyn Fn(DocRef, JobState) + Send + Sync>;

pub struct Replicator {
    pub env: JobEnv,
    /// Jobs by handle key: the replication id for `_replicate` jobs, `db/docid` for documents.
    jobs: Mutex<HashMap<String, Arc<JobHandle>>>,
    /// Terminal states of `_replicator` documents (completed / failed) for `_scheduler/docs`.
    finished_docs: Mutex<HashMap<String, (DocRef, Arc<JobHandle>)>>,
    /// `_replicator` documents that are not a valid replication: (doc, reason, when).
    invalid_docs: Mutex<HashMap<String, (DocRef, String, u64)>>,
}

/// Takes a one-shot job out of the table when its request ends.
struct Registered<'a> {
    replicator: &'a Replicator,
    key: String,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.replicator.jobs.lock().remove(&self.key);
    }
}

fn doc_key(doc: &DocRef) -> String {
    format!("{}/{}", doc.db, doc.doc_id)
}

impl Replicator {
    pub fn new(env: JobEnv) -> Arc<Replicator> {
        Arc::new(Replicator {
            env,
            jobs: Mutex::new(HashMap::new()),
            finished_docs: Mutex::new(HashMap::new()),
            invalid_docs: Mutex::new(HashMap::new()),
        })
    }

    /// `POST /_replicate`. One-shot requests answer when done; continuous ones at once (202).
    pub async fn replicate(
        self: &Arc<Self>,
        request: Request,
        user: Option<&str>,
    ) -> Result<(u16, Value), ReplicatorError> {
        match request {
            Request::Cancel { id, params } => {
                let id = match (id, params) {
                    (Some(id), _) => id,
                    (None, Some(params)) => Job::prepare(&self.env, *params, user).await?.id.full(),
                    (None, None) => {
                        return Err(ReplicatorError::BadRequest("nothing to cancel".into()))
                    }
                };
                let found = {
                    let jobs = self.jobs.lock();
                    jobs.iter()
                        .find(|(_, handle)| {
                            handle.doc.is_none()
                                && handle.id.lock().as_deref().is_some_and(|full| {
                                    full == id || full.split('+').next() == Some(id.as_str())
                                })
                        })
                        .map(|(key, handle)| (key.clone(), handle.clone()))
                };
                let Some((key, handle)) = found else {
                    return Err(ReplicatorError::NotFound(id));
                };
                handle.cancel();
                self.jobs.lock().remove(&key);
                let full = handle.id.lock().clone().unwrap_or(id);
                Ok((200, json!({"ok": true, "_local_id": full})))
            }
            Request::Start(params) => {
                let params = *params;
                let job = Arc::new(Job::prepare(&self.env, params.clone(), user).await?);
                let full = job.id.full();
                if params.continuous {
                    if self.jobs.lock().contains_key(&full) {
                        return Ok((202, json!({"ok": true, "_local_id": full})));
                    }
                    let handle = JobHandle::new(params, None, user.map(str::to_string));
                    *handle.id.lock() = Some(full.clone());
                    self.jobs.lock().insert(full.clone(), handle.clone());
                    tokio::spawn(self.clone().supervise(handle, Some(job), None));
                    return Ok((202, json!({"ok": true, "_local_id": full})));
                }
                let handle = JobHandle::new(params, None, user.map(str::to_string));
                *handle.id.lock() = Some(full.clone());
                *handle.current.lock() = Some(job.clone());
                handle.set_state(JobState::Running);
                // One-shot requests share the table only while they run.
                let key = format!("{full}#{}", crate::job::random_hex());
                self.jobs.lock().insert(key.clone(), handle.clone());
                // Removed however the run ends, also when the client goes away and this
                // future is dropped (which aborts the job's tasks).
                let _registered = Registered {
                    replicator: self,
                    key,
                };
                let result = job.run(handle.cancel.subscribe()).await;
                result.map(|body| (200, body))
            }
        }
    }

    /// Starts (or restarts) the job of a `_replicator` document.
    pub fn start_doc_job(
        self: &Arc<Self>,
        doc: DocRef,
        params: ReplicationParams,
        on_done: DocDone,
    ) {
        let key = doc_key(&doc);
        self.finished_docs.lock().remove(&key);
        // A document's job runs as its user (`ReplicationParams::user_name`).
        let user = params.user_name.clone();
        let handle = JobHandle::new(params, Some(doc), user);
        if let Some(old) = self.jobs.lock().insert(key, handle.clone()) {
            old.cancel();
        }
        tokio::spawn(self.clone().supervise(handle, None, Some(on_done)));
    }

    /// Stops the job of a document (deleted, or changed so that it must restart).
    pub fn stop_doc_job(&self, doc: &DocRef) {
        let key = doc_key(doc);
        if let Some(handle) = self.jobs.lock().remove(&key) {
            handle.cancel();
        }
        self.finished_docs.lock().remove(&key);
        self.invalid_docs.lock().remove(&key);
    }

    /// The parameters the running job of `doc` was started with.
    pub fn doc_job_params(&self, doc: &DocRef) -> Option<ReplicationParams> {
        self.jobs
            .lock()
            .get(&doc_key(doc))
            .map(|handle| handle.params.clone())
    }

    /// Records a document found completed or failed (no job runs for it). An entry this
    /// process made when the job ended is kept (it knows the replication id).
    pub fn record_finished_doc(
        &self,
        doc: DocRef,
        params: Result<ReplicationParams, String>,
        state: JobState,
    ) {
        let key = doc_key(&doc);
        if let Some(handle) = self.jobs.lock().remove(&key) {
            handle.cancel();
        }
        match params {
            Ok(params) => {
                self.invalid_docs.lock().remove(&key);
                self.finished_docs.lock().entry(key).or_insert_with(|| {
                    let handle = JobHandle::new(params, Some(doc.clone()), None);
                    handle.set_state(state);
                    (doc, handle)
                });
            }
            Err(error) => {
                self.finished_docs.lock().remove(&key);
                self.invalid_docs
                    .lock()
                    .insert(key, (doc, error, unix_secs()));
            }
        }
    }

    /// Runs a job until it completes or is cancelled, restarting it after crashes.
    async fn supervise(
        self: Arc<Self>,
        handle: Arc<JobHandle>,
        first: Option<Arc<Job>>,
        on_done: Option<DocDone>,
    ) {
        let mut first = first;
        let mut wait = RESTART_WAIT_FIRST;
        loop {
            if handle.is_cancelled() {
                return;
            }
            let job = match first.take() {
                Some(job) => Ok(job),
                None => Job::prepare(&self.env, handle.params.clone(), handle.user.as_deref())
                    .await
                    .map(Arc::new),
            };
            let result = match job {
                Ok(job) => {
                    *handle.id.lock() = Some(job.id.full());
                    *handle.current.lock() = Some(job.clone());
                    handle.set_state(JobState::Running);
                    job.run(handle.cancel.subscribe()).await
                }
                Err(error) => Err(error),
            };
            match result {
                Ok(body) => {
                    *handle.error_count.lock() = 0;
                    let stats = completed_stats(&body);
                    let state = JobState::Completed { stats };
                    handle.set_state(state.clone());
                    if let (Some(doc), Some(on_done)) = (handle.doc.clone(), &on_done) {
                        self.finish_doc(&handle, doc.clone());
                        on_done(doc, state);
                    }
                    return;
                }
                Err(ReplicatorError::Cancelled) => return,
                Err(ReplicatorError::BadRequest(reason)) if handle.doc.is_some() => {
                    // The document itself is wrong: CouchDB marks it failed and stops.
                    let state = JobState::Failed { error: reason };
                    handle.set_state(state.clone());
                    if let (Some(doc), Some(on_done)) = (handle.doc.clone(), &on_done) {
                        self.finish_doc(&handle, doc.clone());
                        on_done(doc, state);
                    }
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "replication crashed; will restart");
                    *handle.error_count.lock() += 1;
                    handle.set_state(JobState::Crashing {
                        error: error.to_string(),
                    });
                    let mut cancel = handle.cancel.subscribe();
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.changed() => return,
                    }
                    wait = (wait * 2).min(RESTART_WAIT_MAX);
                }
            }
        }
    }

    fn finish_doc(&self, handle: &Arc<JobHandle>, doc: DocRef) {
        let key = doc_key(&doc);
        let mut jobs = self.jobs.lock();
        if jobs
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, handle))
        {
            jobs.remove(&key);
            self.finished_docs.lock().insert(key, (doc, handle.clone()));
        }
    }

    fn handles(&self) -> Vec<Arc<JobHandle>> {
        let mut handles: Vec<Arc<JobHandle>> = self.jobs.lock().values().cloned().collect();
        handles.sort_by_key(|handle| handle.id.lock().clone());
        handles
    }

    /// `GET /_scheduler/jobs`.
    pub fn jobs_json(&self) -> Value {
        let jobs: Vec<Value> = self
            .handles()
            .iter()
            .filter(|handle| handle.id.lock().is_some())
            .map(|handle| {
                json!({
                    "database": handle.doc.as_ref().map(|doc| doc.db.clone()),
                    "doc_id": handle.doc.as_ref().map(|doc| doc.doc_id.clone()),
                    "id": handle.id.lock().clone(),
                    "pid": "<0.0.0>",
                    "node": "settee@127.0.0.1",
                    "source": handle.params.source.display(),
                    "target": handle.params.target.display(),
                    "user": handle.user,
                    "info": live_info(handle),
                    "history": handle.events.lock().clone(),
                    "start_time": iso8601(handle.start_time),
                })
            })
            .collect();
        json!({"total_rows": jobs.len(), "offset": 0, "jobs": jobs})
    }

    /// `GET /_scheduler/docs` (optionally of one database, or one document).
    pub fn docs_json(&self, db: Option<&str>, doc_id: Option<&str>) -> Vec<Value> {
        let mut entries: Vec<(DocRef, Arc<JobHandle>)> = self
            .jobs
            .lock()
            .values()
            .filter_map(|handle| handle.doc.clone().map(|doc| (doc, handle.clone())))
            .collect();
        entries.extend(self.finished_docs.lock().values().cloned());
        entries.retain(|(doc, _)| {
            db.is_none_or(|db| doc.db == db) && doc_id.is_none_or(|id| doc.doc_id == id)
        });
        let invalid: Vec<(DocRef, String, u64)> = self
            .invalid_docs
            .lock()
            .values()
            .filter(|(doc, _, _)| {
                db.is_none_or(|db| doc.db == db) && doc_id.is_none_or(|id| doc.doc_id == id)
            })
            .cloned()
            .collect();
        let mut out: Vec<Value> = invalid
            .into_iter()
            .map(|(doc, error, when)| {
                json!({
                    "database": doc.db, "doc_id": doc.doc_id, "id": null,
                    "node": "settee@127.0.0.1", "source": null, "target": null,
                    "state": "failed", "info": {"error": error}, "error_count": 1,
                    "last_updated": iso8601(when), "start_time": iso8601(when),
                })
            })
            .collect();
        out.extend(entries.iter().map(|(doc, handle)| {
            let state = handle.state.lock().clone();
            let info = match &state {
                JobState::Running | JobState::Initializing => live_info(handle),
                other => other.info(),
            };
            json!({
                "database": doc.db,
                "doc_id": doc.doc_id,
                "id": handle.id.lock().clone(),
                "node": "settee@127.0.0.1",
                "source": handle.params.source.display(),
                "target": handle.params.target.display(),
                "state": state.name(),
                "info": info,
                "error_count": *handle.error_count.lock(),
                "last_updated": iso8601(*handle.last_updated.lock()),
                "start_time": iso8601(handle.start_time),
            })
        }));
        out.sort_by(|a, b| a["doc_id"].as_str().cmp(&b["doc_id"].as_str()));
        out
    }

    /// `_active_tasks` entries for running replications.
    pub fn active_tasks(&self) -> Vec<Value> {
        self.handles()
            .iter()
            .filter(|handle| *handle.state.lock() == JobState::Running)
            .filter_map(|handle| {
                let job = handle.current.lock().clone()?;
                let progress = job.progress.lock().clone();
                let stats = progress.stats;
                Some(json!({
                    "type": "replication",
                    "node": "settee@127.0.0.1",
                    "pid": "<0.0.0>",
                    "replication_id": job.id.full(),
                    "doc_id": handle.doc.as_ref().map(|doc| doc.doc_id.clone()),
                    "database": handle.doc.as_ref().map(|doc| doc.db.clone()),
                    "user": handle.user,
                    "source": job.params.source.display(),
                    "target": job.params.target.display(),
                    "continuous": job.params.continuous,
                    "docs_read": stats.docs_read,
                    "docs_written": stats.docs_written,
                    "doc_write_failures": stats.doc_write_failures,
                    "missing_revisions_found": stats.missing_found,
                    "revisions_checked": stats.missing_checked,
                    "bulk_get_docs": stats.bulk_get_docs,
                    "bulk_get_attempts": stats.bulk_get_attempts,
                    "changes_pending": null,
                    "checkpointed_source_seq": progress.checkpointed_seq,
                    "source_seq": progress.source_seq,
                    "through_seq": progress.through_seq,
                    "checkpoint_interval": job.params.checkpoint_interval.as_millis() as u64,
                    "started_on": progress.started_on,
                    "updated_on": progress.updated_on,
                }))
            })
            .collect()
    }
}

fn live_info(handle: &JobHandle) -> Value {
    let Some(job) = handle.current.lock().clone() else {
        return handle.state.lock().info();
    };
    let progress = job.progress.lock().clone();
    let stats = progress.stats;
    json!({
        "revisions_checked": stats.missing_checked,
        "missing_revisions_found": stats.missing_found,
        "docs_read": stats.docs_read,
        "docs_written": stats.docs_written,
        "changes_pending": null,
        "doc_write_failures": stats.doc_write_failures,
        "bulk_get_docs": stats.bulk_get_docs,
        "bulk_get_attempts": stats.bulk_get_attempts,
        "checkpointed_source_seq": progress.checkpointed_seq,
        "source_seq": progress.source_seq,
        "through_seq": progress.through_seq,
    })
}

/// The `_replication_stats` CouchDB writes into a completed document.
fn completed_stats(body: &Value) -> Value {
    let entry = body
        .get("history")
        .and_then(|history| history.get(0))
        .cloned()
        .unwrap_or(Value::Null);
    let field = |name: &str| entry.get(name).cloned().unwrap_or(json!(0));
    json!({
        "revisions_checked": field("missing_checked"),
        "missing_revisions_found": field("missing_found"),
        "docs_read": field("docs_read"),
        "docs_written": field("docs_written"),
        "doc_write_failures": field("doc_write_failures"),
        "bulk_get_docs": field("bulk_get_docs"),
        "bulk_get_attempts": field("bulk_get_attempts"),
        "checkpointed_source_seq": body.get("source_last_seq").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_795_000_000), "2026-11-18T11:06:40Z");
    }
}
