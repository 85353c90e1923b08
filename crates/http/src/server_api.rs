//! Server-level endpoints: `/`, `/_up`, `/_all_dbs`, `/_dbs_info`, `/_uuids`, `/_session`,
//! `/_active_tasks`.

use hyper::{Method, StatusCode};
use serde_json::json;

use crate::auth::require_admin;
use crate::db_api::db_info;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{self, json, with_header, HttpResponse};
use crate::router::{is_get, not_allowed};
use crate::HttpState;
use settee_engine::StoreHealth;

/// The CouchDB version settee answers as; clients (PouchDB, nano, replicators) read it.
pub const COUCHDB_VERSION: &str = "3.5.0";
/// CouchDB's `[uuids] max_count`.
const UUIDS_MAX_COUNT: u64 = 1000;

pub fn welcome(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    Ok(json(
        StatusCode::OK,
        &json!({
            "couchdb": "Welcome",
            "version": COUCHDB_VERSION,
            "git_sha": "settee",
            "uuid": state.config.server_uuid,
            // Only what works: no `partitioned` (issue 22 point 4) and no `reshard` (a node
            // has no shard count to change).
            "features": ["quickjs", "access-ready", "partitioned", "pluggable-storage-engines", "scheduler"],
            "vendor": {"name": "settee", "version": env!("CARGO_PKG_VERSION")},
        }),
    ))
}

/// CouchDB answers 404 with the reason in `status` when the node should not get traffic
/// (`maintenance_mode`, `nolb`); settee does the same while its storage cannot write.
pub fn up(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    let status = match state.engine.storage_health() {
        StoreHealth::Ok => return Ok(json(StatusCode::OK, &json!({"status": "ok", "seeds": {}}))),
        StoreHealth::NoSpace => "insufficient_storage",
        StoreHealth::Failed => "storage_failure",
    };
    Ok(json(StatusCode::NOT_FOUND, &json!({"status": status})))
}

fn list_options(req: &Req, names: Vec<String>) -> ApiResult<Vec<String>> {
    let descending = req.bool_param("descending", false)?;
    let start = req.json_param("startkey")?.or(req.json_param("start_key")?);
    let end = req.json_param("endkey")?.or(req.json_param("end_key")?);
    let skip = req.u64_param("skip")?.unwrap_or(0) as usize;
    let limit = req.u64_param("limit")?.map(|limit| limit as usize);
    let mut names = names;
    if descending {
        names.reverse();
    }
    let in_range = |name: &String| {
        let after_start = start
            .as_ref()
            .and_then(|key| key.as_str())
            .is_none_or(|key| {
                if descending {
                    name.as_str() <= key
                } else {
                    name.as_str() >= key
                }
            });
        let before_end = end.as_ref().and_then(|key| key.as_str()).is_none_or(|key| {
            if descending {
                name.as_str() >= key
            } else {
                name.as_str() <= key
            }
        });
        after_start && before_end
    };
    Ok(names
        .into_iter()
        .filter(in_range)
        .skip(skip)
        .take(limit.unwrap_or(usize::MAX))
        .collect())
}

pub fn all_dbs(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    require_admin(&req.user)?;
    let names = list_options(req, crate::db_api::all_db_names(state))?;
    Ok(json(StatusCode::OK, &json!(names)))
}

pub async fn dbs_info(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    let names: Vec<String> = match req.method {
        Method::GET | Method::HEAD => list_options(req, crate::db_api::all_db_names(state))?,
        Method::POST => {
            let body = req.json_body_within(&state.config).await?;
            let keys = body
                .get("keys")
                .and_then(|keys| keys.as_array())
                .ok_or_else(|| ApiError::BadRequest("`keys` member must exist.".into()))?;
            if keys.len() > state.config.max_docs_per_bulk {
                return Err(ApiError::BadRequest(format!(
                    "`keys` member must not exceed {} elements.",
                    state.config.max_docs_per_bulk
                )));
            }
            keys.iter()
                .filter_map(|key| key.as_str().map(str::to_string))
                .collect()
        }
        _ => return Err(not_allowed("GET,HEAD,POST")),
    };
    let rows: Vec<serde_json::Value> = names
        .iter()
        .map(|name| match crate::db_api::keyspace(state, name) {
            Ok(keyspace) => match db_info(&keyspace, &state.config.node_name, None) {
                Ok(info) => json!({"key": name, "info": info}),
                Err(_) => json!({"key": name, "error": "not_found"}),
            },
            Err(_) => json!({"key": name, "error": "not_found"}),
        })
        .collect();
    Ok(json(StatusCode::OK, &json!(rows)))
}

