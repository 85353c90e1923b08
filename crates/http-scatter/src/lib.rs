//! Whole-bucket requests in a cluster (docs/format/cluster-transport.md, "Whole-bucket HTTP
//! requests"): the front node sends `_all_docs`, `_changes`, a design document's `_info` and
//! the compactions to every node holding active vbuckets of the bucket, each answering for
//! its own (`Req::vbuckets`), and splits `_bulk_docs`, `_bulk_get`, `_revs_diff`,
//! `_missing_revs` and `_purge` by the node of each document; it merges the
//! answers with `settee-gather`. A database whose vbuckets are all active here, or that is not
//! in the cluster map, is answered locally as on a single node. View queries are merged in
//! [`views`], Mango requests in [`mango`].
//!
//! Split out of `settee-http` (which stays ignorant of it): the binary sets [`hook`] as the
//! door's `HttpState::scatter`, and the router asks it before answering a request locally.
#![deny(clippy::unwrap_used)]

pub mod changes;
pub mod mango;
pub mod views;

use hyper::{Method, StatusCode};
use serde_json::Value;

use settee_http::auth::Operation;
use settee_http::db_api::open;
use settee_http::error::{ApiError, ApiResult};
use settee_http::forward::{self, ForwardHttp, ForwardHttpReply};
use settee_http::request::Req;
use settee_http::response::{json_bytes, HttpResponse};
use settee_http::HttpState;
pub use settee_http_core::scattered::{key_vbucket, scattered, Scattered};

