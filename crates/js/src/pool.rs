//! The worker threads and their queue. A job is a closure run against the worker's
//! [`Sandbox`]; its answer comes back on a oneshot channel that both async handlers (await)
//! and indexer threads (block) can wait on.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::runtime::Sandbox;
use crate::{JsConfig, JsError, MapOutput, Program, Validation};

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

pub(crate) struct Worker {
    config: JsConfig,
    /// Built lazily, dropped after a timeout or out-of-memory so the next call gets a clean one.
    sandbox: Option<Sandbox>,
}

impl Worker {
    fn run_program<T>(
        &mut self,
        program: &Program,
        call: impl FnOnce(&mut Sandbox) -> Result<T, JsError>,
    ) -> Result<T, JsError> {
        if self.sandbox.as_ref().is_some_and(Sandbox::is_full) {
            self.sandbox = None;
        }
        let sandbox = match self.sandbox.as_mut() {
            Some(sandbox) => sandbox,
            None => self.sandbox.insert(Sandbox::new(&self.config)?),
        };
        let result = sandbox
            .ensure_loaded(program.id, &program.spec)
            .and_then(|()| call(sandbox));
        if matches!(
            result,
            Err(JsError::Timeout(_) | JsError::OutOfMemory | JsError::Internal(_))
        ) {
            self.sandbox = None;
        }
        result
    }
}

/// The answer to a submitted call: `.wait()` from a plain thread, `.result().await` from async.
pub struct Pending<T>(oneshot::Receiver<Result<T, JsError>>);

impl<T> Pending<T> {
    /// Blocks the calling thread (not an async task) until the answer arrives.
    pub fn wait(self) -> Result<T, JsError> {
        self.0.blocking_recv().unwrap_or(Err(JsError::Closed))
    }

    pub async fn result(self) -> Result<T, JsError> {
        self.0.await.unwrap_or(Err(JsError::Closed))
    }
}

/// A fixed set of worker threads, each with its own QuickJS runtime.
pub struct JsPool {
    /// `None` after shutdown; the mutex guards only the swap, senders are cloned out.
    sender: Mutex<Option<mpsc::SyncSender<Job>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    size: usize,
}

impl JsPool {
    pub fn new(config: JsConfig) -> Result<JsPool, JsError> {
        let size = config.threads.max(1);
        let (sender, receiver) = mpsc::sync_channel::<Job>(config.queue_max.max(1));
        // One queue shared by every worker: whoever is free takes the next job.
        let receiver = Arc::new(Mutex::new(receiver));
        let mut threads = Vec::with_capacity(size);
        for index in 0..size {
            let receiver = receiver.clone();
            let config = config.clone();
            let thread = std::thread::Builder::new()
                .name(format!("settee-js-{index}"))
                .spawn(move || {
                    // QuickJS runtimes are not Send: each is built on, and stays on, its thread.
                    let mut worker = Worker {
                        config,
                        sandbox: None,
                    };
                    loop {
                        let job = receiver.lock().recv();
                        match job {
                            Ok(job) => job(&mut worker),
                            Err(_) => return,
                        }
                    }
                })
                .map_err(|error| JsError::Internal(error.to_string()))?;
            threads.push(thread);
        }
        Ok(JsPool {
            sender: Mutex::new(Some(sender)),
            threads: Mutex::new(threads),
            size,
        })
    }

    /// How many calls can run at once.
    pub fn size(&self) -> usize {
        self.size
    }

