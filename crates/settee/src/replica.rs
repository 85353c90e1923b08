//! `--replica-of KVADDR/BUCKET[/VBUCKETS]`: the interim hook that makes this node follow
//! vbuckets of another node's bucket (docs/format/replica.md) until the cluster map assigns
//! replicas. Prints each connection's stream starts and failures, for people and tests.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::Context;
use settee_engine::Engine;
use settee_replica::{ReplicaConfig, Replicator, ReplicatorHandle};

use crate::config::Settings;

/// `all` (None) or a list of vbuckets and ranges: `0-3,7`.
fn parse_vbuckets(text: &str) -> anyhow::Result<Option<BTreeSet<u16>>> {
    if text == "all" {
        return Ok(None);
    }
    let mut set = BTreeSet::new();
    for part in text.split(',') {
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (low, high): (u16, u16) = (low.trim().parse()?, high.trim().parse()?);
        anyhow::ensure!(low <= high, "vbucket range {part} is backwards");
        set.extend(low..=high);
    }
    Ok(Some(set))
}

/// The replicator `--replica-of` asks for, started on the current runtime.
pub fn start(
    settings: &Settings,
    engine: &Arc<Engine>,
) -> anyhow::Result<Option<ReplicatorHandle>> {
    let Some(cluster) = &settings.cluster else {
        return Ok(None);
    };
    let Some(spec) = &cluster.replica_of else {
        return Ok(None);
    };
    let mut parts = spec.splitn(3, '/');
    let (Some(addr), Some(bucket)) = (parts.next(), parts.next()) else {
        anyhow::bail!("--replica-of takes KVADDR/BUCKET[/VBUCKETS]");
    };
    let vbuckets = parse_vbuckets(parts.next().unwrap_or("all"))
        .with_context(|| format!("--replica-of {spec}: vbuckets"))?
        .unwrap_or_else(|| (0..settee_engine::vbucket::VBUCKETS_MAX).collect());
    let handle = Replicator::start(
        engine.clone(),
        ReplicaConfig {
            bucket: bucket.to_string(),
            source_kv_addr: addr.to_string(),
            secret: cluster.secret.clone(),
            node_name: settings.node_name.clone(),
            vbucket_count: None,
            node_id: None,
        },
        vbuckets,
    );
    let mut requested = handle.requested();
    let mut failures = handle.failures();
    let bucket = bucket.to_string();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = requested.changed() => {
                    if changed.is_err() { return; }
                    let starts: Vec<String> = requested
                        .borrow_and_update()
                        .iter()
                        .map(|(vbucket, seqno)| format!("{vbucket}:{seqno}"))
                        .collect();
                    println!("settee replica of {bucket}: streams from {}", starts.join(","));
                }
                changed = failures.changed() => {
                    if changed.is_err() { return; }
                    if let Some(error) = failures.borrow_and_update().clone() {
                        println!("settee replica of {bucket}: connection failed: {error}");
                    }
                }
            }
        }
    });
    Ok(Some(handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vbucket_lists_parse() {
        assert_eq!(parse_vbuckets("all").expect("all"), None);
        let set = parse_vbuckets("0-3,7").expect("list").expect("some");
        assert_eq!(set, BTreeSet::from([0, 1, 2, 3, 7]));
        assert!(parse_vbuckets("3-1").is_err());
        assert!(parse_vbuckets("x").is_err());
    }
}
