//! What the fuzz target `cluster_frames` does, on stable and in every test run: valid frames of
//! every kind, cut and with bytes flipped, go through every decoder a peer's bytes can reach.
//! None may panic; whatever decodes re-encodes to the same value.

use settee_cluster::map::Member;
use settee_cluster::network::{Request, Response};
use settee_cluster::wire;
use settee_cluster_net::{frame, handshake};

fn check(data: &[u8]) {
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
}

fn seeds() -> Vec<Vec<u8>> {
    let member = Member::joining(7, "127.0.0.1:7001", "127.0.0.1:5984", "127.0.0.1:11210");
    let mut frames = Vec::new();
    for request in [
        Request::Heartbeat { from: 3 },
        Request::Join {
            member,
            forwarded: false,
        },
    ] {
        let (kind, body) = wire::encode_request(&request);
        let mut bytes = Vec::new();
        frame::encode(kind, 1, &body, &mut bytes);
        frames.push(bytes);
    }
    for response in [
        Response::Heartbeat {
            revision: 12,
            quorum_age_ms: 80,
        },
        Response::Joined { revision: 9 },
        Response::Refused("no".into()),
    ] {
        let (kind, body) = wire::encode_response(&response);
        let mut bytes = Vec::new();
        frame::encode(kind, 2, &body, &mut bytes);
        frames.push(bytes);
    }
    let mut hello = Vec::new();
    frame::encode(handshake::KIND_HELLO, 0, &[5; 40], &mut hello);
    frames.push(hello);
    frames
}

#[test]
fn cut_and_flipped_frames_never_panic_a_decoder() {
    // A fixed linear congruential sequence: the same inputs every run.
    let mut state: u64 = 0x5e77_ee00;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    for seed in seeds() {
        check(&seed);
        for cut in 0..seed.len() {
            check(&seed[..cut]);
        }
        for _ in 0..2_000 {
            let mut bytes = seed.clone();
            for _ in 0..1 + next() % 4 {
                let at = next() % bytes.len();
                bytes[at] ^= 1 << (next() % 8);
            }
            check(&bytes);
        }
    }
}
