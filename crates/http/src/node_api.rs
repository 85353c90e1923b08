//! The node's own endpoints as a single CouchDB 3.5 node answers them: `/_node/{node}` (its
//! name), `/_node/{node}/_config...` (over `settee-node-config`), `/_node/{node}/_versions`,
//! `/_membership`, `/_cluster_setup`, `/_node/{node}/_prometheus`, `_stats` and `_system`
//! (shapes from `settee-metrics`), and `/_reshard` as a CouchDB without resharding answers it.
//! All but `/_reshard` are for server admins only.

use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_node_config::{ConfigError, Persist};

use crate::auth::require_admin;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{json, HttpResponse};
use crate::router::{is_get, not_allowed};
use crate::HttpState;

/// Sections CouchDB refuses to change over HTTP (they name programs to run).
const BLACKLISTED_SECTIONS: &[&str] = &[
    "daemons",
    "external",
    "httpd_design_handlers",
    "httpd_db_handlers",
    "native_query_servers",
    "os_daemons",
    "query_servers",
];

/// The databases a single node needs (`/_cluster_setup`'s `ensure_dbs_exist` default).
const SETUP_DBS: &[&str] = &["_users", "_replicator"];

/// Vbuckets of a database `/_cluster_setup` creates, as settee creates its system databases.
const SETUP_DB_VBUCKETS: u16 = 16;

pub fn membership(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    let (all_nodes, cluster_nodes) = match state.cluster.get() {
        Some(cluster) => cluster.membership(),
        None => (
            vec![state.config.node_name.clone()],
            vec![state.config.node_name.clone()],
        ),
    };
    Ok(json(
        StatusCode::OK,
        &json!({"all_nodes": all_nodes, "cluster_nodes": cluster_nodes}),
    ))
}

/// `/_node/{name}/...` of another member of the cluster, answered by it through the cluster
/// transport (NodeHttp); 404 `no such node` for a name no member has.
async fn another_member(state: &HttpState, req: &mut Req, node: &str) -> ApiResult<HttpResponse> {
    let missing = || ApiError::NotFound(format!("no such node: {node}"));
    let Some(cluster) = state.cluster.get().filter(|_| !req.forwarded) else {
        return Err(missing());
    };
    // The member's name is replaced by `_local` there; the rest of the target is kept.
    let target = crate::forward::client_target(req);
    let rest = target
        .strip_prefix("/_node/")
        .and_then(|after| after.find(['/', '?']).map(|at| &after[at..]))
        .unwrap_or("");
    let target = format!("/_node/_local{rest}");
    let body = req
        .body_bytes(state.config.max_request_size_bytes)
        .await?
        .to_vec();
    let method = req.method.as_str().to_owned();
    let request = crate::forward::request_as(req, &method, target, body);
    let sent = cluster.to_node(node, request).ok_or_else(missing)?;
    Ok(crate::forward::reply_response(sent.await?))
}

pub async fn node(
    state: &HttpState,
    req: &mut Req,
    node: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    if node != "_local" && node != state.config.node_name {
        return another_member(state, req, node).await;
    }
    match rest {
        [] if is_get(req) => Ok(json(
            StatusCode::OK,
            &json!({"name": state.config.node_name}),
        )),
        [] => Err(not_allowed("GET,HEAD")),
        ["_config", config @ ..] => config_request(state, req, config).await,
        ["_versions"] if is_get(req) => Ok(json(StatusCode::OK, &versions())),
        ["_cluster"] if is_get(req) => match state.cluster.get() {
            Some(cluster) => Ok(json(StatusCode::OK, &cluster.status())),
            None => Err(ApiError::NotFound("this node is not in a cluster".into())),
        },
        ["_cluster"] => Err(not_allowed("GET,HEAD")),
        ["_versions"] => Err(not_allowed("GET,HEAD")),
        ["_prometheus"] if is_get(req) => Ok(prometheus(state)),
        ["_stats", path @ ..] if is_get(req) => stats(state, path),
        ["_system"] if is_get(req) => Ok(json(
            StatusCode::OK,
            &settee_metrics::couchdb::system(&state.metrics),
        )),
        ["_prometheus" | "_stats" | "_system", ..] => Err(not_allowed("GET,HEAD")),
        [name @ ("_restart" | "_smoosh"), ..] => Err(ApiError::NotImplemented(format!(
            "/_node/{{node}}/{name} is not served yet"
        ))),
        // CouchDB reads any other name as a database it cannot have.
        [name, ..] => crate::db_api::validate_db_name(name)
            .and(Err(ApiError::NotFound("Database does not exist.".into()))),
    }
}

