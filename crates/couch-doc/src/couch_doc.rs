//! CouchDB document JSON <-> engine values.
//!
//! Incoming: the top-level members are split once (values kept as the exact bytes the client
//! sent); CouchDB's underscore members become engine fields, the rest becomes the stored body.
//! Outgoing: `_id`, `_rev` and friends are spliced around the stored body bytes, so rendering a
//! document copies its body instead of re-serialising it.

use std::fmt::Write as _;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use settee_engine::record::AttEncoding;
use settee_engine::{AttachmentInput, AttachmentMeta, DocRecord, Leaf, RevId, REV_HASH_BYTES_MAX};

use crate::replicator_docs::{hide_credentials, CredentialsShown};
use settee_http_core::error::{ApiError, ApiResult};
use settee_http_core::response::json_string;

/// A document as a client wrote it.
#[derive(Debug, Default)]
pub struct ParsedDoc {
    pub id: Option<String>,
    pub rev: Option<RevId>,
    /// `_rev` as written (`_local` documents use `0-N`, which is not a document revision).
    pub rev_text: Option<String>,
    pub deleted: bool,
    /// `_revisions` as a history, newest first.
    pub revisions: Option<Vec<RevId>>,
    pub attachments: Option<Vec<AttachmentInput>>,
    /// Attachments marked `"follows": true` (multipart uploads), with their metadata.
    pub follows: Vec<Follows>,
    /// Every `_attachments` name in the order the writer gave them (CouchDB keeps that
    /// order; a multipart upload puts its followers back in it).
    pub attachment_order: Vec<String>,
    /// The JSON object without underscore members.
    pub body: Bytes,
}

/// The top-level members of a JSON object in order, each value as the exact bytes stored.
pub(crate) struct Members<'a>(pub(crate) Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: &'de RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

fn first_byte(bytes: &[u8]) -> Option<u8> {
    bytes
        .iter()
        .copied()
        .find(|byte| !byte.is_ascii_whitespace())
}

/// Parses one document body (already depth-checked by the caller).
pub fn parse_doc(bytes: &[u8]) -> ApiResult<ParsedDoc> {
    parse_doc_at(bytes, None)
}

/// [`parse_doc`] of a body written to `path_id` (the request's path names the document; the
/// body's `_id`, when there is one, still decides which document it is).
pub fn parse_doc_at(bytes: &[u8], path_id: Option<&str>) -> ApiResult<ParsedDoc> {
    if first_byte(bytes) != Some(b'{') {
        return Err(
            if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
                ApiError::BadRequest("Document must be a JSON object".into())
            } else {
                ApiError::invalid_json()
            },
        );
    }
    let members: Members = serde_json::from_slice(bytes).map_err(|_| ApiError::invalid_json())?;
    let mut doc = ParsedDoc::default();
    let mut revisions = None;
    let mut body = Vec::with_capacity(bytes.len());
    body.push(b'{');
    for (key, value) in members.0 {
        // The replicator's state members of `_replicator` documents are body members in
        // CouchDB (clients see and may echo them).
        if !key.starts_with('_')
            || key.starts_with("_replication_") && REPLICATION_MEMBERS.contains(&key.as_str())
        {
            if body.len() > 1 {
                body.push(b',');
            }
            body.extend_from_slice(json_string(&key).as_bytes());
            body.push(b':');
            body.extend_from_slice(value.get().as_bytes());
            continue;
        }
        match key.as_str() {
            "_id" => {
                let id: String = serde_json::from_str(value.get())
                    .map_err(|_| ApiError::IllegalDocId("Document id must be a string".into()))?;
                doc.id = Some(id);
            }
            "_rev" => {
                let text: String = serde_json::from_str(value.get())
                    .map_err(|_| ApiError::BadRequest("Invalid rev format".into()))?;
                if !text.starts_with("0-") {
                    doc.rev = Some(parse_rev(&text)?);
                }
                doc.rev_text = Some(text);
            }
            "_deleted" => {
                doc.deleted = serde_json::from_str::<bool>(value.get()).unwrap_or(false);
            }
            // Read once the document's id is known: a `_local` document has no history.
            "_revisions" => revisions = Some(value),
            "_attachments" => {
                let (inputs, follows, order) = parse_attachments(value.get())?;
                doc.attachments = Some(inputs);
                doc.follows = follows;
                doc.attachment_order = order;
            }
            // Output-only members that clients echo back; CouchDB ignores them on write.
            "_conflicts" | "_deleted_conflicts" | "_local_seq" | "_revs_info" => {}
            other => {
                return Err(ApiError::DocValidation(format!(
                    "Bad special document member: {other}"
                )))
            }
        }
    }
    body.push(b'}');
    doc.body = Bytes::from(body);
    if let Some(raw) = revisions {
        let local = doc
            .id
            .as_deref()
            .or(path_id)
            .is_some_and(|id| id.starts_with("_local/"));
        if local {
            // CouchDB checks the member's types and keeps no history for a `_local`
            // document (its revision is a counter): `start` 0 is a replicator's usual value.
            check_revision_types(raw.get())?;
        } else {
            doc.revisions = Some(parse_revisions(raw.get())?);
        }
    }
    Ok(doc)
}