    fn submit<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Worker) -> Result<T, JsError> + Send + 'static,
    ) -> Pending<T> {
        let (answer, receiver) = oneshot::channel();
        let job: Job = Box::new(move |worker| {
            let _ = answer.send(job(worker));
        });
        let sender = self.sender.lock().clone();
        if let Some(sender) = sender {
            // A full queue blocks the submitter: back-pressure on indexers and requests.
            let _ = sender.send(job);
        }
        Pending(receiver)
    }

    /// Compiles every function of `program`; `Err(JsError::Compile)` names the first that
    /// does not compile.
    pub fn check(&self, program: Arc<Program>) -> Pending<()> {
        self.submit(move |worker| worker.run_program(&program, |_| Ok(())))
    }

    /// Maps `docs_json` (a JSON array of documents) through every view of `program`.
    pub fn map(&self, program: Arc<Program>, docs_json: String) -> Pending<MapOutput> {
        self.map_within(program, docs_json, Duration::MAX)
    }

    /// [`JsPool::map`] stopped after `limit` if that comes before the pool's time limit.
    pub fn map_within(
        &self,
        program: Arc<Program>,
        docs_json: String,
        limit: Duration,
    ) -> Pending<MapOutput> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call_within("map", (program.id as f64, docs_json), limit)?;
                serde_json::from_str(&text)
                    .map_err(|error| JsError::Internal(format!("map output: {error}")))
            })
        })
    }

    /// Runs view `view`'s JavaScript reduce: `keys_json` is `[[key, docid], ...]` (ignored
    /// when `rereduce`), `values_json` the values (or earlier reductions when `rereduce`).
    pub fn reduce(
        &self,
        program: Arc<Program>,
        view: usize,
        keys_json: String,
        values_json: String,
        rereduce: bool,
    ) -> Pending<Value> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call(
                    "reduce",
                    (
                        program.id as f64,
                        view as f64,
                        keys_json,
                        values_json,
                        rereduce,
                    ),
                )?;
                script_answer(&text)
            })
        })
    }

    /// Runs `program`'s `validate_doc_update` over one write: the documents, `userCtx` and
    /// `secObj` as JSON (`old_doc_json` is `null` for a new document).
    pub fn validate(
        &self,
        program: Arc<Program>,
        new_doc_json: String,
        old_doc_json: String,
        user_ctx_json: String,
        sec_obj_json: String,
    ) -> Pending<Validation> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call(
                    "validate",
                    (
                        program.id as f64,
                        new_doc_json,
                        old_doc_json,
                        user_ctx_json,
                        sec_obj_json,
                    ),
                )?;
                validation_answer(&text)
            })
        })
    }

    /// Runs the render function `name` of kind `kind` ("shows", "lists", "updates") of
    /// `program` (built with the whole design document as `lib`): `first_json` is the
    /// document (`null` for none) or, for a list, `{"head": .., "rows": [..]}`. Answers the
    /// prelude's object: `{"ok": {code, headers, body | base64}}` (an update adds `"doc"`),
    /// or `{"error": name, "reason": text}` for what the function threw.
    pub fn render(
        &self,
        program: Arc<Program>,
        kind: &'static str,
        name: String,
        first_json: String,
        req_json: String,
    ) -> Pending<Value> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call(
                    "render",
                    (program.id as f64, kind, name, first_json, req_json),
                )?;
                let answer: Value = serde_json::from_str(&text)
                    .map_err(|error| JsError::Internal(format!("render output: {error}")))?;
                log_lines(&answer);
                Ok(answer)
            })
        })
    }

    /// Runs the design document's `rewrites` function of `program` (built with the whole
    /// design document as `lib`) over a request object. Answers the prelude's object:
    /// `{"ok": answer}`, `{"no_dispatch": true}` (no rewrite, or the function returned
    /// nothing), or `{"error": name, "reason": text}` for what it threw.
    pub fn rewrite(&self, program: Arc<Program>, req_json: String) -> Pending<Value> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call("rewrite", (program.id as f64, req_json))?;
                let answer: Value = serde_json::from_str(&text)
                    .map_err(|error| JsError::Internal(format!("rewrite output: {error}")))?;
                log_lines(&answer);
                Ok(answer)
            })
        })
    }

    /// Runs the filter function `name` over one document and a request object, stopped after
    /// `limit` if that comes before the pool's time limit. A filter that throws answers
    /// [`JsError::Script`] with the error's `name: message`.
    pub fn filter(
        &self,
        program: Arc<Program>,
        name: String,
        doc_json: String,
        req_json: String,
        limit: Duration,
    ) -> Pending<bool> {
        self.submit(move |worker| {
            worker.run_program(&program, |sandbox| {
                let text = sandbox.call_within(
                    "filter",
                    (program.id as f64, name, doc_json, req_json),
                    limit,
                )?;
                Ok(script_answer(&text)?.as_bool().unwrap_or(false))
            })
        })
    }
}

/// The prelude's `validate` answer.
fn validation_answer(text: &str) -> Result<Validation, JsError> {
    let answer: Value = serde_json::from_str(text)
        .map_err(|error| JsError::Internal(format!("validate output: {error}")))?;
    log_lines(&answer);
    let message = |field: &str| {
        answer
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(if let Some(reason) = message("forbidden") {
        Validation::Forbidden(reason)
    } else if let Some(reason) = message("unauthorized") {
        Validation::Unauthorized(reason)
    } else if let Some(reason) = message("unknown").or_else(|| message("error")) {
        Validation::Failed(reason)
    } else {
        Validation::Allowed
    })
}

fn log_lines(answer: &Value) {
    if let Some(logs) = answer.get("logs").and_then(Value::as_array) {
        for line in logs {
            tracing::info!(target: "settee_js", "{}", line.as_str().unwrap_or_default());
        }
    }
}

/// `{"ok": value}` or `{"error": message}` from the prelude's reduce/filter entry points; logs
/// go to the server log.
fn script_answer(text: &str) -> Result<Value, JsError> {
    let mut answer: Value = serde_json::from_str(text)
        .map_err(|error| JsError::Internal(format!("script output: {error}")))?;
    log_lines(&answer);
    if let Some(error) = answer.get("error") {
        return Err(JsError::Script(
            error.as_str().unwrap_or("reduce failed").to_string(),
        ));
    }
    Ok(answer.get_mut("ok").map(Value::take).unwrap_or(Value::Null))
}

impl Drop for JsPool {
    fn drop(&mut self) {
        // Closing the queue ends every worker after the job it is running.
        self.sender.lock().take();
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}
