//! JavaScript views over HTTP: `/{db}/_design/{ddoc}/_view/{view}` (GET, POST, `/queries`),
//! `/{db}/_design/{ddoc}/_info`, `/{db}/_view_cleanup`, and the design-document check at PUT.
//! Parameters are parsed in `view_params.rs`; the index is `settee-views`.

use std::collections::HashSet;
use std::sync::Arc;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_engine::{Bucket, ScanRange};
use settee_views::{
    Design, DesignViews, GroupedReduce, IndexGroup, KeyBound, KeyRange, ReduceKind, Reducer, Row,
    ViewError,
};

use crate::auth::Operation;
use crate::couch_doc::{render_doc, RenderOptions};
use crate::db_api::open;
use crate::doc_api::{attachment_fetcher, read_doc};
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::{credentials_shown, CredentialsShown};
use crate::request::Req;
use crate::response::{json as json_response, json_bytes, json_string, ok_true, HttpResponse};
use crate::router::{is_get, not_allowed};
use crate::view_params::{QueryKind, UpdateMode, ViewParams};
use crate::HttpState;

/// Most queries one `/queries` request may carry.
pub const QUERIES_PER_REQUEST_MAX: usize = 1000;

impl From<ViewError> for ApiError {
    fn from(error: ViewError) -> ApiError {
        match error {
            ViewError::InvalidDesign(reason) => ApiError::InvalidDesignDoc(reason),
            ViewError::Compilation(reason) => ApiError::Compilation(reason),
            ViewError::Build(reason) => ApiError::OsProcess(reason),
            ViewError::Reduce(reason) => ApiError::OsProcess(reason),
            ViewError::BuiltinReduce(reason, _) => ApiError::BuiltinReduce(reason),
            ViewError::ReduceOverflow(reason) => ApiError::ReduceOverflow(reason),
            other => {
                tracing::error!(error = %other, "view error");
                ApiError::Internal(other.to_string())
            }
        }
    }
}

/// Rejects a design document whose views CouchDB would reject (before it is stored).
pub async fn check_design(state: &HttpState, id: &str, body: &[u8]) -> ApiResult<()> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    state.views.check_design(id, &value).await?;
    Ok(())
}

/// Structural checks only, for paths that cannot wait for the JS pool (`_bulk_docs`).
pub fn check_design_fields(id: &str, body: &[u8]) -> ApiResult<()> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    Design::parse(id, &value)?;
    Ok(())
}

async fn design_views(
    state: &HttpState,
    bucket: &Arc<Bucket>,
    ddoc: &str,
) -> ApiResult<DesignViews> {
    let id = format!("_design/{ddoc}");
    match state.views.design_views(bucket, &id).await? {
        Some(found) => Ok(found),
        None => match bucket.read_winner(id.as_bytes())? {
            Some((header, _)) if !header.deleted => {
                Err(ApiError::NotFound("missing_named_view".into()))
            }
            Some(_) => Err(ApiError::deleted()),
            None => Err(ApiError::missing()),
        },
    }
}

/// `GET|POST /{db}/_design/{ddoc}/_view/{view}`.
pub async fn view(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    view_name: &str,
) -> ApiResult<HttpResponse> {
    let post = req.method == Method::POST;
    if !post && !is_get(req) {
        return Err(not_allowed("GET,HEAD,POST"));
    }
    let bucket = open(state, req, db, Operation::ReadDb)?;
    let mut params = ViewParams::from_query(&req.query)?;
    let mut queries = None;
    if post {
        req.require_json_content_type()?;
        let body = req
            .json_body(
                state.config.max_request_size_bytes,
                state.config.max_json_depth,
            )
            .await?;
        let Value::Object(members) = body else {
            return Err(ApiError::BadRequest(
                "Request body must be a JSON object".into(),
            ));
        };
        if let Some(list) = members.get("queries") {
            queries = Some(list.clone());
        }
        params.merge_json(&members)?;
    }
    let found = design_views(state, &bucket, ddoc).await?;
    let view = found
        .design
        .view_index(view_name)
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    let credentials = credentials_shown(&bucket, &req.user);
    if let Some(list) = queries {
        return run_queries(state, &bucket, &found, view, &list, credentials).await;
    }
    let body = run_one(state, &bucket, &found, view, params, credentials).await?;
    Ok(json_bytes(StatusCode::OK, body))
}

