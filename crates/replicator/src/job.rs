//! One replication run: open both sides, find the checkpoint to resume from, then a changes
//! reader feeds batches to `worker_processes` workers while this task records checkpoints in
//! order. A one-shot run ends when the reader has caught up and every batch is written; a
//! continuous one keeps long-polling until it is cancelled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::changes::{read_page, ChangeRow};
use crate::checkpoint::{compare_logs, CheckpointRecord};
use crate::client::{HeaderSource, HttpClient, Peer};
use crate::endpoint::{Endpoint, RemoteDb};
use crate::error::ReplicatorError;
use crate::ids::{replication_id, ReplicationId};
use crate::params::{Filter, ReplicationParams};
use crate::stats::Stats;
use crate::worker::Worker;

/// Gives the credentials header a local endpoint uses, for the user a job runs as.
pub type LocalAuth = Arc<dyn Fn(Option<&str>) -> Option<(String, String)> + Send + Sync>;

/// What every job of a node shares.
#[derive(Clone)]
pub struct JobEnv {
    pub client: HttpClient,
    /// The node's uuid: part of every replication id.
    pub server_uuid: String,
    /// `http://127.0.0.1:<port>`: where local database names are reached.
    pub local_url: String,
    pub local_auth: LocalAuth,
}

/// Live numbers of a running job, read by `_active_tasks` and `_scheduler`.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub stats: Stats,
    pub through_seq: Value,
    pub checkpointed_seq: Value,
    pub source_seq: Value,
    pub started_on: u64,
    pub updated_on: u64,
}

pub struct Job {
    pub id: ReplicationId,
    pub params: ReplicationParams,
    source: Peer,
    target: Peer,
    pub progress: Mutex<Progress>,
}

/// A 401 or 403 on opening a database is CouchDB's `unauthorized` failure.
fn refused_as_unauthorized(error: ReplicatorError, peer: &Peer) -> ReplicatorError {
    match error {
        ReplicatorError::Http {
            status: 401 | 403, ..
        } => ReplicatorError::Unauthorized(format!("{}/", peer.url().trim_end_matches('/'))),
        other => other,
    }
}

pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

fn peer(
    env: &JobEnv,
    endpoint: &Endpoint,
    params: &ReplicationParams,
    user: Option<&str>,
) -> Result<Peer, ReplicatorError> {
    let (remote, dynamic) = match endpoint {
        Endpoint::Remote(remote) => (remote.clone(), None),
        Endpoint::Local { db } => {
            let url = format!("{}/{}", env.local_url, Peer::encode_query(db));
            let auth = env.local_auth.clone();
            let user = user.map(str::to_string);
            let source: HeaderSource = Arc::new(move || auth(user.as_deref()));
            (RemoteDb::parse(&url, &[], None)?, Some(source))
        }
    };
    Peer::new(
        env.client.clone(),
        &remote,
        dynamic,
        params.connection_timeout,
        params.retries_per_request,
        params.http_connections,
    )
}

/// Fetches a JavaScript filter's source from the source's design document (the id hashes it).
async fn filter_code(
    source: &Peer,
    params: &ReplicationParams,
) -> Result<Option<String>, ReplicatorError> {
    let Filter::User { ddoc, name, .. } = &params.filter else {
        return Ok(None);
    };
    let doc = source
        .get_doc(&format!("_design/{ddoc}"))
        .await?
        .ok_or_else(|| {
            ReplicatorError::BadRequest(format!(
                "Couldn't open document `_design/{ddoc}` from source database `{}`",
                source.url()
            ))
        })?;
    let code = doc
        .get("filters")
        .and_then(|filters| filters.get(name))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ReplicatorError::BadRequest(format!(
                "Couldn't parse filter code from document {ddoc} on `{}`",
                source.url()
            ))
        })?;
    Ok(Some(code.to_string()))
}

enum Event {
    Batch {
        index: u64,
        last_seq: Value,
        stats: Stats,
    },
    ReaderDone {
        batches: u64,
    },
    Failed(ReplicatorError),
}

struct Batch {
    index: u64,
    rows: Vec<ChangeRow>,
    last_seq: Value,
}

