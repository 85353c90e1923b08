//! openraft's type configuration for the cluster map's Raft group.

use openraft::BasicNode;

use crate::command::{Applied, Command};
use crate::runtime::ClusterRuntime;

openraft::declare_raft_types!(
    /// The cluster's Raft group: commands in, `Applied` out, node ids are `u64`, a snapshot is
    /// the state machine's encoded bytes (docs/format/cluster-map.md).
    pub TypeConfig:
        D = Command,
        R = Applied,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Vec<u8>,
        AsyncRuntime = ClusterRuntime,
);

/// The Raft handle of a node.
pub type Raft = openraft::Raft<TypeConfig>;