/// `POST /{db}/_design/{ddoc}/_view/{view}/queries`.
pub async fn view_queries(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    view_name: &str,
) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let bucket = open(state, req, db, Operation::ReadDb)?;
    req.require_json_content_type()?;
    let body = req
        .json_body(
            state.config.max_request_size_bytes,
            state.config.max_json_depth,
        )
        .await?;
    let list = body
        .get("queries")
        .cloned()
        .ok_or_else(|| ApiError::BadRequest("Missing `queries` field".into()))?;
    let found = design_views(state, &bucket, ddoc).await?;
    let view = found
        .design
        .view_index(view_name)
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    let credentials = credentials_shown(&bucket, &req.user);
    run_queries(state, &bucket, &found, view, &list, credentials).await
}

async fn run_queries(
    state: &HttpState,
    bucket: &Arc<Bucket>,
    found: &DesignViews,
    view: usize,
    list: &Value,
    credentials: CredentialsShown,
) -> ApiResult<HttpResponse> {
    let Value::Array(queries) = list else {
        return Err(ApiError::BadRequest("`queries` must be an array".into()));
    };
    if queries.len() > QUERIES_PER_REQUEST_MAX {
        return Err(ApiError::BadRequest(format!(
            "at most {QUERIES_PER_REQUEST_MAX} queries per request"
        )));
    }
    let mut out = b"{\"results\":[".to_vec();
    for (index, query) in queries.iter().enumerate() {
        let Value::Object(members) = query else {
            return Err(ApiError::BadRequest(
                "Each query must be a JSON object".into(),
            ));
        };
        let mut params = ViewParams::default();
        params.merge_json(members)?;
        if index > 0 {
            out.push(b',');
        }
        out.extend(run_one(state, bucket, found, view, params, credentials.clone()).await?);
    }
    out.extend_from_slice(b"]}");
    Ok(json_bytes(StatusCode::OK, out))
}

/// Plans, waits for the index as `update` asks, then reads on a blocking thread.
async fn run_one(
    state: &HttpState,
    bucket: &Arc<Bucket>,
    found: &DesignViews,
    view: usize,
    params: ViewParams,
    credentials: CredentialsShown,
) -> ApiResult<Vec<u8>> {
    let reduce_kind = found.design.views[view].reduce.clone();
    let kind = params.plan(reduce_kind.is_some())?;
    match params.update {
        UpdateMode::Wait => found.group.wait_for(&bucket.high_seqnos()).await?,
        UpdateMode::Lazy => found.group.ensure_builder(),
        UpdateMode::No => {}
    }
    let reducer = match (kind, reduce_kind) {
        (QueryKind::Reduce(_), Some(ReduceKind::JavaScript(_))) => Some(Reducer::JavaScript {
            pool: state.views.js().clone(),
            program: found.program.clone(),
            view,
        }),
        (QueryKind::Reduce(_), Some(builtin)) => Some(Reducer::Builtin(builtin)),
        _ => None,
    };
    let group = found.group.clone();
    let bucket = bucket.clone();
    tokio::task::spawn_blocking(move || match (kind, reducer) {
        (QueryKind::Reduce(grouping), Some(reducer)) => {
            reduce_query(&group, view, &params, grouping, &reducer)
        }
        _ => map_query(&bucket, &group, view, &params, credentials),
    })
    .await
    .map_err(|error| ApiError::Internal(format!("view query panicked: {error}")))?
}

