//! `_show`, `_list` and `_update`: design document functions that answer requests, as CouchDB
//! 3.x still serves them (deprecated there, used by applications). They run on the node's
//! JavaScript pool (`settee-js` `JsPool::render`, whose prelude gives them CouchDB's
//! `start`/`send`/`getRow`/`provides`/`registerType` and CommonJS `require` over the design
//! document); this module reads the design document and the document, builds CouchDB's request
//! object, and turns the function's answer into the response.
//!
//! A design document's render functions are one [`Program`] per revision, cached by
//! (bucket, collection, design document id); each function compiles on first use, so one that
//! does not compile fails only its own requests.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode};
use md5::{Digest, Md5};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use settee_auth::Operation;
use settee_engine::{Keyspace, UpdateOutcome};
use settee_js::{Program, ProgramSpec};

use crate::couch_doc::{parse_doc, render_doc, RenderOptions};
use crate::db_api::open;
use crate::doc_api::{attachment_fetcher, read_doc, store};
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::credentials_shown;
use crate::request::Req;
use crate::response::{full, if_none_match, not_modified, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;

/// Design documents' render programs, by (bucket id, collection, design document id), each
/// with the revision it was built from.
#[derive(Default)]
pub struct RenderPrograms {
    cache: Mutex<HashMap<DesignKey, (String, Arc<Program>)>>,
}

/// (bucket id, collection, design document id).
type DesignKey = (u32, u32, String);

/// The entries kept at most; past it the cache starts again (design documents are few).
const PROGRAMS_MAX: usize = 1024;

/// A design document as its render functions see it, with its program.
pub(crate) struct Design {
    rev: String,
    pub(crate) program: Arc<Program>,
}

/// The design document `name` of `db` (wherever it lives: `designs.rs`) with its program.
pub(crate) async fn design(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    db: &str,
    name: &str,
) -> ApiResult<Design> {
    let doc = crate::designs::read(state, req, keyspace, db, name).await?;
    let rev = doc.rev.clone();
    let key = (
        keyspace.bucket().id(),
        keyspace.collection(),
        doc.id.clone(),
    );
    if let Some((cached_rev, program)) = state.render_programs.cache.lock().get(&key) {
        if *cached_rev == rev {
            return Ok(Design {
                rev,
                program: program.clone(),
            });
        }
    }
    let mut ddoc = doc.body;
    ddoc.insert("_id".into(), Value::String(doc.id));
    ddoc.insert("_rev".into(), Value::String(rev.clone()));
    let program = Arc::new(Program::new(&ProgramSpec {
        lib: Value::Object(ddoc),
        ..ProgramSpec::default()
    }));
    let mut cache = state.render_programs.cache.lock();
    if cache.len() >= PROGRAMS_MAX {
        cache.clear();
    }
    cache.insert(key, (rev.clone(), program.clone()));
    Ok(Design { rev, program })
}

/// The document a show or update function gets: the winner as CouchDB renders it for this
/// reader, or `None` when it does not exist or is deleted.
fn current_doc(req: &Req, keyspace: &Keyspace, id: &str) -> ApiResult<Option<(String, Value)>> {
    let Some(record) = read_doc(keyspace, id)? else {
        return Ok(None);
    };
    let Some(leaf) = record.winner().filter(|leaf| !leaf.deleted) else {
        return Ok(None);
    };
    let options = RenderOptions::for_reader(credentials_shown(keyspace, &req.user));
    let fetch = attachment_fetcher(keyspace, id);
    let rendered = render_doc(id, &record, leaf, &options, &fetch)?;
    let doc = serde_json::from_slice(&rendered)
        .map_err(|error| ApiError::Internal(format!("rendered document: {error}")))?;
    Ok(Some((leaf.rev.to_string(), doc)))
}

/// A header name as CouchDB's request object spells it (`X-Foo`, `Accept`, `Content-Type`):
/// functions look headers up by that spelling, and hyper keeps them lower case.
fn header_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c });
        upper = c == '-';
    }
    out
}

/// What a request object carries besides the request itself.
pub struct RequestParts<'a> {
    /// The document id the URL names (`null` without one).
    pub id: Option<&'a str>,
    /// A fresh UUID (update functions name new documents with it).
    pub uuid: Option<String>,
    /// The request body as text; `None` is CouchDB's `"undefined"`.
    pub body: Option<String>,
    /// This node's name (in `info.update_seq`).
    pub node: &'a str,
}

