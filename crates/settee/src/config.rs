//! `settee serve` settings: command-line flags, each also settable through an environment
//! variable (`SETTEE_*`) or a TOML config file (`--config`); flags win over the environment,
//! which wins over the file, which wins over the defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (keys are the flag names with underscores).
    #[arg(long, env = "SETTEE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where the node keeps its data [default: $HOME/.local/share/settee].
    #[arg(long, env = "SETTEE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// CouchDB API listen address [default: 127.0.0.1:5984].
    #[arg(long, env = "SETTEE_HTTP_ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// Couchbase KV (memcached binary protocol) listen address [default: 127.0.0.1:11210].
    #[arg(long, env = "SETTEE_KV_ADDR")]
    pub kv_addr: Option<SocketAddr>,
    /// Couchbase management (`/pools`) listen address [default: 127.0.0.1:8091].
    #[arg(long, env = "SETTEE_MGMT_ADDR")]
    pub mgmt_addr: Option<SocketAddr>,
    /// PEM certificate chain of the node: with --tls-key, turns on HTTPS (--https-addr) and
    /// KV over TLS (--kv-tls-addr); reloaded on SIGHUP.
    #[arg(long, env = "SETTEE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "SETTEE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CouchDB API over HTTPS, with TLS configured [default: 127.0.0.1:6984].
    #[arg(long, env = "SETTEE_HTTPS_ADDR")]
    pub https_addr: Option<SocketAddr>,
    /// Couchbase KV over TLS (`couchbases://`), with TLS configured [default: 127.0.0.1:11207].
    #[arg(long, env = "SETTEE_KV_TLS_ADDR")]
    pub kv_tls_addr: Option<SocketAddr>,
    /// The management port (`/pools`, `/metrics`) over HTTPS, with TLS configured
    /// [default: 127.0.0.1:18091].
    #[arg(long, env = "SETTEE_MGMT_TLS_ADDR")]
    pub mgmt_tls_addr: Option<SocketAddr>,
    /// Offer SASL PLAIN on the KV port (sends the password in clear; for old clients only).
    #[arg(long, env = "SETTEE_KV_ALLOW_PLAIN")]
    pub kv_allow_plain: bool,
    /// Share of a 100 ms window a pipelining KV connection must keep its thread busy to be moved
    /// to the bulk lane, threads of its own (0: after its first window of pipelined requests;
    /// 1 or more: never) [default: 0.5].
    #[arg(long, env = "SETTEE_KV_BULK_BUSY_SHARE")]
    pub kv_bulk_busy_share: Option<f64>,
    /// Most HTTP connections open at once; more are answered 503 and closed, clamped to what
    /// the open-files limit allows [default: 2048, CouchDB's mochiweb `max`].
    #[arg(long, env = "SETTEE_HTTP_MAX_CONNECTIONS")]
    pub http_max_connections: Option<usize>,
    /// An HTTP connection waiting for a request is closed after this long, ms; 0: never
    /// [default: 300000, mochiweb's request-line timeout].
    #[arg(long, env = "SETTEE_HTTP_IDLE_TIMEOUT_MS")]
    pub http_idle_timeout_ms: Option<u64>,
    /// A request's headers must be complete this long after its first byte, ms; 0: no limit
    /// [default: 30000, mochiweb's HEADERS_RECV_TIMEOUT].
    #[arg(long, env = "SETTEE_HTTP_HEADER_TIMEOUT_MS")]
    pub http_header_timeout_ms: Option<u64>,
    /// A request body stalling this long between two reads is answered 408, ms; 0: no limit
    /// [default: 300000, mochiweb's body read timeout].
    #[arg(long, env = "SETTEE_HTTP_BODY_TIMEOUT_MS")]
    pub http_body_timeout_ms: Option<u64>,
    /// Most KV connections open at once; more are closed on accept, clamped to what the
    /// open-files limit allows [default: 60000, Couchbase `max_connections`].
    #[arg(long, env = "SETTEE_KV_MAX_CONNECTIONS")]
    pub kv_max_connections: Option<usize>,
    /// A KV connection that has not authenticated by then is closed, ms; 0: never
    /// [default: 300000, as kv_engine].
    #[arg(long, env = "SETTEE_KV_AUTH_TIMEOUT_MS")]
    pub kv_auth_timeout_ms: Option<u64>,
    /// A KV connection that leaves a frame unfinished, no byte arriving for this long, is
    /// closed, ms; 0: never [default: 30000].
    #[arg(long, env = "SETTEE_KV_PARTIAL_FRAME_TIMEOUT_MS")]
    pub kv_partial_frame_timeout_ms: Option<u64>,
    /// A KV connection with nothing in flight and nothing arriving for this long is closed,
    /// ms; 0: never [default: 0, as kv_engine].
    #[arg(long, env = "SETTEE_KV_IDLE_TIMEOUT_MS")]
    pub kv_idle_timeout_ms: Option<u64>,
    /// A KV connection whose socket takes none of its unsent replies for this long (a client
    /// that stopped reading) is closed, ms; 0: never [default: 360000, as kv_engine].
    #[arg(long, env = "SETTEE_KV_SEND_QUEUE_STUCK_TIMEOUT_MS")]
    pub kv_send_queue_stuck_timeout_ms: Option<u64>,
    /// Unsent reply bytes a KV connection may hold before it stops reading requests until
    /// its socket drains [default: 1048576, kv_engine `max_send_queue_size`].
    #[arg(long, env = "SETTEE_KV_MAX_SEND_QUEUE_SIZE")]
    pub kv_max_send_queue_size: Option<usize>,
    /// Unsent reply bytes of all KV connections together; above it each connection may hold
    /// only 64 KiB [default: 268435456].
    #[arg(long, env = "SETTEE_KV_MAX_SEND_QUEUE_TOTAL")]
    pub kv_max_send_queue_total: Option<usize>,
    /// Server admin as USER:PASSWORD (repeatable). Without one, a password is generated once
    /// and kept in the data directory.
    #[arg(long, env = "SETTEE_ADMIN", value_delimiter = ',')]
    pub admin: Vec<String>,
    /// Largest document accepted, bytes [default: 8000000].
    #[arg(long, env = "SETTEE_MAX_DOCUMENT_SIZE")]
    pub max_document_size: Option<usize>,
    /// Largest HTTP request body accepted, bytes [default: 67108864].
    #[arg(long, env = "SETTEE_MAX_REQUEST_SIZE")]
    pub max_request_size: Option<usize>,
    /// Most documents in one bulk request [default: 10000].
    #[arg(long, env = "SETTEE_MAX_DOCS_PER_BULK")]
    pub max_docs_per_bulk: Option<usize>,
    /// Deepest JSON nesting accepted [default: 100].
    #[arg(long, env = "SETTEE_MAX_JSON_DEPTH")]
    pub max_json_depth: Option<usize>,
    /// How often expired documents are purged, seconds [default: 60].
    #[arg(long, env = "SETTEE_EXPIRY_PURGE_INTERVAL")]
    pub expiry_purge_interval: Option<u64>,
    /// PBKDF2 iterations for new `_users` passwords [default: 10000].
    #[arg(long, env = "SETTEE_PBKDF2_ITERATIONS")]
    pub pbkdf2_iterations: Option<u32>,
    /// Memory for hot documents served without touching RocksDB, bytes; 0 turns the cache
    /// off [default: 268435456].
    #[arg(long, env = "SETTEE_DOC_CACHE_SIZE")]
    pub doc_cache_size: Option<usize>,
    /// Longest one JavaScript call (a batch of map calls, a reduce) may run, ms
    /// [default: 5000, CouchDB's os_process_timeout].
    #[arg(long, env = "SETTEE_JS_TIMEOUT_MS")]
    pub js_timeout_ms: Option<u64>,
    /// Heap limit of each JavaScript runtime (one per core), bytes [default: 268435456].
    #[arg(long, env = "SETTEE_JS_MEMORY")]
    pub js_memory: Option<usize>,
    /// What repeated failed logins of a user from one address do: off, warn (log only) or
    /// enforce (refuse that user from that address for a while) [default: enforce, CouchDB's
    /// `[chttpd_auth_lockout] mode`].
    #[arg(long, env = "SETTEE_AUTH_LOCKOUT_MODE")]
    pub auth_lockout_mode: Option<settee_auth::LockoutMode>,
    /// Failed logins that lock a user out from an address [default: 5, CouchDB's `threshold`].
    #[arg(long, env = "SETTEE_AUTH_LOCKOUT_THRESHOLD")]
    pub auth_lockout_threshold: Option<u32>,
    /// How long failures are remembered, from the first one, ms [default: 300000, CouchDB's
    /// `max_lifetime`].
    #[arg(long, env = "SETTEE_AUTH_LOCKOUT_MAX_LIFETIME")]
    pub auth_lockout_max_lifetime: Option<u64>,
    /// Most (address, user) pairs remembered [default: 10000, CouchDB's `max_objects`].
    #[arg(long, env = "SETTEE_AUTH_LOCKOUT_MAX_OBJECTS")]
    pub auth_lockout_max_objects: Option<usize>,
    /// Time the JavaScript filter calls of one `_changes` request may take together (a normal
    /// feed; each batch of a longpoll or continuous feed), ms; past it the request fails with
    /// os_process_error [default: 5000].
    #[arg(long, env = "SETTEE_CHANGES_FILTER_TIMEOUT_MS")]
    pub changes_filter_timeout_ms: Option<u64>,
    /// Answer cross-origin requests from the `--cors-origins` (CouchDB's `[chttpd]
    /// enable_cors`) [default: off].
    #[arg(long, env = "SETTEE_CORS_ENABLE")]
    pub cors_enable: bool,
    /// Origins allowed to make cross-origin requests, comma-separated (`https://app.example`),
    /// or `*` for any (CouchDB's `[cors] origins`) [default: none].
    #[arg(long, env = "SETTEE_CORS_ORIGINS")]
    pub cors_origins: Option<String>,
    /// Allow credentials (cookies, HTTP authentication) on cross-origin requests (CouchDB's
    /// `[cors] credentials`) [default: off].
    #[arg(long, env = "SETTEE_CORS_CREDENTIALS")]
    pub cors_credentials: bool,
    /// Methods a cross-origin preflight may ask for, comma-separated (CouchDB's `[cors]
    /// methods`) [default: CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE].
    #[arg(long, env = "SETTEE_CORS_METHODS")]
    pub cors_methods: Option<String>,
    /// Request headers a cross-origin preflight may ask for, comma-separated (CouchDB's
    /// `[cors] headers`) [default: CouchDB's list: accept, authorization, content-type, ...].
    #[arg(long, env = "SETTEE_CORS_HEADERS")]
    pub cors_headers: Option<String>,
    /// How long a browser may keep a preflight's answer, seconds (CouchDB's `[cors]
    /// max_age`) [default: 600].
    #[arg(long, env = "SETTEE_CORS_MAX_AGE")]
    pub cors_max_age: Option<u64>,
    /// The node's name in `/_membership` and `/_node/{name}` (CouchDB's Erlang node name;
    /// CouchDB's own test runs use `node1@127.0.0.1`) [default: settee@127.0.0.1].
    #[arg(long, env = "SETTEE_NODE_NAME")]
    pub node_name: Option<String>,
    /// This node's cluster address, HOST:PORT: node-to-node TCP (Raft, heartbeats, joins;
    /// docs/format/cluster-transport.md). With it the node runs in a cluster; without any
    /// cluster setting it is a lone node as before [default: none].
    #[arg(long, env = "SETTEE_CLUSTER_ADDR")]
    pub cluster_addr: Option<SocketAddr>,
    /// A member's cluster address to join through on the first start; without it the first
    /// start makes a new one-node cluster. Ignored once the node has a stored Raft log.
    #[arg(long, env = "SETTEE_JOIN")]
    pub join: Option<String>,
    /// The secret every member of the cluster shares (at least 16 bytes): proved in each
    /// connection's handshake, never sent. Prefer the environment variable to the flag.
    #[arg(long, env = "SETTEE_CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Option<String>,
    /// This node's id in the cluster, used on its first clustered start and then kept in
    /// DATA_DIR/node_id [default: random].
    #[arg(long, env = "SETTEE_NODE_ID")]
    pub node_id: Option<u64>,
    /// Interim hook until the cluster map assigns replicas (docs/format/replica.md): follow
    /// KVADDR/BUCKET[/VBUCKETS] as a replica (VBUCKETS: `all` or a list such as `0-3,7`).
    #[arg(long, env = "SETTEE_REPLICA_OF", hide = true)]
    pub replica_of: Option<String>,
    /// How a rebalance copies a vbucket to a new node: `files` (its documents and index rows
    /// as sorted files, docs/format/rebalance.md) or `rebuild` (streamed from seqno 0 and
    /// indexed again on the target, as Couchbase before 7.6) [default: files].
    #[arg(long, env = "SETTEE_REBALANCE_MODE")]
    pub rebalance_mode: Option<String>,
    /// The node's rebalance transfer throttle in MB/s, shared by every move it sends or
    /// receives (Couchbase's file-based rebalance default) [default: 200].
    #[arg(long, env = "SETTEE_REBALANCE_THROTTLE_MBPS")]
    pub rebalance_throttle_mbps: Option<u32>,
}

