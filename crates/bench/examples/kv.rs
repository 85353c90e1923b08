//! Runs the KV benchmark without the `settee` binary:
//! `cargo run -p settee-bench --release --example kv -- --addr 127.0.0.1:11211`.
//! Takes exactly the flags of `settee bench kv`.

use clap::Parser;
use settee_bench::kv::{run, KvArgs};

#[derive(Parser)]
#[command(about = "memcached binary protocol load generator (same flags as `settee bench kv`)")]
struct Cli {
    #[command(flatten)]
    kv: KvArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(Cli::parse().kv).await?;
    Ok(())
}
