//! `POST /_replicate`, `GET /_scheduler/jobs`, `GET /_scheduler/docs[/{db}[/{docid}]]`: the
//! front of `settee-replicator`.

use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_replicator::{ReplicatorError, Request};

use crate::auth::require_admin;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{json, HttpResponse};
use crate::router::{is_get, not_allowed};
use crate::HttpState;

fn replicator(state: &HttpState) -> ApiResult<&std::sync::Arc<settee_replicator::Replicator>> {
    state
        .replicator
        .get()
        .ok_or_else(|| ApiError::ServiceUnavailable("the replicator is not running".into()))
}

/// CouchDB's answers for replication failures.
fn replication_error(error: ReplicatorError) -> HttpResponse {
    let (status, body) = match &error {
        ReplicatorError::BadRequest(reason) => (
            StatusCode::BAD_REQUEST,
            json!({"error": "bad_request", "reason": reason}),
        ),
        ReplicatorError::NotFound(id) => (
            StatusCode::NOT_FOUND,
            json!({"error": "not_found", "reason": id}),
        ),
        ReplicatorError::DbNotFound(db) => (
            StatusCode::NOT_FOUND,
            json!({"error": "db_not_found", "reason": format!("could not open {db}")}),
        ),
        ReplicatorError::Unauthorized(_) => (
            StatusCode::UNAUTHORIZED,
            json!({"error": "unauthorized", "reason": error.to_string().trim_start_matches("unauthorized: ")}),
        ),
        ReplicatorError::Http {
            status: 401 | 403, ..
        } => (
            StatusCode::UNAUTHORIZED,
            json!({"error": "unauthorized", "reason": error.to_string()}),
        ),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": "replication_failed", "reason": error.to_string()}),
        ),
    };
    json(status, &body)
}

pub async fn replicate(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    if req.user.name.is_none() {
        return Err(ApiError::Unauthorized(
            "You are not authorized to access this resource.".into(),
        ));
    }
    req.require_json_content_type()?;
    let body = req.json_body_within(&state.config).await?;
    let replicator = replicator(state)?;
    let request = match Request::parse(&body) {
        Ok(request) => request,
        Err(error) => return Ok(replication_error(error)),
    };
    let user = req.user.name.clone();
    match replicator.replicate(request, user.as_deref()).await {
        Ok((status, body)) => Ok(json(
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            &body,
        )),
        Err(error) => Ok(replication_error(error)),
    }
}

pub fn jobs(state: &HttpState, req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    require_admin(&req.user)?;
    Ok(json(StatusCode::OK, &replicator(state)?.jobs_json()))
}

pub fn docs(
    state: &HttpState,
    req: &Req,
    db: Option<&str>,
    doc_id: Option<&str>,
) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    require_admin(&req.user)?;
    let docs = replicator(state)?.docs_json(db, doc_id);
    if doc_id.is_some() {
        return match docs.into_iter().next() {
            Some(doc) => Ok(json(StatusCode::OK, &doc)),
            None => Err(ApiError::NotFound("unknown replication document".into())),
        };
    }
    Ok(json(
        StatusCode::OK,
        &json!({"total_rows": docs.len(), "offset": 0, "docs": Value::Array(docs)}),
    ))
}

/// Replication entries of `_active_tasks`.
pub fn active_tasks(state: &HttpState) -> Vec<Value> {
    state
        .replicator
        .get()
        .map(|replicator| replicator.active_tasks())
        .unwrap_or_default()
}