#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    http_addr: Option<SocketAddr>,
    kv_addr: Option<SocketAddr>,
    mgmt_addr: Option<SocketAddr>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    https_addr: Option<SocketAddr>,
    kv_tls_addr: Option<SocketAddr>,
    mgmt_tls_addr: Option<SocketAddr>,
    kv_allow_plain: Option<bool>,
    kv_bulk_busy_share: Option<f64>,
    http_max_connections: Option<usize>,
    http_idle_timeout_ms: Option<u64>,
    http_header_timeout_ms: Option<u64>,
    http_body_timeout_ms: Option<u64>,
    kv_max_connections: Option<usize>,
    kv_auth_timeout_ms: Option<u64>,
    kv_partial_frame_timeout_ms: Option<u64>,
    kv_idle_timeout_ms: Option<u64>,
    kv_send_queue_stuck_timeout_ms: Option<u64>,
    kv_max_send_queue_size: Option<usize>,
    kv_max_send_queue_total: Option<usize>,
    admin: Option<Vec<String>>,
    max_document_size: Option<usize>,
    max_request_size: Option<usize>,
    max_docs_per_bulk: Option<usize>,
    max_json_depth: Option<usize>,
    expiry_purge_interval: Option<u64>,
    pbkdf2_iterations: Option<u32>,
    doc_cache_size: Option<usize>,
    js_timeout_ms: Option<u64>,
    js_memory: Option<usize>,
    auth_lockout_mode: Option<String>,
    auth_lockout_threshold: Option<u32>,
    auth_lockout_max_lifetime: Option<u64>,
    auth_lockout_max_objects: Option<usize>,
    changes_filter_timeout_ms: Option<u64>,
    cors_enable: Option<bool>,
    cors_origins: Option<String>,
    cors_credentials: Option<bool>,
    cors_methods: Option<String>,
    cors_headers: Option<String>,
    cors_max_age: Option<u64>,
    node_name: Option<String>,
    cluster_addr: Option<SocketAddr>,
    join: Option<String>,
    cluster_secret: Option<String>,
    node_id: Option<u64>,
    rebalance_mode: Option<String>,
    rebalance_throttle_mbps: Option<u32>,
}

