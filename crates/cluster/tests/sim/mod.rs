//! The deterministic simulation of the orchestrator (issue 20, Tests): openraft and
//! settee-cluster's own node code on a paused tokio clock and a simulated network.

pub mod checks;
pub mod model;
pub mod network;
pub mod world;
