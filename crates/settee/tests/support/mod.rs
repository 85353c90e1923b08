//! A real `settee serve` process for black-box tests, and a minimal blocking HTTP/1.1 client
//! (requests with Content-Length bodies, responses with Content-Length or chunked bodies).

#![allow(dead_code)]

pub mod kv;
pub mod rebalance;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ADMIN: &str = "admin:secret";

/// The binary under test: this build's, or `SETTEE_TEST_BIN` (to check that a regression test
/// fails against an older build).
pub fn binary() -> PathBuf {
    std::env::var_os("SETTEE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_settee")))
}

pub struct Server {
    pub child: Child,
    pub addr: String,
    /// The Couchbase KV door's address.
    pub kv_addr: String,
    /// The management port (`/pools`, `/settee/timings`).
    pub mgmt_addr: String,
    pub data_dir: PathBuf,
    /// What the server printed before it was ready (its addresses, a cluster's node line).
    pub banner: Vec<String>,
}

impl Server {
    pub fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, &[])
    }

    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        Server::start_on(data_dir, "127.0.0.1:0", extra)
    }

    /// On a given HTTP address (a restarted node that must keep its address).
    pub fn start_on(data_dir: &Path, http_addr: &str, extra: &[&str]) -> Server {
        Server::start_configured(data_dir, http_addr, extra, |_| {})
    }

    /// With the command adjusted before it is spawned (resource limits, environment).
    pub fn start_configured(
        data_dir: &Path,
        http_addr: &str,
        extra: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Server {
        let mut command = Command::new(binary());
        configure(&mut command);
        command.args(["serve", "--http-addr", http_addr]);
        // Free ports unless `extra` names them (a restarted cluster node keeps its addresses).
        for flag in ["--kv-addr", "--mgmt-addr"] {
            if !extra.contains(&flag) {
                command.args([flag, "127.0.0.1:0"]);
            }
        }
        let mut child = command
            .args(["--admin", ADMIN, "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn settee");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut addr = None;
        let mut mgmt_addr = String::new();
        let mut banner = Vec::new();
        let kv_addr = loop {
            assert!(Instant::now() < deadline, "settee did not start");
            let line = lines
                .next()
                .expect("settee exited before listening")
                .expect("line");
            banner.push(line.clone());
            if let Some(rest) = line.split("listening on http://").nth(1) {
                addr = Some(rest.split_whitespace().next().expect("address").to_string());
            }
            if let Some(rest) = line.split("couchbase kv on ").nth(1) {
                if let Some(mgmt) = rest.split("management on http://").nth(1) {
                    mgmt_addr = mgmt.split_whitespace().next().expect("address").to_string();
                }
                break rest.split_whitespace().next().expect("address").to_string();
            }
        };
        let addr = addr.expect("http address printed before the kv address");
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            addr,
            kv_addr,
            mgmt_addr,
            data_dir: data_dir.to_owned(),
            banner,
        }
    }

    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill9();
    }

    /// A line of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`).
    pub fn memory_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }
}

/// A test that panics must not leave its server running (it would hold the test's output
/// pipe open and the port busy).
impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// One keep-alive connection.
pub struct Client {
    stream: BufReader<TcpStream>,
    auth: String,
}

impl Client {
    pub fn connect(addr: &str) -> std::io::Result<Client> {
        Client::connect_as(addr, ADMIN)
    }

    /// Authenticated as `credentials` (`USER:PASSWORD`).
    pub fn connect_as(addr: &str, credentials: &str) -> std::io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        use base64_engine::encode;
        Ok(Client {
            stream: BufReader::new(stream),
            auth: encode(credentials.as_bytes()),
        })
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<Response> {
        self.request_with(method, path, &[("Content-Type", "application/json")], body)
    }

    /// A JSON request: (status, the answer parsed, or `null` when it is not JSON).
    #[allow(dead_code)]
    pub fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let body = body.map(|body| body.to_string().into_bytes());
        let response = self.request(method, path, body.as_deref()).unwrap();
        let value = serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null);
        (response.status, value)
    }

    /// A request with headers of the test's choosing besides Host, Authorization and
    /// Content-Length (a header named `Authorization` replaces the client's own; an empty one
    /// sends none: an anonymous request).
    pub fn request_with(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> std::io::Result<Response> {
        let body = body.unwrap_or(b"");
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        {
            head.push_str(&format!("Authorization: Basic {}\r\n", self.auth));
        }
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("authorization") && value.is_empty() {
                continue;
            }
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let stream = self.stream.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        read_response(&mut self.stream)
    }
}