fn bound(key: &Option<Value>, doc_id: &Option<String>) -> Option<KeyBound> {
    key.as_ref().map(|key| KeyBound {
        key: key.clone(),
        doc_id: doc_id.clone(),
    })
}

/// The key ranges a query reads, in order: one per `keys` entry, else one.
fn ranges(params: &ViewParams) -> Vec<KeyRange> {
    if let Some(keys) = &params.keys {
        return keys
            .iter()
            .map(|key| KeyRange {
                descending: params.descending,
                ..KeyRange::key(key.clone())
            })
            .collect();
    }
    if let Some(key) = &params.key {
        return vec![KeyRange {
            start: bound(&Some(key.clone()), &params.start_key_doc_id),
            end: bound(&Some(key.clone()), &params.end_key_doc_id),
            inclusive_end: params.inclusive_end,
            descending: params.descending,
        }];
    }
    vec![KeyRange {
        start: bound(&params.start_key, &params.start_key_doc_id),
        end: bound(&params.end_key, &params.end_key_doc_id),
        inclusive_end: params.inclusive_end,
        descending: params.descending,
    }]
}

fn push_meta(out: &mut Vec<u8>, group: &IndexGroup, params: &ViewParams) {
    if params.update_seq {
        out.extend_from_slice(b"\"update_seq\":");
        out.extend_from_slice(json_string(&group.update_seq().encode()).as_bytes());
        out.push(b',');
    }
}

fn map_query(
    bucket: &Bucket,
    group: &IndexGroup,
    view: usize,
    params: &ViewParams,
    credentials: CredentialsShown,
) -> ApiResult<Vec<u8>> {
    let ranges = ranges(params);
    let offset = match ranges.first() {
        Some(range) => group.offset_of(view, range)? + params.skip,
        None => 0,
    };
    let mut out = format!(
        "{{\"total_rows\":{},\"offset\":{offset},",
        group.total_rows(view)
    )
    .into_bytes();
    push_meta(&mut out, group, params);
    out.extend_from_slice(b"\"rows\":[");
    let mut to_skip = params.skip;
    let mut left = params.limit.unwrap_or(u64::MAX);
    let mut first = true;
    let options = RenderOptions {
        conflicts: params.conflicts,
        ..RenderOptions::for_reader(credentials)
    };
    'ranges: for range in &ranges {
        for row in group.scan(view, range) {
            if left == 0 {
                break 'ranges;
            }
            let row = row?;
            if to_skip > 0 {
                to_skip -= 1;
                continue;
            }
            left -= 1;
            out.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
            first = false;
            write_row(&mut out, &row);
            if params.include_docs {
                out.extend_from_slice(b",\"doc\":");
                include_doc(&mut out, bucket, &row, &options)?;
            }
            out.push(b'}');
        }
    }
    out.extend_from_slice(b"\r\n]}\n");
    Ok(out)
}

fn write_row(out: &mut Vec<u8>, row: &Row) {
    out.extend_from_slice(b"{\"id\":");
    out.extend_from_slice(json_string(&row.id_str()).as_bytes());
    out.extend_from_slice(b",\"key\":");
    out.extend_from_slice(&row.key_json);
    out.extend_from_slice(b",\"value\":");
    out.extend_from_slice(&row.value_json);
}

