//! Single documents: GET/HEAD/PUT/DELETE/COPY `/{db}/{docid}`, POST `/{db}`, and `_local`.

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde_json::json;
use settee_engine::{
    AttachmentInput, DocRecord, DocUpdate, EngineError, Keyspace, Leaf, LimitError, LocalOutcome,
    RevId, UpdateOutcome,
};

use crate::auth::{db_access, require, DbAccess, Operation, UserCtx, REPLICATOR_DB, USER_PREFIX};
use crate::couch_doc::{parse_doc_at, parse_rev, render_doc, ParsedDoc, RenderOptions};
use crate::db_api::open;
use crate::error::{ApiError, ApiResult};
use crate::replicator_docs::{credentials_shown, prepare_replicator_doc};
use crate::request::{check_json_limits, Req};
use crate::response::{etag, json, json_bytes, with_header, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;

pub fn is_reserved_id(id: &str) -> bool {
    id.starts_with("_design/") || id.starts_with("_local/")
}

pub fn validate_doc_id(id: &str, max_bytes: usize) -> ApiResult<()> {
    if id.is_empty() {
        return Err(ApiError::IllegalDocId(
            "Document id must not be empty".into(),
        ));
    }
    if id.len() > max_bytes {
        // CouchDB's answer when its `max_document_id_length` is set; its default is no limit,
        // but the engine's keys hold at most 250 bytes (docs/compatibility.md).
        return Err(ApiError::IllegalDocId("Document id is too long".into()));
    }
    if id.starts_with('_') && !is_reserved_id(id) {
        return Err(ApiError::IllegalDocId(
            "Only reserved document ids may start with underscore.".into(),
        ));
    }
    Ok(())
}

/// The bucket, if the user may read (or write) document `id` there (`settee_auth::authorize`:
/// `_users` lets a user reach their own document, design documents need a database admin to
/// write).
pub(crate) fn doc_access(
    state: &HttpState,
    req: &Req,
    db: &str,
    id: &str,
    write: bool,
) -> ApiResult<Keyspace> {
    let keyspace = crate::db_api::keyspace(state, db)?;
    if !write {
        settee_http_core::auth_db::check_doc_read(keyspace.bucket(), &req.user, id)?;
    }
    let operation = if write {
        Operation::WriteDoc(id.as_bytes())
    } else {
        Operation::ReadDoc(id.as_bytes())
    };
    require(keyspace.bucket(), &req.user, operation)?;
    Ok(keyspace)
}

pub async fn document(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    id: &str,
) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => {
            let keyspace = doc_access(state, req, db, id, false)?;
            get(state, req, &keyspace, id)
        }
        Method::PUT => {
            let keyspace = doc_access(state, req, db, id, true)?;
            Box::pin(put(state, req, &keyspace, id)).await
        }
        Method::DELETE => {
            let keyspace = doc_access(state, req, db, id, true)?;
            Box::pin(delete(req, &keyspace, id)).await
        }
        Method::POST => {
            let keyspace = doc_access(state, req, db, id, true)?;
            Box::pin(crate::form_upload::post_form(state, req, &keyspace, id)).await
        }
        ref method if method.as_str() == "COPY" => {
            let keyspace = doc_access(state, req, db, id, false)?;
            Box::pin(copy(state, req, &keyspace, id)).await
        }
        _ => Err(not_allowed("DELETE,GET,HEAD,POST,PUT,COPY")),
    }
}

/// Render options from the query string, for the request's user reading `keyspace`.
pub fn render_options(req: &Req, keyspace: &Keyspace) -> ApiResult<RenderOptions> {
    let meta = req.flag("meta", false);
    let atts_since = match req.json_param("atts_since")? {
        Some(serde_json::Value::Array(revs)) => revs
            .iter()
            .map(|rev| parse_rev(rev.as_str().unwrap_or("")))
            .collect::<ApiResult<Vec<_>>>()?,
        Some(_) => return Err(ApiError::BadRequest("atts_since must be a list".into())),
        None => Vec::new(),
    };
    Ok(RenderOptions {
        credentials: credentials_shown(keyspace, &req.user),
        revs: req.flag("revs", false),
        revs_info: meta || req.flag("revs_info", false),
        kept_revisions: Default::default(),
        revs_limit: keyspace.bucket().revs_limit() as usize,
        conflicts: meta || req.flag("conflicts", false),
        deleted_conflicts: meta || req.flag("deleted_conflicts", false),
        local_seq: req.flag("local_seq", false),
        attachments: req.flag("attachments", false),
        atts_since,
        follows: false,
        att_encoding_info: req.flag("att_encoding_info", false),
    })
}

