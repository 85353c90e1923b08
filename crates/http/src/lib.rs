//! settee's CouchDB front door: the Apache CouchDB 3.x HTTP API over the document engine.
//!
//! [`serve`] accepts connections on an already-bound listener until its shutdown future
//! resolves. Each request is authenticated ([`auth`]), routed by its decoded path segments
//! ([`router`]) to a handler module (`server_api`, `db_api`, `doc_api`, `bulk_api`,
//! `changes_api`, `attachments_api`, `view_api`, `mango_api`), and every failure becomes one
//! CouchDB error body through the table in [`error`]. Document JSON is split and spliced in
//! [`couch_doc`], never re-serialised on reads.
#![deny(clippy::unwrap_used)]

pub mod attachments_api;
pub use settee_http_core::auth;
pub mod backup_api;
pub mod bulk_api;
pub mod changes_api;
pub use settee_couch_doc::couch_doc;
pub use settee_http_core::config;
pub use settee_http_core::connection;
pub mod db_api;
pub mod design_fns;
pub mod designs;
pub mod doc_api;
pub use settee_http_core::error;
pub mod form_upload;
pub mod forward;
pub use settee_http_core::handshake;
pub mod js_filter;
pub use settee_http_core::jsonp;
pub use settee_http_core::location;
pub mod mango_api;
pub use settee_http_wire::multipart;
pub mod node_api;
pub mod partition_api;
pub mod replicator_api;
pub use settee_couch_doc::replicator_docs;
pub mod rewrite_api;
pub use settee_http_core::request;
pub use settee_http_core::response;
pub mod router;
pub mod server_api;
pub use settee_http_core::streamed;
pub mod subdoc_api;
pub use settee_http_wire::uuids;
pub mod view_api;
pub use settee_http_core::view_params;
pub mod view_rows;
pub mod write_quorum;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use settee_engine::Engine;
use tokio::net::TcpListener;

pub use config::HttpConfig;
/// CORS settings are part of [`HttpConfig`].
pub use settee_http_wire::cors;

/// Starts the node's replicator: local database names are reached at `local_url` with a
/// session cookie minted for the user a job runs as (anonymously when it runs as no one, or
/// as a user who no longer exists), so a job has exactly that user's rights.
pub fn start_replicator(
    state: &Arc<HttpState>,
    local_url: String,
) -> Arc<settee_replicator::Replicator> {
    let weak = Arc::downgrade(state);
    let local_auth: settee_replicator::LocalAuth = Arc::new(move |user: Option<&str>| {
        let state = weak.upgrade()?;
        let cookie = state
            .auth
            .cookie_for(&state.engine, user?, auth::now_secs())?;
        Some(("Cookie".to_string(), format!("AuthSession={cookie}")))
    });
    let env = settee_replicator::JobEnv {
        client: settee_replicator::client::new_client(),
        server_uuid: state.config.server_uuid.clone(),
        local_url,
        local_auth,
    };
    let replicator = settee_replicator::Replicator::new(env);
    let _ = state.replicator.set(replicator.clone());
    replicator
}

