//! Runs the HTTP benchmark without the `settee` binary:
//! `cargo run -p settee-bench --release --example http -- --url http://127.0.0.1:5984 --json`.
//! Takes exactly the flags of `settee bench http`.

use clap::Parser;
use settee_bench::http::{run, HttpArgs};

#[derive(Parser)]
#[command(about = "CouchDB-API HTTP load generator (same flags as `settee bench http`)")]
struct Cli {
    #[command(flatten)]
    http: HttpArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(Cli::parse().http).await?;
    Ok(())
}
