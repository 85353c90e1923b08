//! Single-document requests answered by the document's active node (docs/format/
//! cluster-transport.md, "Forwarded HTTP document requests").
//!
//! The front node: [`forward_if_elsewhere`] picks the requests that name one document
//! ([`document_route`]), asks the binary's [`crate::ClusterView`] whether that document's
//! vbucket is active here and, when it is not, reads the body, sends the request with the
//! authenticated user to the active and turns its reply into the response. The active:
//! [`answer_forwarded`] runs a [`ForwardHttp`] through the same router as that user (no second
//! authentication; the cluster secret authenticated the connection) and reads the answer
//! whole. The HTTP door still knows nothing of the map: which node, which epoch, the retry on a
//! stale map are the binary's, behind the `ClusterView` seam.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::Method;
pub use settee_forward_wire::{AuthMethod, ForwardHttp, ForwardHttpReply, Identity};
pub use settee_http_core::document_route::{document_route, DocumentRoute};

use crate::auth::UserCtx;
use crate::error::{ApiError, ApiResult};
use crate::request::{parse_query, split_path, Req, RequestBody};
use crate::response::{self, HttpResponse};
use crate::HttpState;

/// Headers that describe one hop, or carry the credentials the front node already resolved:
/// never forwarded, never copied back from a reply (`content-length` is, for HEAD).
const HOP_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
];

/// The database and document a forwarded request is about, as the active checks it against
/// the vbucket the sender named: the path's document, or for `POST /db` the body's `_id`.
pub fn forwarded_document(request: &ForwardHttp, plus_to_space: bool) -> Option<(String, String)> {
    let method = Method::from_bytes(request.method.as_bytes()).ok()?;
    let uri: hyper::Uri = request.target.parse().ok()?;
    let segments = split_path(uri.path(), plus_to_space).ok()?;
    match document_route(&method, &segments)? {
        DocumentRoute::Document { db, id } => Some((db.to_owned(), id)),
        DocumentRoute::NewDocument { db } => {
            let body: serde_json::Value = serde_json::from_slice(&request.body).ok()?;
            let id = body.get("_id")?.as_str()?.to_owned();
            Some((db.to_owned(), id))
        }
        DocumentRoute::NewIndex { db } => Some((db.to_owned(), index_ddoc(&request.body)?)),
    }
}

/// The design document a `POST /db/_index` body writes (`None`: not an index definition).
fn index_ddoc(body: &[u8]) -> Option<String> {
    let body: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some(settee_mango::NewIndex::parse(&body).ok()?.ddoc)
}

