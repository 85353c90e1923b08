//! `settee bench http`: GET and PUT throughput and latency of a CouchDB-API server.
//!
//! [`run`] resolves the [`HttpArgs`] into a target (`target.rs`), recreates and preloads the
//! database over one connection (`setup.rs`), then runs each phase (`load.rs`): one tokio task per
//! connection (`connection.rs`), sending requests back to back for a fixed time and counting into
//! a per-task histogram that is merged into a [`PhaseReport`] at the end (`crate::report`, shared
//! with `bench kv`).

pub(crate) mod connection;
mod load;
mod setup;
pub(crate) mod target;

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;

pub use crate::report::{format_json_lines, format_table, PhaseReport};

use load::Workload;
use setup::SetupClient;
use target::Target;

/// More connections than this is a typo, not a benchmark; each one is a task and a socket.
const CONNECTIONS_MAX: usize = 10_000;
/// Preloading more documents than this would take longer than any sensible GET phase.
const DOCS_MAX: usize = 10_000_000;
/// Larger documents measure the network and JSON parsing, not the database.
const DOC_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Which phases [`run`] runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMode {
    /// Only GET preloaded documents.
    Get,
    /// Only PUT new documents.
    Put,
    /// The GET phase, then the PUT phase.
    Both,
}

/// Flags of `settee bench http`.
#[derive(clap::Args, Debug, Clone)]
pub struct HttpArgs {
    /// Server base URL; `http://user:password@host:port` sends basic auth and overrides
    /// --user/--password.
    #[arg(long, default_value = "http://127.0.0.1:5984")]
    pub url: String,
    /// Basic-auth user name; used only together with --password.
    #[arg(long, default_value = "admin")]
    pub user: Option<String>,
    /// Basic-auth password; without it no credentials are sent.
    #[arg(long)]
    pub password: Option<String>,
    /// Database to (re)create and load. It is deleted first.
    #[arg(long, default_value = "bench")]
    pub db: String,
    /// Concurrent keep-alive connections, one task each.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Length of each phase.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// Size of each document's JSON body.
    #[arg(long, default_value_t = 200)]
    pub doc_size_bytes: usize,
    /// Documents preloaded for the GET phase.
    #[arg(long, default_value_t = 10000)]
    pub docs: usize,
    /// Phases to run.
    #[arg(long, value_enum, default_value = "both")]
    pub mode: HttpMode,
    /// Print each phase as one JSON object per line instead of a table (for scripts).
    #[arg(long)]
    pub json: bool,
    /// Query parameters of the `PUT /{db}` that creates the database, e.g. `q=1&n=1` for a
    /// clustered settee bucket with one vbucket and no replica.
    #[arg(long, default_value = "")]
    pub create_params: String,
    /// Keep the database an earlier run created and preloaded (same --db and --docs): no
    /// delete, no create, no preload. Through another node of a cluster, this measures the
    /// same documents read and written through that node.
    #[arg(long)]
    pub reuse_db: bool,
}

/// Runs the benchmark described by `args`, prints the results to stdout (a table, or JSON lines
/// with `--json`) and returns them. Progress goes to stderr.
///
/// `Err` means the benchmark could not run (bad flags, server unreachable, setup rejected);
/// failed requests during a phase are counted in [`PhaseReport::errors`] instead.
pub async fn run(args: HttpArgs) -> anyhow::Result<Vec<PhaseReport>> {
    validate(&args)?;
    let target = Arc::new(Target::from_args(&args)?);
    let runs_get = matches!(args.mode, HttpMode::Get | HttpMode::Both);
    let runs_put = matches!(args.mode, HttpMode::Put | HttpMode::Both);
    let duration = Duration::from_secs(args.duration_secs);

    if !args.reuse_db {
        let mut setup = SetupClient::open(&target).await?;
        setup.recreate_db(&args.create_params).await?;
        if runs_get {
            eprintln!("bench http: preloading {} documents", args.docs);
            setup.preload(args.docs, args.doc_size_bytes).await?;
        }
    }

    let mut reports = Vec::new();
    if runs_get {
        let workload = Arc::new(Workload::get(&target, args.docs)?);
        reports.push(phase("get", &target, workload, &args, duration).await?);
    }
    if runs_put {
        let body = crate::docs::doc_body(args.doc_size_bytes);
        let workload = Arc::new(Workload::put(&target, body, rand::random()));
        reports.push(phase("put", &target, workload, &args, duration).await?);
    }

    if args.json {
        print!("{}", format_json_lines(&reports));
    } else {
        print!("{}", format_table(&reports));
    }
    Ok(reports)
}

async fn phase(
    name: &str,
    target: &Arc<Target>,
    workload: Arc<Workload>,
    args: &HttpArgs,
    duration: Duration,
) -> anyhow::Result<PhaseReport> {
    eprintln!(
        "bench http: {name} phase, {} connections, {} s",
        args.connections, args.duration_secs
    );
    load::run_phase(
        name,
        Arc::clone(target),
        workload,
        args.connections,
        duration,
    )
    .await
}

fn validate(args: &HttpArgs) -> anyhow::Result<()> {
    if args.connections == 0 || args.connections > CONNECTIONS_MAX {
        bail!("--connections must be between 1 and {CONNECTIONS_MAX}");
    }
    if args.docs > DOCS_MAX {
        bail!("--docs must be at most {DOCS_MAX}");
    }
    if args.mode != HttpMode::Put && args.docs == 0 {
        bail!("the get phase needs --docs of at least 1");
    }
    if args.doc_size_bytes > DOC_SIZE_BYTES_MAX {
        bail!("--doc-size-bytes must be at most {DOC_SIZE_BYTES_MAX}");
    }
    Ok(())
}