/// The database of a scattered request another node sent here (`None`: not one that is
/// scattered; the receiver refuses it).
pub fn scattered_db(request: &ForwardHttp, plus_to_space: bool) -> Option<String> {
    let uri = request.target.parse::<hyper::Uri>().ok()?;
    let method = Method::from_bytes(request.method.as_bytes()).ok()?;
    let path = settee_http::request::split_path(uri.path(), plus_to_space).ok()?;
    let query = settee_http::request::parse_query(uri.query());
    let param = |name: &str| {
        query
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let (db, what) = scattered(&method, &path)?;
    // A front node asks the nodes for normal feeds only (changes.rs): a feed that waits or
    // streams would hold the transport's reply open.
    if what == Scattered::Changes && param("feed").is_some_and(|feed| feed != "normal") {
        return None;
    }
    Some(db.to_owned())
}

/// [`scatter_if_partial`] as `settee-http`'s router calls it (`settee_http::ScatterHook`).
pub fn hook<'a>(state: &'a HttpState, req: &'a mut Req) -> settee_http::Scattering<'a> {
    Box::pin(scatter_if_partial(state, req))
}

/// The merged answer of the nodes when `req` is a scattered request on a database whose
/// vbuckets are active on other nodes too; `None` when this node answers it alone.
pub async fn scatter_if_partial(
    state: &HttpState,
    req: &mut Req,
) -> Option<ApiResult<HttpResponse>> {
    if req.forwarded {
        return None;
    }
    let cluster = state.cluster.get()?;
    let (db, what) = scattered(&req.method, &req.path)?;
    let db = db.to_owned();
    if !cluster.scatters(&db) {
        return None;
    }
    Some(match what {
        Scattered::AllDocs => all_docs(state, req, &db).await,
        Scattered::Changes => crate::changes::changes(state, req, &db).await,
        Scattered::DbInfo => db_info(state, req, &db).await,
        Scattered::View => crate::views::view(state, req).await,
        Scattered::Mango => {
            let path = req.path.clone();
            let (_, partition, what) = crate::mango::mango_request(&req.method, &path)?;
            crate::mango::answer(state, req, &db, partition, what).await
        }
        Scattered::ViewCleanup => crate::mango::view_cleanup(state, req, &db).await,
        Scattered::EveryNode => every_node(state, req, &db).await,
        Scattered::DesignInfo | Scattered::CompactDesign => {
            design_every_node(state, req, &db, what).await
        }
        Scattered::IndexBulkDelete => return crate::mango::bulk_delete(state, req, &db).await,
        _ => return by_document(state, req, &db, what).await,
    })
}

/// The request as the nodes get it: `target` and `body` in place of the client's.
pub(crate) fn request_for_nodes(
    req: &Req,
    method: &str,
    target: String,
    body: Vec<u8>,
) -> ForwardHttp {
    // The front node decoded the body: the nodes get plain JSON.
    let mut request = forward::request_as(req, method, target, body);
    request
        .headers
        .retain(|(name, _)| name != "content-encoding");
    request
}

/// A `POST` of a JSON body (the front node's own) to the nodes, at `target`.
pub(crate) fn json_post_for_nodes(req: &Req, target: String, body: Vec<u8>) -> ForwardHttp {
    let mut request = request_for_nodes(req, "POST", target, body);
    request
        .headers
        .retain(|(name, _)| name != "content-type" && name != "content-length");
    request
        .headers
        .push(("content-type".into(), b"application/json".to_vec()));
    request
}

/// Sends `request` to the nodes and returns their 200 answers with the vbuckets of each.
pub(crate) async fn gather(
    state: &HttpState,
    db: &str,
    request: ForwardHttp,
) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>> {
    gather_to_all(state, db, None, request, &[200]).await
}

/// Sends each node the request `parts` makes for it (with `design`, a view query's design
/// document) and returns the answers with the vbuckets of each; the first answer whose status
/// is not in `ok` is the client's answer (`Err`).
pub(crate) async fn gather_parts(
    state: &HttpState,
    db: &str,
    design: Option<&[u8]>,
    parts: &settee_http::ScatterParts<'_>,
    ok: &[u16],
) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>> {
    let Some(cluster) = state.cluster.get() else {
        return Err(Err(ApiError::ServiceUnavailable("not in a cluster".into())));
    };
    gather_through(cluster.as_ref(), db, design, parts, ok).await
}

/// [`gather_parts`] through `cluster` (for a task that outlives the request's state borrow).
pub(crate) async fn gather_through(
    cluster: &dyn settee_http::ClusterView,
    db: &str,
    design: Option<&[u8]>,
    parts: &settee_http::ScatterParts<'_>,
    ok: &[u16],
) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>> {
    let answers = cluster
        .scatter(db, design, parts)
        .await
        .map_err(|refusal| Err(refusal.into()))?;
    if let Some((_, failed)) = answers
        .iter()
        .find(|(_, reply)| !ok.contains(&reply.status))
    {
        return Err(Ok(forward::reply_response(failed.clone())));
    }
    Ok(answers)
}

/// The answer holding each id's row: the one whose vbuckets have the id's.
fn answer_of_each<'a>(
    ids: impl IntoIterator<Item = &'a Value>,
    vbuckets: u16,
    answers: &[(Vec<u16>, ForwardHttpReply)],
) -> Vec<usize> {
    ids.into_iter()
        .map(|id| {
            let vbucket = key_vbucket(id, vbuckets);
            answers
                .iter()
                .position(|(listed, _)| listed.contains(&vbucket))
                .unwrap_or(usize::MAX)
        })
        .collect()
}

/// The database (as `operation` allows it) and the body of a request split by document;
/// `json_only`: refused (415) unless its content type is JSON.
pub(crate) async fn json_body_of(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    operation: Operation<'_>,
    json_only: bool,
) -> ApiResult<(settee_engine::Keyspace, bytes::Bytes)> {
    let keyspace = open(state, req, db, operation)?;
    if json_only {
        req.require_json_content_type()?;
    }
    let body = req.body_bytes(state.config.max_request_size_bytes).await?;
    Ok((keyspace, body))
}

