//! From a hyper request to a handler, by decoded path segments.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request};

use crate::error::{ApiError, ApiResult};
use crate::request::{parse_query, split_path, Req, RequestBody};
use crate::response::{self, HttpResponse};
use crate::{
    attachments_api, backup_api, bulk_api, changes_api, db_api, design_fns, doc_api, mango_api,
    node_api, partition_api, replicator_api, server_api, subdoc_api, view_api, HttpState,
};

/// CouchDB's form (`CouchDB/3.5.0 (Erlang OTP/25)`), which clients and CouchDB's own tests
/// match with `^CouchDB`, naming settee in the comment part.
pub const SERVER_HEADER: &str = "CouchDB/3.5.0 (settee 0.1)";

/// Methods `X-HTTP-Method-Override` may name (CouchDB's list).
const OVERRIDABLE_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY",
];

pub async fn handle(
    state: Arc<HttpState>,
    request: Request<Incoming>,
    peer: Option<std::net::IpAddr>,
) -> HttpResponse {
    let started = std::time::Instant::now();
    let (mut parts, body) = request.into_parts();
    let request_id = request_id(&parts.headers);
    // A CORS preflight is answered before authentication, as CouchDB answers it: the browser
    // sends it without credentials.
    if let Some(headers) = state.config.cors.preflight(&parts.method, &parts.headers) {
        let mut preflight = hyper::Response::new(response::full(bytes::Bytes::new()));
        *preflight.status_mut() = hyper::StatusCode::NO_CONTENT;
        *preflight.headers_mut() = headers;
        common_headers(&mut preflight, request_id);
        state
            .metrics
            .http
            .record("OPTIONS", preflight.status().as_u16(), started.elapsed());
        return preflight;
    }
    let origin = parts
        .headers
        .get(hyper::header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    // Clients that can only send GET and POST ask for another method this way; CouchDB
    // honours it on POST only.
    if parts.method == Method::POST {
        if let Some(method) = parts
            .headers
            .get("x-http-method-override")
            .and_then(|value| value.to_str().ok())
            .filter(|method| OVERRIDABLE_METHODS.contains(method))
            .and_then(|method| Method::from_bytes(method.as_bytes()).ok())
        {
            parts.method = method;
        }
    }
    let declared_length = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<u64>().ok());
    // The runtime settings, read once: every part of this request sees the same ones.
    let settings = state.node_config.settings();
    let callback = crate::jsonp::callback(&settings, parts.uri.query());
    let mut body = Some(body);
    let method = parts.method.clone();
    let mut response = match (
        state
            .auth
            .authenticate(&parts.headers, &state.engine, peer, &settings),
        split_path(parts.uri.path(), settings.decode_plus_to_space),
    ) {
        (Err(error), _) => response::error(&error),
        (Ok(_), Err(invalid)) => response::error(&invalid.error()),
        (Ok(user), Ok(path)) => {
            let mut req = Req {
                method: parts.method,
                path,
                query: parse_query(parts.uri.query()),
                headers: parts.headers,
                uri: parts.uri,
                body: body.take().map(RequestBody::Streamed),
                user,
                peer,
                body_timeout: state.config.body_timeout,
                settings,
                forwarded: false,
                vbuckets: None,
                design: None,
                rewrites: 0,
            };
            // A document whose vbucket is active on another node is answered by that node; a
            // whole-bucket request by every node with active vbuckets, merged here.
            if let Some(cluster) = state.cluster.get() {
                if req.db_segment().contains('$') {
                    cluster.collections_followed(req.db_segment()).await;
                }
            }
            let answer = match crate::forward::forward_if_elsewhere(&state, &mut req).await {
                Some(answer) => answer,
                None => match scatter(&state, &mut req).await {
                    Some(answer) => answer,
                    None => route(&state, &mut req).await,
                },
            };
            let response = match answer {
                Ok(response) => response,
                Err(error) => response::error(&error),
            };
            body = match req.body.take() {
                Some(RequestBody::Streamed(body)) => Some(body),
                _ => None,
            };
            response
        }
    };
    if let Some(body) = body {
        crate::request::discard_body(
            body,
            declared_length,
            state.config.max_request_size_bytes,
            state.config.body_timeout,
        )
        .await;
    }
    if let Some(callback) = callback {
        response = crate::jsonp::wrap(response, &callback);
    }
    common_headers(&mut response, request_id);
    state
        .config
        .cors
        .decorate(origin.as_deref(), response.headers_mut());
    state.metrics.http.record(
        method.as_str(),
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Headers of every answer: `Server`, and the request id and body time CouchDB sends (clients
/// log `X-Couch-Request-ID` to match their requests with the server's).
fn common_headers(response: &mut HttpResponse, request_id: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::SERVER,
        HeaderValue::from_static(SERVER_HEADER),
    );
    headers.insert(REQUEST_ID_HEADER, request_id);
    headers.insert(BODY_TIME_HEADER, HeaderValue::from_static("0"));
}

/// Parsed once: a header name given as a string is validated and hashed on every insert.
const REQUEST_ID_HEADER: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("x-couch-request-id");
const BODY_TIME_HEADER: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("x-couchdb-body-time");

/// Longest request id a client may choose (CouchDB's limit: a UUID's length).
const REQUEST_ID_BYTES_MAX: usize = 36;

/// The client's own `X-Couch-Request-ID` when it is at most 36 letters, digits, `-` and `_`,
/// as CouchDB keeps it; otherwise a new one as CouchDB makes them: 5 random bytes in
/// lower-case hex. Built as the header value itself: no string per request.
fn request_id(headers: &hyper::HeaderMap) -> HeaderValue {
    let chosen = headers.get(REQUEST_ID_HEADER).filter(|value| {
        let id = value.as_bytes();
        !id.is_empty()
            && id.len() <= REQUEST_ID_BYTES_MAX
            && id
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'-' || *byte == b'_')
    });
    if let Some(id) = chosen {
        return id.clone();
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = request_id_bits().to_le_bytes();
    let mut id = [0u8; 10];
    for (pair, byte) in id.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0x0f)];
    }
    HeaderValue::from_bytes(&id).expect("hex digits are a valid header value")
}

