//! Mango in a cluster (docs/format/cluster-transport.md, "Mango"): the indexes are defined by
//! `"language": "query"` design documents spread over the vbuckets, so the front node gathers
//! them from every node, plans on them, lists them (`GET /db/_index`) and explains with them;
//! a `_find` goes to every node with them, each answering for its own vbuckets with the place
//! of each document in the index, and the front node merges by place (`settee-gather` `find`).

use hyper::StatusCode;
use serde_json::{json, Value};
use settee_mango::bookmark::Bookmark;
use settee_mango::{ExecutionStats, IndexKind, Purpose};

use crate::{gather, gather_answers, gather_parts, json_post_for_nodes, malformed};
use settee_http::auth::Operation;
use settee_http::db_api::open;
use settee_http::error::{ApiError, ApiResult};
use settee_http::forward;
use settee_http::location::encode_segment;
use settee_http::mango_api::{find_request_and_body, list_of, plan_query};
use settee_http::request::Req;
use settee_http::response::{json as json_response, json_bytes, HttpResponse};
use settee_http::HttpState;
pub use settee_http_core::scattered::{mango_request, MangoRequest};

/// The database's design documents, from every node (each answers for the design documents
/// of its vbuckets), as the client's user reads them.
pub(crate) async fn design_documents(
    state: &HttpState,
    req: &Req,
    db: &str,
) -> Result<Vec<Value>, ApiResult<HttpResponse>> {
    let target = format!(
        "/{}/_all_docs?startkey=%22_design%2F%22&endkey=%22_design0%22&include_docs=true",
        encode_segment(db)
    );
    let request = crate::request_for_nodes(req, "GET", target, Vec::new());
    let answers = gather(state, db, request).await?;
    let mut designs = Vec::new();
    for (_, reply) in answers {
        let listed: Value = serde_json::from_slice(&reply.body)
            .map_err(|error| Err(ApiError::ServiceUnavailable(error.to_string())))?;
        let rows = listed["rows"].as_array().cloned().unwrap_or_default();
        designs.extend(
            rows.into_iter()
                .filter_map(|mut row| row.get_mut("doc").map(Value::take))
                .filter(Value::is_object),
        );
    }
    Ok(designs)
}