/// `_bulk_docs`, `_bulk_get` and `_revs_diff` split by document. `None` (the body put back):
/// a body this node answers itself, as a single node would (not the request's shape,
/// `all_or_nothing`, more documents than a batch may hold); nothing was sent.
async fn by_document(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    what: Scattered,
) -> Option<ApiResult<HttpResponse>> {
    let operation = match what {
        Scattered::Purge => Operation::AdminDb,
        _ => Operation::ReadDb,
    };
    // Only `_bulk_docs` insists on a JSON content type, as on one node.
    let json_only = what == Scattered::BulkDocs;
    let (keyspace, body) = match json_body_of(state, req, db, operation, json_only).await {
        Ok(opened) => opened,
        Err(error) => return Some(Err(error)),
    };
    let prepared = match what.items() {
        Some((list, id)) => {
            let settings = req.settings.clone();
            let with_ids = if what == Scattered::BulkDocs {
                settee_gather::split::assign_ids(&body, list, id, || {
                    state.uuids.configured(&settings)
                })
            } else {
                Ok(body.to_vec())
            };
            with_ids.and_then(|with_ids| {
                let ids = settee_gather::split::item_ids(&with_ids, list, id)?;
                Ok((with_ids, ids))
            })
        }
        None => settee_gather::split::object_keys(&body).map(|ids| (body.to_vec(), ids)),
    };
    let answers_here = |prepared: &Result<(Vec<u8>, Vec<Value>), _>| match prepared {
        Err(_) => true,
        Ok((with_ids, ids)) => {
            ids.len() > state.config.max_docs_per_bulk
                || (what == Scattered::BulkDocs
                    && serde_json::from_slice::<Value>(with_ids)
                        .is_ok_and(|body| body.get("all_or_nothing") == Some(&Value::Bool(true))))
        }
    };
    if answers_here(&prepared) {
        req.body = Some(settee_http::request::RequestBody::Whole(body));
        return None;
    }
    let (with_ids, ids) = prepared.ok()?;
    let vbuckets = keyspace.bucket().vbuckets();
    let template = json_post_for_nodes(req, forward::client_target(req), Vec::new());
    let parts = |groups: &[Vec<u16>]| -> Vec<Option<ForwardHttp>> {
        let group_of = |id: &Value| {
            let vbucket = key_vbucket(id, vbuckets);
            groups.iter().position(|group| group.contains(&vbucket))
        };
        let shares = match what.items() {
            Some((list, id)) => {
                settee_gather::split::split_list(&with_ids, list, id, groups.len(), group_of)
            }
            None => settee_gather::split::split_object(&with_ids, groups.len(), group_of),
        };
        shares
            .unwrap_or_else(|_| vec![None; groups.len()])
            .into_iter()
            .map(|share| {
                share.map(|body| ForwardHttp {
                    body,
                    ..template.clone()
                })
            })
            .collect()
    };
    let ok: &[u16] = match what {
        Scattered::BulkDocs => &[201, 202],
        Scattered::Purge => &[201],
        _ => &[200],
    };
    let answers = match gather_parts(state, db, None, &parts, ok).await {
        Ok(answers) => answers,
        Err(answer) => return Some(answer),
    };
    let bodies: Vec<Option<&[u8]>> = answers
        .iter()
        .map(|(_, reply)| Some(reply.body.as_slice()))
        .collect();
    let merged = match what {
        Scattered::RevsDiff => settee_gather::split::merge_objects(&bodies, None),
        Scattered::MissingRevs => {
            settee_gather::split::merge_objects(&bodies, Some("missing_revs"))
                .map(|merged| [&b"{\"missing_revs\":"[..], &merged, b"}"].concat())
        }
        Scattered::Purge => settee_gather::split::merge_objects(&bodies, Some("purged"))
            .map(|merged| [&b"{\"purge_seq\":null,\"purged\":"[..], &merged, b"}"].concat()),
        Scattered::BulkGet => settee_gather::split::merge_in_order(
            &bodies,
            &answer_of_each(&ids, vbuckets, &answers),
            Some("results"),
        ),
        _ => {
            let new_edits = req.flag("new_edits", true)
                && serde_json::from_slice::<Value>(&with_ids)
                    .is_ok_and(|body| body.get("new_edits") != Some(&Value::Bool(false)));
            if new_edits {
                let order = answer_of_each(&ids, vbuckets, &answers);
                settee_gather::split::merge_in_order(&bodies, &order, None)
            } else {
                settee_gather::split::merge_concatenated(&bodies, None)
            }
        }
    };
    let status = match what {
        Scattered::BulkDocs if answers.iter().any(|(_, reply)| reply.status == 202) => {
            StatusCode::ACCEPTED
        }
        Scattered::BulkDocs | Scattered::Purge => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    Some(
        merged
            .map_err(malformed)
            .map(|body| json_bytes(status, body)),
    )
}

/// The nodes' answers as `settee-gather` takes them.
pub(crate) fn gather_answers(
    answers: &[(Vec<u16>, ForwardHttpReply)],
) -> Vec<settee_gather::Answer<'_>> {
    answers
        .iter()
        .map(|(listed, reply)| settee_gather::Answer {
            vbuckets: listed,
            body: &reply.body,
        })
        .collect()
}