/// 64 bits for a request id: SplitMix64 over a per-thread counter that starts at a random
/// point. Ids only need to differ (clients match them with their requests); a cryptographic
/// generator (rand's ChaCha) cost about 400 instructions per request.
fn request_id_bits() -> u64 {
    thread_local! {
        static NEXT: std::cell::Cell<u64> = std::cell::Cell::new(rand::random());
    }
    NEXT.with(|next| {
        let state = next.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        next.set(state);
        let mut bits = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        bits = (bits ^ (bits >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bits ^ (bits >> 31)
    })
}

/// Handlers whose futures are large (over about 800 bytes) are boxed: an async fn's future is
/// as large as its largest branch, and hyper moves the whole request future once per request,
/// so one unboxed `_replicate` (4.3 KB) made every document GET copy 4.4 KB.
pub(crate) async fn route(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    let path = req.path.clone();
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    settee_http_core::auth_db::check_request(&state.engine, &req.user, &segments)?;
    match segments.as_slice() {
        [] => server_api::welcome(state, req),
        ["_up"] => server_api::up(state, req),
        ["_node", "_local", "_backup", rest @ ..] => backup_api::backup(state, req, rest).await,
        ["_all_dbs"] => server_api::all_dbs(state, req),
        ["_dbs_info"] => server_api::dbs_info(state, req).await,
        ["_uuids"] => server_api::uuids(state, req),
        ["_membership"] => node_api::membership(state, req),
        ["_cluster_setup"] => node_api::cluster_setup(state, req).await,
        ["_reshard", ..] => node_api::reshard(req),
        ["_node", node, rest @ ..] => node_api::node(state, req, node, rest).await,
        ["_session"] => server_api::session(state, req).await,
        ["_utils", ..] => console(req),
        ["_active_tasks"] => server_api::active_tasks(state, req),
        ["_replicate"] => Box::pin(replicator_api::replicate(state, req)).await,
        ["_scheduler", "jobs"] => replicator_api::jobs(state, req),
        ["_scheduler", "docs"] => replicator_api::docs(state, req, None, None),
        ["_scheduler", "docs", db] => replicator_api::docs(state, req, Some(db), None),
        ["_scheduler", "docs", db, doc_id @ ..] => {
            replicator_api::docs(state, req, Some(db), Some(&doc_id.join("/")))
        }
        ["favicon.ico"] => Err(ApiError::missing()),
        [first, ..] if first.starts_with('_') && !db_api::is_system_db(first) => {
            Err(ApiError::BadRequest(format!(
                "Database name {first} is not allowed: only system databases may start with _"
            )))
        }
        [db] => Box::pin(db_api::database(state, req, db)).await,
        [_, "_temp_view"] => Err(ApiError::Gone(
            "Temporary views are not supported in CouchDB".into(),
        )),
        [db, "_all_docs"] => bulk_api::all_docs(state, req, db, bulk_api::DocSet::All).await,
        [db, "_design_docs"] => bulk_api::all_docs(state, req, db, bulk_api::DocSet::Design).await,
        [db, "_local_docs"] => bulk_api::all_docs(state, req, db, bulk_api::DocSet::Local).await,
        [db, "_bulk_docs"] => {
            state.metrics.http.bulk_requests.inc();
            bulk_api::bulk_docs(state, req, db).await
        }
        [db, "_index"] => Box::pin(mango_api::index(state, req, db)).await,
        [db, "_index", "_bulk_delete"] => Box::pin(mango_api::bulk_delete(state, req, db)).await,
        [db, "_index", ddoc, kind, name] => {
            Box::pin(mango_api::delete(state, req, db, ddoc, kind, name)).await
        }
        [db, "_index", "_design", ddoc, kind, name] => {
            Box::pin(mango_api::delete(state, req, db, ddoc, kind, name)).await
        }
        [_, "_index", ..] => Err(ApiError::missing()),
        [db, "_find"] => Box::pin(mango_api::find(state, req, db, None)).await,
        [db, "_explain"] => mango_api::explain_find(state, req, db, None).await,
        [db, "_bulk_get"] => bulk_api::bulk_get(state, req, db).await,
        [db, "_revs_diff"] => bulk_api::revs_diff(state, req, db).await,
        [db, "_missing_revs"] => bulk_api::missing_revs(state, req, db).await,
        [db, "_changes"] => changes_api::changes(state, req, db).await,
        [db, "_security"] => db_api::security(state, req, db).await,
        [db, "_revs_limit"] => db_api::revs_limit(state, req, db).await,
        [db, "_compact"] => db_api::compact(state, req, db).await,
        [db, "_compact", ddoc] => db_api::compact_views(state, req, db, ddoc).await,
        [db, "_view_cleanup"] => db_api::view_cleanup(state, req, db).await,
        [db, "_purge"] => Box::pin(db_api::purge(state, req, db)).await,
        [db, "_ensure_full_commit"] => db_api::ensure_full_commit(state, req, db).await,
        [db, "_partition", rest @ ..] => Box::pin(partition_api::route(state, req, db, rest)).await,
        [_, "_local"] | [_, "_local", ""] => {
            Err(ApiError::BadRequest("Invalid _local document id.".into()))
        }
        [_, id] if *id == "_local/" => {
            Err(ApiError::BadRequest("Invalid _local document id.".into()))
        }
        [_, "_local", _, _, ..] => Err(ApiError::BadRequest(
            "_local documents do not accept attachments.".into(),
        )),
        [db, "_local", id] => Box::pin(doc_api::local(state, req, db, id)).await,
        [db, "_design", name] => {
            let id = format!("_design/{name}");
            let answer = doc_api::document(state, req, db, &id).await;
            count_document(state, &req.method, &answer);
            answer
        }
        [db, "_design", name, "_view", view] => {
            Box::pin(view_api::view(state, req, db, name, view)).await
        }
        [db, "_design", name, "_view", view, "queries"] => {
            Box::pin(view_api::view_queries(state, req, db, name, view)).await
        }
        [db, "_design", name, "_info"] => {
            Box::pin(view_api::design_info(state, req, db, name)).await
        }
        [db, "_design", name, "_show", rest @ ..] => {
            Box::pin(design_fns::show(state, req, db, name, rest)).await
        }
        [db, "_design", name, "_update", rest @ ..] => {
            Box::pin(design_fns::update(state, req, db, name, rest)).await
        }
        [db, "_design", name, "_list", rest @ ..] => {
            Box::pin(design_fns::list(state, req, db, name, rest)).await
        }
        [db, "_design", name, "_rewrite", rest @ ..] => {
            Box::pin(crate::rewrite_api::rewrite(state, req, db, name, rest)).await
        }
        [_, "_design", _, "_view" | "_info", ..] => Err(ApiError::NotImplemented(
            "design document functions are not served yet".into(),
        )),
        [db, "_design", name, attachment @ ..] => {
            let id = format!("_design/{name}");
            Box::pin(attachments_api::attachment(
                state,
                req,
                db,
                &id,
                &attachment.join("/"),
            ))
            .await
        }
        [_, id, ..] if id.starts_with('_') && !doc_api::is_reserved_id(id) => Err(
            ApiError::IllegalDocId("Only reserved document ids may start with underscore.".into()),
        ),
        [db, id] => {
            let answer = doc_api::document(state, req, db, id).await;
            count_document(state, &req.method, &answer);
            answer
        }
        [db, id, "_lookup"] => subdoc_api::lookup(state, req, db, id).await,
        [db, id, "_mutate"] => Box::pin(subdoc_api::mutate(state, req, db, id)).await,
        [db, id, attachment @ ..] => {
            Box::pin(attachments_api::attachment(
                state,
                req,
                db,
                id,
                &attachment.join("/"),
            ))
            .await
        }
    }
}

/// The web console's files (settee-console), served to anyone: the page asks for a login.
fn console(req: &Req) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    let if_none_match = req.headers.get(hyper::header::IF_NONE_MATCH);
    let reply = settee_console::serve(req.uri.path(), if_none_match.and_then(|v| v.to_str().ok()))
        .ok_or_else(ApiError::missing)?;
    let mut response = hyper::Response::new(response::full(bytes::Bytes::from_static(reply.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(reply.status).unwrap_or_default();
    for (name, value) in reply.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    Ok(response)
}

/// A document read or written through `/{db}/{id}` (CouchDB's `database_reads` and
/// `database_writes`): counted when it succeeded.
fn count_document(state: &HttpState, method: &Method, answer: &ApiResult<HttpResponse>) {
    let Ok(response) = answer else { return };
    if !response.status().is_success() {
        return;
    }
    match *method {
        Method::GET | Method::HEAD => state.metrics.http.database_reads.inc(),
        Method::PUT | Method::DELETE | Method::POST => state.metrics.http.database_writes.inc(),
        _ if method.as_str() == "COPY" => state.metrics.http.database_writes.inc(),
        _ => {}
    }
}

/// `405` with CouchDB's "Only GET,HEAD allowed" style reason.
pub fn not_allowed(allowed: &'static str) -> ApiError {
    ApiError::MethodNotAllowed(allowed)
}

pub fn is_get(req: &Req) -> bool {
    req.method == Method::GET || req.method == Method::HEAD
}

/// The nodes' merged answer of a whole-bucket request, when the binary set the cluster's
/// scatter hook and the request goes to several nodes.
pub(crate) async fn scatter(
    state: &HttpState,
    req: &mut Req,
) -> Option<crate::error::ApiResult<HttpResponse>> {
    let hook = state.scatter.get()?;
    hook(state, req).await
}