/// CouchDB's request object (`chttpd_external:json_req_obj`) for JavaScript functions.
pub fn request_object(keyspace: &Keyspace, req: &Req, parts: RequestParts<'_>) -> Value {
    let query: Map<String, Value> = req
        .query
        .iter()
        .map(|(key, value)| (key.clone(), json!(value)))
        .collect();
    let headers: Map<String, Value> = req
        .headers
        .iter()
        .filter(|(name, _)| *name != hyper::header::AUTHORIZATION && *name != hyper::header::COOKIE)
        .filter_map(|(name, value)| Some((header_case(name.as_str()), json!(value.to_str().ok()?))))
        .collect();
    let cookie: Map<String, Value> = req
        .header("cookie")
        .map(|header| {
            header
                .split(';')
                .filter_map(|pair| pair.trim().split_once('='))
                .filter(|(name, _)| *name != "AuthSession")
                .map(|(name, value)| (name.to_string(), json!(value)))
                .collect()
        })
        .unwrap_or_default();
    let form: Map<String, Value> = match (&parts.body, req.header("content-type")) {
        (Some(body), Some(kind)) if kind.starts_with("application/x-www-form-urlencoded") => {
            form_urlencoded::parse(body.as_bytes())
                .map(|(name, value)| (name.into_owned(), json!(value)))
                .collect()
        }
        _ => Map::new(),
    };
    json!({
        "info": crate::db_api::db_info(keyspace, parts.node, None).unwrap_or_default(),
        "id": parts.id,
        "uuid": parts.uuid,
        "method": req.method.as_str(),
        "requested_path": req.path,
        "path": req.path,
        "raw_path": req.uri.path_and_query().map_or("/", |target| target.as_str()),
        "query": query,
        "headers": headers,
        "body": parts.body.map_or(json!("undefined"), Value::String),
        "peer": req.peer.map_or_else(|| "127.0.0.1".to_string(), |peer| peer.to_string()),
        "form": form,
        "cookie": cookie,
        "userCtx": {"db": keyspace.name(), "name": req.user.name, "roles": req.user.roles},
        "secObj": keyspace.bucket().security(),
    })
}

async fn body_text(state: &HttpState, req: &mut Req) -> ApiResult<Option<String>> {
    if req.body.is_none() {
        return Ok(None);
    }
    let bytes = req.body_bytes(state.config.max_request_size_bytes).await?;
    if bytes.is_empty() && matches!(req.method, Method::GET | Method::HEAD) {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The function's name and the document id after it (ids may hold `/`): CouchDB's
/// "Invalid path." without a name.
fn name_and_id<'a>(rest: &[&'a str]) -> ApiResult<(&'a str, Option<String>)> {
    match rest {
        [name, id @ ..] if !name.is_empty() => Ok((name, (!id.is_empty()).then(|| id.join("/")))),
        _ => Err(ApiError::NotFound("Invalid path.".into())),
    }
}

async fn run(
    state: &HttpState,
    design: &Design,
    kind: &'static str,
    name: &str,
    first: &Value,
    request: &Value,
) -> ApiResult<Value> {
    let answer = state
        .views
        .js()
        .render(
            design.program.clone(),
            kind,
            name.to_string(),
            first.to_string(),
            request.to_string(),
        )
        .result()
        .await
        .map_err(|error| ApiError::Internal(format!("render: {error}")))?;
    match thrown(&answer) {
        Some(error) => Err(error),
        None => Ok(answer),
    }
}

/// The error a function's answer reports (`{"error", "reason"}`: what it threw), if any.
pub(crate) fn thrown(answer: &Value) -> Option<ApiError> {
    let error = answer.get("error").and_then(Value::as_str)?;
    let reason = answer
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some(match error {
        "not_found" => ApiError::NotFound(reason),
        "forbidden" => ApiError::Forbidden(reason),
        "unauthorized" => ApiError::Unauthorized(reason),
        "not_acceptable" => ApiError::NotAcceptable(reason),
        "compilation_error" => ApiError::Compilation(reason),
        other => ApiError::Render {
            error: other.to_string(),
            reason,
        },
    })
}

/// The response a function described: `{code, headers, body | base64}`. Its own `ETag` is
/// dropped (the server's stands).
fn response_of(answer: &Value) -> ApiResult<HttpResponse> {
    let resp = &answer["ok"];
    let body = match (resp.get("base64").and_then(Value::as_str), resp.get("body")) {
        (Some(encoded), _) => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|_| {
                    ApiError::Internal("invalid base64 in the function's answer".into())
                })?,
        ),
        (None, Some(Value::String(text))) => Bytes::from(text.clone()),
        _ => Bytes::new(),
    };
    let mut response = Response::new(full(body));
    *response.status_mut() = resp
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    if let Some(headers) = resp.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            let (Ok(name), Some(Ok(value))) = (
                HeaderName::from_bytes(name.as_bytes()),
                value.as_str().map(HeaderValue::from_str),
            ) else {
                continue;
            };
            if name != hyper::header::ETAG {
                response.headers_mut().insert(name, value);
            }
        }
    }
    Ok(response)
}

