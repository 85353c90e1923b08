//! One replica vbucket's stream: what its STREAM_REQ asks for (from the persisted seqno and
//! snapshot), and the items received since the last batch, applied through
//! `Bucket::apply_replica` at a snapshot's end or when the batch is full (replica.md).

use bytes::Bytes;
use settee_engine::{
    Bucket, PurgeMarker, ReplicaBatch, ReplicaDoc, ReplicaItem, SystemEvent, SystemEventKind,
};
use settee_kv_codec::dcp::ItemMeta;
use settee_kv_codec::dcp_records::{
    event_kind, parse_event_value, parse_record_value, split_collection_key,
};

use crate::ReplicaError;

/// A batch is applied once it holds this many items...
pub const BATCH_ITEMS_MAX: usize = 256;
/// ... or this many bytes of frames.
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// STREAM_REQ's extras for a replica at `high` with its persisted snapshot and failover uuid.
pub(crate) fn stream_request_extras(high: u64, snapshot: (u64, u64), uuid: u64) -> [u8; 48] {
    let (snap_start, snap_end) = if snapshot.0 <= high && high < snapshot.1 {
        snapshot
    } else {
        (high, high)
    };
    let uuid = if high == 0 { 0 } else { uuid };
    let mut extras = [0u8; 48];
    for (at, word) in [
        (8, high),
        (16, u64::MAX),
        (24, uuid),
        (32, snap_start),
        (40, snap_end),
    ] {
        extras[at..at + 8].copy_from_slice(&word.to_be_bytes());
    }
    extras
}

/// A document of a MUTATION or DELETION on a `settee_records` stream.
pub(crate) fn doc_item(
    frame: &Bytes,
    meta: ItemMeta,
    deleted: bool,
    key: &[u8],
    value: &[u8],
) -> Result<ReplicaItem, ReplicaError> {
    let bad = |what: &str| ReplicaError::Protocol(format!("settee record: {what}"));
    let (collection, key) = split_collection_key(key).ok_or_else(|| bad("key"))?;
    let parsed = parse_record_value(value).ok_or_else(|| bad("value"))?;
    Ok(ReplicaItem::Doc(ReplicaDoc {
        seqno: meta.seqno,
        cas: meta.cas,
        collection,
        key: key.to_vec(),
        deleted,
        record: frame.slice_ref(parsed.record),
        attachments: parsed
            .attachments
            .into_iter()
            .map(|(md5, body)| (md5, frame.slice_ref(body)))
            .collect(),
    }))
}

/// A DCP_PURGE: the document the active purged at `seqno` (its CAS from the header).
pub(crate) fn purge_item(
    vbucket: u16,
    seqno: u64,
    cas: u64,
    key: &[u8],
) -> Result<ReplicaItem, ReplicaError> {
    let (collection, key) = split_collection_key(key)
        .ok_or_else(|| ReplicaError::Protocol("settee purge: key".into()))?;
    Ok(ReplicaItem::Purge(PurgeMarker {
        vbucket,
        seqno,
        cas,
        collection,
        key: key.to_vec(),
    }))
}

/// A SYSTEM_EVENT as the replica stores it (its CAS from the header).
pub(crate) fn event_item(
    vbucket: u16,
    (seqno, cas): (u64, u64),
    (event, version): (u32, u8),
    key: &[u8],
    value: &[u8],
) -> Result<ReplicaItem, ReplicaError> {
    let parsed = parse_event_value(event, version, value)
        .ok_or_else(|| ReplicaError::Protocol("system event value".into()))?;
    let kind = match event {
        event_kind::COLLECTION_CREATED => SystemEventKind::CollectionCreated,
        event_kind::COLLECTION_DROPPED => SystemEventKind::CollectionDropped,
        event_kind::SCOPE_CREATED => SystemEventKind::ScopeCreated,
        _ => SystemEventKind::ScopeDropped,
    };
    let name =
        std::str::from_utf8(key).map_err(|_| ReplicaError::Protocol("system event name".into()))?;
    Ok(ReplicaItem::Event(SystemEvent {
        vbucket,
        seqno,
        cas,
        kind,
        manifest_uid: parsed.manifest_uid,
        scope_id: parsed.scope_id,
        collection_id: parsed.collection_id,
        max_ttl: parsed.max_ttl,
        name: name.to_string(),
    }))
}

