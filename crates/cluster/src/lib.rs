//! settee's cluster map, held in a Raft group: the only crate that links `openraft`.
//!
//! The map ([`map::ClusterMap`]: members, buckets, each bucket's vbucket map with epochs) is the
//! state machine of one Raft group; [`command::Command`]s change it, applied by every node in
//! log order (`ClusterMap::apply`, pure). The log, the vote and the map are stored through
//! settee-storage ([`storage`], docs/format/cluster-map.md). The Raft leader is the
//! *orchestrator*: its decisions are pure functions that return a plan ([`placement`],
//! [`failover`], [`voters`], [`detector`], [`orchestrator::decide`], the rebalance planner
//! [`rebalance::plan`]; the rebalance's moves in the map: [`moves`]); [`node::ClusterNode`]
//! executes them. Messages between nodes go
//! through the [`network::Transport`] trait, so a real transport and the deterministic
//! simulation (`tests/simulation.rs`) plug in alike.
//!
//! Start reading at `docs/format/cluster-map.md`, then [`command`], then [`node`].
#![deny(clippy::unwrap_used)]

pub mod codec;
pub mod command;
pub mod detector;
pub mod failover;
pub mod map;
pub mod moves;
pub mod network;
pub mod node;
pub mod orchestrator;
pub mod placement;
pub mod rebalance;
pub mod runtime;
pub mod storage;
pub mod types;
pub mod voters;
pub mod wire;
