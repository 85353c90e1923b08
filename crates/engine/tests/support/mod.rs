//! What the engine's replica tests share.
#![allow(dead_code)]

use settee_engine::{Bucket, ReplicaDoc, ReplicaItem, StreamEntry};

/// What a `settee_records` stream sends for `vbucket` of `bucket` after `since`, in seqno
/// order: each document's stored record with its attachment bodies, each event and each purge
/// marker.
pub fn replica_items(bucket: &Bucket, vbucket: u16, since: u64) -> Vec<ReplicaItem> {
    bucket
        .vbucket_stream(vbucket, since, 10_000)
        .expect("stream")
        .into_iter()
        .filter_map(|entry| match entry {
            StreamEntry::Change(change) => {
                let (record, attachments) = bucket.replica_record(&change).expect("read")?;
                Some(ReplicaItem::Doc(ReplicaDoc {
                    seqno: change.seqno,
                    cas: change.cas,
                    collection: change.collection,
                    key: change.key.clone(),
                    deleted: change.deleted,
                    record,
                    attachments,
                }))
            }
            StreamEntry::Event(event) => Some(ReplicaItem::Event(event)),
            StreamEntry::Purge(marker) => Some(ReplicaItem::Purge(marker)),
        })
        .collect()
}
