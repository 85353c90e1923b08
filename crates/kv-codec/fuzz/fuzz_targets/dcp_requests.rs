//! Any byte stream a DCP consumer can send (docs/format/dcp.md): every frame through each of
//! the DCP request parsers the producer runs, never a panic; what a parser accepts keeps its
//! promises (a name within 200 bytes, a stream request's filter within its limits, a valid
//! range once normalised); and producer messages built from the same bytes parse back to what
//! was encoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_kv_codec::dcp::{
    check_bodiless, encode_deletion, encode_mutation, encode_snapshot_marker, parse_all_vb_seqnos,
    parse_buffer_ack, parse_seqno_ack, Control, Filter, ItemMeta, Message, Open, Route, StreamRequest,
    CONNECTION_NAME_BYTES_MAX, STREAM_COLLECTIONS_MAX,
};
use settee_kv_codec::{decode, Decoded};

fn u64_of(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(bytes.iter().skip(at)) {
        *slot = *byte;
    }
    u64::from_be_bytes(word)
}

fuzz_target!(|data: &[u8]| {
    let mut offset = 0;
    while offset < data.len() {
        let rest = &data[offset..];
        let Ok(Decoded::Frame(frame, used)) = decode(rest, 1 << 20) else {
            break;
        };
        if let Ok(open) = Open::parse(&frame) {
            assert!(!open.name.is_empty() && open.name.len() <= CONNECTION_NAME_BYTES_MAX);
        }
        let _ = Control::parse(&frame);
        for collections in [false, true] {
            if let Ok(request) = StreamRequest::parse(&frame, collections) {
                match &request.filter {
                    Filter::Collections(ids) => {
                        assert!(collections);
                        assert!(!ids.is_empty() && ids.len() <= STREAM_COLLECTIONS_MAX);
                        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
                    }
                    Filter::Scope(_) => assert!(collections),
                    Filter::All => {}
                }
                let (snap_start, snap_end) = request.normalised_snapshot();
                if !request.range_error() {
                    assert!(snap_start <= request.start && request.start <= snap_end);
                }
            }
            let _ = parse_all_vb_seqnos(&frame, collections);
        }
        let _ = parse_buffer_ack(&frame);
        if let Ok(seqno) = parse_seqno_ack(&frame) {
            assert_eq!(frame.extras, seqno.to_be_bytes());
        }
        let _ = check_bodiless(&frame);
        let _ = Message::parse(&frame);

        // Producer messages from the same bytes parse back whole.
        let route = Route { opaque: frame.opaque, vbucket: frame.vbucket() };
        let meta = ItemMeta {
            seqno: u64_of(frame.extras, 0),
            rev_seqno: u64_of(frame.extras, 8),
            cas: frame.cas,
            flags: u64_of(frame.extras, 16) as u32,
            expiry: u64_of(frame.extras, 20) as u32,
        };
        let mut out = Vec::new();
        encode_snapshot_marker(&mut out, route, meta.seqno, meta.rev_seqno, meta.flags);
        encode_mutation(&mut out, route, meta, frame.datatype, frame.key, &[frame.value]);
        let delete_time = (frame.datatype & 1 == 1).then_some(meta.expiry);
        encode_deletion(&mut out, route, meta, delete_time, 0, frame.key, &[frame.value]);
        let mut messages = Vec::new();
        let mut encoded = &out[..];
        while let Ok(Decoded::Frame(message, used)) = decode(encoded, 1 << 21) {
            messages.push(Message::parse(&message).expect("a producer message"));
            encoded = &encoded[used..];
        }
        assert!(encoded.is_empty());
        assert_eq!(
            messages[0],
            Message::SnapshotMarker { start: meta.seqno, end: meta.rev_seqno, flags: meta.flags }
        );
        assert_eq!(messages[1], Message::Mutation { meta, key: frame.key, value: frame.value });
        let deleted = ItemMeta { flags: 0, expiry: 0, ..meta };
        assert_eq!(
            messages[2],
            Message::Deletion { meta: deleted, delete_time, key: frame.key, value: frame.value }
        );
        offset += used;
    }
});
