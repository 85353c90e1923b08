//! JavaScript changes filters: `filter=ddoc/name` runs the design document's
//! `filters.name(doc, req)`, and `filter=_view&view=ddoc/name` keeps documents the view's map
//! function emits at least one row for. Both run on the node's JavaScript pool (`settee-js`,
//! the only crate that links QuickJS); a design document's program is compiled once per
//! revision and cached.
//!
//! A request's filter calls share one time budget ([`FilterBudget`]: a normal feed's whole
//! scan, or each batch of a longpoll/continuous feed), and each call is stopped when the
//! budget runs out (the pool's interrupt handler frees the core). A filter that throws or
//! runs out of time fails the request as CouchDB's query server does: 500 with the error's
//! name, or `os_process_error`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::designs::DesignDoc;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use settee_engine::Keyspace;
use settee_js::{JsPool, Program, ProgramSpec};

use crate::error::{ApiError, ApiResult};
use crate::request::Req;

/// Programs cached per node (design documents whose filters are in use).
const PROGRAMS_MAX: usize = 256;

/// (database, design document id, revision, function).
type ProgramKey = (String, String, String, String);

/// Compiled filter programs, run on the node's JavaScript pool (the one the view indexer
/// uses: one set of runtimes sized to the cores, one CPU-time and memory limit).
pub struct JsFilters {
    pool: Arc<JsPool>,
    programs: Mutex<HashMap<ProgramKey, Arc<Program>>>,
}

/// A filter ready to run.
#[derive(Clone)]
pub struct JsFilter {
    pool: Arc<JsPool>,
    program: Arc<Program>,
    kind: Kind,
    /// `ddoc/name` or `_view ddoc/name`, for the log.
    label: String,
}

/// What is left of the time one `_changes` request (or one batch of a longpoll/continuous
/// feed) may spend in JavaScript filter calls, waiting for the pool included.
#[derive(Clone, Copy, Debug)]
pub struct FilterBudget {
    total: Duration,
    remaining: Duration,
}

impl FilterBudget {
    pub fn new(total: Duration) -> FilterBudget {
        FilterBudget {
            total,
            remaining: total,
        }
    }

    /// A fresh budget for the next batch of a longpoll or continuous feed.
    pub fn renew(&mut self) {
        self.remaining = self.total;
    }

    fn exhausted(&self) -> ApiError {
        ApiError::OsProcess(format!(
            "OS process timed out: the filter ran past this request's {} ms",
            self.total.as_millis()
        ))
    }
}

#[derive(Clone)]
enum Kind {
    /// `filters.<name>` with the request object as JSON text.
    Function { name: String, req: String },
    /// The map function of one view.
    View,
}

impl std::fmt::Debug for JsFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("JsFilter")
    }
}

fn bad(reason: impl Into<String>) -> ApiError {
    ApiError::BadRequest(reason.into())
}

impl JsFilters {
    pub fn new(pool: Arc<JsPool>) -> JsFilters {
        JsFilters {
            pool,
            programs: Mutex::default(),
        }
    }

    /// The filter's program from design document `ddoc`: the copy the front node of a
    /// scattered feed carried (`carried`), else this node's.
    fn program(
        &self,
        keyspace: &Keyspace,
        ddoc: &str,
        carried: Option<&[u8]>,
        function: &str,
        spec: impl FnOnce(&Map<String, Value>) -> ApiResult<ProgramSpec>,
    ) -> ApiResult<Arc<Program>> {
        let id = format!("_design/{ddoc}");
        let design = match carried.and_then(|json| DesignDoc::carried(json, &id)) {
            Some(design) => design,
            None => crate::designs::read_local(keyspace, ddoc).map_err(|error| match error {
                ApiError::NotFound(reason) => {
                    ApiError::NotFound(format!("{reason} design document"))
                }
                other => other,
            })?,
        };
        let key = (
            keyspace.name().to_string(),
            id,
            design.rev.clone(),
            function.to_string(),
        );
        if let Some(program) = self.programs.lock().get(&key) {
            return Ok(program.clone());
        }
        let body = design.body;
        let mut spec = spec(&body)?;
        spec.lib = Value::Object(body);
        let program = Arc::new(Program::new(&spec));
        self.pool
            .check(program.clone())
            .wait_outside_runtime()
            .map_err(|error| bad(format!("compilation of the filter failed: {error}")))?;
        let mut programs = self.programs.lock();
        if programs.len() >= PROGRAMS_MAX {
            programs.clear();
        }
        programs.insert(key, program.clone());
        Ok(program)
    }

