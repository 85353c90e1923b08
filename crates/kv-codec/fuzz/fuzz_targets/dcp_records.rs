//! Any byte stream a settee replica can read from its active (docs/format/replica.md): every
//! frame through the producer-message parser and, for documents, events and purges
//! (DCP_PURGE), the `settee_records` value, key and event parsers the consumer runs — never a
//! panic; what they accept keeps its promises (lengths fill the value, keys of 1..=250 bytes,
//! at most 4096 attachments, a purge has 8 bytes of extras and no value); and a record value,
//! or a purge, built from the same bytes parses back to what was encoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_kv_codec::dcp::{encode_purge, Message, Route};
use settee_kv_codec::dcp_records::{
    encode_record_value, parse_event_value, parse_record_value, split_collection_key,
    ATTACHMENTS_MAX, KEY_BYTES_MAX,
};
use settee_kv_codec::{decode, Decoded};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Decoded::Frame(frame, used)) = decode(rest, 1 << 20) {
        match Message::parse(&frame) {
            Some(Message::Mutation { key, value, .. } | Message::Deletion { key, value, .. }) => {
                if let Some((_, key)) = split_collection_key(key) {
                    assert!(!key.is_empty() && key.len() <= KEY_BYTES_MAX);
                }
                if let Some(parsed) = parse_record_value(value) {
                    assert!(parsed.attachments.len() <= ATTACHMENTS_MAX);
                    let bodies: usize = parsed.attachments.iter().map(|(_, b)| 20 + b.len()).sum();
                    assert_eq!(4 + parsed.record.len() + 2 + bodies, value.len());
                    let mut again = Vec::new();
                    encode_record_value(&mut again, parsed.record, &parsed.attachments);
                    assert_eq!(again, value);
                }
            }
            Some(Message::SystemEvent { event, version, value, .. }) => {
                let _ = parse_event_value(event, version, value);
            }
            Some(Message::Purge { seqno, cas, key }) => {
                assert_eq!(frame.opcode, settee_kv_codec::opcode::DCP_PURGE);
                assert!(frame.value.is_empty());
                assert_eq!(frame.extras, seqno.to_be_bytes());
                assert_eq!(cas, frame.cas);
                if let Some((_, key)) = split_collection_key(key) {
                    assert!(!key.is_empty() && key.len() <= KEY_BYTES_MAX);
                }
            }
            _ => {}
        }
        // The same bytes as a record value and as parts of one.
        let _ = parse_record_value(frame.value);
        let _ = split_collection_key(frame.key);
        let split = frame.value.len() / 2;
        let attachment: [u8; 16] = [frame.datatype; 16];
        let mut built = Vec::new();
        encode_record_value(&mut built, &frame.value[..split], &[(attachment, &frame.value[split..])]);
        let parsed = parse_record_value(&built).expect("a built value parses");
        assert_eq!(parsed.record, &frame.value[..split]);
        assert_eq!(parsed.attachments, vec![(attachment, &frame.value[split..])]);
        // The same key as a purge: it parses back to what was encoded.
        let route = Route { opaque: frame.opaque, vbucket: frame.vbucket() };
        let mut purge = Vec::new();
        encode_purge(&mut purge, route, frame.cas, !frame.cas, frame.key);
        match decode(&purge, 1 << 20) {
            Ok(Decoded::Frame(built, used)) if used == purge.len() => {
                let parsed = Message::parse(&built);
                assert_eq!(
                    parsed,
                    Some(Message::Purge { seqno: frame.cas, cas: !frame.cas, key: frame.key })
                );
            }
            other => panic!("a built purge decodes: {other:?}"),
        }
        rest = &rest[used..];
    }
});