/// Settings after merging flags, environment, file and defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub http_addr: SocketAddr,
    pub kv_addr: SocketAddr,
    pub mgmt_addr: SocketAddr,
    /// HTTPS and KV over TLS, when a certificate and key are configured.
    pub tls: Option<TlsSettings>,
    pub kv_allow_plain: bool,
    pub kv_bulk_busy_share: f64,
    /// Connection counts, timeouts and send queues of both doors (`0` ms: no timeout).
    pub connections: ConnectionSettings,
    pub admins: Vec<(String, String)>,
    pub max_document_size: usize,
    pub max_request_size: usize,
    pub max_docs_per_bulk: usize,
    pub max_json_depth: usize,
    pub expiry_purge_interval_secs: u64,
    pub pbkdf2_iterations: u32,
    pub doc_cache_size: usize,
    pub js_timeout_ms: u64,
    pub js_memory: usize,
    pub auth_lockout: settee_auth::LockoutConfig,
    pub changes_filter_timeout_ms: u64,
    /// Cross-origin requests (CouchDB's `[cors]`).
    pub cors: settee_http::cors::CorsConfig,
    pub node_name: String,
    /// `None`: a lone node, as before clusters existed.
    pub cluster: Option<ClusterSettings>,
}

/// How this node takes part in a cluster (`--cluster-addr` and its companions).
#[derive(Clone)]
pub struct ClusterSettings {
    pub addr: SocketAddr,
    pub join: Option<String>,
    pub secret: String,
    pub node_id: Option<u64>,
    /// `--replica-of` (crates/settee/src/replica.rs).
    pub replica_of: Option<String>,
    /// `--rebalance-mode`: true for `files`, false for `rebuild`.
    pub rebalance_files: bool,
    pub rebalance_throttle_mbps: u32,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("addr", &self.addr)
            .field("join", &self.join)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

/// Where TLS is served and with which certificate.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub files: settee_tls::TlsFiles,
    pub https_addr: SocketAddr,
    pub kv_tls_addr: SocketAddr,
    pub mgmt_tls_addr: SocketAddr,
}

