//! Mango over HTTP: `GET/POST /{db}/_index`, `DELETE /{db}/_index/{ddoc}/json/{name}`,
//! `POST /{db}/_index/_bulk_delete`, `POST /{db}/_find` and `POST /{db}/_explain`.
//! Parsing, planning and execution are `settee-mango`'s; this module loads and saves the
//! design documents indexes live in, opens a JSON index's group on the view indexer (and
//! waits for it when `update` is true), checks access, and writes CouchDB's response shapes.

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_engine::{AttachmentInput, DocRecord, DocUpdate, Keyspace, ScanRange, UpdateOutcome};
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, remove_from_ddoc, AddOutcome};
use settee_mango::request::design_id;
use settee_mango::{
    execute, explain, open_index, plan, FindRequest, Index, IndexKind, MangoError, NewIndex,
    Purpose, Query,
};

use crate::auth::Operation;
use crate::couch_doc::{render_doc, RenderOptions};
use crate::db_api::open;
use crate::doc_api::{attachment_fetcher, read_doc};
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::credentials_shown;
use crate::request::Req;
use crate::response::{json, HttpResponse};
use crate::router::not_allowed;
use crate::streamed::delayed_json;
use crate::HttpState;
use settee_mango::bookmark::Bookmark;

/// Every index of the database: `_all_docs`, then the JSON indexes of its `"language":
/// "query"` design documents, in CouchDB's listing order.
pub fn load_indexes(keyspace: &Keyspace) -> ApiResult<Vec<Index>> {
    Ok(indexes_of(
        &local_design_documents(keyspace)?,
        keyspace.bucket().is_partitioned(),
    ))
}

/// This node's live design documents of `keyspace` (JSON objects with their `_id`).
pub fn local_design_documents(keyspace: &Keyspace) -> ApiResult<Vec<Value>> {
    let range = ScanRange {
        collection: 0,
        start: Some(b"_design/".to_vec()),
        end: Some(b"_design0".to_vec()),
        inclusive_end: false,
        descending: false,
    };
    let mut designs = Vec::new();
    for item in keyspace.scan_docs(range) {
        let (key, record) = item?;
        let (Ok(id), Some(Value::Object(mut body))) =
            (String::from_utf8(key), live_body(keyspace, &record))
        else {
            continue;
        };
        body.insert("_id".into(), Value::String(id));
        designs.push(Value::Object(body));
    }
    Ok(designs)
}

/// The winner's JSON body, unless the document is deleted, expired or not JSON.
fn live_body(keyspace: &Keyspace, record: &DocRecord) -> Option<Value> {
    let leaf = record.winner()?;
    let expired = record.expiry != 0 && record.expiry <= keyspace.bucket().now_secs();
    if leaf.deleted || expired || !leaf.json {
        return None;
    }
    serde_json::from_slice(&leaf.body).ok()
}

pub async fn index(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => list(state, req, db),
        Method::POST => create(state, req, db).await,
        _ => Err(not_allowed("GET,POST")),
    }
}

fn list(state: &HttpState, req: &Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    list_of(req, &load_indexes(&keyspace)?)
}