/// What a show or update request names: the function, the document (read now), the body.
struct Target<'a> {
    name: &'a str,
    id: Option<String>,
    keyspace: Keyspace,
    design: Design,
    /// The document's revision and JSON, when it exists and is not deleted.
    doc: Option<(String, Value)>,
    body: Option<String>,
}

async fn target<'a>(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    rest: &[&'a str],
) -> ApiResult<Target<'a>> {
    let (name, id) = name_and_id(rest)?;
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let design = design(state, req, &keyspace, db, ddoc).await?;
    let doc = match &id {
        // An account another user may not read is no document to them (CouchDB's
        // `after_doc_read` in accounts databases).
        Some(id)
            if settee_http_core::auth_db::check_doc_read(keyspace.bucket(), &req.user, id)
                .is_err() =>
        {
            None
        }
        Some(id) => current_doc(req, &keyspace, id)?,
        None => None,
    };
    let body = body_text(state, req).await?;
    Ok(Target {
        name,
        id,
        keyspace,
        design,
        doc,
        body,
    })
}

/// `GET|POST /{db}/_design/{ddoc}/_show/{name}[/{docid}]`.
pub async fn show(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    if !matches!(req.method, Method::GET | Method::HEAD | Method::POST) {
        return Err(not_allowed("GET,POST,HEAD"));
    }
    let Target {
        name,
        id,
        keyspace,
        design,
        doc,
        body,
    } = target(state, req, db, ddoc, rest).await?;
    // CouchDB's show ETag: what the answer depends on besides the function itself.
    let tag = {
        let mut hash = Md5::new();
        for part in [
            design.rev.as_str(),
            doc.as_ref().map_or("null", |(rev, _)| rev.as_str()),
            req.header("accept").unwrap_or_default(),
            req.user.name.as_deref().unwrap_or_default(),
            &req.user.roles.join(","),
            &serde_json::to_string(&req.query).unwrap_or_default(),
            body.as_deref().unwrap_or_default(),
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        format!(
            "\"{}\"",
            crate::couch_doc::digest_text(&hash.finalize().into())
        )
    };
    if if_none_match(req.header("if-none-match"), &tag) {
        return Ok(not_modified(&tag));
    }
    let missing = id.is_some() && doc.is_none();
    let request = request_object(
        &keyspace,
        req,
        RequestParts {
            id: id.as_deref(),
            uuid: None,
            body,
            node: &state.config.node_name,
        },
    );
    let first = doc.map_or(Value::Null, |(_, doc)| doc);
    let answer = match run(state, &design, "shows", name, &first, &request).await {
        // A function that fails on a document that does not exist answers for the document.
        Err(ApiError::Render { .. }) if missing => return Err(ApiError::missing()),
        answer => answer?,
    };
    let response = response_of(&answer)?;
    Ok(crate::response::with_header(response, "etag", &tag))
}

/// `POST|PUT /{db}/_design/{ddoc}/_update/{name}[/{docid}]`: runs the function and saves the
/// document it returns (with the document API's checks), answering with its response and
/// `X-Couch-Id` / `X-Couch-Update-NewRev`.
pub async fn update(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    if !matches!(req.method, Method::POST | Method::PUT) {
        return Err(not_allowed("POST,PUT"));
    }
    let Target {
        name,
        id,
        keyspace,
        design,
        doc,
        body,
    } = target(state, req, db, ddoc, rest).await?;
    let request = request_object(
        &keyspace,
        req,
        RequestParts {
            id: id.as_deref(),
            uuid: Some(state.uuids.configured(&req.settings)),
            body,
            node: &state.config.node_name,
        },
    );
    let first = doc.map_or(Value::Null, |(_, doc)| doc);
    let answer = run(state, &design, "updates", name, &first, &request).await?;
    let mut response = response_of(&answer)?;
    let Some(new_doc) = answer.get("doc").filter(|doc| !doc.is_null()) else {
        return Ok(response);
    };
    let doc_id = match new_doc.get("_id") {
        Some(Value::String(doc_id)) if !doc_id.is_empty() => doc_id.clone(),
        _ => {
            return Err(ApiError::IllegalDocId(
                "Document id must not be empty".into(),
            ))
        }
    };
    // The writer needs the rights a PUT of this document would.
    let keyspace = open(state, req, db, Operation::WriteDoc(doc_id.as_bytes()))?;
    let bytes = serde_json::to_vec(new_doc).unwrap_or_default();
    let parsed = parse_doc(&bytes)?;
    let rev = parsed.rev.clone();
    let outcome: UpdateOutcome = store(state, req, &keyspace, &doc_id, parsed, rev).await?;
    let new_rev = crate::doc_api::outcome_rev(outcome, &doc_id)?;
    if answer["ok"].get("code").is_none() {
        *response.status_mut() = StatusCode::CREATED;
    }
    let response = crate::response::with_header(response, "x-couch-id", &doc_id);
    Ok(crate::response::with_header(
        response,
        "x-couch-update-newrev",
        &new_rev,
    ))
}

/// The most bytes of view rows a list function is given (they are read whole, then run).
const LIST_VIEW_BYTES_MAX: usize = 64 << 20;

/// `GET|POST /{db}/_design/{ddoc}/_list/{list}/{view}` (a view of the same design document,
/// or `_all_docs`) and `.../_list/{list}/{other ddoc}/{view}`: the view's answer, with every
/// query parameter it takes, becomes the list function's `head` and rows.
pub async fn list(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    rest: &[&str],
) -> ApiResult<HttpResponse> {
    let method = req.method.clone();
    if !matches!(
        method,
        Method::GET | Method::HEAD | Method::POST | Method::OPTIONS
    ) {
        return Err(not_allowed("GET,POST,HEAD"));
    }
    let (name, view_ddoc, view) = match rest {
        [name, view] if !name.is_empty() && !view.is_empty() => (*name, ddoc, *view),
        [name, other, view] if !name.is_empty() && !view.is_empty() => (*name, *other, *view),
        _ => return Err(ApiError::NotFound("Invalid path.".into())),
    };
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let design = design(state, req, &keyspace, db, ddoc).await?;
    if method == Method::OPTIONS {
        req.method = Method::GET;
    }
    let all_docs = rest.len() == 2 && view == "_all_docs";
    // In a cluster the rows come from every node, as the view queried through this node
    // would give them (the scatter hook, on the view's own path); else from this node.
    let view_of_list = if all_docs {
        None
    } else {
        Some((view_ddoc, view))
    };
    let rows = match Box::pin(scattered_rows(state, req, db, view_of_list)).await {
        Some(rows) => rows,
        None if all_docs => {
            Box::pin(crate::bulk_api::all_docs(
                state,
                req,
                db,
                crate::bulk_api::DocSet::All,
            ))
            .await
        }
        None => Box::pin(crate::view_api::view(state, req, db, view_ddoc, view)).await,
    };
    req.method = method;
    let rows = rows?;
    if !rows.status().is_success() {
        return Ok(rows);
    }
    let bytes = http_body_util::Limited::new(rows.into_body(), LIST_VIEW_BYTES_MAX)
        .collect()
        .await
        .map_err(|error| ApiError::Internal(format!("the list's view: {error}")))?
        .to_bytes();
    let mut head: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|error| ApiError::Internal(format!("the list's view: {error}")))?;
    let rows = head.remove("rows").unwrap_or_else(|| json!([]));
    let request = request_object(
        &keyspace,
        req,
        RequestParts {
            id: None,
            uuid: None,
            body: None,
            node: &state.config.node_name,
        },
    );
    let first = json!({"head": head, "rows": rows});
    let answer = run(state, &design, "lists", name, &first, &request).await?;
    response_of(&answer)
}

/// A list's rows from every node when the database is spread over several (the scatter hook
/// answers for the view's path: `view` as (design document, view), or `None` for
/// `_all_docs`); `None` when this node answers alone. The request's path is the view's while
/// the hook looks at it.
async fn scattered_rows(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    view: Option<(&str, &str)>,
) -> Option<ApiResult<HttpResponse>> {
    state.scatter.get()?;
    let segments: Vec<String> = match view {
        Some((ddoc, view)) => vec![
            db.into(),
            "_design".into(),
            ddoc.into(),
            "_view".into(),
            view.into(),
        ],
        None => vec![db.into(), "_all_docs".into()],
    };
    let encoded: Vec<String> = segments
        .iter()
        .map(|segment| crate::location::encode_segment(segment))
        .collect();
    let target = match req.uri.query() {
        Some(query) => format!("/{}?{query}", encoded.join("/")),
        None => format!("/{}", encoded.join("/")),
    };
    let uri = target.parse::<hyper::Uri>().ok()?;
    let path = std::mem::replace(&mut req.path, segments);
    let client_uri = std::mem::replace(&mut req.uri, uri);
    let rows = crate::router::scatter(state, req).await;
    req.path = path;
    req.uri = client_uri;
    rows
}
