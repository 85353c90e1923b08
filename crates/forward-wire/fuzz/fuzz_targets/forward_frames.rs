//! Any bytes a peer can put in a ForwardHttp, ForwardHttpReply, ScatterHttp or NodeHttp body
//! (the cluster port's kinds 0x20 to 0x23) or in a vbucket move's body (0x40 to 0x47); the
//! frame around them is `crates/cluster-net/fuzz` `cluster_frames`: nothing may panic,
//! whatever decodes is within the encoder's bounds, and it re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_forward_wire::moves::MoveFrame;
use settee_forward_wire::{ForwardHttp, ForwardHttpReply, ScatterHttp};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = ForwardHttp::decode(data) {
        assert_eq!(request.check(), Ok(()));
        assert_eq!(request.encode(), data);
    }
    if let Ok(reply) = ForwardHttpReply::decode(data) {
        assert_eq!(reply.check(), Ok(()));
        assert_eq!(reply.encode(), data);
    }
    if let Ok(scatter) = ScatterHttp::decode(data) {
        assert_eq!(scatter.check(), Ok(()));
        assert_eq!(scatter.encode(), data);
    }
    // The first byte picks a move's kind, the rest is its body.
    if let Some((kind, body)) = data.split_first() {
        if let Ok(frame) = MoveFrame::decode(0x40 | (kind & 0x07), body) {
            assert_eq!(frame.check(), Ok(()));
            assert_eq!(frame.encode(), body);
        }
    }
});