/// The local checkpoint state of a run.
struct Checkpointer {
    log_id: String,
    session_id: String,
    start_seq: Value,
    start_time: String,
    history: Vec<Value>,
    source_rev: Option<String>,
    target_rev: Option<String>,
    committed: Value,
    by_doc_ids: bool,
}

impl Job {
    /// Builds the peers and computes the id (fetching a filter function if there is one).
    /// Local endpoints are reached as `user` (`None`: anonymously), with that user's rights.
    pub async fn prepare(
        env: &JobEnv,
        params: ReplicationParams,
        user: Option<&str>,
    ) -> Result<Job, ReplicatorError> {
        let source = peer(env, &params.source, &params, user)?;
        let target = peer(env, &params.target, &params, user)?;
        let code = filter_code(&source, &params).await?;
        let id = replication_id(&params, &env.server_uuid, code.as_deref());
        let now = unix_secs();
        Ok(Job {
            id,
            params,
            source,
            target,
            progress: Mutex::new(Progress {
                started_on: now,
                updated_on: now,
                ..Progress::default()
            }),
        })
    }

    /// Runs to completion (one-shot) or cancellation; answers like CouchDB's `_replicate`.
    pub async fn run(
        self: &Arc<Self>,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Value, ReplicatorError> {
        let params = &self.params;
        let source_info = self
            .source
            .db_info()
            .await
            .map_err(|error| refused_as_unauthorized(error, &self.source))?
            .ok_or_else(|| ReplicatorError::DbNotFound(params.source.display()))?;
        let target_info = self
            .target
            .db_info()
            .await
            .map_err(|error| refused_as_unauthorized(error, &self.target))?;
        if target_info.is_none() {
            if !params.create_target {
                return Err(ReplicatorError::DbNotFound(params.target.display()));
            }
            self.target
                .create_db(&params.create_target_params)
                .await
                .map_err(|error| refused_as_unauthorized(error, &self.target))?;
        }
        self.progress.lock().source_seq = source_info
            .get("update_seq")
            .cloned()
            .unwrap_or(Value::Null);
        let log_id = self.id.checkpoint_doc_id();
        let (source_log, target_log) = if params.use_checkpoints {
            (
                self.source.get_doc(&log_id).await?,
                self.target.get_doc(&log_id).await?,
            )
        } else {
            (None, None)
        };
        let (resume, history) = compare_logs(source_log.as_ref(), target_log.as_ref());
        let start_seq = resume
            .or_else(|| params.since_seq.clone())
            .unwrap_or(json!(0));
        let mut stats = Stats::from_history(history.first());
        {
            let mut progress = self.progress.lock();
            progress.through_seq = start_seq.clone();
            progress.checkpointed_seq = start_seq.clone();
            progress.stats = stats;
        }
        let rev_of = |doc: &Option<Value>| {
            doc.as_ref()
                .and_then(|doc| doc.get("_rev"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let mut checkpointer = Checkpointer {
            log_id,
            session_id: random_hex(),
            start_seq: start_seq.clone(),
            start_time: httpdate::fmt_http_date(SystemTime::now()),
            history,
            source_rev: rev_of(&source_log),
            target_rev: rev_of(&target_log),
            committed: start_seq.clone(),
            by_doc_ids: matches!(params.filter, Filter::DocIds(_)),
        };
        let (events, mut receiver) = mpsc::unbounded_channel::<Event>();
        let (batches, batch_receiver) = mpsc::channel::<Batch>(params.worker_processes * 2);
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(reader(
            self.clone(),
            start_seq.clone(),
            batches,
            events.clone(),
        ));
        let batch_receiver = Arc::new(tokio::sync::Mutex::new(batch_receiver));
        for _ in 0..params.worker_processes {
            tasks.spawn(worker(self.clone(), batch_receiver.clone(), events.clone()));
        }
        drop(events);
        let mut done: BTreeMap<u64, Value> = BTreeMap::new();
        let mut next_index = 0u64;
        let mut total_batches: Option<u64> = None;
        let mut through = start_seq.clone();
        let mut copied_any = false;
        let mut last_checkpoint = Instant::now();
        let mut ticker =
            tokio::time::interval(params.checkpoint_interval.max(Duration::from_millis(10)));
        let result: Result<(), ReplicatorError> = loop {
            if total_batches == Some(next_index) {
                break Ok(());
            }
            tokio::select! {
                changed = cancel.changed() => {
                    if changed.is_err() || *cancel.borrow() {
                        break Err(ReplicatorError::Cancelled);
                    }
                }
                _ = ticker.tick() => {
                    if through != checkpointer.committed
                        && last_checkpoint.elapsed() >= params.checkpoint_interval
                    {
                        self.checkpoint(&mut checkpointer, &through, &stats).await?;
                        last_checkpoint = Instant::now();
                    }
                }
                event = receiver.recv() => match event {
                    None => break Err(ReplicatorError::Protocol {
                        url: self.source.url().to_string(),
                        reason: "replication tasks ended early".into(),
                    }),
                    Some(Event::Failed(error)) => break Err(error),
                    Some(Event::ReaderDone { batches }) => total_batches = Some(batches),
                    Some(Event::Batch { index, last_seq, stats: batch }) => {
                        copied_any |= batch.missing_checked > 0;
                        stats.add(&batch);
                        done.insert(index, last_seq);
                        while let Some(seq) = done.remove(&next_index) {
                            // Batches cut from the middle of a page carry no position.
                            if !seq.is_null() {
                                through = seq;
                            }
                            next_index += 1;
                        }
                        let mut progress = self.progress.lock();
                        progress.stats = stats;
                        progress.through_seq = through.clone();
                        progress.updated_on = unix_secs();
                    }
                }
            }
        };
        tasks.abort_all();
        match result {
            Ok(()) => {
                // Nothing to do: CouchDB answers with the existing checkpoint. A `doc_ids`
                // replication none of whose documents the source has did nothing either,
                // whatever position the source's feed reached.
                if !copied_any && (through == checkpointer.start_seq || checkpointer.by_doc_ids) {
                    let mut body = source_log.unwrap_or_else(|| json!({}));
                    if let Some(members) = body.as_object_mut() {
                        members.retain(|key, _| !key.starts_with('_'));
                    }
                    body["ok"] = json!(true);
                    body["no_changes"] = json!(true);
                    return Ok(body);
                }
                let mut body = if through != checkpointer.committed {
                    self.checkpoint(&mut checkpointer, &through, &stats).await?
                } else {
                    self.record(&checkpointer, &through, &stats)
                };
                body["ok"] = json!(true);
                Ok(body)
            }
            Err(error) => {
                // Keep what was done: a restarted job then resumes from here.
                if through != checkpointer.committed {
                    let _ = self.checkpoint(&mut checkpointer, &through, &stats).await;
                }
                Err(error)
            }
        }
    }

    fn record(&self, checkpointer: &Checkpointer, through: &Value, stats: &Stats) -> Value {
        let end_time = httpdate::fmt_http_date(SystemTime::now());
        CheckpointRecord {
            session_id: &checkpointer.session_id,
            start_seq: &checkpointer.start_seq,
            through_seq: through,
            start_time: &checkpointer.start_time,
            end_time: &end_time,
            stats,
            previous_history: &checkpointer.history,
            by_doc_ids: checkpointer.by_doc_ids,
        }
        .body()
    }

    /// Writes the checkpoint on both sides (target first, as CouchDB does not care about
    /// order but a lost target write must not let the source claim more than the target has).
    async fn checkpoint(
        &self,
        checkpointer: &mut Checkpointer,
        through: &Value,
        stats: &Stats,
    ) -> Result<Value, ReplicatorError> {
        let body = self.record(checkpointer, through, stats);
        if !self.params.use_checkpoints {
            return Ok(body);
        }
        self.target.ensure_full_commit().await?;
        self.source.ensure_full_commit().await?;
        checkpointer.target_rev = Some(
            put_log(
                &self.target,
                &checkpointer.log_id,
                &body,
                checkpointer.target_rev.take(),
            )
            .await?,
        );
        checkpointer.source_rev = Some(
            put_log(
                &self.source,
                &checkpointer.log_id,
                &body,
                checkpointer.source_rev.take(),
            )
            .await?,
        );
        checkpointer.committed = through.clone();
        self.progress.lock().checkpointed_seq = through.clone();
        Ok(body)
    }
}

/// PUTs a checkpoint document; on a conflict (an earlier attempt landed but its answer was
/// lost, or another job wrote it) it takes the current revision and writes again.
async fn put_log(
    peer: &Peer,
    id: &str,
    body: &Value,
    rev: Option<String>,
) -> Result<String, ReplicatorError> {
    let mut doc = body.clone();
    if let Some(rev) = &rev {
        doc["_rev"] = json!(rev);
    }
    if let Some(rev) = peer.put_doc(id, &doc).await? {
        return Ok(rev);
    }
    let current = peer.get_doc(id).await?;
    let current_rev = current
        .as_ref()
        .and_then(|doc| doc.get("_rev"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut doc = body.clone();
    if let Some(rev) = &current_rev {
        doc["_rev"] = json!(rev);
    }
    peer.put_doc(id, &doc)
        .await?
        .ok_or_else(|| ReplicatorError::Protocol {
            url: format!("{}{id}", peer.url()),
            reason: "checkpoint document conflict".into(),
        })
}

/// Changes read per `_changes` request: several worker batches at once, because each request
/// costs the source a merge of all its vbuckets' streams (CouchDB's replicator streams one
/// long feed and cuts it into batches the same way).
const PAGE_BATCHES: usize = 8;

async fn reader(
    job: Arc<Job>,
    start: Value,
    batches: mpsc::Sender<Batch>,
    events: mpsc::UnboundedSender<Event>,
) {
    let params = &job.params;
    let batch_size = params.worker_batch_size;
    let page_size = batch_size * PAGE_BATCHES;
    let mut since = start;
    let mut index = 0u64;
    let mut caught_up = false;
    loop {
        let longpoll = caught_up && params.continuous;
        let page = match read_page(&job.source, params, &since, page_size, longpoll).await {
            Ok(page) => page,
            Err(error) => {
                let _ = events.send(Event::Failed(error));
                return;
            }
        };
        let full = page.rows.len() >= page_size;
        let moved = page.last_seq != since;
        if !page.rows.is_empty() || moved {
            since = page.last_seq.clone();
            // Only the last batch of a page carries the page's position: a batch's sequence
            // may be checkpointed only once every change before it is written.
            let mut rows = page.rows;
            let mut cut: Vec<Vec<ChangeRow>> = Vec::new();
            while rows.len() > batch_size {
                let rest = rows.split_off(batch_size);
                cut.push(std::mem::replace(&mut rows, rest));
            }
            cut.push(rows);
            let last = cut.len() - 1;
            for (position, rows) in cut.into_iter().enumerate() {
                let batch = Batch {
                    index,
                    rows,
                    last_seq: if position == last {
                        page.last_seq.clone()
                    } else {
                        Value::Null
                    },
                };
                index += 1;
                if batches.send(batch).await.is_err() {
                    return;
                }
            }
        }
        if !full {
            if !params.continuous {
                let _ = events.send(Event::ReaderDone { batches: index });
                return;
            }
            caught_up = true;
        }
    }
}

async fn worker(
    job: Arc<Job>,
    batches: Arc<tokio::sync::Mutex<mpsc::Receiver<Batch>>>,
    events: mpsc::UnboundedSender<Event>,
) {
    let copier = Worker {
        source: &job.source,
        target: &job.target,
        use_bulk_get: job.params.use_bulk_get,
    };
    loop {
        let batch = batches.lock().await.recv().await;
        let Some(batch) = batch else {
            return;
        };
        match copier.copy(&batch.rows).await {
            Ok(stats) => {
                let _ = events.send(Event::Batch {
                    index: batch.index,
                    last_seq: batch.last_seq,
                    stats,
                });
            }
            Err(error) => {
                let _ = events.send(Event::Failed(error));
                return;
            }
        }
    }
}

/// A session id: 32 random hex digits, like CouchDB's `couch_uuids:random()`.
pub fn random_hex() -> String {
    let bytes: [u8; 16] = rand::random();
    settee_engine::hex(&bytes)
}
