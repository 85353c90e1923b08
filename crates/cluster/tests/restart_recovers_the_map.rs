//! The Raft group's storage on settee-storage survives a restart: the log, the vote, the map
//! and the snapshot are read back from RocksDB, and the node carries on from them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use settee_cluster::command::{Applied, BucketSettings, Command};
use settee_cluster::failover::ReplicaSeqno;
use settee_cluster::map::{Durability, Member, NodeId};
use settee_cluster::network::{Request, SendFuture, Transport, TransportError};
use settee_cluster::node::{ClusterNode, NodeConfig};
use settee_cluster::orchestrator::SeqnoSource;
use settee_cluster::storage::StoreBackend;
use settee_storage::{Store, StoreOptions};

/// A node alone: there is nobody to send to.
struct Alone;

impl Transport for Alone {
    fn send(&self, _from: NodeId, target: NodeId, _addr: &str, _request: Request) -> SendFuture {
        Box::pin(async move { Err(TransportError::Unreachable(target)) })
    }
}

impl SeqnoSource for Alone {
    fn fence_and_report(
        &self,
        _node: NodeId,
        _bucket: &str,
        _vbuckets: Vec<(u16, u64)>,
    ) -> Pin<Box<dyn Future<Output = Option<Vec<ReplicaSeqno>>> + Send>> {
        Box::pin(async { None })
    }
}

fn member(id: NodeId) -> Member {
    let host = format!("127.0.0.{id}");
    Member::joining(
        id,
        format!("{host}:7000"),
        format!("{host}:5984"),
        format!("{host}:11210"),
    )
}

fn options() -> StoreOptions {
    StoreOptions {
        block_cache_bytes: 8 << 20,
        row_cache_bytes: 0,
        background_jobs: 1,
        ..StoreOptions::default()
    }
}

/// A collection `name` in the `_default` scope of the test's bucket.
fn create_collection(name: &str) -> Command {
    Command::ChangeManifest {
        name: "beer-sample".into(),
        change: settee_manifest::ManifestChange::CreateCollection {
            scope: "_default".into(),
            name: name.into(),
            max_ttl: None,
        },
        limits: settee_manifest::ManifestLimits {
            scopes_max: 100,
            collections_max: 100,
        },
    }
}

async fn start(store: &Arc<Store>) -> ClusterNode {
    let mut config = NodeConfig::new(member(1));
    // A snapshot after a few entries, so the restart also reads a snapshot and a purged log.
    config.snapshot_logs = 4;
    ClusterNode::start(
        config,
        Arc::new(StoreBackend::new(store.clone())),
        Arc::new(Alone),
        Arc::new(Alone),
    )
    .await
    .expect("node starts")
}

async fn until_leader(node: &ClusterNode) {
    for _ in 0..200 {
        if node.raft().metrics().borrow().state == ServerState::Leader {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("node 1 did not lead its one-node cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_vote_map_and_snapshot_come_back_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(Store::open(dir.path(), &options()).expect("store opens"));
    let node = start(&store).await;
    node.bootstrap().await.expect("bootstrap");
    until_leader(&node).await;
    let settings = BucketSettings {
        name: "beer-sample".into(),
        vbucket_count: 1024,
        replicas: 1,
        durability_min: Durability::Majority,
        copies: Default::default(),
    };
    assert!(matches!(
        node.create_bucket(&settings).await,
        Ok(Applied::Revision(2))
    ));
    for index in 1..=6 {
        let command = create_collection(&format!("c{index}"));
        assert!(matches!(
            node.propose(command).await,
            Ok(Applied::Revision(_))
        ));
    }
    let map = node.map();
    let metrics = node.raft().metrics().borrow().clone();
    assert_eq!(map.revision, 8);
    assert_eq!(map.buckets["beer-sample"].manifest.uid(), 6);
    assert!(
        metrics.snapshot.is_some(),
        "a snapshot was built: {metrics:?}"
    );
    node.shutdown().await;
    drop(node);
    // openraft's last tasks let go of the storage as they wind down; RocksDB opens a directory
    // once at a time.
    for _ in 0..200 {
        if Arc::strong_count(&store) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(Arc::strong_count(&store), 1, "the store is still held");
    drop(store);

    let store = Arc::new(Store::open(dir.path(), &options()).expect("store reopens"));
    let node = start(&store).await;
    // The map is back before any log entry is replayed or any election held.
    assert_eq!(*node.map(), *map);
    // openraft publishes what it read back once its core runs: wait for the same last index.
    let again = node
        .raft()
        .wait(Some(Duration::from_secs(5)))
        .log_index(metrics.last_log_index, "the log read back")
        .await
        .expect("the log comes back whole");
    assert!(again.current_term >= metrics.current_term);
    assert!(node
        .raft()
        .get_snapshot()
        .await
        .expect("snapshot read")
        .is_some());
    until_leader(&node).await;
    let command = create_collection("c7");
    assert_eq!(
        node.propose(command).await.expect("commits"),
        Applied::Revision(9)
    );
    // A collection made before the restart still exists: the whole state came back, not
    // just the revision.
    let stale = create_collection("c3");
    assert!(matches!(
        node.propose(stale).await,
        Ok(Applied::Rejected(_))
    ));
    node.shutdown().await;
}