pub(crate) fn malformed(error: settee_gather::Malformed) -> ApiError {
    ApiError::ServiceUnavailable(error.to_string())
}

async fn all_docs(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let keys = settee_http::bulk_api::listing_keys(state, req).await?;
    let skip = req.u64_param("skip")?.unwrap_or(0) as usize;
    let limit = req.u64_param("limit")?.map(|limit| limit as usize);
    let descending = req.bool_param("descending", false)?;
    let target = {
        // Not held across an await (it is not Send).
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &req.query {
            if !matches!(name.as_str(), "skip" | "limit" | "keys") {
                query.append_pair(name, value);
            }
        }
        if let Some(limit) = limit {
            query.append_pair("limit", &skip.saturating_add(limit).to_string());
        }
        format!("{}?{}", req.uri.path(), query.finish())
    };
    let request = match &keys {
        Some(keys) => json_post_for_nodes(
            req,
            target,
            serde_json::json!({ "keys": keys }).to_string().into_bytes(),
        ),
        None => request_for_nodes(req, "GET", target, Vec::new()),
    };
    let answers = match gather(state, db, request).await {
        Ok(answers) => answers,
        Err(answer) => return answer,
    };
    let vbuckets = keyspace.bucket().vbuckets();
    let key_answers = keys.as_ref().and_then(Value::as_array).map(|keys| {
        if descending {
            answer_of_each(keys.iter().rev(), vbuckets, &answers)
        } else {
            answer_of_each(keys, vbuckets, &answers)
        }
    });
    let query = settee_gather::AllDocsQuery {
        skip,
        limit,
        descending,
        key_answers,
    };
    let parts = gather_answers(&answers);
    let mut merge_failed = None;
    let body = settee_gather::merge_all_docs(&parts, &query, |seqs| {
        let zero = settee_engine::SeqVector::zero(vbuckets);
        match settee_gather::merge_seqs(&zero, seqs, vbuckets) {
            Ok(merged) => {
                settee_http::changes_api::couch_seq(&state.config.node_name, &keyspace, &merged)
            }
            Err(error) => {
                merge_failed = Some(error);
                String::new()
            }
        }
    })
    .map_err(malformed)?;
    if let Some(error) = merge_failed {
        return Err(malformed(error));
    }
    Ok(json_bytes(StatusCode::OK, body))
}

async fn db_info(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let vbuckets = keyspace.bucket().vbuckets();
    let request = request_for_nodes(req, "GET", req.uri.path().to_owned(), Vec::new());
    let answers = match gather(state, db, request).await {
        Ok(answers) => answers,
        Err(answer) => return answer,
    };
    let parts = gather_answers(&answers);
    let body = settee_gather::merge_db_info(&parts, |seqs| {
        let zero = settee_engine::SeqVector::zero(vbuckets);
        let merged = settee_gather::merge_seqs(&zero, seqs, vbuckets)?;
        Ok(settee_http::changes_api::couch_seq(
            &state.config.node_name,
            &keyspace,
            &merged,
        ))
    })
    .map_err(malformed)?;
    Ok(json_bytes(StatusCode::OK, body))
}