/// The types CouchDB requires of `_revisions`: an object whose `start` is an integer and
/// whose `ids` is an array of strings.
fn check_revision_types(raw: &str) -> ApiResult<()> {
    let invalid = |reason: &str| Err(ApiError::DocValidation(reason.to_string()));
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|_| ApiError::invalid_json())?;
    let Some(object) = value.as_object() else {
        return invalid("_revisions isn't an object.");
    };
    if !object
        .get("start")
        .is_some_and(|start| start.is_i64() || start.is_u64())
    {
        return invalid("_revisions.start isn't an integer.");
    }
    let Some(ids) = object.get("ids").and_then(serde_json::Value::as_array) else {
        return invalid("_revisions.ids isn't a array.");
    };
    if !ids.iter().all(serde_json::Value::is_string) {
        return invalid("RevId isn't a string");
    }
    Ok(())
}

/// Underscore members CouchDB keeps in the body of `_replicator` documents.
const REPLICATION_MEMBERS: [&str; 6] = [
    "_replication_state",
    "_replication_state_time",
    "_replication_state_reason",
    "_replication_id",
    "_replication_stats",
    "_replication_start_time",
];

pub fn parse_rev(text: &str) -> ApiResult<RevId> {
    RevId::parse(text).ok_or_else(|| ApiError::BadRequest("Invalid rev format".into()))
}

/// `_revisions` (`{"start": N, "ids": [newest, ..., oldest]}`) as a history, newest first.
///
/// Everything that reaches the revision tree is range-checked here, with CouchDB's
/// `doc_validation` errors: `start` is an integer of at most `u64::MAX` and at least the number
/// of ids (so every generation is 1 or more), and every id is a non-empty string of at most
/// [`REV_HASH_BYTES_MAX`] bytes. 0.1.0 let `start` 2^32 through and stored the document without
/// its revision, which hid every document of the database (issue 18).
fn parse_revisions(raw: &str) -> ApiResult<Vec<RevId>> {
    let invalid = |reason: &str| ApiError::DocValidation(reason.to_string());
    let value: serde_json::Value =
        serde_json::from_str(raw).map_err(|_| ApiError::invalid_json())?;
    let Some(object) = value.as_object() else {
        return Err(invalid("_revisions isn't an object."));
    };
    let start = match object.get("start") {
        Some(serde_json::Value::Number(number)) if number.is_u64() => {
            number.as_u64().unwrap_or_default()
        }
        Some(serde_json::Value::Number(number)) if number.is_i64() => {
            return Err(invalid("_revisions.start must be 1 or more."))
        }
        Some(serde_json::Value::Number(number))
            if number.as_f64().is_some_and(|n| n.fract() == 0.0) =>
        {
            return Err(invalid(
                "_revisions.start is larger than 18446744073709551615.",
            ))
        }
        _ => return Err(invalid("_revisions.start isn't an integer.")),
    };
    let Some(ids) = object.get("ids").and_then(serde_json::Value::as_array) else {
        return Err(invalid("_revisions.ids isn't a array."));
    };
    if ids.is_empty() {
        return Err(invalid("_revisions.ids is empty."));
    }
    if start < ids.len() as u64 {
        return Err(invalid(
            "_revisions.start is smaller than the number of _revisions.ids.",
        ));
    }
    ids.iter()
        .enumerate()
        .map(|(index, id)| {
            let hash = id.as_str().ok_or_else(|| invalid("RevId isn't a string"))?;
            let rev = RevId::new(start - index as u64, hash);
            if !rev.is_valid() {
                return Err(invalid(&format!(
                    "RevId must be 1 to {REV_HASH_BYTES_MAX} bytes long"
                )));
            }
            Ok(rev)
        })
        .collect()
}