pub fn attachment_fetcher<'a>(
    keyspace: &'a Keyspace,
    id: &'a str,
) -> impl Fn(&[u8; 16]) -> ApiResult<Bytes> + 'a {
    move |md5| {
        keyspace
            .get_attachment(id.as_bytes(), md5)?
            .ok_or_else(|| ApiError::Internal("attachment body missing".into()))
    }
}

/// The record of a live-or-deleted document, treating expired key-value documents as absent.
/// A record that does not decode is an error naming the problem (`corrupt_document`).
pub fn read_doc(keyspace: &Keyspace, id: &str) -> ApiResult<Option<DocRecord>> {
    let record = keyspace.read_record(id.as_bytes())?;
    Ok(record.filter(|record| record.expiry == 0 || record.expiry > keyspace.bucket().now_secs()))
}

/// [`read_doc`] for readers of many documents (`include_docs`, `keys`, `_revs_diff`): a record
/// that does not decode is counted, logged once, and read as absent, so one bad record never
/// fails the whole response (issue 18).
pub fn read_doc_or_skip(keyspace: &Keyspace, id: &str) -> ApiResult<Option<DocRecord>> {
    let record = keyspace.read_record_or_skip(id.as_bytes())?;
    Ok(record.filter(|record| record.expiry == 0 || record.expiry > keyspace.bucket().now_secs()))
}

/// For readers of many documents: whether `leaf`'s body is within the node's document limits.
/// A body past them (stored by an older version that did not enforce them on the KV door) is
/// counted and logged once, and the reader leaves it out instead of sending a body its client
/// may not be able to parse.
pub fn within_limits(keyspace: &Keyspace, id: &str, leaf: &Leaf) -> Result<(), LimitError> {
    keyspace
        .bucket()
        .doc_limits()
        .check(&leaf.body, leaf.json, 0)
        .inspect_err(|error| keyspace.bucket().skip_over_limit(id.as_bytes(), error))
}

fn get(state: &HttpState, req: &Req, keyspace: &Keyspace, id: &str) -> ApiResult<HttpResponse> {
    let mut options = render_options(req, keyspace)?;
    if options.revs_info {
        options.kept_revisions = keyspace.kept_revisions(id.as_bytes())?;
    }
    let record = read_doc(keyspace, id)?;
    if let Some(open_revs) = req.param("open_revs") {
        return crate::attachments_api::open_revs(
            state,
            req,
            keyspace,
            id,
            record.as_ref(),
            open_revs,
            &options,
        );
    }
    let record = record.ok_or_else(ApiError::missing)?;
    let kept: Leaf;
    let leaf: &Leaf = match req.param("rev") {
        Some(text) => {
            let rev = parse_rev(text)?;
            let rev = if req.flag("latest", false) {
                record
                    .tree
                    .leaves_under(&rev)
                    .first()
                    .map(|leaf| leaf.rev.clone())
                    .unwrap_or(rev)
            } else {
                rev
            };
            kept = keyspace
                .revision(id.as_bytes(), &record, &rev)?
                .ok_or_else(ApiError::missing)?;
            &kept
        }
        None => {
            let winner = record.winner().ok_or_else(ApiError::missing)?;
            if winner.deleted {
                return Err(ApiError::deleted());
            }
            winner
        }
    };
    let tag = crate::response::rev_etag(&crate::couch_doc::shown_rev(id, leaf, &options));
    if crate::response::if_none_match(req.header("if-none-match"), &tag) {
        return Ok(crate::response::not_modified(&tag));
    }
    // Multipart when some attachment body goes out with the document: all of them with
    // `attachments=true`, those newer than the client's revisions with `atts_since`.
    let some_body_follows = (options.attachments || !options.atts_since.is_empty())
        && options.has_newer_attachment(&record, leaf);
    if some_body_follows && crate::attachments_api::wants_multipart(req) {
        return crate::attachments_api::multipart_doc(keyspace, id, &record, leaf, &options);
    }
    let body = render_doc(
        id,
        &record,
        leaf,
        &options,
        &attachment_fetcher(keyspace, id),
    )?;
    Ok(with_header(
        json_bytes(StatusCode::OK, body),
        hyper::header::ETAG,
        &tag,
    ))
}

