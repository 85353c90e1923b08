//! `/{db}/_design/{ddoc}/_rewrite/...`: the design document's `rewrites` (rules, or a
//! JavaScript function run on the node's pool) make another request, which goes through the
//! router again as the same user. The matching and paths are settee-rewrite's; this is the
//! glue: read the design document, ask, dispatch or answer.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};
use serde_json::{json, Value};
use settee_auth::Operation;
use settee_rewrite::{answer, Rewrite, RewriteError, RewriteRequest, Rules};

use crate::db_api::open;
use crate::design_fns::{self, request_object, RequestParts};
use crate::error::{ApiError, ApiResult};
use crate::request::{parse_query, split_path, Req, RequestBody};
use crate::response::{self, full, HttpResponse};
use crate::HttpState;

/// CouchDB's answer when there is no rewrite (no `rewrites`, or the function returned
/// nothing): 404 `rewrite_error`.
fn invalid_path() -> HttpResponse {
    response::json(
        StatusCode::NOT_FOUND,
        &json!({"error": "rewrite_error", "reason": "Invalid path."}),
    )
}

fn api_error(error: RewriteError) -> ApiError {
    let reason = error.to_string();
    match error {
        RewriteError::NoMatchingRule => ApiError::missing(),
        RewriteError::InvalidTarget => ApiError::Render {
            error: "error".into(),
            reason,
        },
        RewriteError::InsecureRule => ApiError::Render {
            error: "insecure_rewrite_rule".into(),
            reason,
        },
        RewriteError::BadAnswer(_) => ApiError::Render {
            error: "rewrite_error".into(),
            reason,
        },
        _ => ApiError::BadRequest(reason),
    }
}

/// `/{db}/_design/{ddoc}/_rewrite/{rest}`.
pub async fn rewrite(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    if req.rewrites >= req.settings.rewrite_limit {
        return Err(ApiError::BadRequest(
            "Exceeded rewrite recursion limit".into(),
        ));
    }
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let mut design = crate::designs::read(state, req, &keyspace, db, ddoc)
        .await?
        .body;
    let rest: Vec<String> = rest.iter().map(|segment| segment.to_string()).collect();
    let query = req.query.clone();
    let method = req.method.clone();
    let request = RewriteRequest {
        method: method.as_str(),
        db,
        ddoc,
        rest: &rest,
        query: &query,
    };
    match design.remove("rewrites") {
        Some(Value::Array(rules)) => {
            let target = Rules::parse(&rules, req.settings.secure_rewrites)
                .and_then(|rules| rules.rewrite(&request))
                .map_err(api_error)?;
            let headers = req.headers.clone();
            let body = req.body.take();
            dispatch(state, req, method, &target, headers, body).await
        }
        Some(Value::String(_)) => {
            let design = design_fns::design(state, req, &keyspace, db, ddoc).await?;
            // The body is read here (the function sees it) and handed on whole, decoded.
            let sent = req.body_bytes(state.config.max_request_size_bytes).await?;
            req.headers.remove(hyper::header::CONTENT_ENCODING);
            let shown = (!sent.is_empty() || !matches!(method, Method::GET | Method::HEAD))
                .then(|| String::from_utf8_lossy(&sent).into_owned());
            let mut object = request_object(
                &keyspace,
                req,
                RequestParts {
                    id: None,
                    uuid: None,
                    body: shown,
                    node: &state.config.node_name,
                },
            );
            if let Some(object) = object.as_object_mut() {
                for unused in ["info", "form", "uuid", "id"] {
                    object.remove(unused);
                }
            }
            let answer = state
                .views
                .js()
                .rewrite(design.program.clone(), object.to_string())
                .result()
                .await
                .map_err(|error| ApiError::Internal(format!("rewrite: {error}")))?;
            if let Some(error) = design_fns::thrown(&answer) {
                return Err(error);
            }
            let Some(answer) = answer.get("ok") else {
                return Ok(invalid_path());
            };
            match answer::read(answer, &request).map_err(api_error)? {
                Rewrite::Respond {
                    code,
                    headers,
                    body,
                } => respond(code, &headers, body.map_or(sent, Bytes::from)),
                Rewrite::Dispatch {
                    method: new_method,
                    target,
                    headers: new_headers,
                    body,
                } => {
                    let method = match new_method {
                        Some(name) => Method::from_bytes(name.as_bytes())
                            .map_err(|_| api_error(RewriteError::BadAnswer("bad method".into())))?,
                        None => method,
                    };
                    let mut headers = req.headers.clone();
                    set_headers(&mut headers, &new_headers)?;
                    let body = body.map_or(sent, Bytes::from);
                    if let Ok(length) = HeaderValue::from_str(&body.len().to_string()) {
                        headers.insert(hyper::header::CONTENT_LENGTH, length);
                    }
                    headers.remove(hyper::header::TRANSFER_ENCODING);
                    let body = Some(RequestBody::Whole(body));
                    dispatch(state, req, method, &target, headers, body).await
                }
            }
        }
        _ => Ok(invalid_path()),
    }
}

fn set_headers(headers: &mut hyper::HeaderMap, given: &[(String, String)]) -> ApiResult<()> {
    for (name, value) in given {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) else {
            return Err(api_error(RewriteError::BadAnswer(format!(
                "bad header {name}"
            ))));
        };
        headers.insert(name, value);
    }
    Ok(())
}

/// The function's early response (`{code, headers, body}`).
fn respond(code: u16, headers: &[(String, String)], body: Bytes) -> ApiResult<HttpResponse> {
    let mut response = Response::new(full(body));
    *response.status_mut() = StatusCode::from_u16(code)
        .map_err(|_| api_error(RewriteError::BadAnswer("bad code".into())))?;
    set_headers(response.headers_mut(), headers)?;
    Ok(response)
}

/// Routes the rewritten request as the same user, one rewrite deeper (forwarded to its
/// document's active node in a cluster). A body the handler left unread goes back to the
/// client's request, which drains it.
async fn dispatch(
    state: &HttpState,
    req: &mut Req,
    method: Method,
    target: &str,
    headers: hyper::HeaderMap,
    body: Option<RequestBody>,
) -> ApiResult<HttpResponse> {
    let uri: hyper::Uri = target
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("invalid rewritten path: {target}")))?;
    let path = split_path(uri.path(), req.settings.decode_plus_to_space)
        .map_err(|invalid| invalid.error())?;
    let mut next = Req {
        method,
        path,
        query: parse_query(uri.query()),
        headers,
        uri,
        body,
        user: req.user.clone(),
        peer: req.peer,
        body_timeout: req.body_timeout,
        settings: req.settings.clone(),
        forwarded: req.forwarded,
        vbuckets: req.vbuckets.clone(),
        design: None,
        rewrites: req.rewrites + 1,
    };
    tracing::debug!(target, "rewrite");
    // As the router does for a client's request: a document whose vbucket is active on
    // another node is answered by that node, a whole-bucket request by every node.
    let answer = match Box::pin(crate::forward::forward_if_elsewhere(state, &mut next)).await {
        Some(answer) => answer,
        None => match Box::pin(crate::router::scatter(state, &mut next)).await {
            Some(answer) => answer,
            None => Box::pin(crate::router::route(state, &mut next)).await,
        },
    };
    if let Some(RequestBody::Streamed(body)) = next.body.take() {
        req.body = Some(RequestBody::Streamed(body));
    }
    answer
}
