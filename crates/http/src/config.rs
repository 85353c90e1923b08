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
    /// `uuid` reported by `GET /`.
    pub server_uuid: String,
}

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
            server_uuid: "00000000000000000000000000000000".into(),
        }
    }
}
