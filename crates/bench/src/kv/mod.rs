//! `settee bench kv`: GET/SET throughput and latency over the memcached binary protocol, against
//! settee's Couchbase KV door or a plain memcached (`scripts/bench-kv-vs-memcached.sh` runs both).
//!
//! [`run`] resolves the [`KvArgs`], asks the server for its vbucket count when it is a Couchbase
//! style server (`client.rs`: HELLO, SCRAM, SELECT_BUCKET, GET_CLUSTER_CONFIG), then starts
//! `--threads` OS threads, each with a single-threaded tokio runtime and one task per connection
//! (`run.rs`). Every connection SETs its share of the keys (the load phase), then keeps
//! `--pipeline` requests in flight for the warm-up and the measured time (`load.rs`). Counts merge
//! into one [`PhaseReport`] per operation, printed like `bench http`'s, with the bench's own CPU
//! time per operation.

pub(crate) mod client;
pub(crate) mod keys;
mod load;
mod run;

use anyhow::bail;
use settee_engine::durability::Level;

pub use crate::report::{format_json_lines, format_table, PhaseReport};
pub use client::SaslMechanism;

/// More connections than this is a typo, not a benchmark; each one is a task and a socket.
const CONNECTIONS_MAX: usize = 10_000;
/// settee keeps at most 4096 requests of one connection queued before it stops reading it.
const PIPELINE_MAX: usize = 4096;
/// Keys are `doc-` and eight digits.
const KEYS_MAX: usize = 99_999_999;
/// Couchbase's largest value.
const VALUE_SIZE_BYTES_MAX: usize = 20 * 1024 * 1024;
const THREADS_MAX: usize = 256;
/// Used when the server hands out no vbucket map and `--vbuckets` is not given: Couchbase's
/// default on Linux.
const VBUCKETS_DEFAULT: u16 = 1024;

/// Flags of `settee bench kv`.
#[derive(clap::Args, Debug, Clone)]
pub struct KvArgs {
    /// Server KV address.
    #[arg(long, default_value = "127.0.0.1:11210")]
    pub addr: String,
    /// Concurrent connections, one task each.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Requests each connection keeps in flight.
    #[arg(long, default_value_t = 16)]
    pub pipeline: usize,
    /// Fraction of requests that are GETs (0.0..=1.0); the rest are SETs.
    #[arg(long, default_value_t = 1.0)]
    pub get_ratio: f64,
    /// Size of every value; values are JSON, `{"v":"xxx..."}` (at least 9 bytes).
    #[arg(
        long = "value-size",
        visible_alias = "value-size-bytes",
        default_value_t = 200
    )]
    pub value_size_bytes: usize,
    /// Distinct keys (`doc-00000000` ..), chosen uniformly at random.
    #[arg(long, default_value_t = 65_536)]
    pub keys: usize,
    /// Measured seconds; 0 runs only the load phase.
    #[arg(
        long = "duration",
        visible_alias = "duration-secs",
        default_value_t = 10
    )]
    pub duration_secs: u64,
    /// Seconds of load before measuring starts (not counted).
    #[arg(long = "warmup", visible_alias = "warmup-secs", default_value_t = 2)]
    pub warmup_secs: u64,
    /// SASL user. With it, each connection does the Couchbase handshake (HELLO, SASL,
    /// SELECT_BUCKET, GET_CLUSTER_CONFIG); without it, the plain memcached dialect (no HELLO, no
    /// auth).
    #[arg(long)]
    pub user: Option<String>,
    /// SASL password; needs --user.
    #[arg(long)]
    pub password: Option<String>,
    /// SASL mechanism.
    #[arg(long, value_enum, default_value = "SCRAM-SHA512")]
    pub sasl_mechanism: SaslMechanism,
    /// Bucket to SELECT_BUCKET after authenticating.
    #[arg(long)]
    pub bucket: Option<String>,
    /// Collection `scope.collection` to read and write (HELLO Collections, its id from
    /// GET_COLLECTION_ID, then the id in LEB128 before every key); default `_default._default`
    /// with bare keys. Needs --user.
    #[arg(long)]
    pub collection: Option<String>,
    /// Skip the load phase (SET of every key); the keys must already be there.
    #[arg(long)]
    pub no_load: bool,
    /// vbucket count for the vbucket field of requests (`crc32` of the key, as the SDKs do).
    /// A Couchbase-style server's cluster map wins; without either, 1024. memcached ignores the
    /// field.
    #[arg(long)]
    pub vbuckets: Option<u16>,
    /// Ask for HELLO UnorderedExecution (replies may come back in any order); needs --user.
    #[arg(long)]
    pub unordered: bool,
    /// Load-generator threads, each running a share of the connections. One is usually enough
    /// and leaves the most CPU to a server on the same machine.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Print one JSON object per phase per line instead of a table (for scripts).
    #[arg(long)]
    pub json: bool,
    /// Durability level of every SET (the durability framing extra): none, majority,
    /// majorityAndPersistActive or persistToMajority. Needs --user.
    #[arg(long, default_value = "none", value_parser = parse_level)]
    pub durability: Level,
    /// Use only keys whose vbucket is active on --addr in the server's cluster map (one node of
    /// a cluster answers NOT_MY_VBUCKET for the others).
    #[arg(long)]
    pub active_only: bool,
}

