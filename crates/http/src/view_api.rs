//! JavaScript views over HTTP: `/{db}/_design/{ddoc}/_view/{view}` (GET, POST, `/queries`),
//! `/{db}/_design/{ddoc}/_info`, `/{db}/_view_cleanup`, and the design-document check at PUT.
//! Parameters are parsed in `view_params.rs`; the rows are written, as they are read, by
//! `view_rows.rs` and streamed by `streamed.rs`; the index is `settee-views`.

use std::collections::HashSet;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};
use settee_engine::Keyspace;
use settee_views::{Design, DesignViews};

use crate::auth::Operation;
use crate::db_api::open;
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::{credentials_shown, CredentialsShown};
use crate::request::Req;
use crate::response::{json as json_response, ok_true, HttpResponse};
use crate::router::{is_get, not_allowed};
use crate::streamed::delayed_json;
use crate::view_params::ViewParams;
use crate::view_rows;
use crate::HttpState;

/// Most queries one `/queries` request may carry.
pub const QUERIES_PER_REQUEST_MAX: usize = 1000;

/// Rejects a design document whose views CouchDB would reject (before it is stored).
pub async fn check_design(
    state: &HttpState,
    keyspace: &Keyspace,
    id: &str,
    body: &[u8],
) -> ApiResult<()> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    state.views.check_design(id, &value).await?;
    let partitioned = value.pointer("/options/partitioned") == Some(&Value::Bool(true));
    if partitioned && !keyspace.bucket().is_partitioned() {
        return Err(ApiError::InvalidDesignDoc(
            "partitioned option cannot be true in a non-partitioned database.".into(),
        ));
    }
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

/// The design document's views: this node's copy, or the one the front node of a scattered
/// query carried (`carried`, its JSON; this node may not hold it).
pub(crate) async fn design_views(
    state: &HttpState,
    keyspace: &Keyspace,
    ddoc: &str,
    carried: Option<&[u8]>,
) -> ApiResult<DesignViews> {
    let id = format!("_design/{ddoc}");
    match state.views.design_views(keyspace, &id, carried).await? {
        Some(found) => Ok(found),
        None if carried.is_some() => Err(ApiError::NotFound("missing_named_view".into())),
        None => match keyspace.read_winner(id.as_bytes())? {
            Some((header, _)) if !header.deleted => {
                Err(ApiError::NotFound("missing_named_view".into()))
            }
            Some(_) => Err(ApiError::deleted()),
            None => Err(ApiError::missing()),
        },
    }
}