/// An attachment whose body follows in a multipart part: name, content type, the `length`
/// (and `encoded_length`) the stub gives, and whether the part is gzipped (`"encoding":
/// "gzip"`, as CouchDB's replicator sends stored-compressed attachments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follows {
    pub name: String,
    pub content_type: String,
    pub length: Option<u64>,
    pub encoded_length: Option<u64>,
    pub gzip: bool,
    /// Kept by replicated (`new_edits=false`) writes, as for inline data.
    pub revpos: Option<u64>,
}

fn parse_attachments(raw: &str) -> ApiResult<(Vec<AttachmentInput>, Vec<Follows>, Vec<String>)> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
        .map_err(|_| ApiError::BadRequest("_attachments must be an object".into()))?;
    let mut inputs = Vec::with_capacity(map.len());
    let mut follows = Vec::new();
    let order: Vec<String> = map.keys().cloned().collect();
    for (name, spec) in map {
        let content_type = spec
            .get("content_type")
            .and_then(|value| value.as_str())
            .unwrap_or("application/octet-stream")
            .to_string();
        if spec.get("stub").and_then(|value| value.as_bool()) == Some(true) {
            let revpos = spec.get("revpos").and_then(|value| value.as_u64());
            inputs.push(AttachmentInput::Stub { name, revpos });
        } else if spec.get("follows").and_then(|value| value.as_bool()) == Some(true) {
            follows.push(Follows {
                name,
                content_type,
                length: spec.get("length").and_then(|value| value.as_u64()),
                encoded_length: spec.get("encoded_length").and_then(|value| value.as_u64()),
                gzip: spec.get("encoding").and_then(|value| value.as_str()) == Some("gzip"),
                revpos: spec.get("revpos").and_then(|value| value.as_u64()),
            });
        } else if let Some(data) = spec.get("data").and_then(|value| value.as_str()) {
            let data = BASE64
                .decode(data.as_bytes())
                .map_err(|_| ApiError::BadRequest("Invalid attachment data".into()))?;
            inputs.push(AttachmentInput::Data {
                name,
                content_type,
                data: Bytes::from(data),
                encoding: AttEncoding::Identity,
                revpos: spec.get("revpos").and_then(|value| value.as_u64()),
            });
        } else {
            return Err(ApiError::BadRequest(format!(
                "Invalid attachment {name}: needs data, stub or follows"
            )));
        }
    }
    Ok((inputs, follows, order))
}

/// What to add around a document body when rendering it, and what the reader may see of it.
/// (No `Default`: every read names its reader, see [`RenderOptions::for_reader`].)
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// Whose replication credentials the reader sees (`replicator_docs.rs`).
    pub credentials: CredentialsShown,
    pub revs: bool,
    pub revs_info: bool,
    pub conflicts: bool,
    pub deleted_conflicts: bool,
    pub local_seq: bool,
    /// Inline attachment data (base64) instead of stubs.
    pub attachments: bool,
    /// Inline only attachments newer than these revisions.
    pub atts_since: Vec<RevId>,
    /// Mark attachments `"follows": true` (multipart responses) instead of inlining them.
    pub follows: bool,
    /// `att_encoding_info=true`: stubs and inline data say how a gzip-stored body is stored.
    pub att_encoding_info: bool,
    /// Inner revisions whose old bodies are kept (`revs_info` says "available" for them).
    pub kept_revisions: std::collections::HashSet<RevId>,
    /// `_revisions` lists at most this many ids (the database's `_revs_limit`: CouchDB cuts
    /// the path it reads to it, so a lowered limit shows before compaction stems the tree).
    pub revs_limit: usize,
}

impl RenderOptions {
    /// The document alone (no revision history, conflicts or attachment bodies), as
    /// `credentials` says the reader may see it.
    pub fn for_reader(credentials: CredentialsShown) -> RenderOptions {
        RenderOptions {
            credentials,
            revs: false,
            revs_info: false,
            conflicts: false,
            deleted_conflicts: false,
            local_seq: false,
            attachments: false,
            atts_since: Vec::new(),
            follows: false,
            att_encoding_info: false,
            kept_revisions: Default::default(),
            revs_limit: usize::MAX,
        }
    }