fn door_facts(state: &HttpState) -> settee_metrics::couchdb::DoorFacts {
    settee_metrics::couchdb::DoorFacts {
        open_databases: state.engine.bucket_names().len() as u64,
    }
}

/// `/_node/{node}/_prometheus`: the text format 0.0.4 (`settee-metrics` writes it).
fn prometheus(state: &HttpState) -> HttpResponse {
    let text = settee_metrics::couchdb::prometheus(&state.metrics, door_facts(state));
    let mut response = hyper::Response::new(crate::response::full(bytes::Bytes::from(text)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(settee_metrics::text::CONTENT_TYPE),
    );
    response
}

/// `/_node/{node}/_stats[/group/name...]`: the whole tree or the part a path names, as
/// CouchDB answers `/_stats/couchdb/request_time`.
fn stats(state: &HttpState, path: &[&str]) -> ApiResult<HttpResponse> {
    let tree = settee_metrics::couchdb::stats(&state.metrics, door_facts(state));
    let found = path.iter().try_fold(&tree, |node, name| node.get(*name));
    match found {
        Some(value) => Ok(json(StatusCode::OK, value)),
        None => Err(ApiError::NotFound("Unknown stat".into())),
    }
}

/// What runs the node's JavaScript and collation; CouchDB adds its Erlang runtime's.
fn versions() -> Value {
    json!({
        "javascript_engine": {"name": "quickjs"},
        "collation_driver": {"name": "settee-collate"},
    })
}

async fn config_request(
    state: &HttpState,
    req: &mut Req,
    path: &[&str],
) -> ApiResult<HttpResponse> {
    let config = &state.node_config;
    match path {
        [] if is_get(req) => Ok(json(StatusCode::OK, &json!(config.all()))),
        [] => Err(not_allowed("GET")),
        ["_reload"] if req.method == Method::POST => {
            config.reload().map_err(config_error)?;
            state.configure_accounts(false).await;
            Ok(crate::response::ok_true(StatusCode::OK))
        }
        ["_reload"] => Err(not_allowed("POST")),
        [section] if is_get(req) => Ok(json(StatusCode::OK, &json!(config.section(section)))),
        [_] => Err(not_allowed("GET")),
        [section, key] => match req.method {
            Method::GET | Method::HEAD => match config.get(section, key) {
                Some(value) => Ok(json(StatusCode::OK, &json!(value))),
                None => Err(unknown_value()),
            },
            Method::PUT => {
                refuse_blacklisted(section)?;
                let mut value = string_body(state, req).await?;
                if *section == "admins" && settee_auth::parse_admin_hash(&value).is_none() {
                    // CouchDB keeps only the hash of a server admin's password.
                    value = state.auth.users.hash_admin_password(&value);
                }
                let previous = config
                    .set(section, key, &value, persist(req))
                    .map_err(config_error)?;
                state.configure_accounts(false).await;
                Ok(json(StatusCode::OK, &json!(previous.unwrap_or_default())))
            }
            Method::DELETE => {
                refuse_blacklisted(section)?;
                let deleted = config
                    .delete(section, key, persist(req))
                    .map_err(config_error)?;
                state.configure_accounts(false).await;
                match deleted {
                    Some(previous) => Ok(json(StatusCode::OK, &json!(previous))),
                    None => Err(unknown_value()),
                }
            }
            _ => Err(not_allowed("GET,PUT,DELETE")),
        },
        _ => Err(ApiError::missing()),
    }
}

fn unknown_value() -> ApiError {
    ApiError::NotFound("unknown_config_value".into())
}

fn refuse_blacklisted(section: &str) -> ApiResult<()> {
    if BLACKLISTED_SECTIONS.contains(&section) {
        return Err(ApiError::Forbidden(
            "Config section blacklisted for modification over HTTP API.".into(),
        ));
    }
    Ok(())
}

/// CouchDB's `X-Couch-Persist: false` keeps a change out of its ini file.
fn persist(req: &Req) -> Persist {
    match req.header("x-couch-persist") {
        Some("false") => Persist::No,
        _ => Persist::Yes,
    }
}

/// A `PUT`'s body: one JSON string.
async fn string_body(state: &HttpState, req: &mut Req) -> ApiResult<String> {
    let body = req.body_bytes(state.config.max_request_size_bytes).await?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|_| ApiError::BadRequest("invalid UTF-8 JSON".into()))?;
    match value {
        Value::String(text) => Ok(text),
        _ => Err(ApiError::BadRequest("a JSON string expected".into())),
    }
}