    /// `filter=ddoc/name`; `node` is this node's name (in the request object's `info`).
    pub fn function(
        &self,
        keyspace: &Keyspace,
        req: &Req,
        filter: &str,
        body: &Value,
        node: &str,
    ) -> ApiResult<JsFilter> {
        let (ddoc, name) = filter
            .split_once('/')
            .ok_or_else(|| bad("`filter` parameter is not a proper filter name"))?;
        let carried = req.design.as_deref();
        let program = self.program(keyspace, ddoc, carried, &format!("filters/{name}"), |doc| {
            let source = doc
                .get("filters")
                .and_then(|filters| filters.get(name))
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::NotFound(format!("missing json key: {name}")))?;
            let mut spec = ProgramSpec::default();
            spec.filters.insert(name.to_string(), source.to_string());
            Ok(spec)
        })?;
        Ok(JsFilter {
            pool: self.pool.clone(),
            program,
            kind: Kind::Function {
                name: name.to_string(),
                req: crate::design_fns::request_object(
                    keyspace,
                    req,
                    crate::design_fns::RequestParts {
                        id: None,
                        uuid: None,
                        body: (!body.is_null()).then(|| body.to_string()),
                        node,
                    },
                )
                .to_string(),
            },
            label: filter.to_string(),
        })
    }

    /// `filter=_view&view=ddoc/name`.
    pub fn view(
        &self,
        keyspace: &Keyspace,
        carried: Option<&[u8]>,
        view: &str,
    ) -> ApiResult<JsFilter> {
        let (ddoc, name) = view
            .split_once('/')
            .ok_or_else(|| bad("`view` filter parameter is not provided."))?;
        let program = self.program(keyspace, ddoc, carried, &format!("views/{name}"), |doc| {
            let source = doc
                .get("views")
                .and_then(|views| views.get(name))
                .and_then(|view| view.get("map"))
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::NotFound(format!("missing json key: {name}")))?;
            Ok(ProgramSpec {
                names: vec![name.to_string()],
                maps: vec![source.to_string()],
                reduces: vec![None],
                ..ProgramSpec::default()
            })
        })?;
        Ok(JsFilter {
            pool: self.pool.clone(),
            program,
            kind: Kind::View,
            label: format!("_view {view}"),
        })
    }
}

impl JsFilter {
    /// Whether `doc_json` (the document as the feed would show it) passes, spending from
    /// `budget`. A filter (or a `_view` filter's map function) that throws, or the budget
    /// running out, fails the request as CouchDB does; both are logged.
    pub fn passes(&self, doc_json: String, budget: &mut FilterBudget) -> ApiResult<bool> {
        if budget.remaining.is_zero() {
            return Err(self.failed(budget.exhausted()));
        }
        let started = Instant::now();
        let limit = budget.remaining;
        let answer = match &self.kind {
            Kind::Function { name, req } => self
                .pool
                .filter(
                    self.program.clone(),
                    name.clone(),
                    doc_json,
                    req.clone(),
                    limit,
                )
                .wait_outside_runtime(),
            Kind::View => self
                .pool
                .map_within(self.program.clone(), format!("[{doc_json}]"), limit)
                .wait_outside_runtime()
                .and_then(|output| match output.errors.into_iter().next() {
                    Some((_, _, message)) => Err(settee_js::JsError::Script(message)),
                    None => Ok(output
                        .rows
                        .first()
                        .and_then(|views| views.first())
                        .is_some_and(|rows| !rows.is_empty())),
                }),
        };
        budget.remaining = budget.remaining.saturating_sub(started.elapsed());
        answer.map_err(|error| {
            self.failed(match error {
                settee_js::JsError::Timeout(_) => budget.exhausted(),
                settee_js::JsError::Script(message) => script_error(&message),
                other => ApiError::OsProcess(other.to_string()),
            })
        })
    }

    fn failed(&self, error: ApiError) -> ApiError {
        tracing::warn!(filter = %self.label, %error, "changes filter failed");
        error
    }
}

/// JavaScript's own error types, which CouchDB reports as the `error` of a failed filter.
const JS_ERROR_NAMES: [&str; 9] = [
    "Error",
    "EvalError",
    "RangeError",
    "ReferenceError",
    "SyntaxError",
    "TypeError",
    "URIError",
    "InternalError",
    "AggregateError",
];

/// A thrown error as the sandbox describes it (`Name: message`) in CouchDB's shape: the name
/// as `error` (`unnamed_error` when it is not one of JavaScript's), the message as `reason`.
fn script_error(message: &str) -> ApiError {
    match message.split_once(": ") {
        Some((name, reason)) => match JS_ERROR_NAMES.iter().find(|known| **known == name) {
            Some(name) => ApiError::JsThrew {
                name,
                reason: reason.to_string(),
            },
            None => ApiError::JsThrew {
                name: "unnamed_error",
                reason: message.to_string(),
            },
        },
        None => ApiError::JsThrew {
            name: "unnamed_error",
            reason: message.to_string(),
        },
    }
}

/// Waiting for the pool from a feed task: the task may block its worker thread (the pool runs
/// elsewhere), which tokio allows inside `block_in_place` on its multi-threaded runtime.
trait WaitOutsideRuntime<T> {
    fn wait_outside_runtime(self) -> Result<T, settee_js::JsError>;
}

impl<T: Send> WaitOutsideRuntime<T> for settee_js::Pending<T> {
    fn wait_outside_runtime(self) -> Result<T, settee_js::JsError> {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.wait())
            }
            Ok(_) => Err(settee_js::JsError::Internal(
                "JavaScript filters need the multi-threaded runtime".into(),
            )),
            Err(_) => self.wait(),
        }
    }
}
