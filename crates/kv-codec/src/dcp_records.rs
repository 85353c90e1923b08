//! The values of a `settee_records` DCP stream (docs/format/replica.md): a document's stored
//! record with its attachment bodies, and what a replica reads back out of MUTATION,
//! DELETION, SYSTEM_EVENT and DCP_PURGE (whose frame is `dcp::encode_purge`). Pure byte
//! handling: the engine checks what the bytes mean.

use crate::leb128;

/// Attachment bodies one record value may carry, at most.
pub const ATTACHMENTS_MAX: usize = 4096;
/// The longest document key (Couchbase's limit).
pub const KEY_BYTES_MAX: usize = 250;

/// A record value, borrowed from the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordValue<'a> {
    pub record: &'a [u8],
    /// (md5, body), in the order sent.
    pub attachments: Vec<([u8; 16], &'a [u8])>,
}

/// Appends a record value: `record_len u32 | record | att_count u16 | (md5 | len u32 | body)*`.
/// Callers keep `attachments` within [`ATTACHMENTS_MAX`] (the engine's documents do).
pub fn encode_record_value(out: &mut Vec<u8>, record: &[u8], attachments: &[([u8; 16], &[u8])]) {
    out.extend_from_slice(&(record.len() as u32).to_be_bytes());
    out.extend_from_slice(record);
    out.extend_from_slice(&(attachments.len() as u16).to_be_bytes());
    for (md5, body) in attachments {
        out.extend_from_slice(md5);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
    }
}

/// Takes `len` bytes off the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    if rest.len() < len {
        return None;
    }
    let (head, tail) = rest.split_at(len);
    *rest = tail;
    Some(head)
}

fn take_u32(rest: &mut &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(take(rest, 4)?.try_into().ok()?))
}

/// A record value whose lengths fill it exactly; `None` otherwise.
pub fn parse_record_value(value: &[u8]) -> Option<RecordValue<'_>> {
    let mut rest = value;
    let record_len = take_u32(&mut rest)? as usize;
    let record = take(&mut rest, record_len)?;
    let count = u16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?) as usize;
    if count > ATTACHMENTS_MAX {
        return None;
    }
    let mut attachments = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let md5: [u8; 16] = take(&mut rest, 16)?.try_into().ok()?;
        let len = take_u32(&mut rest)? as usize;
        attachments.push((md5, take(&mut rest, len)?));
    }
    rest.is_empty().then_some(RecordValue {
        record,
        attachments,
    })
}

/// A collection-aware stream key: (collection id, key of 1..=250 bytes).
pub fn split_collection_key(key: &[u8]) -> Option<(u32, &[u8])> {
    let (collection, used) = leb128::decode_u32(key)?;
    let rest = key.get(used..)?;
    (!rest.is_empty() && rest.len() <= KEY_BYTES_MAX).then_some((collection, rest))
}

/// A SYSTEM_EVENT's value (dcp.md): manifest uid, scope, and for collection events the
/// collection and (version 1 of a creation) its max TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventValue {
    pub manifest_uid: u64,
    pub scope_id: u32,
    pub collection_id: u32,
    pub max_ttl: Option<u32>,
}

/// Event kinds as dcp.md numbers them.
pub mod event_kind {
    pub const COLLECTION_CREATED: u32 = 0;
    pub const COLLECTION_DROPPED: u32 = 1;
    pub const SCOPE_CREATED: u32 = 3;
    pub const SCOPE_DROPPED: u32 = 4;
}

