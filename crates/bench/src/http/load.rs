//! The timed phases: N tasks, each owning one connection, sending requests back to back.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Uri};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::connection::Connection;
use super::target::Target;
use crate::docs::doc_id;
use crate::report::{PhaseReport, Tally};

/// How long past the end of a phase a task may wait for its last response before it is cut off
/// (and that request counted as an error), so a stalled server cannot hang the bench.
const OVERRUN_LIMIT: Duration = Duration::from_secs(10);
/// Pause after a failed connect, so a dead server is not hammered with connects.
const RECONNECT_DELAY: Duration = Duration::from_millis(50);

/// What the requests of a phase look like.
pub(crate) enum Workload {
    /// GET one of these document URIs, chosen uniformly at random. Built once: cloning a `Uri`
    /// is a reference-count increment, formatting and parsing one is not.
    Get { uris: Vec<Uri> },
    /// PUT `body` as a new document, whose id is `id_prefix` + task + sequence number.
    Put { id_prefix: String, body: Bytes },
}

impl Workload {
    pub(crate) fn get(target: &Target, docs: usize) -> anyhow::Result<Self> {
        let uris = (0..docs)
            .map(|index| Target::uri(format!("{}/{}", target.db_path, doc_id(index))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self::Get { uris })
    }

    /// `run_id` keeps ids unique across runs against a database that was not recreated.
    pub(crate) fn put(target: &Target, body: Bytes, run_id: u64) -> Self {
        Self::Put {
            id_prefix: format!("{}/put-{run_id:016x}-", target.db_path),
            body,
        }
    }

    /// The next request of `task`, whose `path` buffer is reused across calls.
    fn request(
        &self,
        headers: &hyper::HeaderMap,
        task: &mut TaskState,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let (method, uri, body) = match self {
            Workload::Get { uris } => {
                let index = task.rng.random_range(0..uris.len());
                (Method::GET, uris[index].clone(), Bytes::new())
            }
            Workload::Put { id_prefix, body } => {
                task.path.clear();
                task.path.push_str(id_prefix);
                let _ = write!(task.path, "{:04}-{:010}", task.index, task.sequence);
                task.sequence += 1;
                let uri = Uri::try_from(task.path.as_str()).context("invalid document path")?;
                (Method::PUT, uri, body.clone())
            }
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers.clone();
        Ok(request)
    }
}

/// Per-task state the workload needs to make requests.
struct TaskState {
    index: usize,
    sequence: u64,
    rng: SmallRng,
    path: String,
}

/// Runs `workload` over `connections` connections for `duration` and merges what they counted.
///
/// Every task connects first; the clock starts once all of them have connected (or failed to),
/// so connection setup is not part of the measured time.
pub(crate) async fn run_phase(
    name: &str,
    target: Arc<Target>,
    workload: Arc<Workload>,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<PhaseReport> {
    let ready = Arc::new(Barrier::new(connections + 1));
    let mut tasks = JoinSet::new();
    for index in 0..connections {
        let target = Arc::clone(&target);
        let workload = Arc::clone(&workload);
        let ready = Arc::clone(&ready);
        tasks.spawn(async move {
            let mut tally = Tally::new();
            let connection = Connection::open(&target.address).await;
            ready.wait().await;
            let deadline = Instant::now() + duration;
            let task = TaskState {
                index,
                sequence: 0,
                rng: SmallRng::from_rng(&mut rand::rng()),
                path: String::new(),
            };
            let load = drive(&target, &workload, task, connection, deadline, &mut tally);
            match tokio::time::timeout_at((deadline + OVERRUN_LIMIT).into(), load).await {
                Ok(result) => result.map(|()| tally),
                Err(_elapsed) => {
                    tally.errors += 1;
                    Ok(tally)
                }
            }
        });
    }
    ready.wait().await;
    let started = Instant::now();

    let mut total = Tally::new();
    while let Some(joined) = tasks.join_next().await {
        let tally = joined.context("load task panicked")??;
        total.merge(&tally);
    }
    Ok(total.into_report(name, started.elapsed().as_secs_f64()))
}

/// Sends requests back to back until `deadline`, reconnecting after a broken connection.
async fn drive(
    target: &Target,
    workload: &Workload,
    mut task: TaskState,
    first_connection: anyhow::Result<Connection>,
    deadline: Instant,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let mut connection = match first_connection {
        Ok(connection) => Some(connection),
        Err(_) => {
            tally.errors += 1;
            None
        }
    };
    while Instant::now() < deadline {
        if connection.as_ref().is_some_and(Connection::is_closed) {
            connection = None;
        }
        if connection.is_none() {
            match Connection::open(&target.address).await {
                Ok(fresh) => connection = Some(fresh),
                Err(_) => {
                    tally.errors += 1;
                    tokio::time::sleep(RECONNECT_DELAY).await;
                    continue;
                }
            }
        }
        let Some(open) = connection.as_mut() else {
            continue;
        };
        let request = workload.request(&target.headers, &mut task)?;
        let sent = Instant::now();
        match open.exchange(request, None).await {
            Ok(status) => {
                tally.record_latency(sent.elapsed().as_micros() as u64);
                if status.is_success() {
                    tally.ops += 1;
                } else {
                    tally.errors += 1;
                }
            }
            Err(_) => tally.errors += 1,
        }
    }
    Ok(())
}
