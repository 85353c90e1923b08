//! `settee bench soak`: legitimate clients on both doors while hostile ones attack (issue 18).
//!
//! The run alternates windows of `--window-secs`: a *baseline* window with only the legitimate
//! clients, then a *hostile* window with the same legitimate clients plus every hostile client
//! of `hostile.rs` (slow readers, half-open and slowloris connections, stalled and endless
//! bodies, oversize, over-deep and malformed requests, a revoked user, failed logins), until the
//! hostile windows add up to `--minutes`. Alternating keeps the two phases on the same data size
//! and the same machine state, so their ratio says what the hostile clients cost.
//!
//! Legitimate clients (`legit.rs`) are closed-loop: each HTTP connection and each KV connection
//! sends one request at a time, 80% reads of preloaded documents and 20% writes of new ones.
//! Every acknowledged write is appended to `--acked`; `--verify FILE` later checks that each of
//! them is there (the script `scripts/soak` does it after a kill -9 and a restart).
//!
//! The server's resident memory is sampled from `/proc/PID/status` (`--server-pid`), and the
//! peak of each phase is reported.

mod hostile;
mod legit;
mod rss;
mod verify;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::http::target::Target;
use crate::http::HttpArgs;
use crate::report::{PhaseReport, Tally};

/// Documents every legitimate reader reads, `pre-00000000` ..
const PRELOADED_DOCS: usize = 1000;
/// The document the slow readers ask for again and again without reading the answers.
const BIG_DOC_BYTES: usize = 4 * 1024 * 1024;
/// A window shorter than this measures connection setup more than load.
const WINDOW_SECS_MIN: u64 = 5;

/// Flags of `settee bench soak`.
#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// HTTP base URL of the node.
    #[arg(long, default_value = "http://127.0.0.1:5984")]
    pub url: String,
    /// KV address of the node.
    #[arg(long, default_value = "127.0.0.1:11210")]
    pub kv_addr: String,
    /// A server admin (the legitimate clients and the setup use it).
    #[arg(long, default_value = "admin")]
    pub user: String,
    #[arg(long, default_value = "secret")]
    pub password: String,
    /// Database (bucket) the run recreates and loads.
    #[arg(long, default_value = "soak")]
    pub db: String,
    /// Total time of the hostile windows; the baseline windows take as long again.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Length of each window.
    #[arg(long, default_value_t = 60)]
    pub window_secs: u64,
    /// Legitimate HTTP connections, one request in flight each.
    #[arg(long, default_value_t = 8)]
    pub http_connections: usize,
    /// Legitimate KV connections, one request in flight each.
    #[arg(long, default_value_t = 8)]
    pub kv_connections: usize,
    /// PID of the server, for its memory (VmRSS) per phase.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Append every acknowledged write's key here, one per line.
    #[arg(long)]
    pub acked: Option<PathBuf>,
    /// Do not run: check that every key listed in this file is stored (exit status 1 if any is
    /// missing).
    #[arg(long)]
    pub verify: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Where the clients connect and how they authenticate, resolved once.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    pub(crate) http: Target,
    pub(crate) kv_addr: String,
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) db: String,
}

impl Endpoints {
    fn from_args(args: &SoakArgs) -> anyhow::Result<Endpoints> {
        let http_args = HttpArgs {
            url: args.url.clone(),
            user: Some(args.user.clone()),
            password: Some(args.password.clone()),
            db: args.db.clone(),
            connections: 1,
            duration_secs: 1,
            doc_size_bytes: 200,
            docs: 0,
            mode: crate::http::HttpMode::Get,
            json: false,
            create_params: String::new(),
            reuse_db: false,
        };
        Ok(Endpoints {
            http: Target::from_args(&http_args)?,
            kv_addr: args.kv_addr.clone(),
            user: args.user.clone(),
            password: args.password.clone(),
            db: args.db.clone(),
        })
    }
}

