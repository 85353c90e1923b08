//! Connections that hold a slot without doing their part are closed after the (here
//! shortened) timeouts, on both doors: HTTP headers that never complete (slowloris), a body
//! that stalls or never ends (408), an idle keep-alive connection; a KV connection that never
//! authenticates, leaves a frame unfinished or sits idle. Streaming responses (a continuous
//! `_changes` feed, a longpoll) and clients that keep working are never cut.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use settee_kv_codec::{feature, opcode};
use support::kv::{store_extras, Kv};
use support::{Client, Server, ADMIN};

/// Far longer than any timeout below: a connection still open then is never closed.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

fn start(dir: &std::path::Path) -> Server {
    Server::start_with(
        dir,
        &[
            "--http-header-timeout-ms",
            "600",
            "--http-idle-timeout-ms",
            "1500",
            "--http-body-timeout-ms",
            "600",
            "--kv-auth-timeout-ms",
            "1500",
            "--kv-partial-frame-timeout-ms",
            "600",
            "--kv-idle-timeout-ms",
            "1500",
        ],
    )
}

/// Reads until the server closes the connection; the bytes it sent first. Panics if it is
/// still open after [`GIVE_UP_AFTER`]. `trickle`: a byte to send every 100 ms meanwhile.
fn until_closed(stream: &mut TcpStream, trickle: Option<u8>) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + GIVE_UP_AFTER;
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        assert!(
            Instant::now() < deadline,
            "the server kept the connection open; received {:?}",
            String::from_utf8_lossy(&received)
        );
        if let Some(byte) = trickle {
            // Once the server has closed, writes fail; reading tells.
            let _ = stream.write_all(&[byte]);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(read) => received.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return received,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(error) => panic!("read failed: {error}"),
        }
    }
}

/// One request on a new connection (a kept-alive one is closed once idle long enough).
fn request(server: &Server, method: &str, path: &str, body: Option<&[u8]>) -> u16 {
    let mut client = Client::connect(&server.addr).unwrap();
    client.request(method, path, body).unwrap().status
}

fn basic_auth() -> String {
    support::base64_engine::encode(ADMIN.as_bytes())
}

#[test]
fn http_connections_that_stall_are_closed_and_feeds_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    assert_eq!(request(&server, "PUT", "/db", None), 201);
    let auth = basic_auth();

    // Slowloris: headers trickling in a byte at a time never complete in time.
    let mut slowloris = TcpStream::connect(&server.addr).unwrap();
    slowloris
        .write_all(b"GET /_up HTTP/1.1\r\nHost: x\r\nX-Padding: ")
        .unwrap();
    let answer = until_closed(&mut slowloris, Some(b'a'));
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));

    // A Content-Length longer than the body sent: 408, then closed.
    let mut short = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "PUT /db/short HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"a\":"
    );
    short.write_all(head.as_bytes()).unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut short, None)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"error\":\"request_timeout\""), "{answer}");

    // A chunked body that never ends: 408, then closed.
    let mut endless = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "PUT /db/endless HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\":\r\n"
    );
    endless.write_all(head.as_bytes()).unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut endless, None)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // Neither stalled write stored anything.
    assert_eq!(request(&server, "GET", "/db/short", None), 404);
    assert_eq!(request(&server, "GET", "/db/endless", None), 404);

    // An idle keep-alive connection: answered, then closed after the idle timeout.
    let mut idle = TcpStream::connect(&server.addr).unwrap();
    idle.write_all(b"GET /_up HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = String::from_utf8_lossy(&until_closed(&mut idle, None)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // A continuous feed with a heartbeat and a longpoll that waits longer than the idle
    // timeout are not cut; a client that keeps sending requests keeps its connection.
    let mut feed = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "GET /db/_changes?feed=continuous&heartbeat=200 HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n"
    );
    feed.write_all(head.as_bytes()).unwrap();
    let mut longpoll = Client::connect(&server.addr).unwrap();
    let polled = longpoll
        .request(
            "GET",
            "/db/_changes?feed=longpoll&timeout=3500&since=now",
            None,
        )
        .unwrap();
    assert_eq!(polled.status, 200);
    assert!(polled.json()["last_seq"].is_string(), "{:?}", polled.json());
    let mut writer = Client::connect(&server.addr).unwrap();
    for index in 0..20 {
        let put = writer
            .request("PUT", &format!("/db/busy-{index}"), Some(b"{}"))
            .unwrap();
        assert_eq!(put.status, 201);
        std::thread::sleep(Duration::from_millis(150));
    }
    feed.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("busy-19") {
        let read = feed.read(&mut chunk).expect("the feed stays open");
        assert!(read > 0, "the feed was closed");
        seen.extend_from_slice(&chunk[..read]);
    }
    server.stop();
}

#[test]
fn kv_connections_that_stall_are_closed_and_busy_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    assert_eq!(request(&server, "PUT", "/default", None), 201);

    // Never authenticates, however chatty.
    let mut anonymous = Kv::connect(&server.kv_addr);
    anonymous.hello(&[feature::XERROR]);
    let deadline = Instant::now() + GIVE_UP_AFTER;
    loop {
        assert!(Instant::now() < deadline, "unauthenticated connection kept");
        let opaque = anonymous.send(opcode::NOOP, b"", &[], &[], 0);
        match anonymous.read() {
            Some(reply) => assert_eq!(reply.opaque, opaque),
            None => break,
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // Leaves a frame unfinished.
    let mut partial = Kv::open(&server.kv_addr, "admin", "secret", "default");
    partial
        .stream
        .write_all(&[0x80, opcode::GET, 0, 3])
        .unwrap();
    assert!(until_closed(&mut partial.stream, None).is_empty());

    // Sits idle after authenticating.
    let mut idle = Kv::open(&server.kv_addr, "admin", "secret", "default");
    assert!(until_closed(&mut idle.stream, None).is_empty());

    // Keeps working: requests spread over more than every timeout above.
    let mut busy = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let started = Instant::now();
    let mut index = 0;
    while started.elapsed() < Duration::from_millis(4000) {
        let key = format!("k{index}");
        let set = busy.call(opcode::SET, key.as_bytes(), &store_extras(0, 0), b"1", 0);
        assert_eq!(set.status, 0);
        index += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(busy.call(opcode::GET, b"k0", &[], &[], 0).status, 0);
    server.stop();
}