/// What a clustered node shows operators (`/_membership`, `/_node/{node}/_cluster`) and how
/// it creates and deletes databases (through the cluster map), set once by the binary when it
/// runs in a cluster: the HTTP door knows nothing else of the cluster.
pub trait ClusterView: Send + Sync {
    /// `(all_nodes, cluster_nodes)` as CouchDB's `/_membership` names them.
    fn membership(&self) -> (Vec<String>, Vec<String>);
    /// Members, their states, the Raft leader and the map revision, as this node knows them.
    fn status(&self) -> serde_json::Value;
    /// `PUT /db` of a new database: `replicas` from CouchDB's `n` (n - 1), `None` for the
    /// cluster's default. Answers once the database is committed and open on this node.
    fn create_db(&self, db: &str, vbuckets: u16, replicas: Option<u8>) -> ClusterChange<'_>;
    /// `DELETE /db`: `Ok(false)` when the cluster map does not hold `db` (a database this node
    /// had before it joined, deleted locally as before).
    fn delete_db(&self, db: &str) -> ClusterDelete<'_>;
    /// Whether this node answers for document `doc_id` of database `db` (`bucket` or
    /// `bucket$scope$collection`): its vbucket is active here, or the database is not in the
    /// cluster map. One map lookup and a CRC32, no I/O.
    fn serves_here(&self, db: &str, doc_id: &str) -> bool;
    /// Waits a moment, if need be, until this node's engine has the collections its map
    /// names for `db`'s bucket (a collection made through another node a moment ago); no I/O
    /// when nothing lags.
    fn collections_followed<'a>(&'a self, db: &'a str) -> ClusterWait<'a> {
        let _ = db;
        Box::pin(async {})
    }
    /// Whether `db` is in the cluster map while this node holds no serving lease, after
    /// waiting a moment for one: it must not answer for its active vbuckets now
    /// (docs/format/cluster-map.md, "The serving lease").
    fn unleased<'a>(&'a self, db: &'a str) -> ClusterUnleased<'a> {
        let _ = db;
        Box::pin(async { false })
    }
    /// Sends a single-document request to the active node of `doc_id`'s vbucket and returns its
    /// answer (forward.rs). The cluster fills in the map's fields of `request` (bucket,
    /// vbucket, revision, epoch) and routes again once if the active refuses a stale map.
    fn forward(&self, db: &str, doc_id: &str, request: forward::ForwardHttp) -> ClusterForward<'_>;
    /// Sends a `/_node/_local/...` request (`request`'s target) to the member named `name`
    /// (as `/_membership` lists it, or its id) and returns its answer; `None` when no member
    /// of the map has that name.
    fn to_node(&self, name: &str, request: forward::ForwardHttp) -> Option<ClusterForward<'_>>;
    /// Whether a whole-bucket request on `db` goes to several nodes (`settee-http-scatter`): the database
    /// is in the map and some of its vbuckets are active on other nodes. No I/O.
    fn scatters(&self, db: &str) -> bool;
    /// Sends a request to every node holding active vbuckets of `db`'s bucket, each for its
    /// own (a ScatterHttp; the cluster fills in the map's fields), and returns each node's
    /// answer with the vbuckets it answered for. `parts` gets the vbuckets of every such node
    /// (as the map stands when they are sent; again if a stale map makes the cluster send them
    /// once more) and gives the request for each, or `None` for a node with nothing to do.
    /// `design` (a view query's design document, as read from its active node) goes with
    /// every part.
    fn scatter<'a>(
        &'a self,
        db: &'a str,
        design: Option<&'a [u8]>,
        parts: &'a ScatterParts<'a>,
    ) -> ClusterScatter<'a>;
}

/// The merged answer of a whole-bucket request that goes to several nodes, or `None` when
/// this node answers it alone (`settee_http_scatter::hook`).
pub type ScatterHook = for<'a> fn(&'a HttpState, &'a mut request::Req) -> Scattering<'a>;
pub type Scattering<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Option<error::ApiResult<response::HttpResponse>>>
            + Send
            + 'a,
    >,
>;

/// Why the cluster did not make a database change.
#[derive(Debug)]
pub enum ClusterRefusal {
    /// The name is taken (CouchDB's 412 `file_exists`).
    Exists,
    /// Nothing committed it in time: no leader, shutting down (503).
    Unavailable(String),
    /// A forwarded request too large for the cluster transport's frame (413).
    TooLarge,
}

pub type ClusterChange<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ClusterRefusal>> + Send + 'a>>;
/// A wait of the cluster's (`ClusterView::collections_followed`).
pub type ClusterWait<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
/// What `ClusterView::unleased` answers, once it has waited.
pub type ClusterUnleased<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>>;
pub type ClusterForward<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<forward::ForwardHttpReply, ClusterRefusal>>
            + Send
            + 'a,
    >,
>;
/// What [`ClusterView::scatter`] sends: per node's vbuckets, that node's request.
pub type ScatterParts<'a> =
    dyn Fn(&[Vec<u16>]) -> Vec<Option<forward::ForwardHttp>> + Send + Sync + 'a;
pub type ClusterScatter<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<Vec<(Vec<u16>, forward::ForwardHttpReply)>, ClusterRefusal>,
            > + Send
            + 'a,
    >,
>;
pub type ClusterDelete<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, ClusterRefusal>> + Send + 'a>>;

impl From<ClusterRefusal> for error::ApiError {
    fn from(refusal: ClusterRefusal) -> error::ApiError {
        match refusal {
            ClusterRefusal::Exists => error::ApiError::FileExists,
            ClusterRefusal::Unavailable(reason) => error::ApiError::ServiceUnavailable(reason),
            ClusterRefusal::TooLarge => error::ApiError::RequestTooLarge,
        }
    }
}