/// `PUT /db/_security` or `/db/_revs_limit`, or `POST /db/_compact`, sent to every node
/// holding active vbuckets of the database, each doing it for itself: the first answer when
/// all agree, else the first refusal (its status and body).
async fn every_node(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let what = req.path.last().cloned().unwrap_or_default();
    let (operation, ok): (_, &[u16]) = match what.as_str() {
        "_security" => (Operation::WriteSecurity, &[200]),
        "_compact" => (Operation::AdminDb, &[202]),
        _ => (Operation::AdminDb, &[200]),
    };
    open(state, req, db, operation)?;
    if what == "_compact" {
        req.require_json_content_type()?;
    }
    let body = req
        .body_bytes(state.config.max_request_size_bytes)
        .await?
        .to_vec();
    let request = request_for_nodes(req, req.method.as_str(), forward::client_target(req), body);
    first_answer(gather_to_all(state, db, None, request, ok).await)
}

/// `GET /db/_design/{d}/_info` and `POST /db/_compact/{ddoc}`: the design document, read
/// where it lives, carried to every node holding active vbuckets of the database, each
/// answering for its own index of it; `_info`'s sizes and positions summed.
async fn design_every_node(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    what: Scattered,
) -> ApiResult<HttpResponse> {
    let compact = what == Scattered::CompactDesign;
    let (ddoc, operation) = match (compact, req.path.as_slice()) {
        (true, [_, _, ddoc]) => (ddoc.clone(), Operation::AdminDb),
        (false, [_, _, ddoc, _]) => (ddoc.clone(), Operation::ReadDb),
        _ => return Err(ApiError::missing()),
    };
    let keyspace = open(state, req, db, operation)?;
    let mut body = Vec::new();
    if compact {
        req.require_json_content_type()?;
        body = req
            .body_bytes(state.config.max_request_size_bytes)
            .await?
            .to_vec();
    }
    let design = settee_http::designs::read(state, req, &keyspace, db, &ddoc).await;
    let design = match design {
        Ok(design) => design.to_json(),
        // `_compact/{ddoc}` of a deleted design document is `missing`, as on one node.
        Err(ApiError::NotFound(_)) if compact => return Err(ApiError::missing()),
        Err(error) => return Err(error),
    };
    let request = request_for_nodes(req, req.method.as_str(), forward::client_target(req), body);
    let ok: &[u16] = if compact { &[202] } else { &[200] };
    let answers = gather_to_all(state, db, Some(&design), request, ok).await;
    if compact {
        return first_answer(answers);
    }
    let answers = match answers {
        Ok(answers) => answers,
        Err(answer) => return answer,
    };
    let bodies: Vec<&[u8]> = answers
        .iter()
        .map(|(_, reply)| reply.body.as_slice())
        .collect();
    let merged = settee_gather::views::merge_design_info(&bodies).map_err(malformed)?;
    Ok(json_bytes(StatusCode::OK, merged))
}

/// Sends `request` (with `design`) to every node and returns their answers, each with a
/// status in `ok`.
async fn gather_to_all(
    state: &HttpState,
    db: &str,
    design: Option<&[u8]>,
    request: ForwardHttp,
    ok: &[u16],
) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>> {
    let parts = move |groups: &[Vec<u16>]| vec![Some(request.clone()); groups.len()];
    gather_parts(state, db, design, &parts, ok).await
}

/// The first node's answer when every node agreed (else the refusal gathering gave).
fn first_answer(
    answers: Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>>,
) -> ApiResult<HttpResponse> {
    match answers {
        Ok(answers) => match answers.into_iter().next() {
            Some((_, reply)) => Ok(forward::reply_response(reply)),
            None => Err(ApiError::ServiceUnavailable("no node answered".into())),
        },
        Err(answer) => answer,
    }
}
