//! openraft's log storage on a [`Backend`]: the vote, the log entries and the last purged log
//! id, under the keys of docs/format/cluster-map.md. Every write resolves only once the backend
//! made it durable; openraft serialises them, so no two are in flight at once.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};

use crate::codec::{self, Reader, Writer};
use crate::map::NodeId;
use crate::storage::backend::{Backend, Write};
use crate::types::TypeConfig;

const VOTE_KEY: &[u8] = b"vote";
const PURGED_KEY: &[u8] = b"purged";
const LOG_PREFIX: &[u8] = b"log/";

pub(crate) fn log_key(index: u64) -> Vec<u8> {
    [LOG_PREFIX, &index.to_be_bytes()].concat()
}

/// One past the last possible log key.
fn log_end() -> Vec<u8> {
    [LOG_PREFIX, &[0xff; 9]].concat()
}

/// The Raft log of one node. Cloning shares the backend (replication tasks read through clones).
#[derive(Clone)]
pub struct LogStore {
    backend: Arc<dyn Backend>,
}

impl LogStore {
    pub fn new(backend: Arc<dyn Backend>) -> LogStore {
        LogStore { backend }
    }

    fn last_purged(&self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        let Some(bytes) = self.backend.get(PURGED_KEY).map_err(read_error)? else {
            return Ok(None);
        };
        let mut reader = Reader(&bytes);
        reader.version().map_err(read_error)?;
        let log_id = codec::read_log_id(&mut reader).map_err(read_error)?;
        Ok(Some(log_id))
    }
}

fn read_error(error: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::<NodeId>::read_logs(&std::io::Error::other(error.to_string())).into()
}

fn write_error(error: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::<NodeId>::write_logs(&std::io::Error::other(error.to_string())).into()
}

fn vote_error(error: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::<NodeId>::write_vote(&std::io::Error::other(error.to_string())).into()
}

fn bound_start(bound: Bound<&u64>) -> u64 {
    match bound {
        Bound::Included(index) => *index,
        Bound::Excluded(index) => index.saturating_add(1),
        Bound::Unbounded => 0,
    }
}

fn bound_end_key(bound: Bound<&u64>) -> Vec<u8> {
    match bound {
        Bound::Included(index) => match index.checked_add(1) {
            Some(next) => log_key(next),
            None => log_end(),
        },
        Bound::Excluded(index) => log_key(*index),
        Bound::Unbounded => log_end(),
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<openraft::Entry<TypeConfig>>, StorageError<NodeId>> {
        let from = log_key(bound_start(range.start_bound()));
        let to = bound_end_key(range.end_bound());
        self.backend
            .scan(&from, &to)
            .map_err(read_error)?
            .iter()
            .map(|(_, value)| codec::decode_entry(value).map_err(read_error))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged_log_id = self.last_purged()?;
        let last = self
            .backend
            .last(&log_key(0), &log_end())
            .map_err(read_error)?;
        let last_log_id = match last {
            Some((_, value)) => Some(codec::decode_entry(&value).map_err(read_error)?.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let writes = vec![Write::Put(VOTE_KEY.to_vec(), codec::encode_vote(vote))];
        self.backend.write(writes).await.map_err(vote_error)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        match self.backend.get(VOTE_KEY).map_err(vote_error)? {
            Some(bytes) => Ok(Some(codec::decode_vote(&bytes).map_err(vote_error)?)),
            None => Ok(None),
        }
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let writes: Vec<Write> = entries
            .into_iter()
            .map(|entry| Write::Put(log_key(entry.log_id.index), codec::encode_entry(&entry)))
            .collect();
        let result = self.backend.write(writes).await;
        let outcome = result
            .as_ref()
            .map(|_| ())
            .map_err(|failure| std::io::Error::other(failure.to_string()));
        callback.log_io_completed(outcome);
        result.map_err(write_error)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let writes = vec![Write::DeleteRange(log_key(log_id.index), log_end())];
        self.backend.write(writes).await.map_err(write_error)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut purged = Writer::default();
        purged.u8(codec::VERSION);
        codec::write_log_id(&mut purged, &log_id);
        let writes = vec![
            Write::Put(PURGED_KEY.to_vec(), purged.0),
            Write::DeleteRange(log_key(0), bound_end_key(Bound::Included(&log_id.index))),
        ];
        self.backend.write(writes).await.map_err(write_error)
    }
}