/// The revision a write names: `?rev=`, `If-Match` or the body's `_rev`, which must agree.
fn write_rev(req: &Req, body_rev: Option<RevId>) -> ApiResult<Option<RevId>> {
    let query_rev = req.param("rev").map(parse_rev).transpose()?;
    let header_rev = req
        .header("if-match")
        .map(|value| parse_rev(value.trim_matches('"')))
        .transpose()?;
    let explicit = match (body_rev, query_rev) {
        (Some(body), Some(query)) if body != query => {
            return Err(ApiError::BadRequest(
                "Document rev from request body and query string have different values".into(),
            ))
        }
        (body, query) => body.or(query),
    };
    match (explicit, header_rev) {
        (Some(explicit), Some(header)) if explicit != header => Err(ApiError::BadRequest(
            "Document rev and etag have different values".into(),
        )),
        (explicit, header) => Ok(explicit.or(header)),
    }
}

/// Reads and parses a document body within the configured limits (413 names the document).
pub async fn read_doc_body(state: &HttpState, req: &mut Req, id: &str) -> ApiResult<ParsedDoc> {
    if req
        .header("content-type")
        .is_some_and(|value| value.starts_with("multipart/related"))
    {
        return crate::attachments_api::parse_multipart_doc(state, req, id).await;
    }
    let bytes = req.body_bytes(state.config.max_request_size_bytes).await?;
    if bytes.len() > req.settings.max_document_size_bytes {
        return Err(ApiError::DocumentTooLarge(id.to_string()));
    }
    check_json_limits(&bytes, state.config.max_json_depth)?;
    parse_doc_at(&bytes, Some(id))
}

/// Account documents (in any accounts database, `settee_auth::is_users_db`): a plain
/// `password` is hashed before storage (CouchDB's `before_doc_update`). The accounts' rules
/// are the database's `_design/_auth` validation (`settee_http_core::auth_db`); the one that
/// keeps users from raising themselves — only a database admin sets or changes roles — is
/// also checked here, so it holds while a database has no `_design/_auth` yet (CouchDB writes
/// it in a new accounts database a while after the setting changed; settee when the database
/// is created or the node starts).
pub fn prepare_user_doc(
    state: &HttpState,
    keyspace: &Keyspace,
    user: &UserCtx,
    id: &str,
    doc: &mut ParsedDoc,
) -> ApiResult<()> {
    if !id.starts_with(USER_PREFIX) || doc.deleted {
        return Ok(());
    }
    let mut value: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&doc.body)
            .map_err(|_| ApiError::BadRequest("invalid user document".into()))?;
    if db_access(keyspace.bucket(), user) != DbAccess::Admin {
        let current = keyspace
            .read_winner(id.as_bytes())?
            .filter(|(header, _)| !header.deleted)
            .and_then(|(_, body)| serde_json::from_slice::<serde_json::Value>(&body).ok());
        let roles = |doc: Option<&serde_json::Value>| {
            let mut roles: Vec<String> = doc
                .and_then(|doc| doc.get("roles"))
                .and_then(|roles| roles.as_array())
                .map(|roles| roles.iter().map(|role| role.to_string()).collect())
                .unwrap_or_default();
            roles.sort();
            roles
        };
        let new_roles = roles(Some(&serde_json::Value::Object(value.clone())));
        match &current {
            None if !new_roles.is_empty() => {
                return Err(ApiError::Forbidden("Only _admin may set roles".into()))
            }
            Some(old) if roles(Some(old)) != new_roles => {
                return Err(ApiError::Forbidden("Only _admin may edit roles".into()))
            }
            _ => {}
        }
    }
    let Some(password) = value.get("password").and_then(|password| password.as_str()) else {
        return Ok(());
    };
    let rules = state.node_config.settings();
    settee_auth::check_password(&rules.auth.password_regexp, password).map_err(|refused| {
        match refused {
            settee_auth::PasswordRefused::Requirement(reason) => ApiError::BadRequest(reason),
            settee_auth::PasswordRefused::RulesBroken => {
                ApiError::Forbidden(settee_auth::PASSWORD_RULES_BROKEN.into())
            }
        }
    })?;
    state.auth.hash_user_password(&mut value);
    doc.body = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
    Ok(())
}

