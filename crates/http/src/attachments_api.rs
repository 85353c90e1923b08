//! Attachments: standalone GET/HEAD/PUT/DELETE `/{db}/{docid}/{name}`, documents with their
//! attachments as `multipart/related` (GET with `attachments=true`, PUT), and `open_revs`
//! answers as JSON or `multipart/mixed`, the way CouchDB's replicator and PouchDB expect them.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::json;
use settee_engine::record::AttEncoding;
use settee_engine::{AttachmentInput, DocRecord, Keyspace, Leaf, RevId};
use settee_http_wire::attachment_gzip::{gzip, is_compressible};
use settee_http_wire::encoding::gunzip;
use settee_node_config::Settings;

use crate::couch_doc::{parse_doc, parse_rev, render_doc, ParsedDoc, RenderOptions};
use crate::doc_api::{attachment_fetcher, doc_access, read_doc, save};
use crate::error::{ApiError, ApiResult};
use crate::multipart::{self, new_boundary, parse_multipart, write_multipart};
use crate::request::{check_json_limits, Req};
use crate::response::{full, json_bytes, with_header, HttpResponse};
use crate::router::not_allowed;
use crate::HttpState;
use settee_http_wire::range;

fn missing_attachment() -> ApiError {
    ApiError::NotFound("Document is missing attachment".into())
}

pub async fn attachment(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    id: &str,
    name: &str,
) -> ApiResult<HttpResponse> {
    match req.method {
        Method::GET | Method::HEAD => {
            let keyspace = doc_access(state, req, db, id, false)?;
            get(req, &keyspace, id, name)
        }
        Method::PUT => {
            let keyspace = doc_access(state, req, db, id, true)?;
            put(state, req, &keyspace, id, name).await
        }
        Method::DELETE => {
            let keyspace = doc_access(state, req, db, id, true)?;
            delete(state, req, &keyspace, id, name).await
        }
        _ => Err(not_allowed("DELETE,GET,HEAD,PUT")),
    }
}

/// The revision a request names with `?rev=` (a leaf, or an inner revision whose old body is
/// kept), or the live winner.
fn target_leaf(req: &Req, keyspace: &Keyspace, id: &str, record: &DocRecord) -> ApiResult<Leaf> {
    match req.param("rev") {
        Some(text) => keyspace
            .revision(id.as_bytes(), record, &parse_rev(text)?)?
            .ok_or_else(ApiError::missing),
        None => {
            let winner = record.winner().ok_or_else(ApiError::missing)?;
            if winner.deleted {
                return Err(ApiError::deleted());
            }
            Ok(winner.clone())
        }
    }
}

fn get(req: &Req, keyspace: &Keyspace, id: &str, name: &str) -> ApiResult<HttpResponse> {
    let record = read_doc(keyspace, id)?.ok_or_else(ApiError::missing)?;
    let leaf = target_leaf(req, keyspace, id, &record)?;
    let meta = leaf
        .attachments
        .iter()
        .find(|meta| meta.name == name)
        .ok_or_else(missing_attachment)?;
    let digest = BASE64.encode(meta.md5);
    let tag = format!("\"{digest}\"");
    if crate::response::if_none_match(req.header("if-none-match"), &tag) {
        return Ok(crate::response::not_modified(&tag));
    }
    let stored = attachment_fetcher(keyspace, id)(&meta.md5)?;
    if meta.is_gzip() {
        return gzip_stored(req, meta, stored, &tag, &digest);
    }
    let data = stored;
    let size = data.len() as u64;
    let (status, content_type, body, content_range) = match range::parse(req.header("range"), size)
    {
        range::RangeRequest::Whole => (StatusCode::OK, meta.content_type.clone(), data, None),
        range::RangeRequest::Unsatisfiable => return Err(ApiError::RangeNotSatisfiable),
        range::RangeRequest::Ranges(ranges) if ranges.len() == 1 => (
            StatusCode::PARTIAL_CONTENT,
            meta.content_type.clone(),
            range::slice(&data, ranges[0]),
            Some(range::content_range(ranges[0], size)),
        ),
        range::RangeRequest::Ranges(ranges) => {
            let boundary: String = rand::random::<[u8; 16]>()
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            let body = range::byteranges_body(&data, &ranges, &meta.content_type, &boundary);
            let content_type = format!("multipart/byteranges; boundary=\"{boundary}\"");
            (StatusCode::PARTIAL_CONTENT, content_type, body, None)
        }
    };
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    if let Some(content_range) = content_range {
        response = with_header(response, "content-range", &content_range);
    }
    let response = with_header(response, "etag", &tag);
    let response = with_header(response, "content-md5", &digest);
    // CouchDB's attachment answers run in a sandbox if a browser opens them (its `[csp]
    // attachments_enable`, on by default).
    let response = with_header(response, "content-security-policy", "sandbox");
    Ok(with_header(response, "accept-ranges", "bytes"))
}