/// The doors' connection limits as configured (before `fd_limit` clamps the maxima).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionSettings {
    pub http_max_connections: usize,
    pub http_idle_timeout_ms: u64,
    pub http_header_timeout_ms: u64,
    pub http_body_timeout_ms: u64,
    pub kv_max_connections: usize,
    pub kv_auth_timeout_ms: u64,
    pub kv_partial_frame_timeout_ms: u64,
    pub kv_idle_timeout_ms: u64,
    pub kv_send_queue_stuck_timeout_ms: u64,
    pub kv_max_send_queue_size: usize,
    pub kv_max_send_queue_total: usize,
}

/// A timeout in ms as a setting: `None` (no timeout) for 0.
pub fn timeout(ms: u64) -> Option<std::time::Duration> {
    (ms > 0).then(|| std::time::Duration::from_millis(ms))
}

fn ms(timeout: Option<std::time::Duration>) -> u64 {
    timeout.map_or(0, |timeout| timeout.as_millis() as u64)
}

pub fn default_data_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    home.join(".local/share/settee")
}

impl ServeArgs {
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let file: FileConfig = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let defaults = settee_http::HttpConfig::default();
        let lockout_defaults = settee_auth::LockoutConfig::default();
        let lockout_mode = match (self.auth_lockout_mode, &file.auth_lockout_mode) {
            (Some(mode), _) => mode,
            (None, Some(text)) => text
                .parse()
                .map_err(|error: String| anyhow::anyhow!("auth_lockout_mode: {error}"))?,
            (None, None) => lockout_defaults.mode,
        };
        let cors = self.cors(&file);
        let tls = self.tls(&file)?;
        let cluster = self.cluster(&file)?;
        let admin_specs = if self.admin.is_empty() {
            file.admin.unwrap_or_default()
        } else {
            self.admin.clone()
        };
        let admins = admin_specs
            .iter()
            .map(|spec| {
                spec.split_once(':')
                    .map(|(user, password)| (user.to_string(), password.to_string()))
                    .filter(|(user, password)| !user.is_empty() && !password.is_empty())
                    .with_context(|| format!("--admin must be USER:PASSWORD, got {spec:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let kv_defaults = settee_kv::KvLimits::default();
        let connections = ConnectionSettings {
            http_max_connections: self
                .http_max_connections
                .or(file.http_max_connections)
                .unwrap_or(defaults.max_connections),
            http_idle_timeout_ms: self
                .http_idle_timeout_ms
                .or(file.http_idle_timeout_ms)
                .unwrap_or(ms(defaults.idle_timeout)),
            http_header_timeout_ms: self
                .http_header_timeout_ms
                .or(file.http_header_timeout_ms)
                .unwrap_or(ms(defaults.header_timeout)),
            http_body_timeout_ms: self
                .http_body_timeout_ms
                .or(file.http_body_timeout_ms)
                .unwrap_or(ms(defaults.body_timeout)),
            kv_max_connections: self
                .kv_max_connections
                .or(file.kv_max_connections)
                .unwrap_or(kv_defaults.max_connections),
            kv_auth_timeout_ms: self
                .kv_auth_timeout_ms
                .or(file.kv_auth_timeout_ms)
                .unwrap_or(ms(kv_defaults.auth_timeout)),
            kv_partial_frame_timeout_ms: self
                .kv_partial_frame_timeout_ms
                .or(file.kv_partial_frame_timeout_ms)
                .unwrap_or(ms(kv_defaults.partial_frame_timeout)),
            kv_idle_timeout_ms: self
                .kv_idle_timeout_ms
                .or(file.kv_idle_timeout_ms)
                .unwrap_or(ms(kv_defaults.idle_timeout)),
            kv_send_queue_stuck_timeout_ms: self
                .kv_send_queue_stuck_timeout_ms
                .or(file.kv_send_queue_stuck_timeout_ms)
                .unwrap_or(ms(kv_defaults.send_queue_stuck_timeout)),
            kv_max_send_queue_size: self
                .kv_max_send_queue_size
                .or(file.kv_max_send_queue_size)
                .unwrap_or(kv_defaults.output_bytes_max),
            kv_max_send_queue_total: self
                .kv_max_send_queue_total
                .or(file.kv_max_send_queue_total)
                .unwrap_or(kv_defaults.node_output_bytes_max),
        };
        Ok(Settings {
            connections,
            tls,
            data_dir: self
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(default_data_dir),
            http_addr: self
                .http_addr
                .or(file.http_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 5984))),
            kv_addr: self
                .kv_addr
                .or(file.kv_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 11210))),
            mgmt_addr: self
                .mgmt_addr
                .or(file.mgmt_addr)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8091))),
            kv_allow_plain: self.kv_allow_plain || file.kv_allow_plain.unwrap_or(false),
            kv_bulk_busy_share: self
                .kv_bulk_busy_share
                .or(file.kv_bulk_busy_share)
                .unwrap_or(settee_kv::BulkLaneConfig::default().busy_share),
            admins,
            max_document_size: self
                .max_document_size
                .or(file.max_document_size)
                .unwrap_or(defaults.max_document_size_bytes),
            max_request_size: self
                .max_request_size
                .or(file.max_request_size)
                .unwrap_or(defaults.max_request_size_bytes),
            max_docs_per_bulk: self
                .max_docs_per_bulk
                .or(file.max_docs_per_bulk)
                .unwrap_or(defaults.max_docs_per_bulk),
            max_json_depth: self
                .max_json_depth
                .or(file.max_json_depth)
                .unwrap_or(defaults.max_json_depth),
            expiry_purge_interval_secs: self
                .expiry_purge_interval
                .or(file.expiry_purge_interval)
                .unwrap_or(60),
            pbkdf2_iterations: self
                .pbkdf2_iterations
                .or(file.pbkdf2_iterations)
                .unwrap_or(settee_auth::PBKDF2_ITERATIONS_DEFAULT),
            js_timeout_ms: self
                .js_timeout_ms
                .or(file.js_timeout_ms)
                .unwrap_or(settee_views::ViewsConfig::default().js.timeout_ms),
            js_memory: self
                .js_memory
                .or(file.js_memory)
                .unwrap_or(settee_views::ViewsConfig::default().js.memory_bytes_max),
            auth_lockout: settee_auth::LockoutConfig {
                mode: lockout_mode,
                threshold: self
                    .auth_lockout_threshold
                    .or(file.auth_lockout_threshold)
                    .unwrap_or(lockout_defaults.threshold),
                max_lifetime: self
                    .auth_lockout_max_lifetime
                    .or(file.auth_lockout_max_lifetime)
                    .map(std::time::Duration::from_millis)
                    .unwrap_or(lockout_defaults.max_lifetime),
                max_objects: self
                    .auth_lockout_max_objects
                    .or(file.auth_lockout_max_objects)
                    .unwrap_or(lockout_defaults.max_objects),
            },
            changes_filter_timeout_ms: self
                .changes_filter_timeout_ms
                .or(file.changes_filter_timeout_ms)
                .unwrap_or(settee_http::config::CHANGES_FILTER_TIMEOUT_MS_DEFAULT),
            doc_cache_size: self.doc_cache_size.or(file.doc_cache_size).unwrap_or(
                settee_engine::EngineOptions::default()
                    .store
                    .row_cache_bytes,
            ),
            cors,
            cluster,
            node_name: self
                .node_name
                .clone()
                .or(file.node_name)
                .unwrap_or_else(|| settee_http::config::NODE_NAME_DEFAULT.to_string()),
        })
    }

    fn tls(&self, file: &FileConfig) -> anyhow::Result<Option<TlsSettings>> {
        let cert = self.tls_cert.clone().or(file.tls_cert.clone());
        let key = self.tls_key.clone().or(file.tls_key.clone());
        let https_addr = self.https_addr.or(file.https_addr);
        let kv_tls_addr = self.kv_tls_addr.or(file.kv_tls_addr);
        let mgmt_tls_addr = self.mgmt_tls_addr.or(file.mgmt_tls_addr);
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsSettings {
                files: settee_tls::TlsFiles { cert, key },
                https_addr: https_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 6984))),
                kv_tls_addr: kv_tls_addr
                    .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 11207))),
                mgmt_tls_addr: mgmt_tls_addr
                    .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 18091))),
            })),
            (None, None)
                if https_addr.is_none() && kv_tls_addr.is_none() && mgmt_tls_addr.is_none() =>
            {
                Ok(None)
            }
            (None, None) => anyhow::bail!(
                "--https-addr, --kv-tls-addr and --mgmt-tls-addr need --tls-cert and --tls-key"
            ),
            _ => anyhow::bail!("--tls-cert and --tls-key must be given together"),
        }
    }

    /// The cluster settings, checked together: a secret without an address, or a join without
    /// either, is a mistake better refused at start than discovered in a partition.
    fn cluster(&self, file: &FileConfig) -> anyhow::Result<Option<ClusterSettings>> {
        let addr = self.cluster_addr.or(file.cluster_addr);
        let join = self.join.clone().or(file.join.clone());
        let secret = self.cluster_secret.clone().or(file.cluster_secret.clone());
        let node_id = self.node_id.or(file.node_id);
        let Some(addr) = addr else {
            if join.is_some() || secret.is_some() || node_id.is_some() || self.replica_of.is_some()
            {
                anyhow::bail!(
                    "--join, --cluster-secret, --node-id and --replica-of need --cluster-addr"
                );
            }
            return Ok(None);
        };
        if addr.ip().is_unspecified() {
            anyhow::bail!("--cluster-addr {addr}: peers reach a node at this address, so it must be a concrete one");
        }
        let secret =
            secret.context("--cluster-addr needs --cluster-secret (or SETTEE_CLUSTER_SECRET)")?;
        if secret.len() < settee_cluster_net::handshake::SECRET_BYTES_MIN {
            anyhow::bail!(
                "the cluster secret must have at least {} bytes",
                settee_cluster_net::handshake::SECRET_BYTES_MIN
            );
        }
        if node_id == Some(0) {
            anyhow::bail!("--node-id 0 is reserved (it means \"not yet numbered\")");
        }
        let rebalance_files = match self
            .rebalance_mode
            .clone()
            .or(file.rebalance_mode.clone())
            .as_deref()
        {
            None | Some("files") => true,
            Some("rebuild") => false,
            Some(other) => anyhow::bail!("--rebalance-mode {other}: `files` or `rebuild`"),
        };
        let rebalance_throttle_mbps = self
            .rebalance_throttle_mbps
            .or(file.rebalance_throttle_mbps)
            .unwrap_or(settee_move_files::THROTTLE_MBPS_DEFAULT);
        if rebalance_throttle_mbps == 0 {
            anyhow::bail!("--rebalance-throttle-mbps must be at least 1");
        }
        Ok(Some(ClusterSettings {
            addr,
            join,
            secret,
            node_id,
            replica_of: self.replica_of.clone(),
            rebalance_files,
            rebalance_throttle_mbps,
        }))
    }

    fn cors(&self, file: &FileConfig) -> settee_http::cors::CorsConfig {
        use settee_http::cors::{split_list, CorsConfig};
        let defaults = CorsConfig::default();
        let text = |flag: &Option<String>, key: &Option<String>| flag.clone().or(key.clone());
        let mut cors = CorsConfig {
            enabled: self.cors_enable || file.cors_enable.unwrap_or(false),
            origins: text(&self.cors_origins, &file.cors_origins)
                .map(|origins| split_list(&origins))
                .unwrap_or_default(),
            credentials: self.cors_credentials || file.cors_credentials.unwrap_or(false),
            methods: text(&self.cors_methods, &file.cors_methods)
                .map(|methods| split_list(&methods))
                .unwrap_or(defaults.methods),
            max_age_secs: self
                .cors_max_age
                .or(file.cors_max_age)
                .unwrap_or(defaults.max_age_secs),
            ..CorsConfig::default()
        };
        if let Some(headers) = text(&self.cors_headers, &file.cors_headers) {
            cors = cors.with_headers(&headers);
        }
        cors
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn settings(flags: &[&str]) -> anyhow::Result<Settings> {
        let cli = Cli::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))?;
        cli.args.settings()
    }

    fn refusal(flags: &[&str]) -> String {
        match settings(flags) {
            Ok(settings) => panic!("{flags:?} accepted: {:?}", settings.cluster),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn cluster_settings_are_checked_together() {
        assert!(settings(&[]).expect("no cluster").cluster.is_none());
        let secret = "sixteen bytes at least";
        let cluster = settings(&[
            "--cluster-addr",
            "127.0.0.1:4369",
            "--cluster-secret",
            secret,
        ])
        .expect("a cluster")
        .cluster
        .expect("cluster settings");
        assert_eq!(cluster.addr.port(), 4369);
        assert!(
            !format!("{cluster:?}").contains(secret),
            "the secret is never printed"
        );
        assert!(refusal(&["--join", "127.0.0.1:1"]).contains("need --cluster-addr"));
        assert!(refusal(&["--cluster-addr", "127.0.0.1:4369"]).contains("--cluster-secret"));
        assert!(refusal(&[
            "--cluster-addr",
            "127.0.0.1:4369",
            "--cluster-secret",
            "short"
        ])
        .contains("at least 16 bytes"));
        assert!(
            refusal(&["--cluster-addr", "0.0.0.0:4369", "--cluster-secret", secret])
                .contains("concrete")
        );
        assert!(refusal(&[
            "--cluster-addr",
            "127.0.0.1:4369",
            "--cluster-secret",
            secret,
            "--node-id",
            "0"
        ])
        .contains("reserved"));
    }

    #[test]
    fn cluster_settings_come_from_the_config_file_too() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("settee.toml");
        let text = "cluster_addr = \"127.0.0.1:4370\"\njoin = \"127.0.0.1:4369\"\n\
                    cluster_secret = \"sixteen bytes at least\"\nnode_id = 7\n";
        std::fs::write(&path, text).expect("write");
        let path = path.to_str().expect("UTF-8 path");
        let cluster = settings(&["--config", path])
            .expect("settings")
            .cluster
            .expect("a cluster");
        assert_eq!(cluster.addr.port(), 4370);
        assert_eq!(cluster.join.as_deref(), Some("127.0.0.1:4369"));
        assert_eq!(cluster.node_id, Some(7));
        // A flag wins over the file.
        let cluster = settings(&["--config", path, "--node-id", "9"])
            .expect("settings")
            .cluster
            .expect("a cluster");
        assert_eq!(cluster.node_id, Some(9));
    }

    #[test]
    fn tls_comes_from_flags_or_the_file_with_couchdbs_and_couchbases_ports() {
        assert!(settings(&[]).unwrap().tls.is_none());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settee.toml");
        std::fs::write(
            &file,
            "tls_cert = \"/etc/n.crt\"\ntls_key = \"/etc/n.key\"\nhttps_addr = \"127.0.0.1:7000\"\n",
        )
        .unwrap();
        let config = file.to_str().unwrap();
        let tls = settings(&["--config", config]).unwrap().tls.unwrap();
        assert_eq!(tls.files.cert, PathBuf::from("/etc/n.crt"));
        assert_eq!(tls.https_addr, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(tls.kv_tls_addr, "127.0.0.1:11207".parse().unwrap());
        // A flag wins over the file.
        let tls = settings(&["--config", config, "--https-addr", "127.0.0.1:7001"])
            .unwrap()
            .tls
            .unwrap();
        assert_eq!(tls.https_addr, "127.0.0.1:7001".parse().unwrap());
        let tls = settings(&["--tls-cert", "a.crt", "--tls-key", "a.key"])
            .unwrap()
            .tls
            .unwrap();
        assert_eq!(tls.https_addr, "127.0.0.1:6984".parse().unwrap());
    }

    #[test]
    fn half_a_tls_configuration_is_refused() {
        let error = settings(&["--tls-cert", "a.crt"]).unwrap_err();
        assert!(
            error.to_string().contains("--tls-cert and --tls-key"),
            "{error}"
        );
        let error = settings(&["--kv-tls-addr", "127.0.0.1:1"]).unwrap_err();
        assert!(error.to_string().contains("need --tls-cert"), "{error}");
    }
}