/// Saves one parsed document and answers like CouchDB (201 + ETag + Location, or the error).
pub async fn save(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    id: &str,
    doc: ParsedDoc,
    rev: Option<RevId>,
) -> ApiResult<HttpResponse> {
    let outcome = store(state, req, keyspace, id, doc, rev).await?;
    let seqno = saved_seqno(&outcome);
    let batched = req.param("batch") == Some("ok");
    if batched && matches!(outcome, UpdateOutcome::Conflict) {
        // CouchDB acknowledges a batched write before trying it, so a conflict is never
        // reported to the writer: the write is lost, as it is there.
        return Ok(json(StatusCode::ACCEPTED, &json!({"ok": true, "id": id})));
    }
    let rev = outcome_rev(outcome, id)?;
    if batched {
        // CouchDB acknowledges a batched write before it is written, so it has no revision
        // to report; settee has written it already, and answers as CouchDB does.
        return Ok(json(StatusCode::ACCEPTED, &json!({"ok": true, "id": id})));
    }
    let saved = [(id.as_bytes(), seqno)];
    let status = if crate::write_quorum::unmet(req, None, keyspace.bucket(), &saved).await {
        StatusCode::ACCEPTED
    } else {
        StatusCode::CREATED
    };
    let response = json(status, &json!({"ok": true, "id": id, "rev": rev}));
    let response = with_header(response, "etag", &etag(&rev));
    Ok(with_header(
        response,
        "location",
        &crate::location::absolute_uri(req, &[req.db_segment(), id]),
    ))
}

/// Writes one parsed document through every check of the document API (its id, system
/// databases' rules, attachment names, design documents): what `save` and update functions
/// write.
pub async fn store(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    id: &str,
    mut doc: ParsedDoc,
    rev: Option<RevId>,
) -> ApiResult<UpdateOutcome> {
    validate_doc_id(id, state.config.max_key_bytes)?;
    crate::partition_api::validate_partitioned_id(keyspace, id)?;
    if settee_auth::is_users_db(keyspace.bucket().name()) {
        prepare_user_doc(state, keyspace, &req.user, id, &mut doc)?;
    }
    if keyspace.bucket().name() == REPLICATOR_DB {
        prepare_replicator_doc(keyspace, &req.user, id, &mut doc)?;
    }
    for attachment in doc.attachments.iter().flatten() {
        if let AttachmentInput::Data { name, .. } = attachment {
            validate_attachment_name(name)?;
        }
    }
    if id.starts_with("_design/") && !doc.deleted {
        crate::view_api::check_design(state, keyspace, id, &doc.body).await?;
    }
    let new_edits = req.flag("new_edits", true);
    let history = match (&doc.revisions, &rev) {
        (Some(history), _) => history.clone(),
        (None, Some(rev)) => vec![rev.clone()],
        (None, None) => Vec::new(),
    };
    if !new_edits && history.is_empty() {
        return Err(ApiError::BadRequest(
            "new_edits=false requires a revision".into(),
        ));
    }
    crate::partition_api::PartitionRoom::new(req, keyspace).admits(
        keyspace,
        id,
        &doc.body,
        doc.deleted,
        new_edits,
    )?;
    let mut attachments = doc.attachments.unwrap_or_default();
    crate::attachments_api::compress_new(&mut attachments, &req.settings);
    let update = DocUpdate {
        key: id.as_bytes().to_vec(),
        parent: rev,
        history,
        deleted: doc.deleted,
        body: doc.body,
        attachments,
    };
    Ok(keyspace
        .update_doc(update, new_edits, &req.user.writer())
        .await?)
}

/// Refuses attachment names CouchDB refuses: one starting with `_`.
pub fn validate_attachment_name(name: &str) -> ApiResult<()> {
    match name.strip_prefix('_') {
        Some(rest) => Err(ApiError::BadRequest(format!(
            "Attachment name '_{rest}' starts with prohibited character '_'"
        ))),
        None => Ok(()),
    }
}

/// The seqno a saved write got (0 for one not saved: nothing to wait for).
fn saved_seqno(outcome: &UpdateOutcome) -> u64 {
    match outcome {
        UpdateOutcome::Saved { seqno, .. } => *seqno,
        _ => 0,
    }
}

