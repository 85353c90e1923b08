//! The `settee` binary: `settee serve` runs a node, `settee bench ...` runs the load generators,
//! `settee backup` / `settee restore` copy a node's data out and back.

mod backup;
mod cluster;
mod cluster_buckets;
mod cluster_cli;
mod cluster_designs;
mod cluster_forward;
mod cluster_lease;
mod cluster_manifests;
mod cluster_move_source;
mod cluster_move_target;
mod cluster_moves;
mod cluster_rebalance;
mod cluster_replicas;
mod cluster_topology;
mod config;
mod fd_limit;
mod node_client;
mod node_config;
mod replica;
mod secrets;
mod serve;
mod tls;

use clap::{Parser, Subcommand};

/// jemalloc for every allocation of the process's Rust code (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(
    name = "settee",
    version,
    about = "A JSON document database with CouchDB and Couchbase front doors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the serve settings does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run a node.
    Serve(config::ServeArgs),
    /// Load generators and experiments (see BENCHMARKS.md).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Copy a running node's data into a backup directory (docs/format/backup.md).
    Backup(backup::BackupArgs),
    /// Make a new data directory from one backup.
    Restore(backup::RestoreArgs),
    /// Cluster operations through a member's management port.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Moves vbuckets so that every serving member holds its share (Couchbase's rebalance);
    /// with --eject, members leave.
    Rebalance(cluster_cli::RebalanceArgs),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// GET by id and PUT of new documents over the CouchDB HTTP API.
    Http(settee_bench::http::HttpArgs),
    /// Seed 003: insert time and disk use with random vs CouchDB-sequential document ids.
    Ids(settee_bench::ids::IdsArgs),
    /// GET/SET over the memcached binary protocol (settee's KV door or a plain memcached).
    Kv(settee_bench::kv::KvArgs),
    /// Seed 000's sub-document experiment (cb-perf-tester) against a KV door.
    Subdoc(settee_bench::subdoc::SubdocArgs),
    /// Seed 001: full view-index build time, CPU use and query latency per vbucket count.
    Views(settee_bench::views::ViewsArgs),
    /// Issue 6: time a replication between two databases and check they compare equal.
    Replicate(settee_bench::replicate::ReplicateArgs),
    /// Issue 18: legitimate clients on both doors with and without hostile ones beside them.
    Soak(settee_bench::soak::SoakArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // openraft logs every failed call to an unreachable peer, several lines per
                // retry (5 a second); settee-cluster-net logs a peer going down and coming back
                // once each instead. RUST_LOG=warn,openraft=warn brings openraft's lines back.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,openraft=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    let bench = match cli.command {
        Command::Serve(args) => return serve::main(args),
        Command::Backup(args) => return runtime()?.block_on(backup::backup(args)),
        Command::Restore(args) => return backup::restore(args),
        Command::Cluster(ClusterCommand::Rebalance(args)) => {
            return runtime()?.block_on(cluster_cli::rebalance(args))
        }
        Command::Bench(bench) => bench,
    };
    let runtime = runtime()?;
    runtime.block_on(async move {
        match bench {
            BenchCommand::Http(args) => settee_bench::http::run(args).await.map(|_| ()),
            BenchCommand::Ids(args) => settee_bench::ids::run(args).await.map(|_| ()),
            BenchCommand::Kv(args) => settee_bench::kv::run(args).await.map(|_| ()),
            BenchCommand::Replicate(args) => settee_bench::replicate::run(args).await.map(|_| ()),
            BenchCommand::Subdoc(args) => settee_bench::subdoc::run(args).await.map(|_| ()),
            BenchCommand::Soak(args) => settee_bench::soak::run(args).await,
            BenchCommand::Views(args) => settee_bench::views::run(args).await.map(|_| ()),
        }
    })
}
