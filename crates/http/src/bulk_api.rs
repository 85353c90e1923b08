//! Many documents per request: `_bulk_docs`, `_bulk_get`, `_all_docs` / `_design_docs`,
//! `_revs_diff`, `_missing_revs`.

use std::sync::Arc;

use hyper::{Method, StatusCode};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use settee_engine::{DocUpdate, Keyspace, RevId, ScanRange, UpdateOutcome};

use crate::auth::{require, Operation, REPLICATOR_DB};
use crate::couch_doc::{parse_doc, parse_rev, render_doc, ParsedDoc, RenderOptions};
use crate::db_api::open;
use crate::doc_api::{
    attachment_fetcher, prepare_user_doc, read_doc, render_options, validate_doc_id, within_limits,
};
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::prepare_replicator_doc;
use crate::request::{check_json_limits, Req};
use crate::response::{json, json_bytes, json_string, HttpResponse};
use crate::router::not_allowed;
use crate::streamed::delayed_json;
use crate::HttpState;

#[derive(serde::Deserialize)]
struct BulkDocsBody<'a> {
    #[serde(borrow)]
    docs: Option<&'a RawValue>,
    new_edits: Option<Value>,
    /// The write quorum asked for in the body (CouchDB reads it there too).
    #[serde(default)]
    w: Option<Value>,
    all_or_nothing: Option<Value>,
}

/// What becomes of one document of a `_bulk_docs` request.
enum Slot {
    /// Written with the others: its index in the engine's batch.
    Update(usize),
    /// A `_local` document, written on its own: its row.
    Done(Value),
    Failed(ApiError),
}

fn error_row(id: &str, error: &ApiError) -> Value {
    json!({"id": id, "error": error.code(), "reason": error.to_string()})
}