/// A gzip-stored attachment, as CouchDB answers it: as stored with `Content-Encoding: gzip` to
/// a client that accepts gzip, decompressed to any other; `Range` is not honoured
/// (`Accept-Ranges: none`).
fn gzip_stored(
    req: &Req,
    meta: &settee_engine::AttachmentMeta,
    stored: Bytes,
    tag: &str,
    digest: &str,
) -> ApiResult<HttpResponse> {
    let accepts_gzip = req.header("accept-encoding").is_some_and(|accept| {
        accept.split(',').any(|coding| {
            coding
                .split(';')
                .next()
                .is_some_and(|name| name.trim() == "gzip")
        })
    });
    let body = if accepts_gzip {
        stored
    } else {
        crate::couch_doc::identity_body(meta, stored)?
    };
    let mut response = Response::new(full(body));
    if let Ok(value) = HeaderValue::from_str(&meta.content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    if accepts_gzip {
        response = with_header(response, "content-encoding", "gzip");
    }
    let response = with_header(response, "etag", tag);
    let response = with_header(response, "content-md5", digest);
    let response = with_header(response, "content-security-policy", "sandbox");
    Ok(with_header(response, "accept-ranges", "none"))
}

/// The revision a write names: `?rev=` or `If-Match`.
fn write_rev(req: &Req) -> ApiResult<Option<RevId>> {
    match req.param("rev") {
        Some(text) => Ok(Some(parse_rev(text)?)),
        None => req
            .header("if-match")
            .map(|value| parse_rev(value.trim_matches('"')))
            .transpose(),
    }
}

/// The other attachments of `leaf`, kept as stubs.
fn stubs_except(leaf: Option<&Leaf>, name: &str) -> Vec<AttachmentInput> {
    leaf.map(|leaf| {
        leaf.attachments
            .iter()
            .filter(|meta| meta.name != name)
            .map(|meta| AttachmentInput::Stub {
                name: meta.name.clone(),
                revpos: None,
            })
            .collect()
    })
    .unwrap_or_default()
}

async fn put(
    state: &HttpState,
    req: &mut Req,
    keyspace: &Keyspace,
    id: &str,
    name: &str,
) -> ApiResult<HttpResponse> {
    if name.is_empty() || name.len() > state.config.max_key_bytes * 4 {
        return Err(ApiError::BadRequest(
            "Attachment name is empty or too long".into(),
        ));
    }
    crate::doc_api::validate_attachment_name(name)?;
    let rev = write_rev(req)?;
    let content_type = req
        .header("content-type")
        .unwrap_or("application/octet-stream")
        .to_string();
    let data = req
        .body_bytes(state.config.max_attachment_size_bytes)
        .await?;
    let record = read_doc(keyspace, id)?;
    let parent = match (&rev, &record) {
        (Some(rev), Some(record)) => Some(record.leaf(rev).ok_or(ApiError::Conflict)?),
        (Some(_), None) => return Err(ApiError::Conflict),
        // A new document holding just this attachment, as CouchDB does.
        (None, None) => None,
        (None, Some(record)) => match record.winner() {
            Some(winner) if winner.deleted => None,
            _ => return Err(ApiError::Conflict),
        },
    };
    let mut attachments = stubs_except(parent, name);
    attachments.push(AttachmentInput::Data {
        name: name.to_string(),
        content_type,
        data,
        encoding: AttEncoding::Identity,
        revpos: None,
    });
    let doc = ParsedDoc {
        body: parent.map_or_else(|| Bytes::from_static(b"{}"), |leaf| leaf.body.clone()),
        attachments: Some(attachments),
        ..ParsedDoc::default()
    };
    let mut response = save(state, req, keyspace, id, doc, rev).await?;
    // CouchDB points at the attachment, and sends no ETag for it.
    if matches!(
        response.status(),
        StatusCode::CREATED | StatusCode::ACCEPTED
    ) {
        let location = crate::location::absolute_uri(req, &[req.db_segment(), id, name]);
        let headers = response.headers_mut();
        headers.remove(hyper::header::ETAG);
        if let Ok(value) = HeaderValue::from_str(&location) {
            headers.insert(hyper::header::LOCATION, value);
        }
    }
    Ok(response)
}

async fn delete(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    id: &str,
    name: &str,
) -> ApiResult<HttpResponse> {
    let rev = write_rev(req)?.ok_or(ApiError::Conflict)?;
    let record = read_doc(keyspace, id)?.ok_or_else(ApiError::missing)?;
    let leaf = record.leaf(&rev).ok_or(if record.tree.contains(&rev) {
        ApiError::Conflict
    } else {
        ApiError::MissingRev
    })?;
    if !leaf.attachments.iter().any(|meta| meta.name == name) {
        return Err(missing_attachment());
    }
    let doc = ParsedDoc {
        body: leaf.body.clone(),
        attachments: Some(stubs_except(Some(leaf), name)),
        ..ParsedDoc::default()
    };
    let mut response = save(state, req, keyspace, id, doc, Some(rev)).await?;
    if matches!(
        response.status(),
        StatusCode::CREATED | StatusCode::ACCEPTED
    ) {
        // 200 whatever the write quorum asked: CouchDB answers an attachment's deletion so.
        *response.status_mut() = StatusCode::OK;
        let headers = response.headers_mut();
        headers.remove(hyper::header::ETAG);
        headers.remove(hyper::header::LOCATION);
    }
    Ok(response)
}

/// Whether the client takes a multipart answer for a document (`multipart/related`, or a
/// wildcard that covers it, as CouchDB's `accepts_content_type` reads `Accept`).
pub fn wants_multipart(req: &Req) -> bool {
    accepts(req, "multipart/related") || accepts(req, "multipart/mixed")
}

/// Whether `Accept` names `media` or a wildcard covering it (`multipart/*`, `*/*`) with a
/// non-zero quality. A request without `Accept` gets JSON from settee.
pub fn accepts(req: &Req, media: &str) -> bool {
    let Some(accept) = req.header("accept") else {
        return false;
    };
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    accept.split(',').any(|item| {
        let mut params = item.split(';');
        let range = params.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = params.any(|param| {
            param
                .trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        let covers = range == media
            || range == "*/*"
            || range
                .strip_suffix("/*")
                .is_some_and(|prefix| prefix == kind);
        covers && !refused
    })
}

/// One document with `"follows": true` attachment stubs, then one part per attachment.
/// One MIME part: its headers and its body.
type Part = (Vec<(String, String)>, Bytes);

fn related_parts(
    keyspace: &Keyspace,
    id: &str,
    record: &DocRecord,
    leaf: &Leaf,
    options: &RenderOptions,
) -> ApiResult<Vec<Part>> {
    let mut options = options.clone();
    options.follows = true;
    let doc = render_doc(
        id,
        record,
        leaf,
        &options,
        &attachment_fetcher(keyspace, id),
    )?;
    let mut parts = vec![(
        vec![("Content-Type".to_string(), "application/json".to_string())],
        Bytes::from(doc),
    )];
    let known_pos = options.known_attachment_pos(record);
    for meta in &leaf.attachments {
        if known_pos.is_some_and(|pos| meta.revpos <= pos) {
            continue;
        }
        // Sent as stored, as CouchDB sends it: a gzip-stored body says so in its part.
        let data = attachment_fetcher(keyspace, id)(&meta.md5)?;
        let mut headers = vec![
            (
                "Content-Disposition".to_string(),
                format!("attachment; filename={}", json!(meta.name)),
            ),
            ("Content-Type".to_string(), meta.content_type.clone()),
            ("Content-Length".to_string(), data.len().to_string()),
        ];
        if meta.is_gzip() {
            headers.push(("Content-Encoding".to_string(), "gzip".to_string()));
        }
        parts.push((headers, data));
    }
    Ok(parts)
}

fn multipart_response(subtype: &str, parts: &[(Vec<(String, String)>, Bytes)]) -> HttpResponse {
    let bodies: Vec<&[u8]> = parts.iter().map(|(_, body)| body.as_ref()).collect();
    let boundary = new_boundary(&bodies);
    let body = write_multipart(&boundary, parts);
    let mut response = Response::new(full(body));
    if let Ok(value) =
        HeaderValue::from_str(&format!("multipart/{subtype}; boundary=\"{boundary}\""))
    {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

pub fn multipart_doc(
    keyspace: &Keyspace,
    id: &str,
    record: &DocRecord,
    leaf: &Leaf,
    options: &RenderOptions,
) -> ApiResult<HttpResponse> {
    let parts = related_parts(keyspace, id, record, leaf, options)?;
    let response = multipart_response("related", &parts);
    Ok(with_header(response, "etag", &format!("\"{}\"", leaf.rev)))
}

/// `GET /{db}/{docid}?open_revs=all|[...]`: every requested leaf, or `{"missing": rev}`.
pub fn open_revs(
    _state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    id: &str,
    record: Option<&DocRecord>,
    open_revs: &str,
    options: &RenderOptions,
) -> ApiResult<HttpResponse> {
    let latest = req.flag("latest", false);
    let requested: Option<Vec<RevId>> = if open_revs == "all" {
        None
    } else {
        let list: Vec<String> = serde_json::from_str(open_revs).map_err(|_| {
            ApiError::BadRequest("Invalid open_revs: expected \"all\" or a JSON list".into())
        })?;
        Some(
            list.iter()
                .map(|text| parse_rev(text))
                .collect::<ApiResult<_>>()?,
        )
    };
    let mut found: Vec<std::borrow::Cow<'_, Leaf>> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    match (&requested, record) {
        (None, None) => return Err(ApiError::missing()),
        (None, Some(record)) => found.extend(record.leaves.iter().map(std::borrow::Cow::Borrowed)),
        (Some(revs), record) => {
            for rev in revs {
                let candidates: Vec<RevId> = match record {
                    Some(record) if latest => {
                        let leaves = record.tree.leaves_under(rev);
                        if leaves.is_empty() {
                            vec![rev.clone()]
                        } else {
                            leaves.into_iter().map(|leaf| leaf.rev).collect()
                        }
                    }
                    _ => vec![rev.clone()],
                };
                for candidate in candidates {
                    // A leaf, or an inner revision whose old body is still kept.
                    let leaf = match record {
                        Some(record) => match record.leaf(&candidate) {
                            Some(leaf) => Some(std::borrow::Cow::Borrowed(leaf)),
                            None => keyspace
                                .revision(id.as_bytes(), record, &candidate)?
                                .map(std::borrow::Cow::Owned),
                        },
                        None => None,
                    };
                    match leaf {
                        Some(leaf) if !found.iter().any(|seen| seen.rev == leaf.rev) => {
                            found.push(leaf)
                        }
                        Some(_) => {}
                        None => missing.push(candidate.to_string()),
                    }
                }
            }
        }
    }
    // A revision past the document limits (stored by an older version) is that revision's
    // error, never the whole response's (issue 18).
    let mut refused: Vec<String> = Vec::new();
    found.retain(
        |leaf| match crate::doc_api::within_limits(keyspace, id, leaf) {
            Ok(()) => true,
            Err(error) => {
                let error = ApiError::over_limit(&error, id);
                refused.push(
                    json!({"error": {"id": id, "rev": leaf.rev.to_string(),
                    "error": error.code(), "reason": error.to_string()}})
                    .to_string(),
                );
                false
            }
        },
    );
    let multipart = accepts(req, "multipart/mixed");
    if multipart {
        let mut parts = Vec::new();
        for leaf in &found {
            let record = record.ok_or_else(ApiError::missing)?;
            // A multipart/related part when some attachment body follows: as CouchDB sends
            // revisions to a replicator, every attachment newer than `atts_since` (all of
            // them without it), `attachments=true` or not.
            if options.has_newer_attachment(record, leaf) {
                let inner = related_parts(keyspace, id, record, leaf, options)?;
                let bodies: Vec<&[u8]> = inner.iter().map(|(_, body)| body.as_ref()).collect();
                let boundary = new_boundary(&bodies);
                parts.push((
                    vec![(
                        "Content-Type".to_string(),
                        format!("multipart/related; boundary=\"{boundary}\""),
                    )],
                    write_multipart(&boundary, &inner),
                ));
            } else {
                let doc = render_doc(id, record, leaf, options, &attachment_fetcher(keyspace, id))?;
                parts.push((
                    vec![("Content-Type".to_string(), "application/json".to_string())],
                    Bytes::from(doc),
                ));
            }
        }
        for rev in &missing {
            parts.push((
                vec![(
                    "Content-Type".to_string(),
                    "application/json; error=\"true\"".to_string(),
                )],
                Bytes::from(json!({"missing": rev}).to_string()),
            ));
        }
        for error in &refused {
            parts.push((
                vec![(
                    "Content-Type".to_string(),
                    "application/json; error=\"true\"".to_string(),
                )],
                Bytes::from(error.clone()),
            ));
        }
        return Ok(multipart_response("mixed", &parts));
    }
    let mut out = b"[".to_vec();
    let mut first = true;
    for leaf in &found {
        let record = record.ok_or_else(ApiError::missing)?;
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(b"{\"ok\":");
        out.extend_from_slice(&render_doc(
            id,
            record,
            leaf,
            options,
            &attachment_fetcher(keyspace, id),
        )?);
        out.push(b'}');
    }
    for rev in &missing {
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(json!({"missing": rev}).to_string().as_bytes());
    }
    for error in &refused {
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(error.as_bytes());
    }
    out.push(b']');
    Ok(json_bytes(StatusCode::OK, out))
}

/// `PUT /{db}/{docid}` with `multipart/related`: the JSON document first, its `"follows": true`
/// attachments' bodies after it, in order.
pub async fn parse_multipart_doc(
    state: &HttpState,
    req: &mut Req,
    id: &str,
) -> ApiResult<ParsedDoc> {
    let content_type = req.header("content-type").unwrap_or("").to_string();
    let boundary = multipart::boundary(&content_type)
        .ok_or_else(|| ApiError::BadRequest("multipart/related needs a boundary".into()))?;
    let body = req.body_bytes(state.config.max_request_size_bytes).await?;
    let parts = parse_multipart(&body, &boundary)
        .map_err(|reason| ApiError::BadRequest(format!("bad multipart body: {reason}")))?;
    let (first, rest) = parts
        .split_first()
        .ok_or_else(|| ApiError::BadRequest("empty multipart body".into()))?;
    if first.body.len() > req.settings.max_document_size_bytes {
        return Err(ApiError::DocumentTooLarge(id.to_string()));
    }
    check_json_limits(&first.body, state.config.max_json_depth)?;
    let mut doc = parse_doc(&first.body)?;
    if doc.follows.len() > rest.len() {
        return Err(ApiError::BadRequest(format!(
            "multipart body has {} attachment parts for {} attachments that follow",
            rest.len(),
            doc.follows.len()
        )));
    }
    let mut attachments = doc.attachments.take().unwrap_or_default();
    for (follows, part) in doc.follows.drain(..).zip(rest) {
        let sent = part.body.len() as u64;
        let encoding = if follows.gzip {
            // Stored as it came; its identity length is checked by decompressing it.
            let identity =
                gunzip(&part.body, state.config.max_attachment_size_bytes).map_err(|_| {
                    ApiError::BadRequest(format!("attachment {} is not gzipped", follows.name))
                })?;
            let identity_length = identity.len() as u64;
            let lengths_agree = follows
                .length
                .is_none_or(|length| length == identity_length)
                && follows.encoded_length.is_none_or(|length| length == sent);
            if !lengths_agree {
                return Err(ApiError::BadRequest(format!(
                    "attachment {} has the wrong length",
                    follows.name
                )));
            }
            AttEncoding::Gzip { identity_length }
        } else {
            if follows.length.is_some_and(|length| length != sent) {
                return Err(ApiError::BadRequest(format!(
                    "attachment {} has the wrong length",
                    follows.name
                )));
            }
            AttEncoding::Identity
        };
        attachments.push(AttachmentInput::Data {
            name: follows.name,
            content_type: follows.content_type,
            data: part.body.clone(),
            encoding,
            revpos: follows.revpos,
        });
    }
    let position = |input: &AttachmentInput| {
        let name = match input {
            AttachmentInput::Stub { name, .. } | AttachmentInput::Data { name, .. } => name,
        };
        doc.attachment_order.iter().position(|known| known == name)
    };
    attachments.sort_by_key(position);
    doc.attachments = Some(attachments);
    Ok(doc)
}

/// Stores new attachment bodies of compressible content types gzipped, as CouchDB does
/// (`[attachments] compressible_types` / `compression_level`, docs/format/document.md).
pub(crate) fn compress_new(attachments: &mut [AttachmentInput], settings: &Settings) {
    if settings.compression_level == 0 {
        return;
    }
    for input in attachments {
        if let AttachmentInput::Data {
            content_type,
            data,
            encoding: encoding @ AttEncoding::Identity,
            ..
        } = input
        {
            if is_compressible(content_type, &settings.compressible_types) {
                let identity_length = data.len() as u64;
                *data = gzip(data, settings.compression_level);
                *encoding = AttEncoding::Gzip { identity_length };
            }
        }
    }
}
