//! `settee cluster rebalance`: Couchbase's `couchbase-cli rebalance` against a node's
//! management port: every serving member (`/pools/default`'s `otpNode`s) known, the `--eject`
//! ones leaving; then `/pools/default/rebalanceProgress` polled until it ends.

use std::time::Duration;

use anyhow::Context;
use hyper::{Method, StatusCode};
use serde_json::Value;

use crate::node_client::NodeClient;

#[derive(clap::Args, Debug)]
pub struct RebalanceArgs {
    /// A member's management URL with an admin's credentials, such as
    /// http://admin:secret@127.0.0.1:8091.
    #[arg(long, env = "SETTEE_MGMT_URL")]
    pub mgmt: String,
    /// A member to remove (its `otpNode` as /pools/default lists it, or its node id);
    /// repeatable.
    #[arg(long)]
    pub eject: Vec<String>,
    /// Stops the running rebalance: every vbucket stays wholly at its old or its new place.
    #[arg(long)]
    pub stop: bool,
    /// Returns once the rebalance is committed instead of waiting for its end.
    #[arg(long)]
    pub no_wait: bool,
}

/// Percent-encodes a form value.
fn form_value(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

pub async fn rebalance(args: RebalanceArgs) -> anyhow::Result<()> {
    let node = NodeClient::parse(&args.mgmt, "--mgmt")?;
    if args.stop {
        node.body(
            Method::POST,
            "/controller/stopRebalance",
            Some(String::new()),
            StatusCode::OK,
        )
        .await?;
        println!("the rebalance is stopping");
        return Ok(());
    }
    let pool: Value = node
        .json(Method::GET, "/pools/default", StatusCode::OK)
        .await?;
    let known: Vec<String> = pool["nodes"]
        .as_array()
        .context("/pools/default lists no nodes")?
        .iter()
        .filter_map(|entry| entry["otpNode"].as_str().map(form_value))
        .collect();
    let ejected: Vec<String> = args.eject.iter().map(|name| form_value(name)).collect();
    let form = format!(
        "knownNodes={}&ejectedNodes={}",
        known.join(","),
        ejected.join(",")
    );
    node.body(
        Method::POST,
        "/controller/rebalance",
        Some(form),
        StatusCode::OK,
    )
    .await?;
    println!("rebalance started over {} nodes", known.len());
    if args.no_wait {
        return Ok(());
    }
    loop {
        let progress: Value = node
            .json(
                Method::GET,
                "/pools/default/rebalanceProgress",
                StatusCode::OK,
            )
            .await?;
        if progress["status"] != "running" {
            println!("the rebalance ended");
            return Ok(());
        }
        let shares: Vec<String> = progress
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| {
                let share = value["progress"].as_f64()?;
                Some(format!("{name} {:.0}%", share * 100.0))
            })
            .collect();
        println!("{}", shares.join(", "));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_are_percent_encoded_in_the_form() {
        assert_eq!(form_value("settee-7@127.0.0.1"), "settee-7%40127.0.0.1");
        assert_eq!(form_value("a b,c"), "a%20b%2Cc");
    }
}
