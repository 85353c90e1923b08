//! Any byte stream a peer can send: decode frames one after another as the server's read loop
//! does, parse each frame's framing extras and LEB128 collection prefix, and check that what
//! decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
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
        let _ = leb128::decode_u32(frame.key);
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
