//! How one entry of a vbucket's stream goes on the wire (docs/format/dcp.md, MUTATION,
//! DELETION, SYSTEM_EVENT): the document's winner with its Couchbase metadata, never its
//! revision tree; xattrs in kv_engine's wire form when the connection asked for them.

use settee_engine::record::Header;
use settee_engine::{
    ChangeEntry, PurgeMarker, ReplicaRecord, StreamItem, SystemEvent, SystemEventKind,
};
use settee_kv_codec::datatype;
use settee_kv_codec::dcp::{
    encode_deletion, encode_mutation, encode_purge, encode_system_event, open_flags, stream_key,
    ItemMeta, Route,
};
use settee_kv_codec::dcp_records::encode_record_value;

/// What the connection's DCP_OPEN flags and HELLO features say about values and keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ValueOptions {
    pub xattrs: bool,
    pub no_value: bool,
    pub keep_datatype: bool,
    pub delete_times: bool,
    /// Keys carry their collection id (HELLO Collections).
    pub collections: bool,
    /// A `settee_records` connection: documents carry their stored record (replica.md).
    pub records: bool,
}

impl ValueOptions {
    pub(crate) fn new(open_flags: u32, collections: bool) -> ValueOptions {
        ValueOptions {
            xattrs: open_flags & open_flags::INCLUDE_XATTRS != 0,
            no_value: open_flags
                & (open_flags::NO_VALUE | open_flags::NO_VALUE_WITH_UNDERLYING_DATATYPE)
                != 0,
            keep_datatype: open_flags & open_flags::NO_VALUE_WITH_UNDERLYING_DATATYPE != 0,
            delete_times: open_flags & open_flags::INCLUDE_DELETE_TIMES != 0,
            collections,
            records: false,
        }
    }
}

/// The stored xattrs (a JSON object) as kv_engine sends them: `u32 total`, then per
/// attribute `u32 len | name 0x00 | value 0x00`. Empty when there are none.
pub(crate) fn xattr_section(stored: &[u8]) -> Vec<u8> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(stored) else {
        return Vec::new();
    };
    if map.is_empty() {
        return Vec::new();
    }
    let mut out = vec![0u8; 4];
    for (name, value) in &map {
        let value = value.to_string();
        let pair_len = name.len() + value.len() + 2;
        out.extend_from_slice(&(pair_len as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(value.as_bytes());
        out.push(0);
    }
    let total = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&total.to_be_bytes());
    out
}

/// Appends the MUTATION or DELETION of the document `change` names, as `item` holds it.
/// `key_buf` is scratch space.
pub(crate) fn encode_item(
    out: &mut Vec<u8>,
    route: Route,
    options: ValueOptions,
    change: &ChangeEntry,
    item: &StreamItem,
    key_buf: &mut Vec<u8>,
) {
    let seqno = change.seqno;
    stream_key(
        options.collections.then_some(change.collection),
        &change.key,
        key_buf,
    );
    let xattrs = if options.xattrs {
        xattr_section(&item.xattrs)
    } else {
        Vec::new()
    };
    let mut kind = if xattrs.is_empty() {
        0
    } else {
        datatype::XATTR
    };
    let meta = ItemMeta {
        seqno,
        rev_seqno: item.rev_seqno,
        cas: item.cas,
        flags: item.item_flags,
        expiry: item.expiry,
    };
    if item.deleted {
        // The HLC's nanoseconds, as Unix seconds.
        let delete_time = options
            .delete_times
            .then_some((item.cas / 1_000_000_000) as u32);
        encode_deletion(out, route, meta, delete_time, kind, key_buf, &[&xattrs]);
        return;
    }
    let body: &[u8] = if options.no_value { &[] } else { &item.body };
    if item.json && (!options.no_value || options.keep_datatype) {
        kind |= datatype::JSON;
    }
    encode_mutation(out, route, meta, kind, key_buf, &[&xattrs, body]);
}

/// Appends the MUTATION or DELETION of a `settee_records` stream (replica.md): the record as
/// stored, its attachment bodies, the key collection-prefixed.
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    route: Route,
    change: &ChangeEntry,
    (record, attachments): &ReplicaRecord,
    key_buf: &mut Vec<u8>,
) {
    stream_key(Some(change.collection), &change.key, key_buf);
    let mut value = Vec::with_capacity(record.len() + 6);
    let bodies: Vec<([u8; 16], &[u8])> = attachments
        .iter()
        .map(|(md5, body)| (*md5, body.as_ref()))
        .collect();
    encode_record_value(&mut value, record, &bodies);
    let header = Header::decode(record).ok();
    let meta = ItemMeta {
        seqno: change.seqno,
        rev_seqno: change.rev.pos,
        cas: header.as_ref().map_or(change.cas, |header| header.cas),
        flags: header.as_ref().map_or(0, |header| header.item_flags),
        expiry: header.as_ref().map_or(0, |header| header.expiry),
    };
    if header.is_some_and(|header| header.deleted) {
        let delete_time = Some((meta.cas / 1_000_000_000) as u32);
        encode_deletion(out, route, meta, delete_time, 0, key_buf, &[&value]);
    } else {
        encode_mutation(out, route, meta, 0, key_buf, &[&value]);
    }
}