pub fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<Response> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((key, value)) = trimmed.split_once(':') {
            headers.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(key, _): &&(String, String)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
    };
    let mut body = Vec::new();
    if let Some(length) = find("content-length").and_then(|value| value.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if find("transfer-encoding").is_some_and(|value| value.contains("chunked")) {
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "closed before the chunked body ended ({} bytes)",
                        body.len()
                    ),
                ));
            }
            let size = usize::from_str_radix(line.trim(), 16).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("not a chunk size: {line:?}"),
                )
            })?;
            if size == 0 {
                line.clear();
                reader.read_line(&mut line)?;
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Base64 for the Authorization header, without a dependency.
pub mod base64_engine {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    pub fn encode(input: &[u8]) -> String {
        let mut out = String::new();
        for chunk in input.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}

/// Creates the user `name` and makes it a member (not an admin) of database `db`.
pub fn add_member(http: &mut Client, db: &str, name: &str, password: &str) {
    let user = serde_json::json!({"name": name, "password": password, "roles": [], "type": "user"});
    let path = format!("/_users/org.couchdb.user:{name}");
    let body = user.to_string();
    assert_eq!(
        http.request("PUT", &path, Some(body.as_bytes()))
            .unwrap()
            .status,
        201
    );
    let security = serde_json::json!({"admins": {"names": [], "roles": []},
        "members": {"names": [name], "roles": []}});
    let body = security.to_string();
    let path = format!("/{db}/_security");
    assert_eq!(
        http.request("PUT", &path, Some(body.as_bytes()))
            .unwrap()
            .status,
        200
    );
}

/// Creates `/db` and puts `count` documents of 1 MB each in it (ids `doc-000`, `doc-001`...),
/// ten per `_bulk_docs`: answers over them outgrow any socket buffer.
#[allow(dead_code)]
pub fn put_big_documents(http: &mut Client, count: usize) {
    assert_eq!(http.request("PUT", "/db", None).unwrap().status, 201);
    let blob = "z".repeat(1 << 20);
    for first in (0..count).step_by(10) {
        let docs: Vec<String> = (first..count.min(first + 10))
            .map(|index| format!("{{\"_id\":\"doc-{index:03}\",\"blob\":\"{blob}\"}}"))
            .collect();
        let body = format!("{{\"docs\":[{}]}}", docs.join(","));
        let response = http
            .request("POST", "/db/_bulk_docs", Some(body.as_bytes()))
            .unwrap();
        assert_eq!(response.status, 201);
    }
}

/// A node of a test cluster on loopback: `--cluster-addr 127.0.0.1:0` with `secret`, joining
/// `join` when given.
#[allow(dead_code)]
pub fn start_cluster_node(dir: &Path, secret: &str, join: Option<&str>) -> Server {
    let mut args = vec!["--cluster-addr", "127.0.0.1:0", "--cluster-secret", secret];
    if let Some(join) = join {
        args.extend_from_slice(&["--join", join]);
    }
    Server::start_with(dir, &args)
}

/// A cluster node started again from its data directory on the addresses it had (the map
/// records them), without `--join`: it carries on from its stored Raft log.
#[allow(dead_code)]
pub fn restart_cluster_node(was: &Server, secret: &str) -> Server {
    let cluster = cluster_addr(was);
    let args = [
        "--cluster-addr",
        cluster.as_str(),
        "--cluster-secret",
        secret,
        "--kv-addr",
        was.kv_addr.as_str(),
        "--mgmt-addr",
        was.mgmt_addr.as_str(),
    ];
    Server::start_on(&was.data_dir, &was.addr, &args)
}

/// The cluster address a node printed in its banner (`settee cluster node ... ADDR:`).
#[allow(dead_code)]
pub fn cluster_addr(server: &Server) -> String {
    let line = server
        .banner
        .iter()
        .find(|line| line.starts_with("settee cluster node "))
        .expect("a cluster node line");
    let addr = line.split_whitespace().nth(5).expect("address");
    addr.trim_end_matches(':').to_string()
}

/// One JSON request as the admin on a fresh connection to `server`'s HTTP door: (status, the
/// answer parsed, or `null`).
#[allow(dead_code)]
pub fn call_json(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    Client::connect(&server.addr)
        .expect("connect")
        .call(method, path, body)
}

/// `GET path` as the admin, which must answer 200: its JSON.
#[allow(dead_code)]
pub fn get_json(server: &Server, path: &str) -> serde_json::Value {
    let (status, body) = call_json(server, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// One request as the admin on a fresh connection to `server`'s HTTP door: (status, JSON).
#[allow(dead_code)]
pub fn http_json(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut client = Client::connect(&server.addr).expect("connect");
    let response = client
        .request(method, path, body.map(str::as_bytes))
        .expect("request");
    (response.status, response.json())
}

/// Polls (every 100 ms, for 60 s at most) until `done` gives a value; `what` names the wait in
/// the failure.
#[allow(dead_code)]
pub fn until<T>(what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Three cluster nodes on loopback sharing `secret` (the first makes the cluster, the others
/// join it), returned once each of them counts three members.
#[allow(dead_code)]
pub fn start_three_nodes(dirs: [&Path; 3], secret: &str) -> [Server; 3] {
    let first = start_cluster_node(dirs[0], secret, None);
    let join = cluster_addr(&first);
    let nodes = [
        first,
        start_cluster_node(dirs[1], secret, Some(&join)),
        start_cluster_node(dirs[2], secret, Some(&join)),
    ];
    for node in &nodes {
        until("three members", || {
            let mut client = Client::connect(&node.addr).ok()?;
            let (_, body) = client.call("GET", "/_node/_local/_cluster", None);
            (body["members"].as_array().map(Vec::len) == Some(3)).then_some(())
        });
    }
    nodes
}