/// What one phase (all of its windows together) measured.
#[derive(Debug, Clone)]
pub struct PhaseSummary {
    pub name: &'static str,
    pub http: PhaseReport,
    pub kv: PhaseReport,
    /// Highest VmRSS of the server seen during the phase, in bytes.
    pub peak_rss_bytes: u64,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct SoakReport {
    pub baseline: PhaseSummary,
    pub hostile: PhaseSummary,
    pub hostile_clients: Vec<hostile::HostileCount>,
    /// Writes the server acknowledged during the whole run.
    pub acknowledged_writes: u64,
    /// Acknowledged writes missing when the run ended (before any restart).
    pub lost_writes: u64,
}

/// Runs the soak (or, with `--verify`, only the check) and prints its summary.
pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let endpoints = Arc::new(Endpoints::from_args(&args)?);
    if let Some(path) = &args.verify {
        let keys = verify::read_keys(path)?;
        let missing = verify::missing(&endpoints, &keys).await?;
        println!(
            "soak verify: {} acknowledged writes, {} missing",
            keys.len(),
            missing.len()
        );
        for key in missing.iter().take(20) {
            println!("  missing: {key}");
        }
        if !missing.is_empty() {
            bail!("{} acknowledged writes are missing", missing.len());
        }
        return Ok(());
    }
    raise_open_files_limit();
    if args.window_secs < WINDOW_SECS_MIN {
        bail!("--window-secs must be at least {WINDOW_SECS_MIN}");
    }
    if args.minutes.is_nan()
        || args.minutes <= 0.0
        || args.http_connections == 0
        || args.kv_connections == 0
    {
        bail!("--minutes and the connection counts must be positive");
    }
    let report = soak(&args, endpoints).await?;
    if args.json {
        println!("{}", to_json(&report));
    } else {
        print!("{}", format_report(&report));
    }
    if report.lost_writes > 0 {
        bail!("{} acknowledged writes are missing", report.lost_writes);
    }
    Ok(())
}

async fn soak(args: &SoakArgs, endpoints: Arc<Endpoints>) -> anyhow::Result<SoakReport> {
    eprintln!("soak: setting up {}", endpoints.db);
    let mut setup = legit::Setup::open(&endpoints).await?;
    setup.recreate_db(PRELOADED_DOCS, BIG_DOC_BYTES).await?;
    hostile::prepare(&mut setup).await?;
    drop(setup);

    let rss = args.server_pid.map(rss::Sampler::start);
    let mut acked_file = match &args.acked {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?,
        ),
        None => None,
    };
    let hostile_total = Duration::from_secs_f64(args.minutes * 60.0);
    let window = Duration::from_secs(args.window_secs);
    let mut phases = [
        (Tally::new(), Tally::new(), Duration::ZERO),
        (Tally::new(), Tally::new(), Duration::ZERO),
    ];
    let counters = Arc::new(hostile::Counters::default());
    let mut acked_keys: Vec<String> = Vec::new();
    let mut round = 0usize;
    while phases[1].2 < hostile_total {
        let length = window.min(hostile_total - phases[1].2);
        if length < Duration::from_secs(1) {
            break;
        }
        for (index, with_hostile) in [(0usize, false), (1, true)] {
            if let Some(rss) = &rss {
                rss.set_phase(index);
            }
            eprintln!(
                "soak: window {} {} ({} s)",
                round + 1,
                if with_hostile { "hostile" } else { "baseline" },
                length.as_secs()
            );
            let hostile_tasks =
                with_hostile.then(|| hostile::start(endpoints.clone(), counters.clone(), round));
            let started = Instant::now();
            let outcome = legit::run_window(
                &endpoints,
                args.http_connections,
                args.kv_connections,
                PRELOADED_DOCS,
                2 * round + index,
                length,
            )
            .await;
            let elapsed = started.elapsed();
            if let Some(tasks) = hostile_tasks {
                tasks.stop().await;
            }
            let (http, kv, _) = &mut phases[index];
            http.merge(&outcome.http);
            kv.merge(&outcome.kv);
            phases[index].2 += elapsed;
            if let Some(file) = acked_file.as_mut() {
                use std::io::Write as _;
                for key in &outcome.acked {
                    writeln!(file, "{key}").context("writing the acknowledged keys")?;
                }
                file.flush().context("writing the acknowledged keys")?;
            }
            acked_keys.extend(outcome.acked);
        }
        round += 1;
    }
    let peaks = rss.map(|rss| rss.stop()).unwrap_or([0, 0]);
    eprintln!("soak: checking {} acknowledged writes", acked_keys.len());
    let lost = verify::missing(&endpoints, &acked_keys).await?;
    let [baseline, hostile] = phases;
    Ok(SoakReport {
        baseline: summary("baseline", baseline, peaks[0]),
        hostile: summary("hostile", hostile, peaks[1]),
        hostile_clients: counters.snapshot(),
        acknowledged_writes: acked_keys.len() as u64,
        lost_writes: lost.len() as u64,
    })
}

