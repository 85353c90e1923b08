/// Default [`HttpConfig::changes_filter_timeout_ms`]: CouchDB's `os_process_timeout`.
pub const CHANGES_FILTER_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// Limits and settings of the CouchDB door. Each is a named value with CouchDB's default where
/// CouchDB has one.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Largest document body accepted (CouchDB `max_document_size`, 8 MB).
    pub max_document_size_bytes: usize,
    /// Largest request body accepted (CouchDB `max_http_request_size`).
    pub max_request_size_bytes: usize,
    /// Largest attachment body accepted.
    pub max_attachment_size_bytes: usize,
    /// Documents per `_bulk_docs` / `_bulk_get` / `keys` request.
    pub max_docs_per_bulk: usize,
    /// Document ids and attachment names, in bytes (the engine's key limit).
    pub max_key_bytes: usize,
    /// Deepest JSON nesting accepted in a request body.
    pub max_json_depth: usize,
    /// Vbuckets of a database created without `?q=`.
    pub default_vbuckets: u16,
    /// Cookie session lifetime (CouchDB `[chttpd_auth] timeout`, 600 s).
    pub session_timeout_secs: u64,
    /// `_changes` heartbeat/timeout upper bound.
    pub changes_timeout_max_ms: u64,
    /// Most feeds open at once (continuous + longpoll), to bound memory.
    pub max_open_feeds: usize,
    /// Time the JavaScript filter calls of one `_changes` request may take together (a normal
    /// feed; each batch of a longpoll or continuous feed), on top of the limit per call
    /// (CouchDB's `os_process_timeout`, 5 s, which CouchDB applies per document).
    pub changes_filter_timeout_ms: u64,
    /// `uuid` reported by `GET /`.
    pub server_uuid: String,
    /// Most connections open at once; more get a 503 (mochiweb's `max`, 2048).
    pub max_connections: usize,
    /// A connection waiting for a request is closed after this long (mochiweb: 300 s).
    pub idle_timeout: Option<std::time::Duration>,
    /// A request's headers must be complete this long after its first byte (mochiweb: 30 s).
    pub header_timeout: Option<std::time::Duration>,
    /// A request body that stalls this long between two reads is answered 408 (mochiweb:
    /// 300 s).
    pub body_timeout: Option<std::time::Duration>,
    /// Bytes of streamed answers (views, `_all_docs`, `_find`) the door may hold unsent, all
    /// connections together, before each answer is held to one chunk in flight.
    pub stream_bytes_max: usize,
    /// Cross-origin requests (CouchDB's `[cors]`; off by default).
    pub cors: settee_http_wire::cors::CorsConfig,
    /// The node's name in `/_membership` and `/_node/{name}` (an Erlang node name in
    /// CouchDB; `/_node/_local` names it too).
    pub node_name: String,
    /// Where `POST /_node/_local/_backup` makes its checkpoints (`docs/format/backup.md`);
    /// `None`: backups are not offered.
    pub backup_dir: Option<std::path::PathBuf>,
}

/// Default [`HttpConfig::node_name`]: CouchDB's default node name is `couchdb@127.0.0.1`.
pub const NODE_NAME_DEFAULT: &str = "settee@127.0.0.1";

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_document_size_bytes: settee_engine::limits::DOC_BYTES_MAX_DEFAULT,
            max_request_size_bytes: 64 << 20,
            max_attachment_size_bytes: 64 << 20,
            max_docs_per_bulk: 10_000,
            max_key_bytes: settee_engine::KEY_BYTES_MAX,
            max_json_depth: settee_engine::limits::JSON_DEPTH_MAX_DEFAULT,
            default_vbuckets: 64,
            session_timeout_secs: 600,
            changes_timeout_max_ms: 3_600_000,
            max_open_feeds: 10_000,
            changes_filter_timeout_ms: CHANGES_FILTER_TIMEOUT_MS_DEFAULT,
            server_uuid: "00000000000000000000000000000000".into(),
            max_connections: crate::connection::MAX_CONNECTIONS_DEFAULT,
            idle_timeout: Some(crate::connection::IDLE_TIMEOUT_DEFAULT),
            header_timeout: Some(crate::connection::HEADER_TIMEOUT_DEFAULT),
            body_timeout: Some(crate::connection::BODY_TIMEOUT_DEFAULT),
            stream_bytes_max: crate::streamed::STREAM_BYTES_MAX_DEFAULT,
            cors: settee_http_wire::cors::CorsConfig::default(),
            node_name: NODE_NAME_DEFAULT.into(),
            backup_dir: None,
        }
    }
}