fn config_error(error: ConfigError) -> ApiError {
    match error {
        ConfigError::Invalid(reason) => ApiError::BadRequest(reason),
        other => {
            tracing::error!(error = %other, "node configuration");
            ApiError::Internal("the node configuration could not be saved".into())
        }
    }
}

/// `/_cluster_setup` on a node that is a finished single node, which settee's always is.
pub async fn cluster_setup(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    match req.method {
        Method::GET | Method::HEAD => Ok(json(
            StatusCode::OK,
            &json!({"state": "single_node_enabled"}),
        )),
        Method::POST => {
            req.require_json_content_type()?;
            let body = req.json_body_within(&state.config).await?;
            match body.get("action").and_then(Value::as_str) {
                Some("enable_single_node") => enable_single_node(state, &body).await,
                Some("finish_cluster") => {
                    Err(ApiError::BadRequest("Cluster is already finished".into()))
                }
                Some("enable_cluster" | "add_node" | "remove_node" | "receive_cookie") => {
                    Err(ApiError::NotImplemented(
                        "a settee node does not join a CouchDB cluster".into(),
                    ))
                }
                // CouchDB's reason, stray quote included.
                _ => Err(ApiError::BadRequest("Invalid Action'".into())),
            }
        }
        _ => Err(not_allowed("GET,POST")),
    }
}

/// Makes sure the databases a single node needs exist; the admin named must already be one.
async fn enable_single_node(state: &HttpState, body: &Value) -> ApiResult<HttpResponse> {
    if let Some(name) = body.get("username").and_then(Value::as_str) {
        if !state.auth.users.is_server_admin(name) {
            return Err(ApiError::BadRequest(
                "settee's server admins are set with --admin, not through _cluster_setup.".into(),
            ));
        }
    }
    let dbs: Vec<String> = match body.get("ensure_dbs_exist") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|name| name.as_str().map(str::to_string))
            .collect(),
        _ => SETUP_DBS.iter().map(|name| name.to_string()).collect(),
    };
    for db in &dbs {
        crate::db_api::validate_db_name(db)?;
        if state.engine.bucket(db).is_none() {
            match crate::db_api::create_db(state, db, SETUP_DB_VBUCKETS, false).await {
                Ok(()) | Err(ApiError::FileExists) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(crate::response::ok_true(StatusCode::CREATED))
}

/// `/_reshard...` as a CouchDB without resharding answers it: the path names a database
/// (`_reshard`) that cannot exist. settee keeps no shard count to change.
pub fn reshard(req: &Req) -> ApiResult<HttpResponse> {
    if req.method == Method::PUT && req.path.len() == 1 {
        crate::db_api::validate_db_name("_reshard")?;
    }
    Err(ApiError::NotFound("Database does not exist.".into()))
}