/// The hostile clients hold several hundred sockets; lift the soft open-files limit to the
/// hard one so that it is the server's limits that are tested, not this process's.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn summary(
    name: &'static str,
    phase: (Tally, Tally, Duration),
    peak_rss_bytes: u64,
) -> PhaseSummary {
    let (http, kv, elapsed) = phase;
    let seconds = elapsed.as_secs_f64();
    PhaseSummary {
        name,
        http: http.into_report("http", seconds),
        kv: kv.into_report("kv", seconds),
        peak_rss_bytes,
    }
}

fn ratio(hostile: f64, baseline: f64) -> f64 {
    if baseline > 0.0 {
        hostile / baseline
    } else {
        0.0
    }
}

fn format_report(report: &SoakReport) -> String {
    let mut out = format!(
        "{:<9} {:>11} {:>9} {:>7} {:>11} {:>9} {:>7} {:>9}\n",
        "phase", "http ops/s", "http p99", "errors", "kv ops/s", "kv p99", "errors", "peak RSS"
    );
    for phase in [&report.baseline, &report.hostile] {
        let _ = writeln!(
            out,
            "{:<9} {:>11.0} {:>7}us {:>7} {:>11.0} {:>7}us {:>7} {:>7}MB",
            phase.name,
            phase.http.ops_per_sec,
            phase.http.p99_us,
            phase.http.errors,
            phase.kv.ops_per_sec,
            phase.kv.p99_us,
            phase.kv.errors,
            phase.peak_rss_bytes / (1024 * 1024)
        );
    }
    let _ = writeln!(
        out,
        "hostile/baseline throughput: http {:.3}x, kv {:.3}x; p99: http {:.2}x, kv {:.2}x",
        ratio(
            report.hostile.http.ops_per_sec,
            report.baseline.http.ops_per_sec
        ),
        ratio(
            report.hostile.kv.ops_per_sec,
            report.baseline.kv.ops_per_sec
        ),
        ratio(
            report.hostile.http.p99_us as f64,
            report.baseline.http.p99_us as f64
        ),
        ratio(
            report.hostile.kv.p99_us as f64,
            report.baseline.kv.p99_us as f64
        ),
    );
    let _ = writeln!(
        out,
        "acknowledged writes: {}, lost: {}",
        report.acknowledged_writes, report.lost_writes
    );
    let _ = writeln!(
        out,
        "hostile clients (what they tried, what the server did):"
    );
    for count in &report.hostile_clients {
        let _ = writeln!(out, "  {count}");
    }
    out
}

fn to_json(report: &SoakReport) -> serde_json::Value {
    let phase = |phase: &PhaseSummary| {
        serde_json::json!({
            "http": phase.http.to_json(),
            "kv": phase.kv.to_json(),
            "peak_rss_bytes": phase.peak_rss_bytes,
        })
    };
    serde_json::json!({
        "baseline": phase(&report.baseline),
        "hostile": phase(&report.hostile),
        "http_throughput_ratio": ratio(report.hostile.http.ops_per_sec, report.baseline.http.ops_per_sec),
        "kv_throughput_ratio": ratio(report.hostile.kv.ops_per_sec, report.baseline.kv.ops_per_sec),
        "acknowledged_writes": report.acknowledged_writes,
        "lost_writes": report.lost_writes,
        "hostile_clients": report.hostile_clients.iter().map(|count| count.to_json()).collect::<Vec<_>>(),
    })
}
