//! One QuickJS runtime with the sandbox prelude loaded: the unit a pool worker owns.
//!
//! Limits: the interrupt handler stops any call that runs past its deadline (QuickJS raises an
//! uncatchable exception), and the runtime's allocator refuses memory past its limit. After
//! either, the worker throws the runtime away and builds a fresh one, so a runaway function
//! cannot leave a half-broken heap behind.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rquickjs::function::IntoArgs;
use rquickjs::{Context, Function, Object, Runtime};

use crate::{JsConfig, JsError};

const PRELUDE: &str = include_str!("prelude.js");
/// A runtime that has loaded this many programs is replaced, so edited design documents do not
/// pile up compiled functions forever.
const PROGRAMS_PER_RUNTIME_MAX: usize = 256;
/// Deadline value meaning "no call running".
const NO_DEADLINE: u64 = u64::MAX;

pub(crate) struct Sandbox {
    // Field order matters: the context must be dropped before its runtime.
    context: Context,
    _runtime: Runtime,
    epoch: Instant,
    /// Nanoseconds since `epoch` after which the interrupt handler stops the running call;
    /// shared with the handler, which QuickJS calls from inside the interpreter loop.
    deadline: Arc<AtomicU64>,
    timeout: Duration,
    loaded: HashSet<u64>,
}

impl Sandbox {
    pub fn new(config: &JsConfig) -> Result<Sandbox, JsError> {
        let runtime = Runtime::new().map_err(internal)?;
        runtime.set_memory_limit(config.memory_bytes_max);
        runtime.set_max_stack_size(config.stack_bytes_max);
        let epoch = Instant::now();
        let deadline = Arc::new(AtomicU64::new(NO_DEADLINE));
        let handler_deadline = deadline.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            (epoch.elapsed().as_nanos() as u64) > handler_deadline.load(Ordering::Relaxed)
        })));
        let context = Context::full(&runtime).map_err(internal)?;
        context
            .with(|ctx| ctx.eval::<(), _>(PRELUDE))
            .map_err(internal)?;
        Ok(Sandbox {
            context,
            _runtime: runtime,
            epoch,
            deadline,
            timeout: Duration::from_millis(config.timeout_ms),
            loaded: HashSet::new(),
        })
    }

    /// Whether this sandbox should be replaced before loading another program.
    pub fn is_full(&self) -> bool {
        self.loaded.len() >= PROGRAMS_PER_RUNTIME_MAX
    }

    /// Compiles the program into this runtime unless it already is.
    pub fn ensure_loaded(&mut self, id: u64, spec: &str) -> Result<(), JsError> {
        if self.loaded.contains(&id) {
            return Ok(());
        }
        let answer = self.call("load", (id as f64, spec.to_string()))?;
        if !answer.is_empty() {
            return Err(JsError::Compile(answer));
        }
        self.loaded.insert(id);
        Ok(())
    }

    /// Calls `__settee[entry](args)`, which returns a string, under the time limit.
    pub fn call<A>(&mut self, entry: &str, args: A) -> Result<String, JsError>
    where
        A: for<'js> IntoArgs<'js>,
    {
        self.call_within(entry, args, self.timeout)
    }

    /// [`Sandbox::call`] stopped after `limit` when that is shorter than the time limit (what
    /// is left of a caller's own budget, e.g. one `_changes` request's).
    pub fn call_within<A>(
        &mut self,
        entry: &str,
        args: A,
        limit: Duration,
    ) -> Result<String, JsError>
    where
        A: for<'js> IntoArgs<'js>,
    {
        let timeout = self.timeout.min(limit);
        let timeout_ns = timeout.as_nanos() as u64;
        let start = self.epoch.elapsed().as_nanos() as u64;
        self.deadline
            .store(start.saturating_add(timeout_ns), Ordering::Relaxed);
        let epoch = self.epoch;
        let deadline = self.deadline.clone();
        let result = self.context.with(|ctx| {
            let entries: Object = ctx.globals().get("__settee").map_err(internal)?;
            let function: Function = entries.get(entry).map_err(internal)?;
            match function.call::<A, String>(args) {
                Ok(answer) => Ok(answer),
                Err(error) => {
                    let timed_out =
                        epoch.elapsed().as_nanos() as u64 > deadline.load(Ordering::Relaxed);
                    let message = if error.is_exception() {
                        let caught = ctx.catch();
                        caught
                            .as_exception()
                            .map(|exception| exception.message().unwrap_or_default())
                            .or_else(|| caught.as_string().and_then(|s| s.to_string().ok()))
                            .unwrap_or_else(|| format!("{caught:?}"))
                    } else {
                        error.to_string()
                    };
                    Err(if timed_out {
                        JsError::Timeout(timeout.as_millis() as u64)
                    } else if message.contains("out of memory") {
                        JsError::OutOfMemory
                    } else {
                        JsError::Internal(message)
                    })
                }
            }
        });
        self.deadline.store(NO_DEADLINE, Ordering::Relaxed);
        result
    }
}

fn internal(error: rquickjs::Error) -> JsError {
    JsError::Internal(error.to_string())
}