    /// Whether some attachment of `leaf` is newer than the `atts_since` revisions (every one
    /// is without them), so its body would go out with the document.
    pub fn has_newer_attachment(&self, record: &DocRecord, leaf: &Leaf) -> bool {
        let known_pos = self.known_attachment_pos(record);
        leaf.attachments
            .iter()
            .any(|meta| known_pos.is_none_or(|pos| meta.revpos > pos))
    }

    /// The newest generation among `atts_since` revisions this document has: attachments
    /// added at or before it are known to the client and go out as stubs.
    pub fn known_attachment_pos(&self, record: &DocRecord) -> Option<u64> {
        self.atts_since
            .iter()
            .filter(|rev| record.tree.contains(rev))
            .map(|rev| rev.pos)
            .max()
    }
}

/// The revision of `leaf` the reader of `options` is shown (its ETag).
pub fn shown_rev<'a>(
    id: &str,
    leaf: &'a Leaf,
    options: &RenderOptions,
) -> std::borrow::Cow<'a, RevId> {
    match hide_credentials(&options.credentials, id, leaf) {
        Some((_, rev)) => std::borrow::Cow::Owned(rev),
        None => std::borrow::Cow::Borrowed(&leaf.rev),
    }
}

/// The body of `leaf` the reader of `options` is shown (what `COPY` copies).
pub fn shown_body(id: &str, leaf: &Leaf, options: &RenderOptions) -> Bytes {
    match hide_credentials(&options.credentials, id, leaf) {
        Some((body, _)) => Bytes::from(body),
        None => leaf.body.clone(),
    }
}

/// Renders one revision of a document as CouchDB JSON. `fetch` returns attachment bodies.
pub fn render_doc(
    id: &str,
    record: &DocRecord,
    leaf: &Leaf,
    options: &RenderOptions,
    fetch: &dyn Fn(&[u8; 16]) -> ApiResult<Bytes>,
) -> ApiResult<Vec<u8>> {
    // What this reader is shown: another user's replication document has no credentials and
    // a revision of its own.
    let hidden = hide_credentials(&options.credentials, id, leaf);
    let (body, shown_rev) = match &hidden {
        Some((body, rev)) => (body.as_slice(), rev),
        None => (&leaf.body[..], &leaf.rev),
    };
    // The shown revision in place of the stored one where the history starts.
    let path_rev = |rev: &RevId| if *rev == leaf.rev { shown_rev } else { rev }.clone();
    let mut out = String::with_capacity(leaf.body.len() + 128);
    out.push_str("{\"_id\":");
    out.push_str(&json_string(id));
    out.push_str(",\"_rev\":\"");
    let _ = write!(out, "{shown_rev}");
    out.push('"');
    if leaf.deleted {
        out.push_str(",\"_deleted\":true");
    }
    let mut bytes = out.into_bytes();
    splice_members(&mut bytes, body, leaf.json);
    let mut out = String::new();
    if !leaf.attachments.is_empty() {
        out.push_str(",\"_attachments\":");
        render_attachments(&mut out, record, leaf, options, fetch)?;
    }
    if options.conflicts {
        let conflicts = record.tree.conflicts();
        if !conflicts.is_empty() {
            out.push_str(",\"_conflicts\":");
            push_rev_list(&mut out, &conflicts);
        }
    }
    if options.deleted_conflicts {
        let deleted = record.tree.deleted_conflicts();
        if !deleted.is_empty() {
            out.push_str(",\"_deleted_conflicts\":");
            push_rev_list(&mut out, &deleted);
        }
    }
    if options.local_seq {
        let _ = write!(out, ",\"_local_seq\":{}", record.seqno);
    }
    if options.revs {
        if let Some(path) = record.tree.path(&leaf.rev) {
            let _ = write!(
                out,
                ",\"_revisions\":{{\"start\":{},\"ids\":[",
                leaf.rev.pos
            );
            for (index, rev) in path.iter().take(options.revs_limit.max(1)).enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&json_string(&path_rev(rev).hash));
            }
            out.push_str("]}");
        }
    }
    if options.revs_info {
        if let Some(path) = record.tree.path(&leaf.rev) {
            out.push_str(",\"_revs_info\":[");
            for (index, rev) in path.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                let status = match record.leaf(rev) {
                    Some(found) if found.deleted => "deleted",
                    Some(_) => "available",
                    None if options.kept_revisions.contains(rev) => {
                        if record.tree.is_deleted(rev) == Some(true) {
                            "deleted"
                        } else {
                            "available"
                        }
                    }
                    None => "missing",
                };
                let rev = path_rev(rev);
                let _ = write!(out, "{{\"rev\":\"{rev}\",\"status\":\"{status}\"}}");
            }
            out.push(']');
        }
    }
    out.push('}');
    bytes.extend_from_slice(out.as_bytes());
    Ok(bytes)
}

