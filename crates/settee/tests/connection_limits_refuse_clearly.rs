//! A flood of silent connections cannot lock clients out. Past a door's maximum, new HTTP
//! connections get a 503 with CouchDB's JSON error and KV ones are closed, while established
//! clients of both doors keep working, and new clients get in once the flood leaves. Under a
//! low open-files limit the node raises its soft limit to the hard one, or else shares what
//! it has between the doors, keeping room for its own files: it stays reachable.

mod support;

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use settee_kv_codec::opcode;
use support::kv::{store_extras, Kv};
use support::{Client, Server};

/// Far longer than the server needs to notice a closed connection.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

/// Raises this process's soft open-files limit to its hard one: the test opens hundreds of
/// sockets.
fn raise_own_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls only read or write the struct on this stack frame.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(
        limit.rlim_cur >= 1500,
        "this test opens 1,200 sockets; the hard open-files limit is {}",
        limit.rlim_cur
    );
}

/// Starts a server whose open-files limit is `soft`/`hard` from its first instruction.
fn start_with_open_files(dir: &std::path::Path, soft: u64, hard: u64) -> Server {
    Server::start_configured(dir, "127.0.0.1:0", &[], |command| {
        // SAFETY: setrlimit is async-signal-safe and touches only the struct it is given.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
}

/// What a connection got before the server closed it (`None`: still open after a while,
/// meaning it was accepted and is being served).
fn answer_before_close(stream: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Some(received),
            Ok(read) => received.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return Some(received),
            Err(_) => return None,
        }
    }
}

/// Retries until a new HTTP client gets `/_up` (the server frees slots as it notices closed
/// connections).
fn new_http_client_gets_in(server: &Server) {
    let deadline = Instant::now() + GIVE_UP_AFTER;
    loop {
        if let Ok(mut client) = Client::connect(&server.addr) {
            if let Ok(response) = client.request("GET", "/_up", None) {
                if response.status == 200 {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "no new HTTP client got in");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn new_kv_client_gets_in(server: &Server) {
    let deadline = Instant::now() + GIVE_UP_AFTER;
    loop {
        let mut kv = Kv::connect(&server.kv_addr);
        let opaque = kv.send(opcode::NOOP, b"", &[], &[], 0);
        if kv.read().is_some_and(|reply| reply.opaque == opaque) {
            return;
        }
        assert!(Instant::now() < deadline, "no new KV client got in");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The established clients of both doors still read and write.
fn established_clients_work(http: &mut Client, kv: &mut Kv, round: usize) {
    let put = http
        .request("PUT", &format!("/default/http-{round}"), Some(b"{}"))
        .unwrap();
    assert_eq!(put.status, 201);
    let key = format!("kv-{round}");
    let set = kv.call(opcode::SET, key.as_bytes(), &store_extras(0, 0), b"1", 0);
    assert_eq!(set.status, 0);
    assert_eq!(kv.call(opcode::GET, key.as_bytes(), &[], &[], 0).status, 0);
}

#[test]
fn past_the_maximum_new_connections_are_refused_and_established_ones_keep_working() {
    raise_own_open_files_limit();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--http-max-connections", "8", "--kv-max-connections", "8"],
    );
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    let mut kv = Kv::open(&server.kv_addr, "admin", "secret", "default");

    // 40 silent connections on each door: 7 fill each door, the rest are refused.
    let mut http_flood: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    let mut kv_flood: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(&server.kv_addr).unwrap())
        .collect();
    let mut refused_http = 0;
    for stream in http_flood.iter_mut().skip(7) {
        let answer = answer_before_close(stream, GIVE_UP_AFTER).expect("refused");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON error body");
        assert_eq!(json["error"], "service_unavailable");
        refused_http += 1;
    }
    assert_eq!(refused_http, 33);
    for stream in kv_flood.iter_mut().skip(7) {
        let answer = answer_before_close(stream, GIVE_UP_AFTER).expect("closed");
        assert!(answer.is_empty());
    }
    // The first 7 of each were accepted and are being served (still open).
    for stream in http_flood.iter_mut().chain(kv_flood.iter_mut()).take(7) {
        assert!(answer_before_close(stream, Duration::from_millis(200)).is_none());
    }
    established_clients_work(&mut http, &mut kv, 0);

    // The flood leaves: new clients of both doors get in.
    drop(http_flood);
    drop(kv_flood);
    new_http_client_gets_in(&server);
    new_kv_client_gets_in(&server);
    established_clients_work(&mut http, &mut kv, 1);
    server.stop();
}

#[test]
fn a_low_open_files_limit_is_raised_or_shared_and_the_node_stays_reachable() {
    raise_own_open_files_limit();
    // Soft 256, hard 4096: raised to 4096, so 400 silent HTTP connections are all accepted
    // and a new client still gets in (with 256 descriptors, accept fails from ~220 on).
    let dir = tempfile::tempdir().unwrap();
    let server = start_with_open_files(dir.path(), 256, 4096);
    let flood: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    new_http_client_gets_in(&server);
    new_kv_client_gets_in(&server);
    drop(flood);
    server.stop();

    // Soft = hard = 1024 (`ulimit -n 1024`): nothing to raise; the doors share what is left
    // after the node's own files (384 each). 600 silent connections on each door, 1,200 in
    // all: past a door's share they are refused, and the established clients, the storage
    // and, once the flood leaves, new clients all work.
    let dir = tempfile::tempdir().unwrap();
    let server = start_with_open_files(dir.path(), 1024, 1024);
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/default", None).unwrap().status, 201);
    let mut kv = Kv::open(&server.kv_addr, "admin", "secret", "default");
    let mut http_flood: Vec<TcpStream> = (0..600)
        .map(|_| TcpStream::connect(&server.addr).unwrap())
        .collect();
    let mut kv_flood: Vec<TcpStream> = (0..600)
        .map(|_| TcpStream::connect(&server.kv_addr).unwrap())
        .collect();
    // Past the share: a 503 (the last ones may be closed without one while 64 refusals are
    // being answered); on the KV door, closed.
    let answer = answer_before_close(&mut http_flood[400], GIVE_UP_AFTER).expect("refused");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer_before_close(&mut http_flood[599], GIVE_UP_AFTER).is_some());
    assert_eq!(
        answer_before_close(&mut kv_flood[599], GIVE_UP_AFTER).as_deref(),
        Some(&[][..])
    );
    established_clients_work(&mut http, &mut kv, 0);
    drop(http_flood);
    drop(kv_flood);
    new_http_client_gets_in(&server);
    new_kv_client_gets_in(&server);
    established_clients_work(&mut http, &mut kv, 1);
    server.stop();
}
