//! Any byte stream a peer can send on the cluster port: cut it into frames as a connection
//! does, and give each frame's body to every decoder a frame of its kind can reach (handshake
//! messages, requests, replies, error frames). Nothing may panic, and whatever decodes
//! re-encodes to a body that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_cluster::wire;
use settee_cluster_net::{frame, handshake};

fuzz_target!(|data: &[u8]| {
    let mut offset = 0;
    while offset < data.len() {
        let rest = &data[offset..];
        let Ok(Some((frame, used))) = frame::decode(rest) else {
            break;
        };
        assert!(used >= 4 + frame::HEAD_BYTES && used <= rest.len());
        let _ = handshake::decode_nonce_and_id(frame.body);
        let _ = wire::decode_error(frame.body);
        if let Ok(request) = wire::decode_request(frame.kind, frame.body) {
            let (kind, body) = wire::encode_request(&request);
            assert_eq!(kind, frame.kind);
            let again = wire::decode_request(kind, &body).expect("re-encoded request decodes");
            assert_eq!(format!("{again:?}"), format!("{request:?}"));
        }
        if let Ok(Ok(response)) = wire::decode_response(frame.kind, frame.body) {
            let (kind, body) = wire::encode_response(&response);
            match wire::decode_response(kind, &body) {
                Ok(Ok(again)) => assert_eq!(format!("{again:?}"), format!("{response:?}")),
                other => panic!("re-encoded {response:?} decodes as {other:?}"),
            }
        }
        offset += used;
    }
});