pub fn outcome_rev(outcome: UpdateOutcome, id: &str) -> ApiResult<String> {
    match outcome {
        UpdateOutcome::Saved { rev, .. } => Ok(rev.to_string()),
        refused => Err(outcome_error(&refused, id).unwrap_or(ApiError::Conflict)),
    }
}

/// What a write that was not saved answers (`None`: it was saved).
pub fn outcome_error(outcome: &UpdateOutcome, id: &str) -> Option<ApiError> {
    Some(match outcome {
        UpdateOutcome::Saved { .. } => return None,
        UpdateOutcome::Conflict => ApiError::Conflict,
        UpdateOutcome::MissingStub { name } => ApiError::MissingStub {
            doc: id.to_string(),
            name: name.clone(),
        },
        UpdateOutcome::Invalid(reason) => ApiError::BadRequest(reason.clone()),
        UpdateOutcome::OverLimit(error) => ApiError::over_limit(error, id),
        UpdateOutcome::CorruptRecord(reason) => EngineError::CorruptDocument(reason.clone()).into(),
        // What a validate_doc_update function threw.
        UpdateOutcome::Forbidden(reason) => ApiError::Forbidden(reason.clone()),
        UpdateOutcome::Unauthorized(reason) => ApiError::Unauthorized(reason.clone()),
        UpdateOutcome::ValidationFailed(reason) => ApiError::JsThrew {
            name: "unknown_error",
            reason: reason.clone(),
        },
    })
}

async fn put(
    state: &HttpState,
    req: &mut Req,
    keyspace: &Keyspace,
    id: &str,
) -> ApiResult<HttpResponse> {
    let mut doc = read_doc_body(state, req, id).await?;
    let rev = write_rev(req, doc.rev.take())?;
    save(state, req, keyspace, id, doc, rev).await
}

pub async fn post(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    // Anyone may sign up in an accounts database, which only its members may read: the
    // document's own write rule (below) decides there.
    let keyspace = if settee_auth::is_users_db(db) {
        crate::db_api::keyspace(state, db)?
    } else {
        open(state, req, db, Operation::ReadDb)?
    };
    req.require_json_content_type()?;
    let provisional = "(new document)";
    let mut doc = read_doc_body(state, req, provisional).await?;
    let id = match doc.id.take() {
        Some(id) => id,
        None => state.uuids.configured(&req.settings),
    };
    require(
        keyspace.bucket(),
        &req.user,
        Operation::WriteDoc(id.as_bytes()),
    )?;
    let rev = doc.rev.take();
    save(state, req, &keyspace, &id, doc, rev).await
}