/// `GET /{db}/_index`'s answer listing `indexes`.
pub fn list_of(req: &Req, indexes: &[Index]) -> ApiResult<HttpResponse> {
    let total = indexes.len();
    let bad_params = || {
        ApiError::Mango(MangoError::Internal {
            error: "invalid_list_index_params",
            reason: "Index parameter ranges: limit > 1, skip > 0".into(),
        })
    };
    let integer = |name: &str| -> ApiResult<Option<i64>> {
        req.param(name)
            .map(|text| text.parse::<i64>().map_err(|_| bad_params()))
            .transpose()
    };
    let limit = match integer("limit")? {
        None => total,
        Some(limit) if limit < 1 => return Err(bad_params()),
        Some(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
    };
    let skip = match integer("skip")? {
        None => 0,
        Some(skip) if skip < 0 => return Err(bad_params()),
        Some(skip) => usize::try_from(skip).unwrap_or(usize::MAX).min(total),
    };
    let listed: Vec<Value> = indexes
        .iter()
        .skip(skip)
        .take(limit)
        .map(Index::to_json)
        .collect();
    Ok(json(
        StatusCode::OK,
        &json!({"total_rows": total, "indexes": listed}),
    ))
}

async fn create(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    req.require_json_content_type()?;
    let body = req.json_body_within(&state.config).await?;
    let index = NewIndex::parse(&body)?;
    if index.partitioned == Some(true) && !keyspace.bucket().is_partitioned() {
        // CouchDB's answer: the design document it would write is refused.
        return Err(ApiError::Mango(MangoError::Internal {
            error: "error_saving_ddoc",
            reason: "Unknown error while saving the design document: invalid_design_doc".into(),
        }));
    }
    let record = read_doc(&keyspace, &index.ddoc)?;
    let current = record
        .as_ref()
        .and_then(|record| live_body(&keyspace, record));
    let result = match add_to_ddoc(current.as_ref(), &index)? {
        AddOutcome::Exists => "exists",
        AddOutcome::Updated(new_body) => {
            save_ddoc(&keyspace, &index.ddoc, record.as_ref(), Some(new_body)).await?;
            "created"
        }
    };
    Ok(json(
        StatusCode::OK,
        &json!({"result": result, "id": index.ddoc, "name": index.name}),
    ))
}

/// Writes a new body for the design document `id` over its current winner (or deletes it when
/// `body` is `None`), keeping its attachments.
async fn save_ddoc(
    keyspace: &Keyspace,
    id: &str,
    current: Option<&DocRecord>,
    body: Option<Value>,
) -> ApiResult<()> {
    let winner = current
        .and_then(|record| record.winner())
        .filter(|leaf| !leaf.deleted);
    let attachments = match (winner, &body) {
        (Some(leaf), Some(_)) => leaf
            .attachments
            .iter()
            .map(|meta| AttachmentInput::Stub {
                name: meta.name.clone(),
                revpos: None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let update = DocUpdate {
        key: id.as_bytes().to_vec(),
        parent: winner.map(|leaf| leaf.rev.clone()),
        history: Vec::new(),
        deleted: body.is_none(),
        body: Bytes::from(
            body.map_or_else(|| b"{}".to_vec(), |body| body.to_string().into_bytes()),
        ),
        attachments,
    };
    // Design documents are not validated (`validate.rs`); the caller checked db admin rights.
    let writer = settee_engine::Writer::system();
    match keyspace.update_doc(update, true, &writer).await? {
        UpdateOutcome::Saved { .. } => Ok(()),
        UpdateOutcome::Conflict => Err(ApiError::Mango(MangoError::Internal {
            error: "error_saving_ddoc",
            reason: "Encountered a conflict while saving the design document.".into(),
        })),
        UpdateOutcome::MissingStub { name } | UpdateOutcome::Invalid(name) => {
            Err(ApiError::Mango(MangoError::Internal {
                error: "error_saving_ddoc",
                reason: format!("Unknown error while saving the design document: {name}"),
            }))
        }
        UpdateOutcome::OverLimit(error) => Err(ApiError::Mango(MangoError::Internal {
            error: "error_saving_ddoc",
            reason: format!("Unknown error while saving the design document: {error}"),
        })),
        UpdateOutcome::CorruptRecord(reason) => Err(ApiError::Mango(MangoError::Internal {
            error: "error_saving_ddoc",
            reason: format!("The design document's stored record does not decode: {reason}"),
        })),
        UpdateOutcome::Forbidden(reason)
        | UpdateOutcome::Unauthorized(reason)
        | UpdateOutcome::ValidationFailed(reason) => Err(ApiError::Mango(MangoError::Internal {
            error: "error_saving_ddoc",
            reason: format!("Unknown error while saving the design document: {reason}"),
        })),
    }
}

/// `DELETE /{db}/_index/{ddoc}/{type}/{name}` (the design document with or without its
/// `_design/` prefix).
pub async fn delete(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    kind: &str,
    name: &str,
) -> ApiResult<HttpResponse> {
    if req.method != Method::DELETE {
        return Err(not_allowed("DELETE"));
    }
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    let ddoc = design_id(ddoc);
    let found = load_indexes(&keyspace)?.into_iter().any(|index| {
        index.kind == IndexKind::Json
            && kind == "json"
            && index.ddoc.as_deref() == Some(ddoc.as_str())
            && index.name == name
    });
    if !found {
        return Err(ApiError::missing());
    }
    remove_index(&keyspace, &ddoc, name).await?;
    Ok(json(StatusCode::OK, &json!({"ok": true})))
}

async fn remove_index(keyspace: &Keyspace, ddoc: &str, name: &str) -> ApiResult<()> {
    let record = read_doc(keyspace, ddoc)?;
    let body = record
        .as_ref()
        .and_then(|record| live_body(keyspace, record))
        .ok_or_else(ApiError::missing)?;
    let remaining = remove_from_ddoc(&body, name)?;
    save_ddoc(keyspace, ddoc, record.as_ref(), remaining).await
}

/// `POST /{db}/_index/_bulk_delete` `{"docids": [...]}`: removes every JSON index of each
/// named design document.
pub async fn bulk_delete(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::AdminDb)?;
    req.require_json_content_type()?;
    let body = req.json_body_within(&state.config).await?;
    let docids = match body.get("docids") {
        Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => ids.clone(),
        other => {
            return Err(ApiError::Mango(MangoError::bad_request(
                "invalid_bulk_docs",
                format!(
                    "Bulk Delete requires an array of non-null docids. Docids: {}",
                    other.cloned().unwrap_or(Value::Null)
                ),
            )))
        }
    };
    if docids.len() > state.config.max_docs_per_bulk {
        return Err(ApiError::RequestTooLarge);
    }
    let indexes = load_indexes(&keyspace)?;
    let (mut success, mut fail) = (Vec::new(), Vec::new());
    for docid in docids.iter().filter_map(Value::as_str) {
        let ddoc = design_id(docid);
        let names: Vec<&str> = indexes
            .iter()
            .filter(|index| index.ddoc.as_deref() == Some(ddoc.as_str()))
            .map(|index| index.name.as_str())
            .collect();
        if names.is_empty() {
            fail.push(json!({"id": ddoc, "error": "not_found"}));
            continue;
        }
        let mut outcome = Ok(());
        for name in names {
            outcome = outcome.and(remove_index(&keyspace, &ddoc, name).await);
        }
        match outcome {
            Ok(()) => success.push(json!({"id": ddoc, "ok": true})),
            Err(error) => fail.push(json!({"id": ddoc, "error": error.code()})),
        }
    }
    Ok(json(
        StatusCode::OK,
        &json!({"success": success, "fail": fail}),
    ))
}

async fn find_request(
    state: &HttpState,
    req: &mut Req,
    partition: Option<&str>,
) -> ApiResult<FindRequest> {
    Ok(find_request_and_body(state, req, partition).await?.0)
}

/// A `_find` or `_explain` request, parsed, and its body as the client sent it.
pub async fn find_request_and_body(
    state: &HttpState,
    req: &mut Req,
    partition: Option<&str>,
) -> ApiResult<(FindRequest, Value)> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    req.require_json_content_type()?;
    let body = req.json_body_within(&state.config).await?;
    let mut request = FindRequest::parse(&body)?;
    request.partition = partition.map(str::to_string);
    Ok((request, body))
}

/// Every index the design documents `designs` (a JSON array of documents with their `_id`,
/// as a front node carries them to the nodes of a scattered `_find`) define, in
/// [`load_indexes`]' order.
pub fn indexes_of(designs: &[Value], db_partitioned: bool) -> Vec<Index> {
    let mut indexes: Vec<Index> = designs
        .iter()
        .filter_map(|design| Some((design.get("_id")?.as_str()?, design)))
        .flat_map(|(id, body)| indexes_in_ddoc(id, body, db_partitioned))
        .collect();
    indexes.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    indexes.insert(0, Index::all_docs());
    indexes
}

/// The indexes a query may use: a partition query only `_all_docs` and the partitioned
/// indexes, a global one only the others (CouchDB's rule). `carried`: the design documents a
/// front node sent with a scattered query, in place of this node's.
pub fn usable_indexes(
    keyspace: &Keyspace,
    partition: Option<&str>,
    carried: Option<&[u8]>,
) -> ApiResult<Vec<Index>> {
    let indexes = match carried {
        Some(json) => {
            let designs: Vec<Value> = serde_json::from_slice(json).map_err(|error| {
                ApiError::BadRequest(format!("carried design documents: {error}"))
            })?;
            indexes_of(&designs, keyspace.bucket().is_partitioned())
        }
        None => load_indexes(keyspace)?,
    };
    Ok(usable_of(indexes, partition))
}

/// Of `indexes`, those a query of `partition` (or a global one) may use.
pub fn usable_of(mut indexes: Vec<Index>, partition: Option<&str>) -> Vec<Index> {
    indexes.retain(|index| {
        index.kind == IndexKind::Special || index.partitioned == partition.is_some()
    });
    indexes
}

/// Plans a query, with CouchDB's reasons when no index serves its sort in a partitioned
/// database.
pub fn plan_query(
    keyspace: &Keyspace,
    request: &FindRequest,
    indexes: &[Index],
    purpose: Purpose,
) -> ApiResult<settee_mango::Plan> {
    plan(&Query::of(request), indexes, purpose).map_err(|error| match error {
        MangoError::BadRequest {
            error: "no_usable_index",
            ..
        } if keyspace.bucket().is_partitioned() => {
            let kind = if request.partition.is_some() {
                "partitioned"
            } else {
                "global"
            };
            ApiError::Mango(MangoError::bad_request(
                "no_usable_index",
                format!("No {kind} index exists for this sort, try indexing by the sort fields."),
            ))
        }
        other => other.into(),
    })
}

pub async fn explain_find(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    partition: Option<&str>,
) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let request = find_request(state, req, partition).await?;
    let indexes = usable_indexes(&keyspace, partition, None)?;
    let plan = plan_query(&keyspace, &request, &indexes, Purpose::Explain)?;
    Ok(json(StatusCode::OK, &explain(db, &request, &plan)))
}

pub async fn find(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    partition: Option<&str>,
) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let request = find_request(state, req, partition).await?;
    if let Some(bookmark) = &request.bookmark {
        settee_mango::bookmark::Bookmark::decode(bookmark)?;
    }
    let indexes = usable_indexes(&keyspace, partition, req.design.as_deref())?;
    let plan = plan_query(&keyspace, &request, &indexes, Purpose::Find)?;
    let group = match &plan.index {
        Some(index) => open_index(&state.views, &keyspace, index).await?,
        None => None,
    };
    if let Some(group) = &group {
        // CouchDB's update=true: the index first catches up with every write acknowledged
        // before the query arrived; otherwise it is read as it is, and catches up behind.
        if request.update {
            group.wait_for(&keyspace.bucket().high_seqnos()).await?;
        } else {
            group.ensure_builder();
        }
    }
    let credentials = credentials_shown(&keyspace, &req.user);
    let only = req.vbuckets.clone().map(|listed| {
        let vbuckets = keyspace.bucket().vbuckets();
        move |id: &str| {
            let vbucket = settee_engine::vbucket::vbucket_of(id.as_bytes(), vbuckets);
            listed.get(usize::from(vbucket)) == Some(&true)
        }
    });
    delayed_json(&state.streams, move |out| {
        let options = RenderOptions {
            conflicts: request.conflicts,
            ..RenderOptions::for_reader(credentials)
        };
        let render = |id: &str, record: &DocRecord| -> Option<Vec<u8>> {
            let leaf = record.winner()?;
            if leaf.deleted || !leaf.json {
                return None;
            }
            render_doc(
                id,
                record,
                leaf,
                &options,
                &attachment_fetcher(&keyspace, id),
            )
            .ok()
        };
        out.buffer().extend_from_slice(b"{\"docs\":[");
        let mut first = true;
        // Scattered here: each result's place in the index too, for the front node's merge.
        let mut places = only.as_ref().map(|_| Vec::new());
        // Whether to go on: false once the client has gone.
        let mut emit = |doc: &[u8], at: &Bookmark| -> bool {
            let chunk = out.buffer();
            chunk.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
            first = false;
            chunk.extend_from_slice(doc);
            if let Some(places) = places.as_mut() {
                places.push(json!([at.key, at.id]));
            }
            out.flush_when_full().is_ok()
        };
        let outcome = execute(
            &keyspace,
            group.as_deref(),
            &request,
            &plan,
            &render,
            &mut emit,
            only.as_ref().map(|only| only as &dyn Fn(&str) -> bool),
        )
        .inspect_err(|error| tracing::warn!(%error, "_find failed while streaming"))?;
        let tail = out.buffer();
        tail.extend_from_slice(b"\r\n],\r\n\"bookmark\": ");
        tail.extend_from_slice(json!(outcome.bookmark).to_string().as_bytes());
        if request.execution_stats {
            tail.extend_from_slice(b",\r\n\"execution_stats\": ");
            tail.extend_from_slice(outcome.stats.to_json().to_string().as_bytes());
        }
        if let Some(warning) = outcome.warning {
            tail.extend_from_slice(b",\r\n\"warning\": ");
            tail.extend_from_slice(json!(warning).to_string().as_bytes());
        }
        if let Some(places) = places {
            tail.extend_from_slice(b",\r\n\"places\": ");
            tail.extend_from_slice(Value::Array(places).to_string().as_bytes());
        }
        tail.extend_from_slice(b"}\r");
        Ok(())
    })
    .await
}
