//! Any byte stream a peer can send: decode frames one after another as the server's read loop
//! does, parse each frame's framing extras and LEB128 collection prefix, and check that what
//! decodes re-encodes to the same bytes; split sub-document extras and specs out of every
//! frame as well, and check every request's shape as the server does before running it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_kv_codec::subdoc::{MultiExtras, SingleExtras, Specs};
use settee_kv_codec::{decode, encode_request, encode_response, leb128, Decoded, FramingExtras, Magic};

fuzz_target!(|data: &[u8]| {
    let mut offset = 0;
    while offset < data.len() {
        let rest = &data[offset..];
        let Ok(Decoded::Frame(frame, used)) = decode(rest, 4096) else {
            break;
        };
        assert!(used >= 24 && used <= rest.len());
        let _ = FramingExtras::parse(frame.framing_extras);
        let _ = settee_kv_codec::validate::request(&frame);
        let _ = leb128::decode_u32(frame.key);
        if let Ok((_, rest)) = settee_kv_codec::validate::collection_key(frame.key) {
            assert!(!rest.is_empty() && rest.len() < frame.key.len());
        }
        // Sub-document bodies: every split stays inside the frame.
        if let Ok(extras) = SingleExtras::parse(frame.extras) {
            if let Ok((path, value)) = extras.split(frame.value) {
                assert_eq!(path.len() + value.len(), frame.value.len());
            }
        }
        let _ = MultiExtras::parse(frame.extras);
        for specs in [Specs::lookups(frame.value), Specs::mutations(frame.value)].into_iter().flatten() {
            let used: usize = specs.as_slice().iter().map(|spec| spec.path.len() + spec.value.len()).sum();
            assert!(used <= frame.value.len());
        }
        let mut again = Vec::new();
        match frame.magic {
            Magic::Request | Magic::AltRequest => encode_request(
                &mut again, frame.opcode, frame.vbucket(), frame.opaque, frame.cas, frame.datatype,
                frame.framing_extras, frame.extras, frame.key, frame.value,
            ),
            Magic::Response if frame.framing_extras.is_empty() => encode_response(
                &mut again, frame.opcode, frame.status(), frame.opaque, frame.cas, frame.datatype,
                frame.extras, frame.key, &[frame.value],
            ),
            _ => {}
        }
        // Re-encoding a request with no framing extras yields magic 0x80 even for 0x08
        // input, and the same bytes otherwise.
        if !again.is_empty() && (frame.magic != Magic::AltRequest || !frame.framing_extras.is_empty()) {
            assert_eq!(&again[..], &rest[..used]);
        }
        offset += used;
    }
});