/// Appends the members of a stored JSON object (without its braces) after `,`. Values stored by
/// the KV door may not be objects; CouchDB clients cannot see those members.
fn splice_members(out: &mut Vec<u8>, body: &[u8], json: bool) {
    if !json {
        return;
    }
    let trimmed = body.trim_ascii();
    if trimmed.len() < 2 || trimmed[0] != b'{' || trimmed[trimmed.len() - 1] != b'}' {
        return;
    }
    let inner = trimmed[1..trimmed.len() - 1].trim_ascii();
    if !inner.is_empty() {
        out.push(b',');
        out.extend_from_slice(inner);
    }
}

fn push_rev_list(out: &mut String, revs: &[RevId]) {
    out.push('[');
    for (index, rev) in revs.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        let _ = write!(out, "\"{rev}\"");
    }
    out.push(']');
}

pub fn digest_text(md5: &[u8; 16]) -> String {
    format!("md5-{}", BASE64.encode(md5))
}

pub fn parse_digest(text: &str) -> Option<[u8; 16]> {
    let encoded = text.strip_prefix("md5-")?;
    BASE64.decode(encoded).ok()?.try_into().ok()
}

fn render_attachments(
    out: &mut String,
    record: &DocRecord,
    leaf: &Leaf,
    options: &RenderOptions,
    fetch: &dyn Fn(&[u8; 16]) -> ApiResult<Bytes>,
) -> ApiResult<()> {
    let known_pos = options.known_attachment_pos(record);
    out.push('{');
    for (index, meta) in leaf.attachments.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        let wanted = options.attachments || options.follows || !options.atts_since.is_empty();
        let newer = known_pos.is_none_or(|pos| meta.revpos > pos);
        let inline = wanted && newer;
        render_attachment(out, meta, inline, options, fetch)?;
    }
    out.push('}');
    Ok(())
}

fn render_attachment(
    out: &mut String,
    meta: &AttachmentMeta,
    inline: bool,
    options: &RenderOptions,
    fetch: &dyn Fn(&[u8; 16]) -> ApiResult<Bytes>,
) -> ApiResult<()> {
    let follows = options.follows;
    // CouchDB's stubs: `length` is the decompressed length; how the body is stored shows
    // with att_encoding_info, and always on parts that follow (they are sent as stored).
    let encoding_info = |out: &mut String, shown: bool| {
        if shown && meta.is_gzip() {
            let _ = write!(
                out,
                ",\"encoding\":\"gzip\",\"encoded_length\":{}",
                meta.length
            );
        }
    };
    out.push_str(&json_string(&meta.name));
    out.push_str(":{\"content_type\":");
    out.push_str(&json_string(&meta.content_type));
    let _ = write!(
        out,
        ",\"revpos\":{},\"digest\":\"{}\"",
        meta.revpos,
        digest_text(&meta.md5)
    );
    if inline && follows {
        let _ = write!(
            out,
            ",\"length\":{},\"follows\":true",
            meta.identity_length()
        );
        encoding_info(out, true);
    } else if inline {
        let data = identity_body(meta, fetch(&meta.md5)?)?;
        out.push_str(",\"data\":\"");
        out.push_str(&BASE64.encode(&data));
        out.push('"');
        encoding_info(out, options.att_encoding_info);
    } else {
        let _ = write!(out, ",\"length\":{},\"stub\":true", meta.identity_length());
        encoding_info(out, options.att_encoding_info);
    }
    out.push('}');
    Ok(())
}