/// Everything a handler can reach.
pub struct HttpState {
    pub engine: Arc<Engine>,
    pub config: HttpConfig,
    pub auth: auth::Auth,
    pub uuids: uuids::UuidGenerator,
    /// Feeds (longpoll, continuous, eventsource) open now, bounded by `max_open_feeds`.
    pub open_feeds: Arc<std::sync::atomic::AtomicUsize>,
    /// Resolves when the server shuts down, so long-running feeds end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The view indexer and its JS pool (shared with the KV door's view endpoint).
    pub views: Arc<settee_views::Views>,
    /// Set once at startup, after the listener is bound (the replicator reaches local
    /// databases through it).
    pub replicator: std::sync::OnceLock<Arc<settee_replicator::Replicator>>,
    /// JavaScript changes filters (the JavaScript pool starts on first use).
    pub js_filters: js_filter::JsFilters,
    /// Unsent bytes of the streamed answers of every connection.
    pub streams: Arc<streamed::StreamBudget>,
    /// `/_node/{node}/_config` and the runtime settings each request reads once.
    pub node_config: Arc<settee_node_config::NodeConfig>,
    /// Counted on every request (`router::handle`), shown by `/_node/{node}/_prometheus`,
    /// `_stats` and `_system` (`node_api.rs`, over `settee-metrics`).
    pub metrics: Arc<settee_metrics::NodeMetrics>,
    /// Set once at startup when the node runs in a cluster.
    pub cluster: std::sync::OnceLock<Arc<dyn ClusterView>>,
    /// Whole-bucket requests sent to every node and merged (`settee-http-scatter`), set by
    /// the binary with `cluster`; unset, every request is answered here.
    pub scatter: std::sync::OnceLock<ScatterHook>,
    /// Design documents' show, list and update functions, compiled per revision.
    pub render_programs: design_fns::RenderPrograms,
}

impl HttpState {
    pub fn new(
        engine: Arc<Engine>,
        config: HttpConfig,
        users: Arc<settee_auth::Users>,
        cookie_secret: Vec<u8>,
        shutdown: tokio::sync::watch::Receiver<bool>,
        views: Arc<settee_views::Views>,
        node_config: Arc<settee_node_config::NodeConfig>,
    ) -> HttpState {
        let auth = auth::Auth::new(users, cookie_secret, config.session_timeout_secs);
        let streams = Arc::new(streamed::StreamBudget::new(config.stream_bytes_max));
        HttpState {
            engine,
            config,
            auth,
            uuids: uuids::UuidGenerator::new(),
            open_feeds: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            shutdown,
            js_filters: js_filter::JsFilters::new(views.js().clone()),
            views,
            replicator: std::sync::OnceLock::new(),
            streams,
            node_config,
            metrics: Arc::default(),
            cluster: std::sync::OnceLock::new(),
            scatter: std::sync::OnceLock::new(),
            render_programs: Default::default(),
        }
    }

    /// Gives the accounts and the engine the authentication settings of `_config` (the
    /// accounts database, `[admins]`, the lockout mode), after every `_config` change and at
    /// startup (`startup`), where it also makes sure `_users` and the configured accounts
    /// database have `_design/_auth`. As in CouchDB, a database named later gets it when it
    /// is created (`db_api::create_db`) or at the next start, not at once.
    pub async fn configure_accounts(&self, startup: bool) {
        settee_http_core::auth_db::configure(&self.auth, &self.engine, &self.node_config);
        if !startup {
            return;
        }
        let mut dbs = vec![auth::USERS_DB.to_string(), settee_auth::authentication_db()];
        dbs.dedup();
        for db in dbs {
            if let Err(error) = settee_http_core::auth_db::ensure_auth_ddoc(&self.engine, &db).await
            {
                tracing::warn!(db, %error, "writing the accounts database's _design/_auth");
            }
        }
    }

    /// Counts into the node's metrics, which the KV door's `/metrics` shares.
    pub fn with_metrics(mut self, metrics: Arc<settee_metrics::NodeMetrics>) -> HttpState {
        self.metrics = metrics;
        self
    }
}

/// Serves the CouchDB API on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with(listener, state, shutdown, handshake::Plain).await
}

/// Serves the CouchDB API over what `handshake` makes of each accepted socket (HTTPS: a TLS
/// stream), until `shutdown` resolves.
pub async fn serve_with<H: handshake::Handshake>(
    listener: TcpListener,
    state: Arc<HttpState>,
    shutdown: impl std::future::Future<Output = ()>,
    handshake: H,
) {
    tokio::pin!(shutdown);
    let slots = settee_door::Slots::new("http", state.config.max_connections);
    let refusals = connection::Refusals::default();
    let timeouts = connection::Timeouts {
        idle: state.config.idle_timeout,
        header: state.config.header_timeout,
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(connection) => connection,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = slots.take() else {
            if handshake.answers_refusals() {
                refusals.answer(stream);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let metrics = state.metrics.clone();
        let handshake = handshake.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _open = metrics.http.connections_open.hold();
            let stream = match handshake.handshake(stream).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::debug!(%error, "handshake failed");
                    return;
                }
            };
            let clock = connection::Clock::new();
            let service_clock = clock.clone();
            let service = service_fn(move |request| {
                let state = state.clone();
                // No timeout runs until this request's response has been sent.
                let answering = service_clock.request_started();
                async move {
                    let response = router::handle(state, request, Some(peer.ip())).await;
                    Ok::<_, Infallible>(
                        response.map(|body| connection::TrackedBody::new(body, answering)),
                    )
                }
            });
            let io = TokioIo::new(connection::TimedIo::new(stream, clock.clone()));
            let served = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(io, service);
            if let Some(Err(error)) = connection::watch(served, &clock, timeouts).await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
}