/// Answers a Mango request on a database whose vbuckets are active on several nodes.
pub(crate) async fn answer(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    partition: Option<&str>,
    what: MangoRequest,
) -> ApiResult<HttpResponse> {
    let keyspace = match partition {
        Some(partition) => {
            settee_http::partition_api::partitioned(state, req, db, partition, Operation::ReadDb)?
        }
        None => open(state, req, db, Operation::ReadDb)?,
    };
    let parsed = match what {
        MangoRequest::ListIndexes => None,
        _ => Some(find_request_and_body(state, req, partition).await?),
    };
    if let Some((request, _)) = &parsed {
        if let Some(bookmark) = &request.bookmark {
            Bookmark::decode(bookmark)?;
        }
    }
    let designs: Vec<Value> = match design_documents(state, req, db).await {
        Ok(designs) => designs
            .into_iter()
            .filter(|doc| doc.get("language").and_then(Value::as_str) == Some("query"))
            .collect(),
        Err(answer) => return answer,
    };
    let all = settee_http::mango_api::indexes_of(&designs, keyspace.bucket().is_partitioned());
    let Some((request, body)) = parsed else {
        return list_of(req, &all);
    };
    let indexes = settee_http::mango_api::usable_of(all, partition);
    let purpose = match what {
        MangoRequest::Explain => Purpose::Explain,
        _ => Purpose::Find,
    };
    let plan = plan_query(&keyspace, &request, &indexes, purpose)?;
    if what == MangoRequest::Explain {
        return Ok(json_response(
            StatusCode::OK,
            &settee_mango::explain(db, &request, &plan),
        ));
    }
    let started = std::time::Instant::now();
    let skip = request.skip;
    let limit = request.limit;
    let mut sent = body;
    sent["skip"] = json!(0);
    sent["limit"] = json!(skip.saturating_add(limit));
    let node_request = json_post_for_nodes(
        req,
        forward::client_target(req),
        sent.to_string().into_bytes(),
    );
    let carried = Value::Array(designs).to_string().into_bytes();
    let parts = move |groups: &[Vec<u16>]| vec![Some(node_request.clone()); groups.len()];
    let answers = match gather_parts(state, db, Some(&carried), &parts, &[200]).await {
        Ok(answers) => answers,
        Err(answer) => return answer,
    };
    let by_id = plan
        .index
        .as_ref()
        .is_none_or(|index| index.kind == IndexKind::Special);
    let position = move |key: &Value| {
        if by_id {
            Vec::new()
        } else {
            settee_collate::encode_key(key)
        }
    };
    let query = settee_gather::find::FindQuery {
        skip: usize::try_from(skip).unwrap_or(usize::MAX),
        limit: usize::try_from(limit).unwrap_or(usize::MAX),
        descending: plan.descending,
        position: &position,
    };
    let merged =
        settee_gather::find::merge_find(&gather_answers(&answers), &query).map_err(malformed)?;
    let stats = ExecutionStats {
        keys_examined: merged.examined.keys,
        docs_examined: merged.examined.docs,
        quorum_docs_examined: merged.examined.quorum_docs,
        results_returned: merged.returned,
        execution_time_ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    let bookmark = match (merged.last, &request.bookmark) {
        (Some((key, id)), _) => Bookmark { key, id }.encode(),
        (None, Some(given)) => given.clone(),
        (None, None) => "nil".to_owned(),
    };
    let mut out = merged.head;
    out.extend_from_slice(b"\r\n\"bookmark\": ");
    out.extend_from_slice(json!(bookmark).to_string().as_bytes());
    if request.execution_stats {
        out.extend_from_slice(b",\r\n\"execution_stats\": ");
        out.extend_from_slice(stats.to_json().to_string().as_bytes());
    }
    if let Some(warning) = settee_mango::warning(&plan, &stats) {
        out.extend_from_slice(b",\r\n\"warning\": ");
        out.extend_from_slice(json!(warning).to_string().as_bytes());
    }
    out.extend_from_slice(b"}\r");
    Ok(json_bytes(StatusCode::OK, out))
}

/// `POST /db/_index/_bulk_delete` split by design document: each node deletes the indexes of
/// the design documents of its vbuckets; `success` and `fail` list them in the request's
/// order. `None` (the body put back): a body this node answers itself, as a single node would
/// (not a list of string ids, more than a batch may hold); nothing was sent.
pub(crate) async fn bulk_delete(
    state: &HttpState,
    req: &mut Req,
    db: &str,
) -> Option<ApiResult<HttpResponse>> {
    let opened = crate::json_body_of(state, req, db, Operation::AdminDb, true).await;
    let (keyspace, body) = match opened {
        Ok(opened) => opened,
        Err(error) => return Some(Err(error)),
    };
    let ids: Option<Vec<String>> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|body| match body.get("docids") {
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect(),
            _ => None,
        })
        .filter(|ids: &Vec<String>| ids.len() <= state.config.max_docs_per_bulk);
    let Some(ids) = ids else {
        req.body = Some(settee_http::request::RequestBody::Whole(body));
        return None;
    };
    let vbuckets = keyspace.bucket().vbuckets();
    let design_ids: Vec<String> = ids
        .iter()
        .map(|id| settee_mango::request::design_id(id))
        .collect();
    let vbucket_of = |id: &str| settee_engine::vbucket::vbucket_of(id.as_bytes(), vbuckets);
    let template = json_post_for_nodes(req, forward::client_target(req), Vec::new());
    let parts = |groups: &[Vec<u16>]| -> Vec<Option<forward::ForwardHttp>> {
        let mut shares: Vec<Vec<&str>> = vec![Vec::new(); groups.len()];
        for (id, design) in ids.iter().zip(&design_ids) {
            let vbucket = vbucket_of(design);
            if let Some(group) = groups.iter().position(|group| group.contains(&vbucket)) {
                shares[group].push(id);
            }
        }
        shares
            .into_iter()
            .map(|share| {
                (!share.is_empty()).then(|| forward::ForwardHttp {
                    body: json!({ "docids": share }).to_string().into_bytes(),
                    ..template.clone()
                })
            })
            .collect()
    };
    let answers = match gather_parts(state, db, None, &parts, &[200]).await {
        Ok(answers) => answers,
        Err(answer) => return Some(answer),
    };
    // Each node lists its ids in the request's order: take them back in that order.
    let mut lists = Vec::with_capacity(answers.len());
    for (listed, reply) in &answers {
        let Ok(answer) = serde_json::from_slice::<Value>(&reply.body) else {
            return Some(Err(ApiError::ServiceUnavailable(
                "a node's _bulk_delete answer is not JSON".into(),
            )));
        };
        let list = |name: &str| answer[name].as_array().cloned().unwrap_or_default();
        lists.push((
            listed,
            list("success").into_iter().peekable(),
            list("fail").into_iter(),
        ));
    }
    let (mut success, mut fail) = (Vec::new(), Vec::new());
    for design in &design_ids {
        let vbucket = vbucket_of(design);
        let Some((_, succeeded, failed)) = lists
            .iter_mut()
            .find(|(listed, _, _)| listed.contains(&vbucket))
        else {
            continue;
        };
        if succeeded.peek().and_then(|entry| entry["id"].as_str()) == Some(design.as_str()) {
            success.extend(succeeded.next());
        } else {
            fail.extend(failed.next());
        }
    }
    Some(Ok(json_response(
        StatusCode::OK,
        &json!({"success": success, "fail": fail}),
    )))
}

/// `POST /db/_view_cleanup` on every node, each keeping the indexes of every design document
/// of the database (gathered here and carried): a node never drops the index of a design
/// document another node holds.
pub(crate) async fn view_cleanup(
    state: &HttpState,
    req: &mut Req,
    db: &str,
) -> ApiResult<HttpResponse> {
    open(state, req, db, Operation::AdminDb)?;
    req.require_json_content_type()?;
    let designs = match design_documents(state, req, db).await {
        Ok(designs) => designs,
        Err(answer) => return answer,
    };
    let carried = Value::Array(designs).to_string().into_bytes();
    let request = json_post_for_nodes(req, forward::client_target(req), b"{}".to_vec());
    let parts = move |groups: &[Vec<u16>]| vec![Some(request.clone()); groups.len()];
    match gather_parts(state, db, Some(&carried), &parts, &[202]).await {
        Ok(_) => Ok(settee_http::response::ok_true(StatusCode::ACCEPTED)),
        Err(answer) => answer,
    }
}