/// An attachment's body as its readers see it: gzip-stored bodies decompressed.
pub fn identity_body(meta: &AttachmentMeta, stored: Bytes) -> ApiResult<Bytes> {
    if !meta.is_gzip() {
        return Ok(stored);
    }
    let limit = usize::try_from(meta.identity_length()).unwrap_or(usize::MAX);
    settee_http_wire::encoding::gunzip(&stored, limit)
        .map_err(|_| ApiError::Internal(format!("attachment {} does not decompress", meta.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_underscore_members_and_keeps_value_bytes() {
        let doc = parse_doc(br#"{"_id":"a","x": [1, 2],"_rev":"1-abc","y":{"z":"\u00e9"}}"#)
            .expect("parse");
        assert_eq!(doc.id.as_deref(), Some("a"));
        assert_eq!(doc.rev.map(|rev| rev.to_string()).as_deref(), Some("1-abc"));
        assert_eq!(&doc.body[..], br#"{"x":[1, 2],"y":{"z":"\u00e9"}}"#);
    }

    #[test]
    fn rejects_non_objects_bad_json_and_unknown_specials() {
        assert!(
            matches!(parse_doc(b"[1]"), Err(ApiError::BadRequest(reason)) if reason.contains("JSON object"))
        );
        assert!(matches!(
            parse_doc(b"{\"a\":"),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse_doc(b"{\"_foo\":1}"),
            Err(ApiError::DocValidation(_))
        ));
    }

    #[test]
    fn revisions_become_history() {
        let doc = parse_doc(br#"{"_revisions":{"start":3,"ids":["c","b","a"]}}"#).expect("parse");
        let history: Vec<String> = doc
            .revisions
            .expect("revisions")
            .iter()
            .map(|rev| rev.to_string())
            .collect();
        assert_eq!(history, vec!["3-c", "2-b", "1-a"]);
    }

    #[test]
    fn revisions_take_any_u64_generation() {
        // 0.1.0 took these and stored the document without its revision (issue 18).
        for (body, newest) in [
            (
                r#"{"_revisions":{"start":4294967296,"ids":["aa"]}}"#,
                "4294967296-aa",
            ),
            (
                r#"{"_revisions":{"start":18446744073709551615,"ids":["b","a"]}}"#,
                "18446744073709551615-b",
            ),
        ] {
            let doc = parse_doc(body.as_bytes()).expect("parse");
            let revisions = doc.revisions.expect("revisions");
            assert_eq!(revisions[0].to_string(), newest);
            assert!(revisions.iter().all(RevId::is_valid));
        }
    }

    #[test]
    fn revisions_out_of_range_are_doc_validation_errors() {
        let long = format!(
            r#"{{"_revisions":{{"start":1,"ids":["{}"]}}}}"#,
            "h".repeat(256)
        );
        for body in [
            r#"{"_revisions":{"start":18446744073709551616,"ids":["aa"]}}"#,
            r#"{"_revisions":{"start":-1,"ids":["aa"]}}"#,
            r#"{"_revisions":{"start":1.5,"ids":["aa"]}}"#,
            r#"{"_revisions":{"start":"1","ids":["aa"]}}"#,
            r#"{"_revisions":{"start":1,"ids":["b","a"]}}"#,
            r#"{"_revisions":{"start":0,"ids":["a"]}}"#,
            r#"{"_revisions":{"start":1,"ids":[]}}"#,
            r#"{"_revisions":{"start":1,"ids":[""]}}"#,
            r#"{"_revisions":{"start":1,"ids":[7]}}"#,
            r#"{"_revisions":{"start":1}}"#,
            r#"{"_revisions":[1]}"#,
            long.as_str(),
        ] {
            assert!(
                matches!(parse_doc(body.as_bytes()), Err(ApiError::DocValidation(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn a_local_document_keeps_no_history_but_its_revisions_are_typed() {
        // A replicator writes its checkpoints with `_revisions.start` 0.
        let body = r#"{"_revisions":{"start":0,"ids":["1"]},"_id":"_local/cp","x":1}"#;
        let doc = parse_doc(body.as_bytes()).expect("a _local document");
        assert_eq!(doc.revisions, None);
        assert_eq!(doc.body.as_ref(), br#"{"x":1}"#);
        let at_path = parse_doc_at(
            br#"{"_revisions":{"start":0,"ids":["1"]}}"#,
            Some("_local/cp"),
        );
        assert!(at_path.is_ok());
        // The same member on a document is range-checked, and on a local one still typed.
        let plain = r#"{"_revisions":{"start":0,"ids":["1"]},"_id":"cp"}"#;
        assert!(matches!(
            parse_doc(plain.as_bytes()),
            Err(ApiError::DocValidation(_))
        ));
        for body in [
            r#"{"_id":"_local/cp","_revisions":{"start":"0","ids":["1"]}}"#,
            r#"{"_id":"_local/cp","_revisions":{"start":0,"ids":[1]}}"#,
            r#"{"_id":"_local/cp","_revisions":{"start":0}}"#,
        ] {
            assert!(
                matches!(parse_doc(body.as_bytes()), Err(ApiError::DocValidation(_))),
                "{body}"
            );
        }
    }
}