/// The answer of the document's active node when it is another node; `None` when this node
/// answers (not clustered, not a document request, a database outside the map, the vbucket
/// active here, or a request another node forwarded here).
pub async fn forward_if_elsewhere(
    state: &HttpState,
    req: &mut Req,
) -> Option<ApiResult<HttpResponse>> {
    if req.forwarded {
        return None;
    }
    let cluster = state.cluster.get()?;
    let route = match document_route(&req.method, &req.path)? {
        DocumentRoute::Document { db, id } if req.method.as_str() == "COPY" => {
            let db = db.to_owned();
            if let Some(answer) = copy_across(cluster.as_ref(), req, &db, &id).await {
                return Some(answer);
            }
            Some((db, id))
        }
        DocumentRoute::Document { db, id } => Some((db.to_owned(), id)),
        DocumentRoute::NewDocument { .. } => None,
        DocumentRoute::NewIndex { db } => {
            let db = db.to_owned();
            let body = match req.body_bytes(state.config.max_request_size_bytes).await {
                Ok(body) => body,
                Err(error) => return Some(Err(error)),
            };
            req.headers.remove(hyper::header::CONTENT_ENCODING);
            // Not an index definition: answered here, as a single node answers it.
            let id = index_ddoc(&body);
            req.body = Some(RequestBody::Whole(body));
            Some((db, id?))
        }
    };
    let (db, id, body) = match route {
        Some((db, id)) => {
            if cluster.serves_here(&db, &id) {
                return unleased(cluster.as_ref(), &db).await;
            }
            let body = req
                .sent_body_bytes(state.config.max_request_size_bytes)
                .await;
            (db, id, body)
        }
        None => {
            let db = req.db_segment().to_owned();
            let (id, body) = match new_document(state, req).await? {
                Ok(routed) => routed,
                Err(error) => return Some(Err(error)),
            };
            if cluster.serves_here(&db, &id) {
                req.body = Some(RequestBody::Whole(body));
                return unleased(cluster.as_ref(), &db).await;
            }
            (db, id, Ok(body))
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(error) => return Some(Err(error)),
    };
    let request = request_as(req, req.method.as_str(), client_target(req), body.to_vec());
    Some(match cluster.forward(&db, &id, request).await {
        Ok(reply) => Ok(reply_response(reply)),
        Err(refusal) => Err(refusal.into()),
    })
}

/// Members of a document as `GET ?attachments=true` shows it that a `PUT` of its copy leaves
/// out (the copy gets its own revision history).
const NOT_COPIED: &[&str] = &[
    "_rev",
    "_revisions",
    "_conflicts",
    "_deleted_conflicts",
    "_local_seq",
];

/// `COPY /db/src` (Destination: `dst[?rev=R]`) when the two documents are not both active
/// here: the source as the user reads it, attachments inline, from its node, written as the
/// destination through the destination's node as the user (with `R` as its `_rev`). `None`
/// when both are here, or for a request the handler refuses as on one node (no Destination,
/// an absolute one).
async fn copy_across(
    cluster: &dyn crate::ClusterView,
    req: &Req,
    db: &str,
    source: &str,
) -> Option<ApiResult<HttpResponse>> {
    let destination = req.header("destination")?;
    if destination.contains("://") {
        return None;
    }
    let (raw_target, target_rev) = match destination.split_once("?rev=") {
        Some((target, rev)) => (target, Some(rev.to_owned())),
        None => (destination, None),
    };
    let target = percent_encoding::percent_decode_str(raw_target)
        .decode_utf8_lossy()
        .into_owned();
    if cluster.serves_here(db, source) && cluster.serves_here(db, &target) {
        return None;
    }
    let db_path = format!("/{}", crate::location::encode_segment(db));
    let mut read_target = format!("{}?attachments=true", req.uri.path());
    if let Some(rev) = req.param("rev") {
        read_target.push_str("&rev=");
        read_target.push_str(&crate::location::encode_segment(rev));
    }
    let mut read = request_as(req, "GET", read_target, Vec::new());
    read.headers
        .retain(|(name, _)| !matches!(name.as_str(), "destination" | "accept" | "content-type"));
    let source_reply = match cluster.forward(db, source, read).await {
        Ok(reply) if reply.status == 200 => reply,
        Ok(refused) => return Some(Ok(reply_response(refused))),
        Err(refusal) => return Some(Err(refusal.into())),
    };
    let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_slice(&source_reply.body) else {
        return Some(Err(ApiError::Internal(
            "the source document's node answered no document".into(),
        )));
    };
    doc.retain(|name, _| !NOT_COPIED.contains(&name.as_str()));
    doc.insert("_id".into(), target.clone().into());
    if let Some(rev) = target_rev {
        doc.insert("_rev".into(), rev.into());
    }
    if let Some(serde_json::Value::Object(attachments)) = doc.get_mut("_attachments") {
        for attachment in attachments.values_mut() {
            if let serde_json::Value::Object(fields) = attachment {
                fields.retain(|name, _| name == "content_type" || name == "data");
            }
        }
    }
    let body = serde_json::Value::Object(doc).to_string().into_bytes();
    let mut write = request_as(req, "PUT", format!("{db_path}/{raw_target}"), body);
    write.headers.retain(|(name, _)| {
        !matches!(
            name.as_str(),
            "destination" | "content-type" | "content-length" | "content-encoding"
        )
    });
    write
        .headers
        .push(("content-type".into(), b"application/json".to_vec()));
    Some(match cluster.forward(db, &target, write).await {
        Ok(reply) => Ok(reply_response(reply)),
        Err(refusal) => Err(refusal.into()),
    })
}

/// A document this node is the active of, by its map: answered here (`None`), unless the node
/// holds no serving lease, nor gets one within a moment, when its map may be stale (a
/// failover it has not seen): 503, which clients retry (docs/format/cluster-map.md, "The serving lease").
async fn unleased(cluster: &dyn crate::ClusterView, db: &str) -> Option<ApiResult<HttpResponse>> {
    cluster.unleased(db).await.then(|| {
        Err(crate::error::ApiError::ServiceUnavailable(
            "this node cannot confirm its cluster map now; try again".into(),
        ))
    })
}

/// `req` as another node runs it, with `method`, `target` and `body`: the user and the
/// headers but hop-by-hop ones; the cluster side fills in where it goes.
pub fn request_as(req: &Req, method: &str, target: String, body: Vec<u8>) -> ForwardHttp {
    ForwardHttp {
        revision: 0,
        epoch: 0,
        bucket: String::new(),
        vbucket: 0,
        method: method.to_owned(),
        target,
        identity: identity(&req.user),
        headers: request_headers(&req.headers),
        body,
    }
}

/// The request's path and query as the client sent them.
pub fn client_target(req: &Req) -> String {
    req.uri.path_and_query().map_or_else(
        || req.uri.path().to_owned(),
        |target| target.as_str().to_owned(),
    )
}

/// `POST /db`'s document id and body: the body's `_id`, or one this node makes (written into
/// the body, so the active stores exactly that id). `None`: not a JSON object with a JSON
/// content type, answered here as any malformed request is (the body put back).
async fn new_document(state: &HttpState, req: &mut Req) -> Option<ApiResult<(String, Bytes)>> {
    req.require_json_content_type().ok()?;
    let body = match req.body_bytes(state.config.max_request_size_bytes).await {
        Ok(body) => body,
        Err(error) => return Some(Err(error)),
    };
    // The body is decoded now: what goes on (forwarded or served here) is the plain JSON.
    req.headers.remove(hyper::header::CONTENT_ENCODING);
    let parsed = crate::request::parse_json(&body, state.config.max_json_depth);
    let Ok(serde_json::Value::Object(members)) = parsed else {
        req.body = Some(RequestBody::Whole(body));
        return None;
    };
    match members.get("_id") {
        Some(serde_json::Value::String(id)) => Some(Ok((id.clone(), body))),
        Some(_) => {
            req.body = Some(RequestBody::Whole(body));
            None
        }
        None => {
            let id = state.uuids.configured(&req.settings);
            Some(Ok((id.clone(), with_id(&body, &id, members.is_empty()))))
        }
    }
}

/// `body` (a JSON object) with `"_id": id` as its first member.
fn with_id(body: &[u8], id: &str, empty: bool) -> Bytes {
    let open = body.iter().position(|&byte| byte == b'{').unwrap_or(0);
    let member = format!(
        "\"_id\":{}{}",
        serde_json::Value::String(id.to_owned()),
        if empty { "" } else { "," }
    );
    let mut spliced = Vec::with_capacity(body.len() + member.len());
    spliced.extend_from_slice(&body[..=open.min(body.len().saturating_sub(1))]);
    spliced.extend_from_slice(member.as_bytes());
    spliced.extend_from_slice(body.get(open + 1..).unwrap_or_default());
    Bytes::from(spliced)
}

fn identity(user: &UserCtx) -> Identity {
    Identity {
        name: user.name.clone(),
        roles: user.roles.clone(),
        auth: match user.authenticated {
            Some("cookie") => AuthMethod::Cookie,
            Some(_) => AuthMethod::Basic,
            None => AuthMethod::None,
        },
    }
}

fn user(identity: Identity) -> UserCtx {
    UserCtx {
        name: identity.name,
        roles: identity.roles,
        authenticated: match identity.auth {
            AuthMethod::Cookie => Some("cookie"),
            AuthMethod::Basic => Some("default"),
            AuthMethod::None => None,
        },
    }
}

fn is_hop_header(name: &str) -> bool {
    HOP_HEADERS.contains(&name)
}

fn request_headers(headers: &HeaderMap) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .filter(|(name, _)| !is_hop_header(name.as_str()) && *name != hyper::header::CONTENT_LENGTH)
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect()
}