/// A view query's `POST` body: a JSON object.
pub async fn object_body(
    state: &HttpState,
    req: &mut Req,
) -> ApiResult<serde_json::Map<String, Value>> {
    req.require_json_content_type()?;
    let body = req
        .json_body(
            state.config.max_request_size_bytes,
            state.config.max_json_depth,
        )
        .await?;
    match body {
        Value::Object(members) => Ok(members),
        _ => Err(ApiError::BadRequest(
            "Request body must be a JSON object".into(),
        )),
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
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let mut params = ViewParams::from_query(&req.query)?;
    let mut queries = None;
    if post {
        let members = object_body(state, req).await?;
        if let Some(list) = members.get("queries") {
            queries = Some(list.clone());
        }
        // A parameter in both the query string and the body: the query string's wins, as
        // in CouchDB.
        let members: serde_json::Map<String, Value> = members
            .into_iter()
            .filter(|(name, _)| !req.has_param(name))
            .collect();
        params.merge_json(&members)?;
    }
    let found = design_views(state, &keyspace, ddoc, req.design.as_deref()).await?;
    let view = found
        .design
        .view_index(view_name)
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    check_partition(req, &found, &mut params)?;
    let credentials = credentials_shown(&keyspace, &req.user);
    if let Some(list) = queries {
        return run_queries(state, &keyspace, &found, view, &list, credentials).await;
    }
    let query = view_rows::plan(state, &keyspace, &found, view, params)
        .await?
        .only(req.vbuckets.clone());
    let group = found.group.clone();
    delayed_json(&state.streams, move |out| {
        view_rows::write(&keyspace, &group, &query, &credentials, out)
    })
    .await
}

/// `GET|POST /{db}/_partition/{p}/_design/{ddoc}/_view/{view}`: the view query of one
/// partition, as `?partition=p` asks it (the router checked that they do not conflict).
pub async fn partition_view(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    ddoc: &str,
    view_name: &str,
    partition: &str,
) -> ApiResult<HttpResponse> {
    req.query.retain(|(name, _)| name != "partition");
    req.query.push(("partition".into(), partition.into()));
    view(state, req, db, ddoc, view_name).await
}

/// A partitioned view is queried one partition at a time, and only it is (CouchDB's rules
/// and reasons); a partition query's `limit` obeys `partition_query_limit`.
fn check_partition(req: &Req, found: &DesignViews, params: &mut ViewParams) -> ApiResult<()> {
    match (&params.partition, found.group.is_partitioned()) {
        (None, true) => Err(ApiError::QueryParse(
            "`partition` parameter is mandatory for queries to this view.".into(),
        )),
        (Some(_), false) => Err(ApiError::QueryParse(
            "`partition` parameter is not supported in this design doc".into(),
        )),
        (None, false) => Ok(()),
        (Some(partition), true) => {
            crate::partition_api::validate_partition(partition)?;
            params.limit = crate::partition_api::query_limit(req, params.limit)?;
            Ok(())
        }
    }
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
    let keyspace = open(state, req, db, Operation::ReadDb)?;
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
    let found = design_views(state, &keyspace, ddoc, None).await?;
    let view = found
        .design
        .view_index(view_name)
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    let credentials = credentials_shown(&keyspace, &req.user);
    run_queries(state, &keyspace, &found, view, &list, credentials).await
}

/// Several queries of one view, answered in one `{"results": [...]}` streamed like one.
async fn run_queries(
    state: &HttpState,
    keyspace: &Keyspace,
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
    let mut planned = Vec::with_capacity(queries.len());
    for query in queries {
        let Value::Object(members) = query else {
            return Err(ApiError::BadRequest(
                "Each query must be a JSON object".into(),
            ));
        };
        let mut params = ViewParams::default();
        params.merge_json(members)?;
        planned.push(view_rows::plan(state, keyspace, found, view, params).await?);
    }
    let keyspace = keyspace.clone();
    let group = found.group.clone();
    delayed_json(&state.streams, move |out| {
        out.buffer().extend_from_slice(b"{\"results\":[");
        for (index, query) in planned.iter().enumerate() {
            if index > 0 {
                out.buffer().push(b',');
            }
            view_rows::write(&keyspace, &group, query, &credentials, out)?;
        }
        out.buffer().extend_from_slice(b"]}");
        Ok(())
    })
    .await
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
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    // In a cluster, a design document this node does not hold is read from its node: the
    // answer is about this node's index of it.
    let id = format!("_design/{ddoc}");
    let carried = match state.cluster.get() {
        Some(cluster) if !cluster.serves_here(db, &id) => Some(
            crate::designs::read(state, req, &keyspace, db, ddoc)
                .await?
                .to_json(),
        ),
        _ => None,
    };
    let found = design_views(state, &keyspace, ddoc, carried.as_deref()).await?;
    let group = &found.group;
    let (file, active) = group.sizes();
    // CouchDB's `_info` gives the index's position as a number (its shards' seqs summed) and
    // how many changes it has still to index; a node answering a scattered `_info` counts the
    // vbuckets it answers for (not the replicas it holds).
    let only = req.vbuckets.clone();
    let sum = |seqs: &settee_engine::SeqVector| -> u64 {
        match &only {
            Some(only) => seqs
                .seqnos()
                .iter()
                .zip(only.iter())
                .filter_map(|(seqno, answered)| answered.then_some(*seqno))
                .sum(),
            None => seqs.sum(),
        }
    };
    let indexed = sum(&group.update_seq());
    let pending = sum(&keyspace.bucket().high_seqnos()).saturating_sub(indexed);
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "name": ddoc,
            "view_index": {
                "signature": settee_views::hex(&group.signature()),
                "language": found.design.language,
                "sizes": {"file": file, "active": active, "external": active},
                "update_seq": indexed,
                "updates_pending": {"minimum": pending, "preferred": pending, "total": pending},
                "purge_seq": 0,
                "updater_running": group.is_updater_running(),
                "compact_running": group.is_compacting(),
                "waiting_clients": 0,
                "waiting_commit": false,
                // CouchDB names the ICU collator versions its index was built with; settee's
                // collation is its own implementation of those rules (settee-collate).
                "collator_versions": [settee_collate::COLLATION_VERSION],
            }
        }),
    ))
}

/// `POST /{db}/_view_cleanup`: drops index data no design document of the database uses:
/// this node's design documents, or every design document of the database when the front
/// node of a scattered cleanup carried them (`carried`, a JSON array).
pub async fn view_cleanup(
    state: &HttpState,
    keyspace: &Keyspace,
    carried: Option<&[u8]>,
) -> ApiResult<HttpResponse> {
    let mut keep = HashSet::new();
    let designs: Vec<Value> = match carried {
        Some(json) => serde_json::from_slice(json)
            .map_err(|error| ApiError::BadRequest(format!("carried design documents: {error}")))?,
        None => crate::mango_api::local_design_documents(keyspace)?,
    };
    for design in &designs {
        let Some(id) = design.get("_id").and_then(Value::as_str) else {
            continue;
        };
        let json = design.to_string().into_bytes();
        if let Ok(Some((parsed, _))) = state.views.carried_design(keyspace, id, &json) {
            keep.insert(parsed.signature);
        }
    }
    // Mango JSON indexes are index groups too.
    let partitioned = keyspace.bucket().is_partitioned();
    for index in crate::mango_api::indexes_of(&designs, partitioned) {
        if index.kind == settee_mango::IndexKind::Json {
            keep.insert(settee_mango::signature(&index));
        }
    }
    state.views.cleanup(keyspace, &keep).await?;
    Ok(ok_true(StatusCode::ACCEPTED))
}