pub fn uuids(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    let count = req.u64_param("count")?.unwrap_or(1);
    if count > UUIDS_MAX_COUNT {
        return Err(ApiError::BadRequest("count parameter too large".into()));
    }
    // `?algorithm=` is settee's own; CouchDB always uses `[uuids] algorithm`.
    let algorithm = req.param("algorithm");
    let mut ids = Vec::with_capacity(count as usize);
    for _ in 0..count {
        ids.push(match algorithm {
            None => state.uuids.configured(&req.settings),
            Some(algorithm) => state.uuids.next(algorithm).ok_or_else(|| {
                ApiError::BadRequest(format!("unknown uuid algorithm {algorithm}"))
            })?,
        });
    }
    let body = json!({"uuids": ids});
    // Caches must not keep ids: CouchDB sends an ETag of the answer and a date in the past.
    let tag = uuids_etag(&body);
    let response = json(StatusCode::OK, &body);
    let response = with_header(response, "cache-control", "must-revalidate, no-cache");
    let response = with_header(response, "etag", &tag);
    let response = with_header(response, "expires", "Mon, 01 Jan 1990 00:00:00 GMT");
    Ok(with_header(response, "pragma", "no-cache"))
}

/// `"..."`: the MD5 of the answer in base 36, as CouchDB writes its ETags.
fn uuids_etag(body: &serde_json::Value) -> String {
    use md5::Digest;
    let digest: [u8; 16] = md5::Md5::digest(body.to_string().as_bytes()).into();
    let mut value = u128::from_be_bytes(digest);
    let mut digits = Vec::new();
    loop {
        digits.push(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(value % 36) as usize]);
        value /= 36;
        if value == 0 {
            break;
        }
    }
    digits.reverse();
    format!("\"{}\"", String::from_utf8_lossy(&digits))
}

pub async fn session(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => Ok(session_info(req)),
        Method::POST => {
            let body = req.body_bytes(state.config.max_request_size_bytes).await?;
            let form = req
                .header("content-type")
                .is_some_and(|value| value.starts_with("application/x-www-form-urlencoded"));
            let (name, password) = if form {
                let mut name = None;
                let mut password = None;
                for (key, value) in form_urlencoded::parse(&body) {
                    match key.as_ref() {
                        "name" | "username" => name = Some(value.into_owned()),
                        "password" => password = Some(value.into_owned()),
                        _ => {}
                    }
                }
                (name, password)
            } else {
                let value = crate::request::parse_json(&body, state.config.max_json_depth)?;
                let text = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_string);
                (text("name").or(text("username")), text("password"))
            };
            let (Some(name), Some(password)) = (name, password) else {
                return Err(ApiError::Unauthorized(
                    "Name or password is incorrect.".into(),
                ));
            };
            let account = state
                .auth
                .login(&state.engine, &name, &password, req.peer)?;
            if req.settings.auth.upgrade_hash_on_auth {
                state
                    .auth
                    .upgrade_password_hash(&state.engine, &name, &password);
            }
            let cookie = state.auth.make_cookie(&account, crate::auth::now_secs());
            let response = json(
                StatusCode::OK,
                &json!({"ok": true, "name": name, "roles": account.roles}),
            );
            Ok(with_header(
                response,
                "set-cookie",
                &format!(
                    "AuthSession={cookie}; Version=1; Path=/; HttpOnly; Max-Age={}",
                    state.config.session_timeout_secs
                ),
            ))
        }
        Method::DELETE => {
            let response = response::ok_true(StatusCode::OK);
            Ok(with_header(
                response,
                "set-cookie",
                "AuthSession=; Version=1; Path=/; HttpOnly; Max-Age=0",
            ))
        }
        _ => Err(not_allowed("GET,HEAD,POST,DELETE")),
    }
}

/// `GET /_session`: who the request's handlers found, the handlers that run and, for a
/// known user, the handler that knew them and the accounts database.
fn session_info(req: &Req) -> HttpResponse {
    let user = &req.user;
    let auth = &req.settings.auth;
    let handlers: Vec<&str> = auth.handlers.iter().map(|handler| handler.name()).collect();
    let mut info = json!({"authentication_handlers": handlers});
    if let Some(method) = user.authenticated {
        info["authenticated"] = json!(method);
        info["authentication_db"] = json!(auth.authentication_db);
    }
    json(
        StatusCode::OK,
        &json!({"ok": true, "userCtx": user.to_json(), "info": info}),
    )
}

pub fn active_tasks(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    require_admin(&req.user)?;
    let mut tasks = state.views.active_tasks();
    tasks.extend(crate::replicator_api::active_tasks(state));
    Ok(json(StatusCode::OK, &serde_json::Value::Array(tasks)))
}