fn header_map(headers: Vec<(String, Vec<u8>)>) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if is_hop_header(&name) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&value),
        ) {
            map.append(name, value);
        }
    }
    map
}

pub fn reply_response(reply: ForwardHttpReply) -> HttpResponse {
    if reply.status == 304 {
        // The active's `Content-Length: 0` kept: hyper drops it beside a body already ended
        // (`response::not_modified`).
        let mut response = response::not_modified("");
        *response.headers_mut() = header_map(reply.headers);
        return response;
    }
    let mut response = hyper::Response::new(response::full(reply.body));
    *response.status_mut() =
        hyper::StatusCode::from_u16(reply.status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    *response.headers_mut() = header_map(reply.headers);
    response
}

/// Runs a request another node forwarded, as the user it names, and reads the answer whole
/// (at most `reply_body_bytes_max` bytes of body, else `Err` with the reason). The front node
/// adds its own request id, CORS and JSONP; nothing of that is done here. `scattered`: what a
/// scattered whole-bucket request answers for (`settee-http-scatter`).
pub async fn answer_forwarded(
    state: Arc<HttpState>,
    request: ForwardHttp,
    scattered: Option<Scattered>,
    reply_body_bytes_max: usize,
) -> Result<ForwardHttpReply, String> {
    let response = forwarded_response(&state, request, scattered).await;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, reply_body_bytes_max)
        .collect()
        .await
        .map_err(|error| format!("reply too large to forward or unreadable: {error}"))?
        .to_bytes();
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| !is_hop_header(name.as_str()))
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    Ok(ForwardHttpReply {
        status: parts.status.as_u16(),
        headers,
        body: body.to_vec(),
    })
}

