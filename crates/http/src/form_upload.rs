//! `POST /{db}/{docid}` with `multipart/form-data`: an HTML form adding attachments to a
//! document, as CouchDB takes it (Futon and old applications upload files this way).
//!
//! The form's `_rev` field names the revision to edit; each `_attachments` file field adds (or
//! replaces) the attachment named by its file name, with the part's content type; a `_doc`
//! field, if any, is the document's new JSON body instead of the revision's. As CouchDB, the
//! request must come with a `Referer` naming the host it was sent to (a form from another
//! site cannot write), and any other content type is 415.

use bytes::Bytes;
use settee_engine::{AttachmentInput, Keyspace};

use crate::couch_doc::{parse_doc, parse_rev, ParsedDoc};
use crate::doc_api::{read_doc, save};
use crate::error::{ApiError, ApiResult};
use crate::multipart::{boundary, parse_multipart};
use crate::request::{check_json_limits, Req};
use crate::response::HttpResponse;
use crate::HttpState;

/// `name` and `filename` of a part's `Content-Disposition: form-data; name="x"; filename="y"`.
pub fn disposition(header: &str) -> (Option<String>, Option<String>) {
    let mut name = None;
    let mut filename = None;
    let mut items = header.split(';').map(str::trim);
    if !items
        .next()
        .is_some_and(|kind| kind.eq_ignore_ascii_case("form-data"))
    {
        return (None, None);
    }
    for item in items {
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|inner| inner.strip_suffix('"'))
            .unwrap_or(value)
            .to_string();
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(value),
            "filename" => filename = Some(value),
            _ => {}
        }
    }
    (name, filename)
}

/// CouchDB's check that a form was posted from the node's own pages: a `Referer` whose host
/// (and port) is the host the request was sent to.
fn check_referer(req: &Req) -> ApiResult<()> {
    let referer = req
        .header("referer")
        .ok_or_else(|| ApiError::BadRequest("Referer header required.".into()))?;
    let host = req
        .header(&req.settings.x_forwarded_host)
        .or_else(|| req.header("host"));
    let referer_host = referer
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""));
    match (referer_host, host) {
        (Some(referer_host), Some(host)) if referer_host.eq_ignore_ascii_case(host.trim()) => {
            Ok(())
        }
        _ => Err(ApiError::BadRequest(
            "Referer header must match host.".into(),
        )),
    }
}

pub async fn post_form(
    state: &HttpState,
    req: &mut Req,
    keyspace: &Keyspace,
    id: &str,
) -> ApiResult<HttpResponse> {
    check_referer(req)?;
    let content_type = req.header("content-type").unwrap_or("").to_string();
    if !content_type.starts_with("multipart/form-data") {
        return Err(ApiError::BadContentType("multipart/form-data"));
    }
    let boundary = boundary(&content_type)
        .ok_or_else(|| ApiError::BadRequest("multipart/form-data needs a boundary".into()))?;
    let body = req.body_bytes(state.config.max_request_size_bytes).await?;
    let parts = parse_multipart(&body, &boundary)
        .map_err(|reason| ApiError::BadRequest(format!("bad multipart body: {reason}")))?;
    let mut rev_text = None;
    let mut doc_json: Option<Bytes> = None;
    let mut files = Vec::new();
    for part in &parts {
        let (name, filename) = disposition(part.header("content-disposition").unwrap_or(""));
        match (name.as_deref(), filename) {
            (Some("_rev"), _) => {
                rev_text = Some(String::from_utf8_lossy(&part.body).trim().to_string())
            }
            (Some("_doc"), _) => doc_json = Some(part.body.clone()),
            (Some("_attachments"), Some(filename)) if !filename.is_empty() => {
                crate::doc_api::validate_attachment_name(&filename)?;
                files.push(AttachmentInput::Data {
                    name: filename,
                    content_type: part
                        .header("content-type")
                        .unwrap_or("application/octet-stream")
                        .to_string(),
                    data: part.body.clone(),
                    encoding: settee_engine::record::AttEncoding::Identity,
                    revpos: None,
                });
            }
            _ => {}
        }
    }
    let mut doc = match doc_json {
        Some(json) => {
            if json.len() > req.settings.max_document_size_bytes {
                return Err(ApiError::DocumentTooLarge(id.to_string()));
            }
            check_json_limits(&json, state.config.max_json_depth)?;
            parse_doc(&json)?
        }
        None => ParsedDoc::default(),
    };
    let rev = match rev_text {
        Some(text) => Some(parse_rev(&text)?),
        None => doc.rev.take(),
    };
    let record = read_doc(keyspace, id)?;
    let leaf = match (&rev, &record) {
        (Some(rev), Some(record)) => Some(record.leaf(rev).ok_or(ApiError::Conflict)?),
        (Some(_), None) => return Err(ApiError::missing()),
        (None, Some(record)) if record.winner().is_some_and(|winner| !winner.deleted) => {
            return Err(ApiError::Conflict)
        }
        (None, _) => None,
    };
    // The revision's attachments stay, except those the form replaces.
    let mut attachments: Vec<AttachmentInput> = leaf
        .map(|leaf| {
            leaf.attachments
                .iter()
                .filter(|meta| {
                    !files.iter().any(|file| {
                        matches!(file, AttachmentInput::Data { name, .. } if *name == meta.name)
                    })
                })
                .map(|meta| AttachmentInput::Stub {
                    name: meta.name.clone(),
                    revpos: None,
                })
                .collect()
        })
        .unwrap_or_default();
    attachments.extend(files);
    if doc.body.is_empty() {
        doc.body = leaf.map_or_else(|| Bytes::from_static(b"{}"), |leaf| leaf.body.clone());
    }
    doc.attachments = Some(attachments);
    let mut response = save(state, req, keyspace, id, doc, rev).await?;
    // CouchDB answers a form with the ETag only.
    response.headers_mut().remove(hyper::header::LOCATION);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_are_read() {
        assert_eq!(
            disposition("form-data; name=\"_attachments\"; filename=\"file.txt\""),
            (Some("_attachments".into()), Some("file.txt".into()))
        );
        assert_eq!(
            disposition("form-data; name=_rev"),
            (Some("_rev".into()), None)
        );
        assert_eq!(disposition("attachment; name=\"x\""), (None, None));
        assert_eq!(disposition(""), (None, None));
    }
}
