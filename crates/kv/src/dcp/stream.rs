//! One vbucket's stream on a DCP connection: snapshots of the `seq` range, each announced by a
//! marker and read a chunk at a time, until the end seqno (docs/format/dcp.md, "What a stream
//! sends"). A stream holds at most one chunk of entries; documents are read as they are sent.

use std::collections::{BTreeSet, VecDeque};

use settee_engine::{Bucket, EngineError, StreamEntry, SystemEventKind};
use settee_kv_codec::dcp::{
    encode_seqno_advanced, encode_snapshot_marker, encode_stream_end, end_reason, snapshot_flags,
    Route,
};

use super::item::{encode_event, encode_item, encode_purge_marker, encode_record, ValueOptions};

/// Entries read from the vbucket at a time.
const CHUNK_ENTRIES: usize = 64;

/// Which of the vbucket's entries this stream sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Not collection-aware: collection 0's documents, no events.
    DefaultCollection,
    /// Collection-aware, every collection and every event.
    Everything,
    /// These collections (and the events about them); with `scope`, also that scope's events
    /// and collections created in it later.
    Collections {
        ids: BTreeSet<u32>,
        scope: Option<u32>,
    },
}

impl Selection {
    /// Whether the stream sends `entry`; follows the filter's collections as they are created
    /// in its scope or dropped.
    fn admit(&mut self, entry: &StreamEntry) -> bool {
        match (self, entry) {
            (Selection::DefaultCollection, StreamEntry::Change(change)) => change.collection == 0,
            (Selection::DefaultCollection, StreamEntry::Event(_)) => false,
            (Selection::DefaultCollection, StreamEntry::Purge(marker)) => marker.collection == 0,
            (Selection::Collections { ids, .. }, StreamEntry::Purge(marker)) => {
                ids.contains(&marker.collection)
            }
            (Selection::Everything, _) => true,
            (Selection::Collections { ids, .. }, StreamEntry::Change(change)) => {
                ids.contains(&change.collection)
            }
            (Selection::Collections { ids, scope }, StreamEntry::Event(event)) => {
                let in_scope = *scope == Some(event.scope_id);
                match event.kind {
                    SystemEventKind::CollectionCreated if in_scope => {
                        ids.insert(event.collection_id);
                        true
                    }
                    SystemEventKind::CollectionDropped => ids.remove(&event.collection_id),
                    SystemEventKind::ScopeCreated | SystemEventKind::ScopeDropped => in_scope,
                    _ => ids.contains(&event.collection_id),
                }
            }
        }
    }

    /// A filter left with nothing to stream (its collections or scope dropped).
    fn is_empty_after(&self, entry: &StreamEntry) -> bool {
        match (self, entry) {
            (
                Selection::Collections {
                    scope: Some(scope), ..
                },
                StreamEntry::Event(event),
            ) => event.kind == SystemEventKind::ScopeDropped && event.scope_id == *scope,
            (Selection::Collections { ids, scope: None }, StreamEntry::Event(_)) => ids.is_empty(),
            _ => false,
        }
    }
}

/// What one step of a stream did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Wrote a message, or read entries to send next.
    Progress,
    /// Nothing to send until the vbucket's high seqno moves.
    Waiting,
    /// Wrote its STREAM_END: remove it.
    Ended,
}

#[derive(Debug)]
pub(crate) struct Stream {
    pub route: Route,
    end: u64,
    selection: Selection,
    /// The start of the first marker (the request's start) until it is sent.
    first_marker: Option<u64>,
    /// Everything up to here has been read from the vbucket.
    read_to: u64,
    /// The end of the snapshot being sent; `read_to == snapshot_end` and no pending entries
    /// between snapshots.
    snapshot_end: u64,
    /// The seqno of the last message sent in the current snapshot.
    last_sent: u64,
    pending: VecDeque<StreamEntry>,
    /// A SEQNO_ADVANCED is owed once the current snapshot's entries are sent.
    advance_owed: bool,
    /// Scratch space for keys.
    key_buf: Vec<u8>,
}

impl Stream {
    pub(crate) fn new(route: Route, start: u64, end: u64, selection: Selection) -> Stream {
        Stream {
            route,
            end,
            selection,
            first_marker: Some(start),
            read_to: start,
            snapshot_end: start,
            last_sent: start,
            pending: VecDeque::new(),
            advance_owed: false,
            key_buf: Vec::new(),
        }
    }

    /// Whether the stream would write something if stepped now, without reading anything.
    pub(crate) fn may_progress(&self, high_seqno: u64) -> bool {
        !self.pending.is_empty()
            || self.read_to < self.snapshot_end
            || self.advance_owed
            || self.read_to >= self.end
            || high_seqno.min(self.end) > self.read_to
    }