/// What a request another node scattered here answers for.
pub struct Scattered {
    /// One flag per vbucket of the bucket: true at those this node answers for.
    pub vbuckets: Arc<[bool]>,
    /// The design document a view query runs (its JSON), carried by the front node.
    pub design: Option<Arc<[u8]>>,
}

async fn forwarded_response(
    state: &HttpState,
    request: ForwardHttp,
    scattered: Option<Scattered>,
) -> HttpResponse {
    let (vbuckets, design) = match scattered {
        Some(scattered) => (Some(scattered.vbuckets), scattered.design),
        None => (None, None),
    };
    let settings = state.node_config.settings();
    let (Ok(method), Ok(uri)) = (
        Method::from_bytes(request.method.as_bytes()),
        request.target.parse::<hyper::Uri>(),
    ) else {
        return response::error(&ApiError::BadRequest(
            "a forwarded request's method or target does not parse".into(),
        ));
    };
    let path = match split_path(uri.path(), settings.decode_plus_to_space) {
        Ok(path) => path,
        Err(invalid) => return response::error(&invalid.error()),
    };
    let mut req = Req {
        method,
        path,
        query: parse_query(uri.query()),
        headers: header_map(request.headers),
        uri,
        body: Some(RequestBody::Whole(Bytes::from(request.body))),
        user: user(request.identity),
        peer: None,
        body_timeout: state.config.body_timeout,
        settings,
        forwarded: true,
        vbuckets,
        design,
        rewrites: 0,
    };
    match crate::router::route(state, &mut req).await {
        Ok(response) => response,
        Err(error) => response::error(&error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_definition_names_its_design_document() {
        assert_eq!(
            index_ddoc(br#"{"index": {"fields": ["a"]}, "ddoc": "mine"}"#),
            Some("_design/mine".into())
        );
        assert_eq!(index_ddoc(b"{}"), None);
    }

    #[test]
    fn a_generated_id_becomes_the_first_member_of_the_body() {
        assert_eq!(
            &with_id(br#" {"a":1}"#, "x1", false)[..],
            br#" {"_id":"x1","a":1}"#
        );
        assert_eq!(&with_id(b"{}", "x1", true)[..], br#"{"_id":"x1"}"#);
        let request = ForwardHttp {
            revision: 1,
            epoch: 1,
            bucket: "db".into(),
            vbucket: 0,
            method: "POST".into(),
            target: "/db?batch=ok".into(),
            identity: identity(&UserCtx::default()),
            headers: vec![],
            body: with_id(br#"{"a":1}"#, "x1", false).to_vec(),
        };
        assert_eq!(
            forwarded_document(&request, false),
            Some(("db".to_owned(), "x1".to_owned()))
        );
    }

    #[test]
    fn credentials_and_hop_headers_are_not_forwarded() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Basic eDp5"));
        headers.insert("cookie", HeaderValue::from_static("AuthSession=abc"));
        headers.insert("content-length", HeaderValue::from_static("7"));
        headers.insert("host", HeaderValue::from_static("a:1"));
        headers.insert("if-match", HeaderValue::from_static("1-x"));
        let names: Vec<String> = request_headers(&headers)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, vec!["host".to_owned(), "if-match".to_owned()]);
    }
}