/// The row's document, or the document its value links to (`{"_id": ...}`, CouchDB's linked
/// documents), or `null`.
fn include_doc(
    out: &mut Vec<u8>,
    bucket: &Bucket,
    row: &Row,
    options: &RenderOptions,
) -> ApiResult<()> {
    let value = row.value();
    let (id, rev) = match value.get("_id").and_then(Value::as_str) {
        Some(linked) => (
            linked.to_string(),
            value
                .get("_rev")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        None => (row.id_str().into_owned(), None),
    };
    let record = read_doc(bucket, &id)?;
    let leaf = record.as_ref().and_then(|record| match &rev {
        Some(rev) => record
            .leaves
            .iter()
            .find(|leaf| leaf.rev.to_string() == *rev),
        None => record.winner().filter(|leaf| !leaf.deleted),
    });
    match (record.as_ref(), leaf) {
        (Some(record), Some(leaf)) => {
            let fetch = attachment_fetcher(bucket, &id);
            out.extend(render_doc(&id, record, leaf, options, &fetch)?);
        }
        _ => out.extend_from_slice(b"null"),
    }
    Ok(())
}

fn reduce_query(
    group: &IndexGroup,
    view: usize,
    params: &ViewParams,
    grouping: settee_views::Grouping,
    reducer: &Reducer,
) -> ApiResult<Vec<u8>> {
    let mut out = b"{".to_vec();
    push_meta(&mut out, group, params);
    out.extend_from_slice(b"\"rows\":[");
    let mut to_skip = params.skip;
    let mut left = params.limit.unwrap_or(u64::MAX);
    let mut first = true;
    let mut emit = |out: &mut Vec<u8>, (key, value): (Value, Value)| -> bool {
        if left == 0 {
            return false;
        }
        if to_skip > 0 {
            to_skip -= 1;
            return true;
        }
        left -= 1;
        out.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
        first = false;
        out.extend_from_slice(format!("{{\"key\":{key},\"value\":{value}}}").as_bytes());
        true
    };
    // Groups never span two `keys` entries: each key is reduced on its own.
    'ranges: for range in ranges(params) {
        let mut grouped = GroupedReduce::new(reducer, grouping);
        for row in group.scan(view, &range) {
            if let Some(done) = grouped.push(&row?)? {
                if !emit(&mut out, done) {
                    break 'ranges;
                }
            }
        }
        if let Some(done) = grouped.finish()? {
            if !emit(&mut out, done) {
                break;
            }
        }
    }
    out.extend_from_slice(b"\r\n]}\n");
    Ok(out)
}

/// `GET /{db}/_design/{ddoc}/_info`.
pub async fn design_info(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
) -> ApiResult<HttpResponse> {
    if !is_get(req) {
        return Err(not_allowed("GET,HEAD"));
    }
    let bucket = open(state, req, db, Operation::ReadDb)?;
    let found = design_views(state, &bucket, ddoc).await?;
    let group = &found.group;
    let (file, active) = group.sizes();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "name": ddoc,
            "view_index": {
                "signature": settee_views::hex(&group.signature()),
                "language": found.design.language,
                "sizes": {"file": file, "active": active, "external": active},
                "update_seq": group.update_seq().encode(),
                "purge_seq": 0,
                "updater_running": group.is_updater_running(),
                "compact_running": false,
                "waiting_clients": 0,
                "waiting_commit": false,
            }
        }),
    ))
}

/// `POST /{db}/_view_cleanup`: drops index data no design document of the database uses.
pub async fn view_cleanup(state: &HttpState, bucket: &Arc<Bucket>) -> ApiResult<HttpResponse> {
    let mut keep = HashSet::new();
    let ids: Vec<String> = {
        let range = ScanRange {
            start: Some(b"_design/".to_vec()),
            end: Some(b"_design0".to_vec()),
            inclusive_end: false,
            descending: false,
        };
        let mut ids = Vec::new();
        for item in bucket.scan_docs(range) {
            let (key, record) = item?;
            if !record.is_deleted() {
                ids.push(String::from_utf8_lossy(&key).into_owned());
            }
        }
        ids
    };
    for id in ids {
        // A design document that no longer parses keeps nothing.
        if let Ok(Some((design, _))) = state.views.design(bucket, &id) {
            keep.insert(design.signature);
        }
    }
    // Mango JSON indexes are index groups too.
    for index in crate::mango_api::load_indexes(bucket)? {
        if index.kind == settee_mango::IndexKind::Json {
            keep.insert(settee_mango::signature(&index));
        }
    }
    state.views.cleanup(bucket, &keep).await?;
    Ok(ok_true(StatusCode::ACCEPTED))
}
