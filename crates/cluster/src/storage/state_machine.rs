//! openraft's state machine on a [`Backend`]: the cluster map, the last applied log id and the
//! last membership, written whole after every applied batch (`cluster/sm`), and the last
//! snapshot (`cluster/snapshot`). A restart reads the map back without replaying the log.
//!
//! Every applied map is published on a `watch` channel: that is how the rest of a node (and
//! the simulation's checks) follows the committed map.

use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use tokio::sync::watch;

use crate::codec::{self, DecodeError, Reader, Writer};
use crate::command::Applied;
use crate::map::{ClusterMap, NodeId};
use crate::storage::backend::{Backend, Write};
use crate::types::TypeConfig;

const STATE_KEY: &[u8] = b"sm";
const SNAPSHOT_KEY: &[u8] = b"snapshot";

/// What the state machine holds; its encoding is also a snapshot's data.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub applied: Option<LogId<NodeId>>,
    pub membership: StoredMembership<NodeId, BasicNode>,
    pub map: ClusterMap,
}

impl State {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(codec::VERSION);
        codec::write_optional_log_id(&mut w, &self.applied);
        codec::write_stored_membership(&mut w, &self.membership);
        codec::write_map(&mut w, &self.map);
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<State, DecodeError> {
        let mut r = Reader(bytes);
        r.version()?;
        let applied = codec::read_optional_log_id(&mut r)?;
        let membership = codec::read_stored_membership(&mut r)?;
        let map = codec::read_map(&mut r)?;
        r.end()?;
        Ok(State {
            applied,
            membership,
            map,
        })
    }
}

fn encode_snapshot(id: &str, state: &[u8]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(codec::VERSION);
    w.str(id);
    w.0.extend_from_slice(state);
    w.0
}

fn decode_snapshot(bytes: &[u8]) -> Result<(String, Vec<u8>), DecodeError> {
    let mut r = Reader(bytes);
    r.version()?;
    let id = r.str()?;
    Ok((id, r.0.to_vec()))
}

fn snapshot_of(id: String, state_bytes: Vec<u8>) -> Result<Snapshot<TypeConfig>, DecodeError> {
    let state = State::decode(&state_bytes)?;
    Ok(Snapshot {
        meta: SnapshotMeta {
            last_log_id: state.applied,
            last_membership: state.membership,
            snapshot_id: id,
        },
        snapshot: Box::new(state_bytes),
    })
}

fn io_error(error: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::<NodeId>::write_state_machine(&std::io::Error::other(error.to_string())).into()
}

fn read_error(error: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::<NodeId>::read_state_machine(&std::io::Error::other(error.to_string())).into()
}

pub struct StateMachine {
    backend: Arc<dyn Backend>,
    state: State,
    published: watch::Sender<Arc<ClusterMap>>,
}

/// The map as last applied and stored in `backend` (empty if none), read without starting Raft:
/// what a node checks before it rejoins its peers.
pub fn stored_map(backend: &dyn Backend) -> Result<ClusterMap, StorageError<NodeId>> {
    Ok(stored_state(backend)?.map)
}

fn stored_state(backend: &dyn Backend) -> Result<State, StorageError<NodeId>> {
    match backend.get(STATE_KEY).map_err(read_error)? {
        Some(bytes) => State::decode(&bytes).map_err(read_error),
        None => Ok(State::default()),
    }
}

impl StateMachine {
    /// Opens the state machine stored in `backend` (empty if none).
    pub fn open(backend: Arc<dyn Backend>) -> Result<StateMachine, StorageError<NodeId>> {
        let state = stored_state(backend.as_ref())?;
        let (published, _) = watch::channel(Arc::new(state.map.clone()));
        Ok(StateMachine {
            backend,
            state,
            published,
        })
    }

    /// Follows the applied map: the current one, then each one applied after it.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterMap>> {
        self.published.subscribe()
    }

    async fn persist(&self, extra: Option<Write>) -> Result<(), StorageError<NodeId>> {
        let mut writes = vec![Write::Put(STATE_KEY.to_vec(), self.state.encode())];
        writes.extend(extra);
        self.backend.write(writes).await.map_err(io_error)
    }

    fn publish(&self) {
        self.published
            .send_replace(Arc::new(self.state.map.clone()));
    }
}

/// Builds a snapshot from a copy of the state taken when openraft asked for the builder.
pub struct SnapshotBuilder {
    backend: Arc<dyn Backend>,
    state: State,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let bytes = self.state.encode();
        let id = match &self.state.applied {
            Some(log_id) => format!(
                "{}-{}-{}",
                log_id.leader_id.term, log_id.index, self.state.map.revision
            ),
            None => "empty".to_owned(),
        };
        let stored = encode_snapshot(&id, &bytes);
        self.backend
            .write(vec![Write::Put(SNAPSHOT_KEY.to_vec(), stored)])
            .await
            .map_err(io_error)?;
        snapshot_of(id, bytes).map_err(io_error)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((self.state.applied, self.state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut outcomes = Vec::new();
        for entry in entries {
            self.state.applied = Some(entry.log_id);
            let outcome = match &entry.payload {
                EntryPayload::Blank => Applied::Revision(self.state.map.revision),
                EntryPayload::Normal(command) => self.state.map.apply(command),
                EntryPayload::Membership(membership) => {
                    self.state.membership =
                        StoredMembership::new(Some(entry.log_id), membership.clone());
                    Applied::Revision(self.state.map.revision)
                }
            };
            outcomes.push(outcome);
        }
        self.persist(None).await?;
        self.publish();
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            backend: self.backend.clone(),
            state: self.state.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Vec<u8>>, StorageError<NodeId>> {
        Ok(Box::default())
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Vec<u8>>,
    ) -> Result<(), StorageError<NodeId>> {
        let state = State::decode(&snapshot).map_err(read_error)?;
        if state.applied != meta.last_log_id {
            return Err(read_error("snapshot data does not match its meta"));
        }
        self.state = state;
        let stored = encode_snapshot(&meta.snapshot_id, &snapshot);
        self.persist(Some(Write::Put(SNAPSHOT_KEY.to_vec(), stored)))
            .await?;
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let Some(bytes) = self.backend.get(SNAPSHOT_KEY).map_err(read_error)? else {
            return Ok(None);
        };
        let (id, state) = decode_snapshot(&bytes).map_err(read_error)?;
        Ok(Some(snapshot_of(id, state).map_err(read_error)?))
    }
}
