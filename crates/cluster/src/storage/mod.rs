//! The Raft group's storage: the log and vote ([`LogStore`]) and the state machine
//! ([`StateMachine`]), both over one [`Backend`].

// openraft's `StorageError` is what its storage traits return, large as it is.
#![allow(clippy::result_large_err)]

pub mod backend;
mod log_store;
mod state_machine;

pub use backend::{Backend, MemoryBackend, StoreBackend, Write};
pub use log_store::LogStore;
pub use state_machine::{stored_map, SnapshotBuilder, State, StateMachine};