    /// Writes at most one message (or reads the next chunk) into `out`.
    pub(crate) fn step(
        &mut self,
        bucket: &Bucket,
        options: ValueOptions,
        out: &mut Vec<u8>,
    ) -> Result<Step, EngineError> {
        if let Some(entry) = self.pending.pop_front() {
            return self.send(bucket, options, entry, out);
        }
        if self.read_to < self.snapshot_end {
            self.read_chunk(bucket)?;
            return Ok(Step::Progress);
        }
        if self.advance_owed {
            self.advance_owed = false;
            if self.last_sent < self.snapshot_end {
                encode_seqno_advanced(out, self.route, self.snapshot_end);
                self.last_sent = self.snapshot_end;
            }
            return Ok(Step::Progress);
        }
        if self.read_to >= self.end {
            encode_stream_end(out, self.route, end_reason::OK);
            return Ok(Step::Ended);
        }
        let high = bucket.high_seqnos().get(self.route.vbucket).min(self.end);
        if high <= self.read_to {
            return Ok(Step::Waiting);
        }
        let (start, flags) = match self.first_marker.take() {
            Some(start) => (start, snapshot_flags::DISK | snapshot_flags::CHECKPOINT),
            None => (
                self.read_to + 1,
                snapshot_flags::MEMORY | snapshot_flags::CHECKPOINT,
            ),
        };
        encode_snapshot_marker(out, self.route, start, high, flags);
        self.snapshot_end = high;
        // Only a collection-aware stream learns of seqnos it was not sent.
        self.advance_owed = self.selection != Selection::DefaultCollection;
        Ok(Step::Progress)
    }

    /// Reads the next entries of the current snapshot.
    fn read_chunk(&mut self, bucket: &Bucket) -> Result<(), EngineError> {
        let entries = bucket.vbucket_stream(self.route.vbucket, self.read_to, CHUNK_ENTRIES)?;
        let whole = entries.len() < CHUNK_ENTRIES;
        for entry in entries {
            if entry.seqno() > self.snapshot_end {
                self.read_to = self.snapshot_end;
                return Ok(());
            }
            self.read_to = entry.seqno();
            self.pending.push_back(entry);
        }
        if whole {
            // The range has nothing more up to the snapshot's end (entries of documents
            // written again since have moved past it).
            self.read_to = self.snapshot_end;
        }
        Ok(())
    }

    fn send(
        &mut self,
        bucket: &Bucket,
        options: ValueOptions,
        entry: StreamEntry,
        out: &mut Vec<u8>,
    ) -> Result<Step, EngineError> {
        if !self.selection.admit(&entry) {
            return Ok(Step::Progress);
        }
        match &entry {
            StreamEntry::Change(change) if options.records => {
                let Some(record) = bucket.replica_record(change)? else {
                    return Ok(Step::Progress);
                };
                encode_record(out, self.route, change, &record, &mut self.key_buf);
            }
            StreamEntry::Change(change) => {
                let Some(item) = bucket.stream_item(change)? else {
                    return Ok(Step::Progress);
                };
                encode_item(out, self.route, options, change, &item, &mut self.key_buf);
            }
            StreamEntry::Event(event) => {
                if event.kind == SystemEventKind::CollectionModified {
                    return Ok(Step::Progress);
                }
                encode_event(out, self.route, event, options.records);
            }
            // Only a replica learns of purges (replica.md); other consumers get the seqno
            // through the snapshot's SEQNO_ADVANCED, as for an entry they filter out.
            StreamEntry::Purge(marker) if options.records => {
                encode_purge_marker(out, self.route, marker, &mut self.key_buf);
            }
            StreamEntry::Purge(_) => return Ok(Step::Progress),
        }
        self.last_sent = entry.seqno();
        if self.selection.is_empty_after(&entry) {
            encode_stream_end(out, self.route, end_reason::FILTER_EMPTY);
            return Ok(Step::Ended);
        }
        Ok(Step::Progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_engine::{ChangeEntry, RevId, SystemEvent};

    fn change(collection: u32) -> StreamEntry {
        StreamEntry::Change(ChangeEntry {
            vbucket: 0,
            seqno: 1,
            cas: 1,
            deleted: false,
            collection,
            key: b"k".to_vec(),
            rev: RevId::new(1, "a"),
        })
    }

    fn event(kind: SystemEventKind, scope_id: u32, collection_id: u32) -> StreamEntry {
        StreamEntry::Event(SystemEvent {
            vbucket: 0,
            seqno: 2,
            cas: 2,
            kind,
            manifest_uid: 1,
            scope_id,
            collection_id,
            max_ttl: None,
            name: String::new(),
        })
    }

    #[test]
    fn selections_follow_their_collections() {
        let mut plain = Selection::DefaultCollection;
        assert!(plain.admit(&change(0)) && !plain.admit(&change(8)));
        assert!(!plain.admit(&event(SystemEventKind::CollectionCreated, 0, 8)));

        let mut two = Selection::Collections {
            ids: BTreeSet::from([8, 9]),
            scope: None,
        };
        assert!(two.admit(&change(8)) && !two.admit(&change(0)));
        assert!(!two.admit(&event(SystemEventKind::CollectionCreated, 0, 10)));
        let drop8 = event(SystemEventKind::CollectionDropped, 0, 8);
        assert!(two.admit(&drop8) && !two.is_empty_after(&drop8));
        let drop9 = event(SystemEventKind::CollectionDropped, 0, 9);
        assert!(two.admit(&drop9) && two.is_empty_after(&drop9));

        let mut scope = Selection::Collections {
            ids: BTreeSet::new(),
            scope: Some(8),
        };
        assert!(scope.admit(&event(SystemEventKind::CollectionCreated, 8, 12)));
        assert!(scope.admit(&change(12)));
        assert!(!scope.admit(&event(SystemEventKind::CollectionCreated, 9, 13)));
        let gone = event(SystemEventKind::ScopeDropped, 8, 0);
        assert!(scope.admit(&gone) && scope.is_empty_after(&gone));
    }
}