/// A vbucket's stream on the current connection.
#[derive(Debug, Default)]
pub(crate) struct VbStream {
    /// The snapshot being received.
    pub snapshot: (u64, u64),
    /// Items not applied yet, in seqno order.
    pub items: Vec<ReplicaItem>,
    /// Bytes of the frames behind `items`.
    pub bytes: usize,
    /// The seqno the next batch raises the vbucket to (the last item's, or SEQNO_ADVANCED's).
    pub reached: u64,
    /// True once the vbucket's STREAM_REQ was accepted.
    pub open: bool,
    /// The persisted seqno last acknowledged on this connection (SEQNO_ACKNOWLEDGED).
    pub acknowledged: Option<u64>,
}

impl VbStream {
    pub fn push(&mut self, item: ReplicaItem, frame_bytes: usize) -> Result<(), ReplicaError> {
        let seqno = item.seqno();
        if seqno <= self.reached || seqno < self.snapshot.0 || seqno > self.snapshot.1 {
            return Err(ReplicaError::Protocol(format!(
                "item {seqno} outside its snapshot {:?}",
                self.snapshot
            )));
        }
        self.reached = seqno;
        self.items.push(item);
        self.bytes += frame_bytes;
        Ok(())
    }

    /// Whether the batch must be applied before more is received: it holds
    /// [`BATCH_ITEMS_MAX`] items or [`BATCH_BYTES_MAX`] bytes.
    pub fn full(&self) -> bool {
        self.items.len() >= BATCH_ITEMS_MAX || self.bytes >= BATCH_BYTES_MAX
    }

    /// Whether the batch ends its snapshot (it is applied with the others once no whole frame
    /// is buffered, or before the vbucket's next snapshot starts).
    pub fn ends_snapshot(&self) -> bool {
        self.reached == self.snapshot.1 && self.reached > 0
    }

    /// Applies what was received (if anything moved); returns the items applied.
    pub async fn flush(&mut self, bucket: &Bucket, vbucket: u16) -> Result<usize, ReplicaError> {
        let held = bucket.high_seqnos().get(vbucket);
        if self.items.is_empty() && self.reached <= held {
            return Ok(0);
        }
        let batch = ReplicaBatch {
            items: std::mem::take(&mut self.items),
            high_seqno: self.reached.max(held),
            snapshot: self.snapshot,
        };
        self.bytes = 0;
        Ok(bucket.apply_replica(vbucket, batch).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_resume_inside_an_unfinished_snapshot_only() {
        let word = |extras: &[u8; 48], at: usize| {
            u64::from_be_bytes(extras[at..at + 8].try_into().expect("8 bytes"))
        };
        let fresh = stream_request_extras(0, (0, 0), 77);
        assert_eq!((word(&fresh, 8), word(&fresh, 24)), (0, 0));
        let inside = stream_request_extras(15, (10, 20), 77);
        assert_eq!((word(&inside, 32), word(&inside, 40)), (10, 20));
        assert_eq!(word(&inside, 24), 77);
        let done = stream_request_extras(20, (10, 20), 77);
        assert_eq!((word(&done, 32), word(&done, 40)), (20, 20));
        assert_eq!(word(&done, 16), u64::MAX);
    }

    #[test]
    fn items_must_stay_inside_their_snapshot_in_order() {
        let event = |seqno| {
            ReplicaItem::Event(SystemEvent {
                vbucket: 0,
                seqno,
                cas: 1,
                kind: SystemEventKind::ScopeCreated,
                manifest_uid: 1,
                scope_id: 8,
                collection_id: 0,
                max_ttl: None,
                name: "s".into(),
            })
        };
        let mut stream = VbStream {
            snapshot: (1, 5),
            ..VbStream::default()
        };
        stream.push(event(2), 10).expect("inside");
        assert!(stream.push(event(2), 10).is_err());
        assert!(stream.push(event(6), 10).is_err());
        assert!(!stream.full() && !stream.ends_snapshot());
        stream.push(event(5), 10).expect("the end");
        assert!(stream.ends_snapshot() && !stream.full());
    }
}