/// The value of a SYSTEM_EVENT of `event` kind and `version`; `None` for another shape or kind.
pub fn parse_event_value(event: u32, version: u8, value: &[u8]) -> Option<EventValue> {
    use event_kind::*;
    let mut rest = value;
    let manifest_uid = u64::from_be_bytes(take(&mut rest, 8)?.try_into().ok()?);
    let scope_id = take_u32(&mut rest)?;
    let (collection_id, max_ttl) = match (event, version) {
        (COLLECTION_CREATED, 0) | (COLLECTION_DROPPED, 0) => (take_u32(&mut rest)?, None),
        (COLLECTION_CREATED, 1) => (take_u32(&mut rest)?, Some(take_u32(&mut rest)?)),
        (SCOPE_CREATED, 0) | (SCOPE_DROPPED, 0) => (0, None),
        _ => return None,
    };
    rest.is_empty().then_some(EventValue {
        manifest_uid,
        scope_id,
        collection_id,
        max_ttl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_values_round_trip_and_refuse_loose_lengths() {
        let mut out = Vec::new();
        let body = b"attachment body".as_slice();
        encode_record_value(&mut out, b"record bytes", &[([7; 16], body)]);
        let parsed = parse_record_value(&out).expect("parses");
        assert_eq!(parsed.record, b"record bytes");
        assert_eq!(parsed.attachments, vec![([7; 16], body)]);
        assert_eq!(parse_record_value(&out[..out.len() - 1]), None);
        let mut longer = out.clone();
        longer.push(0);
        assert_eq!(parse_record_value(&longer), None);
        let mut none = Vec::new();
        encode_record_value(&mut none, b"r", &[]);
        assert_eq!(none, [0, 0, 0, 1, b'r', 0, 0]);
    }

    #[test]
    fn purges_round_trip_and_refuse_other_shapes() {
        use crate::dcp::{encode_purge, stream_key, Message, Route};
        use crate::{decode, encode_request, opcode, Decoded};
        let route = Route {
            opaque: 7,
            vbucket: 513,
        };
        let mut key = Vec::new();
        stream_key(Some(0x1234), b"purged-doc", &mut key);
        let mut out = Vec::new();
        encode_purge(&mut out, route, 0x0102_0304_0506_0708, 0xfeed_beef, &key);
        let Ok(Decoded::Frame(frame, used)) = decode(&out, 1 << 20) else {
            panic!("one frame");
        };
        assert_eq!(used, out.len());
        assert_eq!(frame.opcode, opcode::DCP_PURGE);
        assert_eq!((frame.opaque, frame.vbucket(), frame.datatype), (7, 513, 0));
        assert!(frame.value.is_empty());
        let Some(Message::Purge { seqno, cas, key }) = Message::parse(&frame) else {
            panic!("a purge");
        };
        assert_eq!((seqno, cas), (0x0102_0304_0506_0708, 0xfeed_beef));
        assert_eq!(
            split_collection_key(key),
            Some((0x1234, b"purged-doc".as_slice()))
        );
        // A value, or extras of another length, is not a purge.
        let seqno = 9u64.to_be_bytes();
        for (extras, value) in [(&seqno[..], &b"v"[..]), (&seqno[..4], b""), (&[][..], b"")] {
            let mut bytes = Vec::new();
            encode_request(
                &mut bytes,
                opcode::DCP_PURGE,
                1,
                1,
                0,
                0,
                &[],
                extras,
                key,
                value,
            );
            let Ok(Decoded::Frame(frame, _)) = decode(&bytes, 1 << 20) else {
                panic!("one frame");
            };
            assert_eq!(Message::parse(&frame), None);
        }
    }

    #[test]
    fn keys_and_events_parse_as_dcp_sends_them() {
        let mut key = Vec::new();
        leb128::encode_u32(200, &mut key);
        key.extend_from_slice(b"doc");
        assert_eq!(split_collection_key(&key), Some((200, b"doc".as_slice())));
        assert_eq!(split_collection_key(&[0]), None);
        let mut value = 9u64.to_be_bytes().to_vec();
        value.extend_from_slice(&8u32.to_be_bytes());
        assert_eq!(
            parse_event_value(event_kind::SCOPE_CREATED, 0, &value).map(|v| v.scope_id),
            Some(8)
        );
        value.extend_from_slice(&12u32.to_be_bytes());
        let dropped = parse_event_value(event_kind::COLLECTION_DROPPED, 0, &value);
        assert_eq!(dropped.map(|v| v.collection_id), Some(12));
        assert_eq!(
            parse_event_value(event_kind::COLLECTION_CREATED, 1, &value),
            None
        );
        value.extend_from_slice(&60u32.to_be_bytes());
        let created = parse_event_value(event_kind::COLLECTION_CREATED, 1, &value);
        assert_eq!(created.and_then(|v| v.max_ttl), Some(60));
    }
}
