//! The legitimate clients of a soak window, and the setup requests of the run.
//!
//! Each HTTP and each KV connection is one task sending one request at a time until the window
//! ends: 80% reads of the preloaded documents, 20% writes of new documents whose keys are
//! collected as acknowledged when the server says the write succeeded.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use settee_kv_codec::{datatype, opcode, status};

use super::Endpoints;
use crate::http::connection::Connection;
use crate::http::target::Target;
use crate::kv::client::{Client, Handshake, SaslMechanism};
use crate::report::Tally;

/// Share of requests that read; the rest write new documents.
const READ_SHARE: f64 = 0.8;
/// A request with no answer after this is counted as failed and its connection replaced.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before replacing a broken connection, so a refusing server is not hammered.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// Size of each written document's `pad` member.
const PAD_BYTES: usize = 160;

/// The id of preloaded document `index`.
pub(crate) fn preloaded_id(index: usize) -> String {
    format!("pre-{index:08}")
}

/// The JSON body of a written document: it names its own key, so a check can tell it apart.
fn written_body(key: &str) -> String {
    format!(r#"{{"w":"{key}","pad":"{}"}}"#, "p".repeat(PAD_BYTES))
}

/// One HTTP connection for setup requests that need their answers.
pub(crate) struct Setup {
    target: Target,
    connection: Connection,
}

impl Setup {
    pub(crate) async fn open(endpoints: &Endpoints) -> anyhow::Result<Setup> {
        Ok(Setup {
            target: endpoints.http.clone(),
            connection: Connection::open(&endpoints.http.address).await?,
        })
    }

    /// Sends a request as the admin; `path` is absolute (`/db/...` or `/_users/...`).
    pub(crate) async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: impl Into<Bytes>,
    ) -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let request = http_request(&self.target, method.clone(), path, body.into())?;
        if self.connection.is_closed() {
            self.connection = Connection::open(&self.target.address).await?;
        }
        let mut answer = Vec::new();
        let status = self
            .connection
            .exchange(request, Some(&mut answer))
            .await
            .with_context(|| format!("{method} {path}"))?;
        Ok((status, answer))
    }

    /// Like [`Setup::request`], failing unless the status is a success.
    pub(crate) async fn expect_ok(
        &mut self,
        method: Method,
        path: &str,
        body: impl Into<Bytes>,
    ) -> anyhow::Result<Vec<u8>> {
        let (status, answer) = self.request(method.clone(), path, body).await?;
        if !status.is_success() {
            bail!(
                "{method} {path}: {status} {}",
                String::from_utf8_lossy(&answer)
            );
        }
        Ok(answer)
    }

    pub(crate) fn db_path(&self) -> &str {
        &self.target.db_path
    }

    /// Deletes and recreates the database with `preloaded` small documents and one document of
    /// `big_bytes` (`big`) for the slow readers.
    pub(crate) async fn recreate_db(
        &mut self,
        preloaded: usize,
        big_bytes: usize,
    ) -> anyhow::Result<()> {
        let db = self.db_path().to_string();
        let (status, answer) = self.request(Method::DELETE, &db, Bytes::new()).await?;
        if !status.is_success() && status != StatusCode::NOT_FOUND {
            bail!("DELETE {db}: {status} {}", String::from_utf8_lossy(&answer));
        }
        self.expect_ok(Method::PUT, &db, Bytes::new()).await?;
        let docs: Vec<serde_json::Value> = (0..preloaded)
            .map(|index| {
                let id = preloaded_id(index);
                serde_json::json!({"_id": id, "w": id, "pad": "p".repeat(PAD_BYTES)})
            })
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({ "docs": docs }))?;
        self.expect_ok(Method::POST, &format!("{db}/_bulk_docs"), body)
            .await?;
        let big = serde_json::to_vec(&serde_json::json!({"pad": "b".repeat(big_bytes)}))?;
        self.expect_ok(Method::PUT, &format!("{db}/big"), big)
            .await?;
        Ok(())
    }
}

/// A request to `target` with its headers (Host, Authorization, Content-Type).
pub(crate) fn http_request(
    target: &Target,
    method: Method,
    path: &str,
    body: Bytes,
) -> anyhow::Result<Request<Full<Bytes>>> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = Target::uri(path.to_string())?;
    *request.headers_mut() = target.headers.clone();
    Ok(request)
}

/// What the legitimate clients of one window did.
pub(crate) struct WindowOutcome {
    pub(crate) http: Tally,
    pub(crate) kv: Tally,
    /// Keys of the writes the server acknowledged.
    pub(crate) acked: Vec<String>,
}

/// Runs the legitimate clients for `length`; `window` numbers the window, so that the keys
/// its writes create are new.
pub(crate) async fn run_window(
    endpoints: &std::sync::Arc<Endpoints>,
    http_connections: usize,
    kv_connections: usize,
    preloaded: usize,
    window: usize,
    length: Duration,
) -> WindowOutcome {
    let deadline = Instant::now() + length;
    let mut http_tasks = Vec::new();
    for worker in 0..http_connections {
        let endpoints = endpoints.clone();
        http_tasks.push(tokio::spawn(async move {
            http_worker(
                &endpoints,
                preloaded,
                format!("h{window}-{worker}"),
                deadline,
            )
            .await
        }));
    }
    let mut kv_tasks = Vec::new();
    for worker in 0..kv_connections {
        let endpoints = endpoints.clone();
        kv_tasks.push(tokio::spawn(async move {
            kv_worker(
                &endpoints,
                preloaded,
                format!("k{window}-{worker}"),
                deadline,
            )
            .await
        }));
    }
    let mut outcome = WindowOutcome {
        http: Tally::new(),
        kv: Tally::new(),
        acked: Vec::new(),
    };
    for task in http_tasks {
        if let Ok((tally, acked)) = task.await {
            outcome.http.merge(&tally);
            outcome.acked.extend(acked);
        }
    }
    for task in kv_tasks {
        if let Ok((tally, acked)) = task.await {
            outcome.kv.merge(&tally);
            outcome.acked.extend(acked);
        }
    }
    outcome
}

