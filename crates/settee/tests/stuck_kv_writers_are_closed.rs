//! A KV client that pipelines GETs of a large document and then never reads holds a full send
//! queue, and would keep its connection (and the replies it holds) forever. kv_engine closes a
//! connection whose send queue makes no progress for 360 s (`shutdownIfSendQueueStuck`); here
//! the timeout is shortened through `SETTEE_KV_SEND_QUEUE_STUCK_TIMEOUT_MS` (an environment
//! variable, which an older build ignores). The stuck connection is closed before it got its
//! replies, while other clients keep working; a client that reads slowly but steadily gets
//! every reply and keeps its connection.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use settee_kv_codec::{encode_request, opcode};
use support::kv::{store_extras, Kv};
use support::{Client, Server};

const STUCK_TIMEOUT: Duration = Duration::from_millis(1000);
const DOC_BYTES: usize = 1 << 20;
/// 64 MB of replies: far more than the send queue (1 MB) and the sockets' buffers hold.
const PIPELINED: usize = 64;
/// Far longer than the timeout: a connection still open then is never closed.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

fn start(dir: &std::path::Path) -> Server {
    Server::start_configured(dir, "127.0.0.1:0", &[], |command| {
        command.env(
            "SETTEE_KV_SEND_QUEUE_STUCK_TIMEOUT_MS",
            STUCK_TIMEOUT.as_millis().to_string(),
        );
    })
}

/// Sends `PIPELINED` GETs of `big` at once, without reading.
fn pipeline_gets(kv: &mut Kv) {
    let mut frames = Vec::new();
    for _ in 0..PIPELINED {
        kv.opaque += 1;
        let vbucket = settee_engine::vbucket::vbucket_of(b"big", kv.vbuckets);
        encode_request(
            &mut frames,
            opcode::GET,
            vbucket,
            kv.opaque,
            0,
            0,
            &[],
            &[],
            b"big",
            &[],
        );
    }
    kv.stream.write_all(&frames).unwrap();
}

/// A client on another connection is answered.
fn other_client_works(server: &Server, round: usize) {
    let mut other = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let key = format!("other-{round}");
    let set = other.call(opcode::SET, key.as_bytes(), &store_extras(0, 0), b"1", 0);
    assert_eq!(set.status, 0);
    let get = other.call(opcode::GET, key.as_bytes(), &[], &[], 0);
    assert_eq!((get.status, get.value.as_slice()), (0, &b"1"[..]));
}

#[test]
fn a_kv_client_that_stops_reading_is_closed_and_a_slow_reader_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    let mut setup = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(DOC_BYTES - 11));
    let set = setup.call(opcode::SET, b"big", &store_extras(0, 0), big.as_bytes(), 0);
    assert_eq!(set.status, 0);

    // Stops reading: its send queue fills and stays full.
    let mut stuck = Kv::open(&server.kv_addr, "admin", "secret", "default");
    pipeline_gets(&mut stuck);
    other_client_works(&server, 0);
    std::thread::sleep(STUCK_TIMEOUT * 3);
    other_client_works(&server, 1);
    // Whatever the sockets held arrives, then the end: fewer bytes than asked for.
    stuck
        .stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + GIVE_UP_AFTER;
    let mut received = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        assert!(
            Instant::now() < deadline,
            "the server kept a connection that does not read ({received} bytes received)"
        );
        match stuck.stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => received += read,
            Err(error) if error.kind() == ErrorKind::ConnectionReset => break,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(error) => panic!("read failed: {error}"),
        }
    }
    assert!(
        received < PIPELINED * DOC_BYTES,
        "every reply was sent ({received} bytes), so the connection was not stuck"
    );
    eprintln!("the stuck connection was closed after {received} bytes");
    other_client_works(&server, 2);

    // Reads slowly but steadily: never stuck for the timeout, so it gets every reply.
    let mut slow = Kv::open(&server.kv_addr, "admin", "secret", "default");
    pipeline_gets(&mut slow);
    let mut replies = 0;
    while replies < PIPELINED {
        let mut piece = vec![0u8; 256 << 10];
        let read = slow
            .stream
            .read(&mut piece)
            .expect("the slow reader is served");
        assert!(
            read > 0,
            "the slow reader was closed after {replies} replies"
        );
        slow.buffer.extend_from_slice(&piece[..read]);
        while let Ok(settee_kv_codec::Decoded::Frame(frame, used)) =
            settee_kv_codec::decode(&slow.buffer, 1 << 26)
        {
            assert_eq!(frame.status(), 0);
            assert_eq!(frame.value.len(), DOC_BYTES);
            slow.buffer.drain(..used);
            replies += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let get = slow.call(opcode::GET, b"big", &[], &[], 0);
    assert_eq!(get.status, 0, "the slow reader's connection is still open");
    server.stop();
}