async fn delete(req: &Req, keyspace: &Keyspace, id: &str) -> ApiResult<HttpResponse> {
    let rev = write_rev(req, None)?;
    if keyspace.bucket().name() == REPLICATOR_DB {
        let mut deletion = ParsedDoc {
            deleted: true,
            ..ParsedDoc::default()
        };
        prepare_replicator_doc(keyspace, &req.user, id, &mut deletion)?;
    }
    let Some(record) = keyspace.read_record(id.as_bytes())? else {
        return Err(ApiError::missing());
    };
    let Some(rev) = rev else {
        return Err(ApiError::Conflict);
    };
    let _ = record;
    let update = DocUpdate {
        key: id.as_bytes().to_vec(),
        parent: Some(rev),
        history: Vec::new(),
        deleted: true,
        body: Bytes::from_static(b"{}"),
        attachments: Vec::new(),
    };
    let outcome = keyspace
        .update_doc(update, true, &req.user.writer())
        .await?;
    let saved = [(id.as_bytes(), saved_seqno(&outcome))];
    let rev = outcome_rev(outcome, id)?;
    let status = if crate::write_quorum::unmet(req, None, keyspace.bucket(), &saved).await {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let response = json(status, &json!({"ok": true, "id": id, "rev": rev}));
    Ok(with_header(response, "etag", &etag(&rev)))
}

async fn copy(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    id: &str,
) -> ApiResult<HttpResponse> {
    let destination = req
        .header("destination")
        .ok_or_else(|| ApiError::BadRequest("Destination header is mandatory for COPY.".into()))?;
    // CouchDB copies within the database only: a destination naming a host is refused.
    if destination.contains("://") {
        return Err(ApiError::BadRequest(
            "Destination URL must be relative.".into(),
        ));
    }
    let (target, target_rev) = match destination.split_once("?rev=") {
        Some((target, rev)) => (target.to_string(), Some(parse_rev(rev)?)),
        None => (destination.to_string(), None),
    };
    let target = percent_encoding::percent_decode_str(&target)
        .decode_utf8_lossy()
        .into_owned();
    require(
        keyspace.bucket(),
        &req.user,
        Operation::WriteDoc(target.as_bytes()),
    )?;
    let record = read_doc(keyspace, id)?.ok_or_else(ApiError::missing)?;
    // `?rev=` may name an inner revision whose old body is still kept.
    let kept: Leaf;
    let leaf = match req.param("rev") {
        Some(text) => {
            kept = keyspace
                .revision(id.as_bytes(), &record, &parse_rev(text)?)?
                .ok_or_else(ApiError::missing)?;
            &kept
        }
        None => record
            .winner()
            .filter(|leaf| !leaf.deleted)
            .ok_or_else(ApiError::missing)?,
    };
    let mut attachments = Vec::with_capacity(leaf.attachments.len());
    for meta in &leaf.attachments {
        let data = attachment_fetcher(keyspace, id)(&meta.md5)?;
        attachments.push(AttachmentInput::Data {
            name: meta.name.clone(),
            content_type: meta.content_type.clone(),
            data,
            encoding: meta.encoding,
            revpos: None,
        });
    }
    // What the user may read of it: another user's replication without its credentials.
    let options = RenderOptions::for_reader(credentials_shown(keyspace, &req.user));
    let doc = ParsedDoc {
        body: crate::couch_doc::shown_body(id, leaf, &options),
        attachments: Some(attachments),
        ..ParsedDoc::default()
    };
    save(state, req, keyspace, &target, doc, target_rev).await
}

pub async fn local(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    name: &str,
) -> ApiResult<HttpResponse> {
    let id = format!("_local/{name}");
    let operation = if crate::router::is_get(req) {
        Operation::ReadDoc(id.as_bytes())
    } else {
        Operation::WriteDoc(id.as_bytes())
    };
    let keyspace = open(state, req, db, operation)?;
    let key = name.as_bytes();
    let parse_generation = |text: &str| -> ApiResult<u64> {
        text.strip_prefix("0-")
            .and_then(|number| number.parse().ok())
            .ok_or_else(|| ApiError::BadRequest("Invalid rev format".into()))
    };
    match req.method {
        Method::GET | Method::HEAD => {
            let (generation, body) = keyspace.get_local(key)?.ok_or_else(ApiError::missing)?;
            let mut out = format!(
                "{{\"_id\":{},\"_rev\":\"0-{generation}\"",
                crate::response::json_string(&id)
            )
            .into_bytes();
            let inner = body.trim_ascii();
            if inner.len() > 2 {
                out.push(b',');
                out.extend_from_slice(&inner[1..inner.len() - 1]);
            }
            out.push(b'}');
            Ok(json_bytes(StatusCode::OK, out))
        }
        Method::PUT => {
            let mut doc = read_doc_body(state, req, &id).await?;
            let rev = match (doc.rev_text.take(), req.param("rev")) {
                (Some(text), _) => Some(parse_generation(&text)?),
                (None, Some(text)) => Some(parse_generation(text)?),
                (None, None) => None,
            };
            let body = if doc.deleted { None } else { Some(doc.body) };
            let outcome = keyspace.put_local(key, rev, body).await?;
            local_answer(outcome, &id, StatusCode::CREATED)
        }
        Method::DELETE => {
            let rev = req.param("rev").map(parse_generation).transpose()?;
            let outcome = keyspace.put_local(key, rev, None).await?;
            local_answer(outcome, &id, StatusCode::OK)
        }
        _ => Err(not_allowed("GET,HEAD,PUT,DELETE")),
    }
}

fn local_answer(outcome: LocalOutcome, id: &str, status: StatusCode) -> ApiResult<HttpResponse> {
    match outcome {
        LocalOutcome::Saved { generation } => Ok(json(
            status,
            &json!({"ok": true, "id": id, "rev": format!("0-{generation}")}),
        )),
        LocalOutcome::Conflict => Err(ApiError::Conflict),
        LocalOutcome::NotFound => Err(ApiError::missing()),
    }
}