/// Legitimate clients should see no errors; each connection prints its first few, so a run
/// that has some says why.
fn report_error(tally: &Tally, connection: &str, what: &str) {
    const PRINTED_PER_CONNECTION: u64 = 3;
    if tally.errors < PRINTED_PER_CONNECTION {
        eprintln!("soak: legitimate connection {connection}: {what}");
    }
}

async fn http_worker(
    endpoints: &Endpoints,
    preloaded: usize,
    prefix: String,
    deadline: Instant,
) -> (Tally, Vec<String>) {
    let mut tally = Tally::new();
    let mut acked = Vec::new();
    let mut rng = SmallRng::from_rng(&mut rand::rng());
    let target = &endpoints.http;
    let mut connection: Option<Connection> = None;
    let mut sequence = 0u64;
    while Instant::now() < deadline {
        let conn = match connection.as_mut() {
            Some(conn) if !conn.is_closed() => conn,
            _ => match Connection::open(&target.address).await {
                Ok(conn) => connection.insert(conn),
                Err(_) => {
                    tally.errors += 1;
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                    continue;
                }
            },
        };
        let (request, written) = if rng.random::<f64>() < READ_SHARE {
            let id = preloaded_id(rng.random_range(0..preloaded));
            let path = format!("{}/{id}", target.db_path);
            (http_request(target, Method::GET, &path, Bytes::new()), None)
        } else {
            let key = format!("{prefix}-{sequence}");
            sequence += 1;
            let path = format!("{}/{key}", target.db_path);
            let body = Bytes::from(written_body(&key));
            (http_request(target, Method::PUT, &path, body), Some(key))
        };
        let Ok(request) = request else {
            tally.errors += 1;
            continue;
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, conn.exchange(request, None)).await;
        tally.record_latency(started.elapsed().as_micros() as u64);
        match answer {
            Ok(Ok(status)) if status.is_success() => {
                tally.ops += 1;
                acked.extend(written);
            }
            Ok(Ok(status)) => {
                report_error(&tally, &prefix, &format!("HTTP status {status}"));
                tally.errors += 1;
            }
            Ok(Err(error)) => {
                report_error(&tally, &prefix, &format!("HTTP {error:#}"));
                tally.errors += 1;
                connection = None;
            }
            Err(_) => {
                report_error(&tally, &prefix, "HTTP request timed out");
                tally.errors += 1;
                connection = None;
            }
        }
    }
    (tally, acked)
}

async fn kv_worker(
    endpoints: &Endpoints,
    preloaded: usize,
    prefix: String,
    deadline: Instant,
) -> (Tally, Vec<String>) {
    let mut tally = Tally::new();
    let mut acked = Vec::new();
    let mut rng = SmallRng::from_rng(&mut rand::rng());
    let handshake = Handshake {
        address: endpoints.kv_addr.clone(),
        credentials: Some((endpoints.user.clone(), endpoints.password.clone())),
        mechanism: SaslMechanism::ScramSha512,
        bucket: Some(endpoints.db.clone()),
        unordered: false,
        collection: None,
    };
    let mut client: Option<Client> = None;
    let mut sequence = 0u64;
    while Instant::now() < deadline {
        let conn = match client.as_mut() {
            Some(conn) => conn,
            None => {
                match tokio::time::timeout(REQUEST_TIMEOUT, Client::connect(&handshake)).await {
                    Ok(Ok((conn, _))) => client.insert(conn),
                    _ => {
                        tally.errors += 1;
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        continue;
                    }
                }
            }
        };
        let started = Instant::now();
        let (reply, written) = if rng.random::<f64>() < READ_SHARE {
            let key = preloaded_id(rng.random_range(0..preloaded));
            let reply =
                tokio::time::timeout(REQUEST_TIMEOUT, conn.call(opcode::GET, key.as_bytes(), &[]))
                    .await;
            (reply, None)
        } else {
            let key = format!("{prefix}-{sequence}");
            sequence += 1;
            let body = written_body(&key);
            let reply = tokio::time::timeout(
                REQUEST_TIMEOUT,
                conn.call_with(
                    opcode::SET,
                    datatype::JSON,
                    &[0; 8],
                    key.as_bytes(),
                    body.as_bytes(),
                ),
            )
            .await;
            (reply, Some(key))
        };
        tally.record_latency(started.elapsed().as_micros() as u64);
        match reply {
            Ok(Ok(reply)) if reply.status == status::SUCCESS => {
                tally.ops += 1;
                acked.extend(written);
            }
            Ok(Ok(reply)) => {
                report_error(
                    &tally,
                    &prefix,
                    &format!("KV status 0x{:04x}", reply.status),
                );
                tally.errors += 1;
            }
            Ok(Err(error)) => {
                report_error(&tally, &prefix, &format!("KV {error:#}"));
                tally.errors += 1;
                client = None;
            }
            Err(_) => {
                report_error(&tally, &prefix, "KV request timed out");
                tally.errors += 1;
                client = None;
            }
        }
    }
    (tally, acked)
}