fn parse_level(name: &str) -> Result<Level, String> {
    Level::from_name(name).ok_or_else(|| {
        "one of none, majority, majorityAndPersistActive, persistToMajority".to_string()
    })
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct KvReport {
    /// `load` (the initial SETs, unless --no-load), then `get` and/or `set` of the measured time.
    pub phases: Vec<PhaseReport>,
    /// The vbucket count the requests were addressed with.
    pub vbuckets: u16,
    /// HELLO features the server accepted.
    pub features: Vec<u16>,
    /// CPU seconds (user + system) this process used during the measured time.
    pub client_cpu_seconds: f64,
    /// `client_cpu_seconds` per measured reply, in microseconds.
    pub client_cpu_us_per_op: f64,
    /// Connections that broke, stalled or were closed by the server.
    pub failed_connections: usize,
    /// Failed replies by operation and status, e.g. `("GET", 0x0001, 12)`; a GET that returned a
    /// value of the wrong length is listed with status 0.
    pub failures: Vec<(&'static str, u16, u64)>,
}

/// Runs the benchmark described by `args`, prints the results to stdout (a table, or JSON lines
/// with `--json`) and returns them. Progress and failures go to stderr.
///
/// `Err` means the benchmark could not run (bad flags, server unreachable, handshake refused);
/// failed requests are counted in [`PhaseReport::errors`] instead.
pub async fn run(args: KvArgs) -> anyhow::Result<KvReport> {
    validate(&args)?;
    let report = run::run(&args).await?;
    print(&args, &report);
    Ok(report)
}

fn print(args: &KvArgs, report: &KvReport) {
    if args.json {
        for phase in &report.phases {
            let mut line = phase.to_json();
            if phase.name != "load" {
                line["client_cpu_us_per_op"] = serde_json::json!(report.client_cpu_us_per_op);
                line["connections"] = serde_json::json!(args.connections);
                line["pipeline"] = serde_json::json!(args.pipeline);
            }
            println!("{line}");
        }
    } else {
        print!("{}", format_table(&report.phases));
        if args.duration_secs > 0 {
            println!(
                "client CPU: {:.2} us per op ({:.0}% of one core)",
                report.client_cpu_us_per_op,
                100.0 * report.client_cpu_seconds / args.duration_secs as f64
            );
        }
    }
    for (operation, status, count) in &report.failures {
        eprintln!("bench kv: {count} {operation} replies with status 0x{status:04x}");
    }
    if report.failed_connections > 0 {
        eprintln!(
            "bench kv: {} of {} connections failed (see above)",
            report.failed_connections, args.connections
        );
    }
}

fn validate(args: &KvArgs) -> anyhow::Result<()> {
    if args.connections == 0 || args.connections > CONNECTIONS_MAX {
        bail!("--connections must be between 1 and {CONNECTIONS_MAX}");
    }
    if args.pipeline == 0 || args.pipeline > PIPELINE_MAX {
        bail!("--pipeline must be between 1 and {PIPELINE_MAX}");
    }
    if !(0.0..=1.0).contains(&args.get_ratio) {
        bail!("--get-ratio must be between 0.0 and 1.0");
    }
    if args.value_size_bytes > VALUE_SIZE_BYTES_MAX {
        bail!("--value-size must be at most {VALUE_SIZE_BYTES_MAX}");
    }
    if args.keys == 0 || args.keys > KEYS_MAX {
        bail!("--keys must be between 1 and {KEYS_MAX}");
    }
    if args.threads == 0 || args.threads > THREADS_MAX {
        bail!("--threads must be between 1 and {THREADS_MAX}");
    }
    if args.vbuckets == Some(0) {
        bail!("--vbuckets must be at least 1");
    }
    if args.password.is_some() != args.user.is_some() {
        bail!("--user and --password go together");
    }
    if args.user.is_none()
        && (args.bucket.is_some()
            || args.unordered
            || args.active_only
            || args.durability.is_sync())
    {
        bail!(
            "--bucket, --unordered, --active-only and --durability need the Couchbase \
             handshake, i.e. --user"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn parse(argv: &[&str]) -> anyhow::Result<KvArgs> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
        validate(&cli.kv)?;
        Ok(cli.kv)
    }

    #[test]
    fn defaults_are_a_pipelined_get_load_of_200_byte_values() {
        let args = parse(&[]).expect("defaults are valid");
        assert_eq!(args.addr, "127.0.0.1:11210");
        assert_eq!((args.connections, args.pipeline), (16, 16));
        assert_eq!((args.get_ratio, args.value_size_bytes), (1.0, 200));
        assert_eq!(args.sasl_mechanism, SaslMechanism::ScramSha512);
        assert!(args.user.is_none() && args.vbuckets.is_none());
    }

    #[test]
    fn inconsistent_flags_are_refused() {
        assert!(parse(&["--get-ratio", "1.5"]).is_err());
        assert!(parse(&["--pipeline", "0"]).is_err());
        assert!(parse(&["--user", "admin"]).is_err());
        assert!(parse(&["--bucket", "default"]).is_err());
        assert!(parse(&["--vbuckets", "0"]).is_err());
        let args = parse(&[
            "--user",
            "admin",
            "--password",
            "secret",
            "--bucket",
            "default",
            "--sasl-mechanism",
            "SCRAM-SHA256",
            "--value-size-bytes",
            "1000",
            "--duration-secs",
            "3",
        ])
        .expect("valid");
        assert_eq!(args.sasl_mechanism, SaslMechanism::ScramSha256);
        assert_eq!((args.value_size_bytes, args.duration_secs), (1000, 3));
    }
}