pub async fn bulk_docs(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    req.require_json_content_type()?;
    let bytes = req.body_bytes(state.config.max_request_size_bytes).await?;
    // The envelope is parsed without descending into the documents (raw values), so the depth
    // check is made per document (`prepare_bulk_doc`): one document too deep, or holding a
    // lone surrogate escape or serde_json's reserved member name, is that document's error,
    // not the whole batch's, and a
    // replication writing the batch goes on with the others. A number no double holds makes
    // the body invalid JSON, as for CouchDB.
    settee_engine::limits::check_json_numbers(&bytes)
        .map_err(|error| ApiError::over_limit(&error, ""))?;
    let body: BulkDocsBody = serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::BadRequest("Request body must be a JSON object".into()))?;
    let docs: Vec<&RawValue> = match body.docs {
        None => {
            return Err(ApiError::BadRequest(
                "POST body must include `docs` parameter.".into(),
            ))
        }
        Some(docs) => serde_json::from_str(docs.get())
            .map_err(|_| ApiError::BadRequest("`docs` parameter must be an array.".into()))?,
    };
    let body_new_edits = match body.new_edits {
        None => true,
        Some(Value::Bool(flag)) => flag,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "`new_edits` parameter must be a boolean.".into(),
            ))
        }
    };
    if body.all_or_nothing == Some(Value::Bool(true)) {
        // CouchDB 3 dropped all-or-nothing writes and answers every document so.
        let rows: Vec<Value> = docs
            .iter()
            .map(|raw| {
                let id = serde_json::from_str::<Value>(raw.get())
                    .ok()
                    .and_then(|doc| doc.get("_id").cloned())
                    .unwrap_or(Value::Null);
                json!({"id": id, "error": "not_implemented",
                    "reason": "all_or_nothing is not supported"})
            })
            .collect();
        return Ok(json(StatusCode::EXPECTATION_FAILED, &Value::Array(rows)));
    }
    if docs.len() > state.config.max_docs_per_bulk {
        return Err(ApiError::RequestTooLarge);
    }
    let new_edits = body_new_edits && req.flag("new_edits", true);
    let mut updates = Vec::with_capacity(docs.len());
    let mut slots: Vec<(String, Slot)> = Vec::with_capacity(docs.len());
    let mut room = crate::partition_api::PartitionRoom::new(req, &keyspace);
    for raw in docs {
        let prepared = prepare_bulk_doc(state, req, &keyspace, raw.get().as_bytes(), new_edits);
        match prepared {
            Ok(Prepared::Doc(id, update)) => {
                if let Err(error) =
                    room.admits(&keyspace, &id, &update.body, update.deleted, new_edits)
                {
                    slots.push((id, Slot::Failed(error)));
                    continue;
                }
                slots.push((id, Slot::Update(updates.len())));
                updates.push(update);
            }
            Ok(Prepared::Local(id, doc)) => {
                match write_local(&keyspace, &id, doc).await {
                    Ok(rev) if new_edits => {
                        let row = json!({"ok": true, "id": id, "rev": rev});
                        slots.push((id, Slot::Done(row)));
                    }
                    // As for documents, `new_edits=false` answers only what failed.
                    Ok(_) => {}
                    Err(error) => slots.push((id, Slot::Failed(error))),
                }
            }
            // An id CouchDB refuses fails the whole request there.
            Err((_, error @ (ApiError::IllegalDocId(_) | ApiError::IllegalPartition(_)))) => {
                return Err(error)
            }
            Err((id, error)) => slots.push((id, Slot::Failed(error))),
        }
    }
    for update in &mut updates {
        crate::attachments_api::compress_new(&mut update.attachments, &req.settings);
    }
    let outcomes = keyspace
        .update_docs(updates, new_edits, &req.user.writer())
        .await?;
    let saved = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, UpdateOutcome::Saved { .. }))
        .count();
    state.metrics.http.database_writes.add(saved as u64);
    let written: Vec<(&[u8], u64)> = slots
        .iter()
        .filter_map(|(id, slot)| match slot {
            Slot::Update(index) => match &outcomes[*index] {
                UpdateOutcome::Saved { seqno, .. } => Some((id.as_bytes(), *seqno)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let short_of_copies =
        crate::write_quorum::unmet(req, body.w.as_ref(), keyspace.bucket(), &written).await;
    let mut rows = Vec::with_capacity(slots.len());
    for (id, slot) in slots {
        match slot {
            Slot::Failed(error) => rows.push(error_row(&id, &error)),
            Slot::Done(row) => rows.push(row),
            Slot::Update(index) => match &outcomes[index] {
                UpdateOutcome::Saved { rev, .. } => {
                    if new_edits && short_of_copies {
                        rows.push(json!({"ok": true, "id": id, "rev": rev.to_string(),
                            "accepted": true}));
                    } else if new_edits {
                        rows.push(json!({"ok": true, "id": id, "rev": rev.to_string()}));
                    }
                }
                refused => {
                    if let Some(error) = crate::doc_api::outcome_error(refused, &id) {
                        rows.push(error_row(&id, &error));
                    }
                }
            },
        }
    }
    let status = if short_of_copies {
        StatusCode::ACCEPTED
    } else {
        StatusCode::CREATED
    };
    Ok(json(status, &Value::Array(rows)))
}

/// A `_bulk_docs` document ready to write.
enum Prepared {
    Doc(String, DocUpdate),
    Local(String, ParsedDoc),
}

/// Writes one `_local` document of a `_bulk_docs` request (CouchDB accepts them there):
/// its new `0-N` revision.
async fn write_local(keyspace: &Keyspace, id: &str, doc: ParsedDoc) -> ApiResult<String> {
    let name = id.strip_prefix("_local/").unwrap_or(id);
    let generation = match doc.rev_text.as_deref() {
        None => None,
        Some(text) => Some(
            text.strip_prefix("0-")
                .and_then(|number| number.parse::<u64>().ok())
                .ok_or_else(|| ApiError::BadRequest("Invalid rev format".into()))?,
        ),
    };
    let body = (!doc.deleted).then_some(doc.body);
    match keyspace
        .put_local(name.as_bytes(), generation, body)
        .await?
    {
        settee_engine::LocalOutcome::Saved { generation } => Ok(format!("0-{generation}")),
        settee_engine::LocalOutcome::Conflict => Err(ApiError::Conflict),
        settee_engine::LocalOutcome::NotFound => Err(ApiError::missing()),
    }
}

fn prepare_bulk_doc(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    raw: &[u8],
    new_edits: bool,
) -> Result<Prepared, (String, ApiError)> {
    let mut doc = check_json_limits(raw, state.config.max_json_depth)
        .and_then(|()| parse_doc(raw))
        .map_err(|error| (String::new(), error))?;
    let id = match doc.id.take() {
        Some(id) => id,
        None => state.uuids.configured(&req.settings),
    };
    let fail = |error: ApiError| (id.clone(), error);
    if raw.len() > req.settings.max_document_size_bytes {
        return Err(fail(ApiError::DocumentTooLarge(id.clone())));
    }
    validate_doc_id(&id, state.config.max_key_bytes).map_err(fail)?;
    crate::partition_api::validate_partitioned_id(keyspace, &id).map_err(fail)?;
    for attachment in doc.attachments.iter().flatten() {
        if let settee_engine::AttachmentInput::Data { name, .. } = attachment {
            crate::doc_api::validate_attachment_name(name).map_err(fail)?;
        }
    }
    if id.starts_with("_local/") {
        require(
            keyspace.bucket(),
            &req.user,
            Operation::WriteDoc(id.as_bytes()),
        )
        .map_err(fail)?;
        return Ok(Prepared::Local(id, doc));
    }
    require(
        keyspace.bucket(),
        &req.user,
        Operation::WriteDoc(id.as_bytes()),
    )
    .map_err(fail)?;
    if id.starts_with("_design/") && !doc.deleted {
        crate::view_api::check_design_fields(&id, &doc.body).map_err(fail)?;
    }
    if settee_auth::is_users_db(keyspace.bucket().name()) {
        prepare_user_doc(state, keyspace, &req.user, &id, &mut doc).map_err(fail)?;
    }
    if keyspace.bucket().name() == REPLICATOR_DB {
        prepare_replicator_doc(keyspace, &req.user, &id, &mut doc).map_err(fail)?;
    }
    let history = match (&doc.revisions, &doc.rev) {
        (Some(history), _) => history.clone(),
        (None, Some(rev)) => vec![rev.clone()],
        (None, None) => Vec::new(),
    };
    if !new_edits && history.is_empty() {
        return Err(fail(ApiError::BadRequest(
            "new_edits=false requires a revision".into(),
        )));
    }
    let update = DocUpdate {
        key: id.as_bytes().to_vec(),
        parent: doc.rev,
        history,
        deleted: doc.deleted,
        body: doc.body,
        attachments: doc.attachments.unwrap_or_default(),
    };
    Ok(Prepared::Doc(id, update))
}

pub async fn bulk_get(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let body = req.json_body_within(&state.config).await?;
    let docs = body
        .get("docs")
        .and_then(|docs| docs.as_array())
        .ok_or_else(|| ApiError::BadRequest("Missing JSON list of 'docs'.".into()))?;
    if docs.len() > state.config.max_docs_per_bulk {
        return Err(ApiError::RequestTooLarge);
    }
    let base = render_options(req, &keyspace)?;
    let latest = req.flag("latest", false);
    let mut out = Vec::with_capacity(docs.len() * 256);
    out.extend_from_slice(b"{\"results\":[");
    for (index, spec) in docs.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let id = spec.get("id").and_then(|id| id.as_str()).unwrap_or("");
        let mut options = base.clone();
        if let Some(Value::Array(since)) = spec.get("atts_since") {
            options.atts_since = since
                .iter()
                .filter_map(|rev| rev.as_str().and_then(RevId::parse))
                .collect();
        }
        let rev = spec.get("rev").and_then(|rev| rev.as_str());
        out.extend_from_slice(format!("{{\"id\":{},\"docs\":[", json_string(id)).as_bytes());
        match crate::partition_api::validate_partitioned_id(&keyspace, id) {
            Ok(()) => bulk_get_one(&keyspace, id, rev, latest, &options, &mut out)?,
            Err(error) => out.extend_from_slice(
                json!({"error": {"id": id, "rev": rev, "error": error.code(), "reason": error.to_string()}})
                    .to_string()
                    .as_bytes(),
            ),
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    Ok(json_bytes(StatusCode::OK, out))
}

fn bulk_get_one(
    keyspace: &Keyspace,
    id: &str,
    rev: Option<&str>,
    latest: bool,
    options: &RenderOptions,
    out: &mut Vec<u8>,
) -> ApiResult<()> {
    let failed = |rev: &str, error: &ApiError| {
        json!({"error": {"id": id, "rev": rev, "error": error.code(), "reason": error.to_string()}})
            .to_string()
    };
    let missing = |rev: &str| {
        json!({"error": {"id": id, "rev": rev, "error": "not_found", "reason": "missing"}})
            .to_string()
    };
    // One document that cannot be sent is that document's error, never the whole response's.
    let record = match read_doc(keyspace, id) {
        Ok(record) => record,
        Err(error @ ApiError::CorruptDocument(_)) => {
            keyspace
                .bucket()
                .skip_corrupt_document(id.as_bytes(), &error);
            out.extend_from_slice(failed(rev.unwrap_or("undefined"), &error).as_bytes());
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    let Some(record) = record else {
        out.extend_from_slice(missing(rev.unwrap_or("undefined")).as_bytes());
        return Ok(());
    };
    let revs: Vec<RevId> = match rev {
        None => record
            .winner()
            .map(|leaf| vec![leaf.rev.clone()])
            .unwrap_or_default(),
        Some(text) => match RevId::parse(text) {
            None => {
                out.extend_from_slice(missing(text).as_bytes());
                return Ok(());
            }
            Some(rev) if latest => {
                let leaves = record.tree.leaves_under(&rev);
                if leaves.is_empty() {
                    vec![rev]
                } else {
                    leaves.into_iter().map(|leaf| leaf.rev).collect()
                }
            }
            Some(rev) => vec![rev],
        },
    };
    for (index, rev) in revs.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        // A leaf, or an inner revision whose old body is still kept.
        let kept = match record.leaf(rev) {
            Some(_) => None,
            None => keyspace.revision(id.as_bytes(), &record, rev)?,
        };
        match record.leaf(rev).or(kept.as_ref()) {
            Some(leaf) => match within_limits(keyspace, id, leaf) {
                Err(error) => {
                    let error = ApiError::over_limit(&error, id);
                    out.extend_from_slice(failed(&rev.to_string(), &error).as_bytes());
                }
                Ok(()) => {
                    let fetch = attachment_fetcher(keyspace, id);
                    let doc = render_doc(id, &record, leaf, options, &fetch)?;
                    out.extend_from_slice(b"{\"ok\":");
                    out.extend_from_slice(&doc);
                    out.push(b'}');
                }
            },
            None => out.extend_from_slice(missing(&rev.to_string()).as_bytes()),
        }
    }
    Ok(())
}

/// Which documents an `_all_docs`-style request lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocSet<'a> {
    All,
    Design,
    /// `_local_docs`: the `_local` documents, which `_all_docs` never lists.
    Local,
    /// `/db/_partition/{p}/_all_docs`: the partition's documents (partition_api.rs).
    Partition(&'a str),
}

/// Parameters whose values are JSON (a string one is quoted when it comes from a POST body).
const JSON_PARAMS: [&str; 7] = [
    "key",
    "startkey",
    "start_key",
    "endkey",
    "end_key",
    "startkey_docid",
    "endkey_docid",
];

/// The `keys` of a listing (query string for GET, body for POST); a POST body's other members
/// become parameters too, the query string's taking precedence (CouchDB's rule).
pub async fn listing_keys(state: &HttpState, req: &mut Req) -> ApiResult<Option<Value>> {
    match req.method {
        Method::GET | Method::HEAD => match req.json_param("keys")? {
            Some(keys) if !keys.is_array() => Err(ApiError::BadRequest(
                "`keys` parameter must be an array.".into(),
            )),
            keys => Ok(keys),
        },
        Method::POST => {
            req.require_json_content_type()?;
            let body = req.json_body_within(&state.config).await?;
            let Value::Object(members) = body else {
                return Err(ApiError::BadRequest(
                    "Request body must be a JSON object".into(),
                ));
            };
            for (name, value) in &members {
                if name == "keys" || req.has_param(name) {
                    continue;
                }
                let text = match value {
                    Value::String(text) if !JSON_PARAMS.contains(&name.as_str()) => text.clone(),
                    other => other.to_string(),
                };
                req.query.push((name.clone(), text));
            }
            match members.get("keys") {
                Some(keys) if !keys.is_array() => Err(ApiError::BadRequest(
                    "`keys` body member must be an array.".into(),
                )),
                keys => Ok(keys.cloned()),
            }
        }
        _ => Err(not_allowed("GET,HEAD,POST")),
    }
}

/// The live documents whose ids are in `[low, high)`: `_design_docs`' `total_rows` (few
/// design documents) and a partition's, counted by a scan.
fn live_doc_count(keyspace: &Keyspace, low: &str, high: &str, only: Option<&[bool]>) -> u64 {
    let range = ScanRange {
        collection: keyspace.collection(),
        start: Some(low.as_bytes().to_vec()),
        end: Some(high.as_bytes().to_vec()),
        inclusive_end: false,
        descending: false,
    };
    let scan = keyspace.bucket().scan_docs(range);
    let scan = match only {
        Some(only) => scan.only(only),
        None => scan,
    };
    scan.filter_map(Result::ok)
        .filter(|(_, record)| record.winner().is_some_and(|leaf| !leaf.deleted))
        .count() as u64
}

/// `/{db}/_local_docs`: `_local` documents as `_all_docs` rows (`value.rev` is `0-N`), with
/// `keys`, `startkey`/`endkey`, `descending`, `skip`, `limit` and `include_docs`; CouchDB
/// counts neither `total_rows` nor `offset` for them.
fn local_docs(req: &Req, keyspace: &Keyspace, keys: Option<Value>) -> ApiResult<HttpResponse> {
    let descending = req.bool_param("descending", false)?;
    let skip = req.u64_param("skip")?.unwrap_or(0) as usize;
    let limit = req
        .u64_param("limit")?
        .map_or(usize::MAX, |limit| limit as usize);
    let include_docs = req.bool_param("include_docs", false)?;
    let stored = keyspace.local_docs()?;
    let row = |key: &[u8], generation: u64| -> ApiResult<Value> {
        let id = format!("_local/{}", String::from_utf8_lossy(key));
        let rev = format!("0-{generation}");
        let mut row = json!({"id": id, "key": id, "value": {"rev": rev}});
        if include_docs {
            let doc = match keyspace.get_local(key)? {
                Some((_, body)) => {
                    let mut doc: serde_json::Map<String, Value> =
                        serde_json::from_slice(&body).unwrap_or_default();
                    doc.insert("_id".into(), json!(id));
                    doc.insert("_rev".into(), json!(rev));
                    Value::Object(doc)
                }
                None => Value::Null,
            };
            row["doc"] = doc;
        }
        Ok(row)
    };
    let mut rows = Vec::new();
    match keys {
        Some(Value::Array(keys)) => {
            let ordered: Vec<&Value> = if descending {
                keys.iter().rev().collect()
            } else {
                keys.iter().collect()
            };
            for key in ordered.into_iter().skip(skip).take(limit) {
                let name = key.as_str().and_then(|id| id.strip_prefix("_local/"));
                let found = name.and_then(|name| {
                    stored
                        .iter()
                        .find(|(stored, _)| stored.as_slice() == name.as_bytes())
                });
                rows.push(match found {
                    Some((stored, generation)) => row(stored, *generation)?,
                    None => json!({"key": key, "error": "not_found"}),
                });
            }
        }
        Some(_) => {
            return Err(ApiError::BadRequest(
                "`keys` member must be an array.".into(),
            ))
        }
        None => {
            let as_id =
                |value: Option<Value>| value.and_then(|value| value.as_str().map(str::to_string));
            let start = as_id(key_param(req, &["startkey", "start_key"])?);
            let end = as_id(key_param(req, &["endkey", "end_key"])?);
            let inclusive_end = req.bool_param("inclusive_end", true)?;
            let in_range = |id: &str| {
                let (low, high) = if descending {
                    (&end, &start)
                } else {
                    (&start, &end)
                };
                low.as_deref().is_none_or(|low| id >= low)
                    && high.as_deref().is_none_or(|high| {
                        let inclusive = if descending { true } else { inclusive_end };
                        if inclusive {
                            id <= high
                        } else {
                            id < high
                        }
                    })
            };
            let listed: Vec<&(Vec<u8>, u64)> = if descending {
                stored.iter().rev().collect()
            } else {
                stored.iter().collect()
            };
            for (key, generation) in listed
                .into_iter()
                .filter(|(key, _)| in_range(&format!("_local/{}", String::from_utf8_lossy(key))))
                .skip(skip)
                .take(limit)
            {
                rows.push(row(key, *generation)?);
            }
        }
    }
    Ok(json(
        StatusCode::OK,
        &json!({"total_rows": null, "offset": null, "rows": rows}),
    ))
}

fn key_param(req: &Req, names: &[&str]) -> ApiResult<Option<Value>> {
    for name in names {
        if let Some(value) = req.json_param(name)? {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

pub async fn all_docs(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    set: DocSet<'_>,
) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let keys = listing_keys(state, req).await?;
    if set == DocSet::Local {
        return local_docs(req, &keyspace, keys);
    }
    let include_docs = req.bool_param("include_docs", false)?;
    let mut options = render_options(req, &keyspace)?;
    options.revs = false;
    let descending = req.bool_param("descending", false)?;
    let skip = req.u64_param("skip")?.unwrap_or(0) as usize;
    let mut limit = req.u64_param("limit")?;
    let update_seq = req.bool_param("update_seq", false)?;
    let bounds = match set {
        DocSet::Design => Some(("_design/".to_string(), "_design0".to_string())),
        DocSet::Partition(partition) => {
            limit = crate::partition_api::query_limit(req, limit)?;
            Some(crate::partition_api::id_bounds(partition))
        }
        DocSet::All | DocSet::Local => None,
    };
    let limit = limit.map(|limit| limit as usize);
    // Scattered here by another node: only the vbuckets it names (docs/format/cluster-transport.md).
    let only = req.vbuckets.clone();
    let live = match (&bounds, &only) {
        (Some((low, high)), _) => live_doc_count(&keyspace, low, high, only.as_deref()),
        (None, Some(only)) => keyspace.doc_counts_only(only)?.0,
        (None, None) => keyspace.doc_counts()?.0,
    };
    // With `keys`, CouchDB's offset is null (there is no one place in the index to count from).
    let head = |offset: Option<u64>| -> ApiResult<String> {
        let offset = offset.map_or("null".to_string(), |offset| offset.to_string());
        let mut head = format!("{{\"total_rows\":{live},\"offset\":{offset}");
        if update_seq {
            head.push_str(&format!(
                ",\"update_seq\":\"{}\"",
                crate::changes_api::couch_seq(
                    &state.config.node_name,
                    &keyspace,
                    &keyspace.high_seqnos()?
                )
            ));
        }
        head.push_str(",\"rows\":[\r\n");
        Ok(head)
    };
    if let Some(keys) = keys {
        let keys = keys
            .as_array()
            .ok_or_else(|| ApiError::BadRequest("`keys` member must be an array.".into()))?;
        if keys.len() > state.config.max_docs_per_bulk {
            return Err(ApiError::RequestTooLarge);
        }
        let mut out = head(None)?.into_bytes();
        let mut first = true;
        let vbuckets = keyspace.bucket().vbuckets();
        let ordered: Vec<&Value> = if descending {
            keys.iter().rev().collect()
        } else {
            keys.iter().collect()
        };
        let ordered = ordered.into_iter().filter(|key| {
            only.as_ref().is_none_or(|only| {
                only.get(usize::from(settee_http_core::scattered::key_vbucket(
                    key, vbuckets,
                ))) == Some(&true)
            })
        });
        for key in ordered.skip(skip).take(limit.unwrap_or(usize::MAX)) {
            if !first {
                out.extend_from_slice(b",\r\n");
            }
            first = false;
            key_row(&keyspace, key, include_docs, &options, &mut out)?;
        }
        out.extend_from_slice(b"\r\n]}");
        return Ok(json_bytes(StatusCode::OK, out));
    }
    let as_id = |value: Option<Value>| value.and_then(|value| value.as_str().map(str::to_string));
    let mut start = as_id(key_param(req, &["startkey", "start_key"])?);
    let mut end = as_id(key_param(req, &["endkey", "end_key"])?);
    let mut inclusive_end = req.bool_param("inclusive_end", true)?;
    if let Some(key) = as_id(req.json_param("key")?) {
        start = Some(key.clone());
        end = Some(key);
        inclusive_end = true;
    }
    if let Some((low, high)) = bounds.clone() {
        // Clamp the range to the design documents' or the partition's ids.
        if descending {
            start = Some(start.map_or(high.clone(), |key| key.min(high.clone())));
            end = Some(end.map_or(low.clone(), |key| key.max(low.clone())));
        } else {
            start = Some(start.map_or(low.clone(), |key| key.max(low.clone())));
            if end.as_ref().is_none_or(|key| key >= &high) {
                end = Some(high);
                inclusive_end = false;
            }
        }
    }
    // CouchDB's offset: the live documents before the first row in reading order.
    let offset = match &start {
        Some(start) => {
            let (low, high) = match &bounds {
                Some((low, high)) => (Some(low.clone()), Some(high.clone())),
                None => (None, None),
            };
            let before = if descending {
                let mut after_start = start.clone().into_bytes();
                after_start.push(0);
                ScanRange {
                    collection: keyspace.collection(),
                    start: Some(after_start),
                    end: high.map(String::into_bytes),
                    inclusive_end: false,
                    descending: false,
                }
            } else {
                ScanRange {
                    collection: keyspace.collection(),
                    start: low.map(String::into_bytes),
                    end: Some(start.clone().into_bytes()),
                    inclusive_end: false,
                    descending: false,
                }
            };
            match &only {
                Some(only) => keyspace.bucket().count_live_docs_only(before, only)?,
                None => keyspace.bucket().count_live_docs(before)?,
            }
        }
        None => 0,
    };
    let head = head(Some(offset + skip as u64))?;
    let range = ScanRange {
        collection: 0,
        start: start.map(String::into_bytes),
        end: end.map(String::into_bytes),
        inclusive_end,
        descending,
    };
    let rows = RowsQuery {
        range,
        skip,
        limit,
        include_docs,
        options,
        only,
    };
    stream_rows(&state.streams, keyspace, head, rows).await
}

fn key_row(
    keyspace: &Keyspace,
    key: &Value,
    include_docs: bool,
    options: &RenderOptions,
    out: &mut Vec<u8>,
) -> ApiResult<()> {
    let Some(id) = key.as_str() else {
        out.extend_from_slice(
            json!({"key": key, "error": "not_found"})
                .to_string()
                .as_bytes(),
        );
        return Ok(());
    };
    let record = match read_doc(keyspace, id) {
        Ok(record) => record,
        Err(error @ ApiError::CorruptDocument(_)) => {
            keyspace
                .bucket()
                .skip_corrupt_document(id.as_bytes(), &error);
            out.extend_from_slice(
                json!({"key": id, "error": error.code(), "reason": error.to_string()})
                    .to_string()
                    .as_bytes(),
            );
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    let Some(record) = record else {
        out.extend_from_slice(
            json!({"key": id, "error": "not_found"})
                .to_string()
                .as_bytes(),
        );
        return Ok(());
    };
    let Some(winner) = record.winner() else {
        out.extend_from_slice(
            json!({"key": id, "error": "not_found"})
                .to_string()
                .as_bytes(),
        );
        return Ok(());
    };
    let rev = winner.rev.to_string();
    if winner.deleted {
        let mut row = json!({"id": id, "key": id, "value": {"rev": rev, "deleted": true}});
        if include_docs {
            row["doc"] = Value::Null;
        }
        out.extend_from_slice(row.to_string().as_bytes());
        return Ok(());
    }
    out.extend_from_slice(
        format!(
            "{{\"id\":{0},\"key\":{0},\"value\":{{\"rev\":\"{rev}\"}}",
            json_string(id)
        )
        .as_bytes(),
    );
    if include_docs {
        out.extend_from_slice(b",\"doc\":");
        if within_limits(keyspace, id, winner).is_ok() {
            out.extend_from_slice(&render_doc(
                id,
                &record,
                winner,
                options,
                &attachment_fetcher(keyspace, id),
            )?);
        } else {
            out.extend_from_slice(b"null");
        }
    }
    out.push(b'}');
    Ok(())
}

/// Which rows of a range scan `_all_docs` answers with, and how.
struct RowsQuery {
    range: ScanRange,
    skip: usize,
    limit: Option<usize>,
    include_docs: bool,
    options: RenderOptions,
    only: Option<Arc<[bool]>>,
}

/// Streams the rows of a range scan, written on a blocking thread (`streamed.rs`). A scan that
/// fails is an error response, or an aborted body once rows were sent: never a short list that
/// looks complete.
async fn stream_rows(
    budget: &Arc<crate::streamed::StreamBudget>,
    keyspace: Keyspace,
    head: String,
    rows: RowsQuery,
) -> ApiResult<HttpResponse> {
    let RowsQuery {
        range,
        skip,
        limit,
        include_docs,
        options,
        only,
    } = rows;
    delayed_json(budget, move |out| {
        out.buffer().extend_from_slice(head.as_bytes());
        let mut emitted = 0usize;
        let mut skipped = 0usize;
        let limit = limit.unwrap_or(usize::MAX);
        let scan = keyspace.scan_docs(range);
        let scan = match &only {
            Some(only) => scan.only(only),
            None => scan,
        };
        for item in scan {
            if emitted >= limit {
                break;
            }
            let (key, record) = item.inspect_err(|error| {
                tracing::warn!(%error, db = keyspace.name(), "_all_docs scan failed");
            })?;
            let Some(winner) = record.winner() else {
                continue;
            };
            if winner.deleted
                || (record.expiry != 0 && record.expiry <= keyspace.bucket().now_secs())
            {
                continue;
            }
            if skipped < skip {
                skipped += 1;
                continue;
            }
            let id = String::from_utf8_lossy(&key);
            let chunk = out.buffer();
            if emitted > 0 {
                chunk.extend_from_slice(b",\r\n");
            }
            chunk.extend_from_slice(
                format!(
                    "{{\"id\":{0},\"key\":{0},\"value\":{{\"rev\":\"{1}\"}}",
                    json_string(&id),
                    winner.rev
                )
                .as_bytes(),
            );
            if include_docs && within_limits(&keyspace, &id, winner).is_err() {
                chunk.extend_from_slice(b",\"doc\":null");
            } else if include_docs {
                chunk.extend_from_slice(b",\"doc\":");
                match render_doc(
                    &id,
                    &record,
                    winner,
                    &options,
                    &attachment_fetcher(&keyspace, &id),
                ) {
                    Ok(doc) => chunk.extend_from_slice(&doc),
                    Err(_) => chunk.extend_from_slice(b"null"),
                }
            }
            chunk.push(b'}');
            emitted += 1;
            out.flush_when_full()?;
        }
        out.buffer().extend_from_slice(b"\r\n]}");
        Ok(())
    })
    .await
}

fn revs_request(body: &Value) -> ApiResult<Vec<(String, Vec<RevId>)>> {
    let object = body
        .as_object()
        .ok_or_else(|| ApiError::BadRequest("Request body must be a JSON object".into()))?;
    object
        .iter()
        .map(|(id, revs)| {
            let revs = revs
                .as_array()
                .ok_or_else(|| ApiError::BadRequest("revs must be a list".into()))?
                .iter()
                .map(|rev| parse_rev(rev.as_str().unwrap_or("")))
                .collect::<ApiResult<Vec<_>>>()?;
            Ok((id.clone(), revs))
        })
        .collect()
}

async fn revs_body(state: &HttpState, req: &mut Req) -> ApiResult<Vec<(String, Vec<RevId>)>> {
    if req.method != Method::POST {
        return Err(not_allowed("POST"));
    }
    let body = req.json_body_within(&state.config).await?;
    let requests = revs_request(&body)?;
    if requests.len() > state.config.max_docs_per_bulk {
        return Err(ApiError::RequestTooLarge);
    }
    Ok(requests)
}

pub async fn revs_diff(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let requests = revs_body(state, req).await?;
    let mut out = serde_json::Map::new();
    for (id, revs) in requests {
        let (missing, ancestors) = match keyspace.read_record_or_skip(id.as_bytes())? {
            Some(record) => record.tree.revs_diff(&revs),
            None => (revs, Vec::new()),
        };
        if missing.is_empty() {
            continue;
        }
        let mut entry =
            json!({"missing": missing.iter().map(|rev| rev.to_string()).collect::<Vec<_>>()});
        if !ancestors.is_empty() {
            entry["possible_ancestors"] = json!(ancestors
                .iter()
                .map(|rev| rev.to_string())
                .collect::<Vec<_>>());
        }
        out.insert(id, entry);
    }
    Ok(json(StatusCode::OK, &Value::Object(out)))
}

pub async fn missing_revs(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let requests = revs_body(state, req).await?;
    let mut out = serde_json::Map::new();
    for (id, revs) in requests {
        let missing = match keyspace.read_record_or_skip(id.as_bytes())? {
            Some(record) => record.tree.revs_diff(&revs).0,
            None => revs,
        };
        if !missing.is_empty() {
            out.insert(
                id,
                json!(missing
                    .iter()
                    .map(|rev| rev.to_string())
                    .collect::<Vec<_>>()),
            );
        }
    }
    Ok(json(StatusCode::OK, &json!({"missing_revs": out})))
}