/// Appends the DCP_PURGE of a purge marker (`settee_records` streams only, replica.md): its
/// seqno, its CAS in the header, the key collection-prefixed.
pub(crate) fn encode_purge_marker(
    out: &mut Vec<u8>,
    route: Route,
    marker: &PurgeMarker,
    key_buf: &mut Vec<u8>,
) {
    stream_key(Some(marker.collection), &marker.key, key_buf);
    encode_purge(out, route, marker.seqno, marker.cas, key_buf);
}

/// Appends the SYSTEM_EVENT of a manifest change (never "collection modified": kv_engine sends
/// that one only in the FlatBuffers form settee does not offer). A `settee_records` stream
/// (`with_cas`) carries the event's CAS in the header (replica.md).
pub(crate) fn encode_event(out: &mut Vec<u8>, route: Route, event: &SystemEvent, with_cas: bool) {
    let mut value = event.manifest_uid.to_be_bytes().to_vec();
    value.extend_from_slice(&event.scope_id.to_be_bytes());
    let (key, version): (&[u8], u8) = match event.kind {
        SystemEventKind::CollectionCreated => {
            value.extend_from_slice(&event.collection_id.to_be_bytes());
            match event.max_ttl {
                Some(ttl) => {
                    value.extend_from_slice(&ttl.to_be_bytes());
                    (event.name.as_bytes(), 1)
                }
                None => (event.name.as_bytes(), 0),
            }
        }
        SystemEventKind::CollectionDropped => {
            value.extend_from_slice(&event.collection_id.to_be_bytes());
            (&[], 0)
        }
        SystemEventKind::ScopeCreated => (event.name.as_bytes(), 0),
        SystemEventKind::ScopeDropped => (&[], 0),
        SystemEventKind::CollectionModified => return,
    };
    let start = out.len();
    encode_system_event(
        out,
        route,
        event.seqno,
        event.kind as u32,
        version,
        key,
        &value,
    );
    if with_cas {
        // The CAS field of the 24-byte header (offset 16).
        out[start + 16..start + 24].copy_from_slice(&event.cas.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_purge_marker_goes_out_with_its_seqno_cas_and_collection_key() {
        use settee_kv_codec::dcp::Message;
        use settee_kv_codec::dcp_records::split_collection_key;
        use settee_kv_codec::{decode, Decoded};
        let marker = PurgeMarker {
            vbucket: 5,
            seqno: 77,
            cas: 0xabcd,
            collection: 9,
            key: b"gone".to_vec(),
        };
        let route = Route {
            opaque: 3,
            vbucket: 5,
        };
        let (mut out, mut key_buf) = (Vec::new(), Vec::new());
        encode_purge_marker(&mut out, route, &marker, &mut key_buf);
        let Ok(Decoded::Frame(frame, used)) = decode(&out, 1 << 20) else {
            panic!("a frame");
        };
        assert_eq!((used, frame.vbucket(), frame.opaque), (out.len(), 5, 3));
        let Some(Message::Purge { seqno, cas, key }) = Message::parse(&frame) else {
            panic!("a purge");
        };
        assert_eq!((seqno, cas), (77, 0xabcd));
        assert_eq!(split_collection_key(key), Some((9, b"gone".as_slice())));
    }

    #[test]
    fn xattrs_take_kv_engines_wire_form() {
        let section = xattr_section(br#"{"_sync":{"rev":"1-a"},"u":1}"#);
        let mut expected = Vec::new();
        let pairs: [(&str, &str); 2] = [("_sync", r#"{"rev":"1-a"}"#), ("u", "1")];
        for (name, value) in pairs {
            expected.extend_from_slice(&((name.len() + value.len() + 2) as u32).to_be_bytes());
            expected.extend_from_slice(name.as_bytes());
            expected.push(0);
            expected.extend_from_slice(value.as_bytes());
            expected.push(0);
        }
        assert_eq!(&section[4..], &expected[..]);
        assert_eq!(
            u32::from_be_bytes(section[..4].try_into().expect("4")),
            expected.len() as u32
        );
        assert!(xattr_section(b"").is_empty());
        assert!(xattr_section(b"{}").is_empty());
    }
}
