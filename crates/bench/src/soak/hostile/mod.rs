//! The hostile clients of a soak window. Each kind is a loop (or a set of held sockets) that
//! runs until the window ends, counting what it tried and what the server did with it:
//! `refused` (the server answered with an error, as it should), `closed` (the server closed
//! the connection), and `accepted` (the server did what a hostile client asked and should not
//! have: stored an oversize document, served a revoked user, let a wrong password in).

mod accounts;
mod requests;
mod sockets;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use hyper::header::{AUTHORIZATION, HOST};
use hyper::Method;
use parking_lot::Mutex;
use settee_kv_codec::opcode;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::legit::{http_request, preloaded_id, Setup};
use super::Endpoints;
use crate::http::connection::Connection;
use crate::kv::client::{Client, Handshake, SaslMechanism};

pub(crate) use accounts::prepare;
use accounts::{failed_logins_http, failed_logins_kv, revoked_user, set_members};
use requests::{malformed, over_deep, oversize_http, oversize_kv};
use sockets::{hold, http_slow_reader, kv_slow_reader};

/// Sockets held open without a word, per door.
const HALF_OPEN_PER_DOOR: usize = 200;
/// HTTP connections sending their headers one byte at a time.
const SLOWLORIS: usize = 100;
/// HTTP requests whose body stalls (a Content-Length the client never fills), and ones with an
/// endless chunked body.
const STALLED_BODIES: usize = 20;
const ENDLESS_BODIES: usize = 20;
/// KV connections that send part of a frame header and stop.
const PARTIAL_FRAMES: usize = 50;
/// Connections per door that pipeline GETs of the big document and never read.
const SLOW_READERS_PER_DOOR: usize = 2;
/// A byte every this long keeps a slowloris connection "active".
const DRIP_INTERVAL: Duration = Duration::from_secs(2);
/// Over the 8 MB document limit of both doors.
const OVERSIZE_BYTES: usize = 9 * 1024 * 1024;
/// Far deeper than any limit.
const OVER_DEEP_LEVELS: usize = 100_000;
/// How long a hostile client waits for an answer before counting the request as unanswered.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before a hostile client replaces a socket the server closed.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);

const REVOKED_USER: &str = "soak_revoked";
const VICTIM_USER: &str = "soak_victim";
const ACCOUNT_PASSWORD: &str = "soak-password";

/// What one kind of hostile client did over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostileCount {
    pub name: &'static str,
    pub attempts: u64,
    pub refused: u64,
    pub closed: u64,
    pub accepted: u64,
}

impl HostileCount {
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "attempts": self.attempts,
            "refused": self.refused,
            "closed": self.closed,
            "accepted": self.accepted,
        })
    }
}

impl fmt::Display for HostileCount {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{:<24} attempts {:>8}  refused {:>8}  closed by server {:>6}  accepted {:>4}",
            self.name, self.attempts, self.refused, self.closed, self.accepted
        )
    }
}

/// Counts of every hostile kind, shared by their tasks.
#[derive(Default)]
pub(crate) struct Counters {
    /// A mutex: the counts change at most a few hundred times a second.
    counts: Mutex<BTreeMap<&'static str, HostileCount>>,
}

#[derive(Clone, Copy)]
enum Outcome {
    Attempt,
    Refused,
    Closed,
    Accepted,
}

