//! Clients that ask for a long streamed answer (`_all_docs`, `_find`, a view) and then stop
//! reading it (issue 18). Each such answer is written by a blocking thread that waits while
//! its client does not read. With tokio's default cap of 512 blocking threads, 530 stuck
//! clients took them all and every other request that needed one (another `_all_docs`, a
//! `_find`) waited for them; and nothing ever closed a connection whose client stopped
//! reading. Now the pool has a thread for every allowed HTTP connection on top of the 512,
//! and the idle timeout closes a connection whose socket takes none of its response.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{put_big_documents, Client, Server};

/// The tests run one at a time: 530 readers of 40 MB answers load both cores for seconds.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Asks for the whole database with its documents and never reads the answer.
fn stuck_reader(server: &Server) -> TcpStream {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "GET /db/_all_docs?include_docs=true HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {}\r\n\r\n",
        support::base64_engine::encode(support::ADMIN.as_bytes())
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

// This test once saw, in 2 of about 8 runs under load, the other client's `_all_docs` or
// `_find` answer 200 with its rows missing. Not reproduced since (19 runs under load), but two
// ways to it are closed: a producer that failed or panicked ended the chunked body cleanly
// (`_all_docs` and `_find` now abort it, through streamed.rs), and the test client read a
// connection closed mid-body as an empty body (it now fails).
#[test]
fn stuck_readers_of_long_answers_leave_threads_for_everyone_else() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    put_big_documents(&mut http, 40);
    // More stuck answers than tokio's default blocking pool has threads.
    let stuck: Vec<TcpStream> = (0..530).map(|_| stuck_reader(&server)).collect();
    // Let every one of them start and fill what its socket takes.
    std::thread::sleep(Duration::from_secs(3));
    // The client reads with a 30 s timeout: a request waiting for a thread fails it.
    let mut other = Client::connect(&server.addr).unwrap();
    let all_docs = other
        .request("GET", "/db/_all_docs?limit=1", None)
        .expect("_all_docs answered while 530 clients do not read theirs");
    assert_eq!(all_docs.status, 200);
    let listed = all_docs.json();
    assert_eq!(
        listed["rows"].as_array().map(Vec::len),
        Some(1),
        "{listed} {:?}",
        String::from_utf8_lossy(&all_docs.body[..all_docs.body.len().min(300)])
    );
    let find = other
        .request(
            "POST",
            "/db/_find",
            Some(br#"{"selector":{"_id":{"$gt":"doc-010"}},"fields":["_id"],"limit":2}"#),
        )
        .expect("_find answered while 530 clients do not read theirs");
    assert_eq!(find.status, 200);
    let found = find.json();
    assert_eq!(found["docs"].as_array().map(Vec::len), Some(2), "{found}");
    drop(stuck);
    server.stop();
}

#[test]
fn a_client_that_stops_reading_its_answer_is_closed_after_the_idle_timeout() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--http-idle-timeout-ms",
            "1500",
            "--http-header-timeout-ms",
            "500",
        ],
    );
    let mut http = Client::connect(&server.addr).unwrap();
    put_big_documents(&mut http, 40);
    let mut stuck = stuck_reader(&server);
    // Not reading for well past the timeout (and the watchdog's next look).
    std::thread::sleep(Duration::from_secs(5));
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut received = 0usize;
    let mut tail = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        match stuck.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => {
                received += read;
                tail.extend_from_slice(&chunk[..read]);
                let keep = tail.len().saturating_sub(16);
                tail.drain(..keep);
            }
            Err(error) if error.kind() == ErrorKind::ConnectionReset => break,
            Err(error) => panic!(
                "the connection stayed open ({error}) after {:?} with {received} bytes read",
                started.elapsed()
            ),
        }
    }
    // Closed before the end: what was buffered arrives, the last chunk never does.
    assert!(
        received < 40 << 20,
        "the whole answer arrived ({received} bytes): the connection was not closed"
    );
    assert!(!tail.ends_with(b"0\r\n\r\n"), "the chunked body was ended");
    // The node serves the next client as usual.
    let mut other = Client::connect(&server.addr).unwrap();
    assert_eq!(other.request("GET", "/db", None).unwrap().status, 200);
    server.stop();
}
