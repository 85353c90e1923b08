//! Any bytes a peer can put in a ForwardHttp, ForwardHttpReply or ScatterHttp body (the
//! cluster port's kinds 0x20, 0x21 and 0x22; the frame around them is
//! `crates/cluster-net/fuzz` `cluster_frames`): nothing may panic, whatever decodes is within the encoder's bounds, and it re-encodes to
//! the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
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
});