impl Counters {
    fn add(&self, name: &'static str, outcome: Outcome) {
        let mut counts = self.counts.lock();
        let count = counts.entry(name).or_insert_with(|| HostileCount {
            name,
            ..HostileCount::default()
        });
        match outcome {
            Outcome::Attempt => count.attempts += 1,
            Outcome::Refused => count.refused += 1,
            Outcome::Closed => count.closed += 1,
            Outcome::Accepted => count.accepted += 1,
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<HostileCount> {
        self.counts.lock().values().cloned().collect()
    }
}

/// The running hostile clients of one window.
pub(crate) struct Running {
    tasks: JoinSet<()>,
    endpoints: Arc<Endpoints>,
}

impl Running {
    /// Stops every hostile client (their sockets close) and lifts the revocation, so the next
    /// window starts from the same state.
    pub(crate) async fn stop(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        if let Ok(mut setup) = Setup::open(&self.endpoints).await {
            let _ = set_members(&mut setup, &[]).await;
        }
    }
}

/// Starts every hostile client for one window.
pub(crate) fn start(endpoints: Arc<Endpoints>, counters: Arc<Counters>, round: usize) -> Running {
    let mut tasks = JoinSet::new();
    let raw = RawHttp::new(&endpoints);
    let http_address = endpoints.http.address.clone();
    let kv_address = endpoints.kv_addr.clone();

    for _ in 0..HALF_OPEN_PER_DOOR {
        tasks.spawn(hold(
            http_address.clone(),
            Vec::new(),
            None,
            "half-open http",
            counters.clone(),
        ));
        tasks.spawn(hold(
            kv_address.clone(),
            Vec::new(),
            None,
            "half-open kv",
            counters.clone(),
        ));
    }
    for _ in 0..SLOWLORIS {
        let opening = format!("GET {}/{} HTTP/1.1\r\n", raw.db_path, preloaded_id(1)).into_bytes();
        tasks.spawn(hold(
            http_address.clone(),
            opening,
            Some(b"X".to_vec()),
            "slowloris http",
            counters.clone(),
        ));
    }
    for _ in 0..STALLED_BODIES {
        let mut opening = raw.head(
            "PUT",
            &format!("{}/stalled", raw.db_path),
            "Content-Length: 1000\r\n",
        );
        opening.extend_from_slice(br#"{"a":"#);
        tasks.spawn(hold(
            http_address.clone(),
            opening,
            None,
            "stalled body http",
            counters.clone(),
        ));
    }
    for _ in 0..ENDLESS_BODIES {
        let opening = raw.head(
            "PUT",
            &format!("{}/endless", raw.db_path),
            "Transfer-Encoding: chunked\r\n",
        );
        tasks.spawn(hold(
            http_address.clone(),
            opening,
            Some(b"1\r\n \r\n".to_vec()),
            "endless body http",
            counters.clone(),
        ));
    }
    for _ in 0..PARTIAL_FRAMES {
        // Twelve of a request header's 24 bytes: a GET whose frame never completes.
        let opening = vec![0x80, opcode::GET, 0, 4, 0, 0, 0, 0, 0, 0, 0, 4];
        tasks.spawn(hold(
            kv_address.clone(),
            opening,
            None,
            "partial frame kv",
            counters.clone(),
        ));
    }
    for _ in 0..SLOW_READERS_PER_DOOR {
        tasks.spawn(http_slow_reader(raw.clone(), counters.clone()));
        tasks.spawn(kv_slow_reader(endpoints.clone(), counters.clone()));
    }
    tasks.spawn(oversize_http(raw.clone(), counters.clone()));
    tasks.spawn(oversize_kv(endpoints.clone(), counters.clone()));
    tasks.spawn(over_deep(endpoints.clone(), counters.clone()));
    tasks.spawn(malformed(raw.clone(), kv_address.clone(), counters.clone()));
    tasks.spawn(failed_logins_http(endpoints.clone(), counters.clone()));
    tasks.spawn(failed_logins_kv(endpoints.clone(), counters.clone()));
    tasks.spawn(revoked_user(endpoints.clone(), counters.clone(), round));
    Running { tasks, endpoints }
}

/// What raw HTTP requests need: the address and the admin's headers as text.
#[derive(Clone)]
struct RawHttp {
    address: String,
    host: String,
    authorization: String,
    db_path: String,
}

impl RawHttp {
    fn new(endpoints: &Endpoints) -> RawHttp {
        let header = |name| {
            endpoints
                .http
                .headers
                .get(name)
                .and_then(|value: &hyper::header::HeaderValue| value.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        RawHttp {
            address: endpoints.http.address.clone(),
            host: header(HOST),
            authorization: header(AUTHORIZATION),
            db_path: endpoints.http.db_path.clone(),
        }
    }

    /// A request head with the admin's credentials and `extra` header lines.
    fn head(&self, method: &str, path: &str, extra: &str) -> Vec<u8> {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nContent-Type: application/json\r\n{extra}\r\n",
            self.host, self.authorization
        )
        .into_bytes()
    }
}

fn admin_handshake(endpoints: &Endpoints) -> Handshake {
    handshake_as(endpoints, &endpoints.user, &endpoints.password)
}

fn handshake_as(endpoints: &Endpoints, user: &str, password: &str) -> Handshake {
    Handshake {
        address: endpoints.kv_addr.clone(),
        credentials: Some((user.to_string(), password.to_string())),
        mechanism: SaslMechanism::ScramSha512,
        bucket: Some(endpoints.db.clone()),
        unordered: false,
        collection: None,
    }
}

/// Reads an HTTP status line from `stream`, if one comes within [`ANSWER_TIMEOUT`].
async fn read_status(stream: &mut TcpStream) -> Option<u16> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    let read = async {
        while !head.windows(2).any(|pair| pair == b"\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(count) => head.extend_from_slice(&buffer[..count]),
            }
        }
    };
    let _ = tokio::time::timeout(ANSWER_TIMEOUT, read).await;
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace().nth(1)?.parse().ok()
}

fn count_http_status(counters: &Counters, name: &'static str, status: Option<u16>) {
    match status {
        Some(code) if (200..300).contains(&code) => counters.add(name, Outcome::Accepted),
        Some(_) => counters.add(name, Outcome::Refused),
        None => counters.add(name, Outcome::Closed),
    }
}

/// Aborts a spawned helper task when its owner is dropped (its window ended).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One request as the admin over a kept connection; the status, or `None` if none came.
async fn admin_exchange(
    endpoints: &Endpoints,
    connection: &mut Option<Connection>,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> Option<u16> {
    exchange_with(endpoints, connection, method, path, body, As::Admin).await
}

/// Whose credentials a request carries.
#[derive(Clone, Copy)]
enum As<'a> {
    Admin,
    /// This `Authorization` value.
    Basic(&'a str),
    Anonymous,
}

/// One request over a kept connection, with the credentials `who` says.
async fn exchange_with(
    endpoints: &Endpoints,
    connection: &mut Option<Connection>,
    method: Method,
    path: &str,
    body: Vec<u8>,
    who: As<'_>,
) -> Option<u16> {
    if connection.as_ref().is_none_or(Connection::is_closed) {
        *connection = Connection::open(&endpoints.http.address).await.ok();
    }
    let conn = connection.as_mut()?;
    let mut request = http_request(&endpoints.http, method, path, Bytes::from(body)).ok()?;
    match who {
        As::Admin => {}
        As::Basic(authorization) => {
            let value = hyper::header::HeaderValue::from_str(authorization).ok()?;
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        As::Anonymous => {
            request.headers_mut().remove(AUTHORIZATION);
        }
    }
    match tokio::time::timeout(ANSWER_TIMEOUT, conn.exchange(request, None)).await {
        Ok(Ok(status)) => Some(status.as_u16()),
        _ => {
            *connection = None;
            None
        }
    }
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}
