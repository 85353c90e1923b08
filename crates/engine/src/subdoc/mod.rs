//! Sub-document lookups and mutations on stored documents (Couchbase's `lookup_in` /
//! `mutate_in`), for both doors. The crate `settee-subdoc` works on bytes: `path` parses
//! paths, `scan` walks stored JSON without building anything, `json` resolves every path of a
//! request in one pass and splices mutations into the bytes (everything outside the edited
//! spans stays byte for byte). This module decides what the paths apply to — the body, the extended attributes, or the virtual
//! `$document` — and makes a mutation one atomic, CAS-checked write of the record.

pub use settee_subdoc::{index, json, path, scan, Status};

use bytes::Bytes;
use settee_revtree::RevId;
use smallvec::SmallVec;

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::vattr;

pub use Status as SubdocStatus;

/// What a lookup spec asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupOp {
    Get,
    Exists,
    Count,
    /// The whole body (path empty).
    WholeDoc,
}

#[derive(Clone, Copy, Debug)]
pub struct LookupSpec<'a> {
    pub op: LookupOp,
    pub xattr: bool,
    pub path: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutateOp {
    DictAdd,
    DictUpsert,
    Delete,
    Replace,
    ArrayPushLast,
    ArrayPushFirst,
    ArrayInsert,
    ArrayAddUnique,
    Counter,
    /// Replace the whole body with the value.
    SetDoc,
    /// Delete the document.
    DeleteDoc,
}

#[derive(Clone, Debug)]
pub struct MutateSpec {
    pub op: MutateOp,
    pub xattr: bool,
    pub mkdir_p: bool,
    pub expand_macros: bool,
    pub path: Bytes,
    pub value: Bytes,
}

/// How a mutation treats a missing document (Couchbase's store semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CreateMode {
    /// The document must exist.
    #[default]
    Replace,
    /// Create it if missing (`MKDOC`).
    Upsert,
    /// It must not exist (`ADD`).
    Insert,
}

#[derive(Clone, Debug, Default)]
pub struct MutateIn {
    pub specs: Vec<MutateSpec>,
    pub create: CreateMode,
    /// Operate on a deleted document's xattrs (`ACCESS_DELETED`).
    pub access_deleted: bool,
    /// 0 = any version.
    pub cas: u64,
    /// `None` keeps the document's expiry; `Some(0)` clears it.
    pub expiry: Option<u32>,
}

/// What a lookup found out about the document itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LookupMeta {
    pub cas: u64,
    pub deleted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MutateInOutcome {
    Done {
        cas: u64,
        seqno: u64,
        rev: RevId,
        /// Values some specs return (counters), by spec index.
        values: Vec<(u8, Vec<u8>)>,
        deleted: bool,
    },
    NotFound,
    Exists,
    CasMismatch,
    Locked,
    /// One spec failed; nothing was written.
    SpecFailed {
        index: u8,
        status: SubdocStatus,
    },
    /// The body is not JSON, so paths in it mean nothing.
    NotJson,
    /// The resulting document would pass the document limits (`limits.rs`): too large, too
    /// deep, or holding a number no double can represent. Nothing was written.
    OverLimit(crate::limits::LimitError),
    /// The document's winning revision is at the largest generation: no mutation can follow.
    GenerationOverflow,
    /// A validation function of the bucket refused the write (`validate.rs`).
    Refused(crate::Refusal),
}

/// Where a spec's path points.
enum Target {
    Body,
    Xattrs,
    /// `$document`: document metadata.
    Virtual,
}

fn target_of(xattr: bool, path: &[u8]) -> Target {
    if !xattr {
        Target::Body
    } else if path.first() == Some(&b'$') {
        Target::Virtual
    } else {
        Target::Xattrs
    }
}

const VIRTUAL_DOCUMENT: &[u8] = b"$document";

/// Whether an xattr path names the `$document` virtual attribute (or a path inside it).
fn is_document_vattr(path: &[u8]) -> bool {
    path.strip_prefix(VIRTUAL_DOCUMENT)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'.' || rest[0] == b'[')
}

fn status_text(count: usize) -> Vec<u8> {
    count.to_string().into_bytes()
}

/// Lookups that would scan more than this many bytes (a large body without a structural index,
/// large xattrs) are worth moving off the request threads.
pub const HEAVY_SCAN_BYTES: usize = 64 * 1024;

/// What [`Bucket::lookup_in_light`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(LookupMeta),
    /// No such document (or deleted without `access_deleted`, or expired).
    NotFound,
    /// Nothing was run: the lookup would scan a lot (see [`HEAVY_SCAN_BYTES`]).
    Heavy,
}

impl Bucket {
    /// Runs lookup specs against one document, all body paths in one walk of the body and all
    /// xattr paths in one walk of the xattrs. `each(index, status, value)` gets every spec's
    /// outcome in order (values borrowed from the stored record). `None` when the document
    /// does not exist, or is deleted and `access_deleted` is not set.
    pub fn lookup_in<'k>(
        &self,
        key: impl Into<crate::DocKey<'k>>,
        specs: &[LookupSpec<'_>],
        access_deleted: bool,
        each: impl FnMut(usize, Status, &[u8]),
    ) -> Result<Option<LookupMeta>, EngineError> {
        Ok(
            match self.lookup_with(key.into(), specs, access_deleted, false, each)? {
                Lookup::Found(meta) => Some(meta),
                Lookup::NotFound | Lookup::Heavy => None,
            },
        )
    }

    /// [`Bucket::lookup_in`] for request threads: a lookup that would scan a large unindexed
    /// body or large xattrs is not run (`Lookup::Heavy`, `each` never called), so the caller
    /// can move it to a pool. Deciding costs nothing extra: it is the same read of the record.
    pub fn lookup_in_light<'k>(
        &self,
        key: impl Into<crate::DocKey<'k>>,
        specs: &[LookupSpec<'_>],
        access_deleted: bool,
        each: impl FnMut(usize, Status, &[u8]),
    ) -> Result<Lookup, EngineError> {
        self.lookup_with(key.into(), specs, access_deleted, true, each)
    }

    fn lookup_with(
        &self,
        key: crate::DocKey<'_>,
        specs: &[LookupSpec<'_>],
        access_deleted: bool,
        refuse_heavy: bool,
        mut each: impl FnMut(usize, Status, &[u8]),
    ) -> Result<Lookup, EngineError> {
        self.check_live(key.collection)?;
        let vbucket = self.vbucket_of(key.key);
        let Some(doc_key) = crate::keys::DocKeyBuf::new(self.id, vbucket, key.collection, key.key)
        else {
            return Ok(Lookup::NotFound);
        };
        let locked = self.is_kv_locked(key);
        let now = self.now_secs();
        let found = self.store.get_with(
            settee_storage::Cf::Doc,
            doc_key.as_slice(),
            |raw| -> Result<Lookup, EngineError> {
                let header = crate::record::Header::decode(raw)?;
                let expired = header.expiry != 0 && header.expiry <= now;
                if (header.deleted && !access_deleted) || (!header.deleted && expired) {
                    return Ok(Lookup::NotFound);
                }
                let heavy = (header.body_len as usize >= HEAVY_SCAN_BYTES && header.index_len == 0)
                    || header.xattrs_len as usize >= HEAVY_SCAN_BYTES;
                if refuse_heavy && heavy {
                    return Ok(Lookup::Heavy);
                }
                let body = header.body(raw)?;
                let body_index = index::Index::open(header.index(raw)?);
                let meta = LookupMeta {
                    cas: if locked { u64::MAX } else { header.cas },
                    deleted: header.deleted,
                };
                // The common case — body paths only, through the index — streams: each path is
                // parsed, resolved and answered in turn, with nothing collected in between.
                if header.json && specs.iter().all(|spec| !spec.xattr) {
                    if let Some((index, root)) = body_index
                        .as_ref()
                        .and_then(|index| json::indexed_root(body, index).map(|root| (index, root)))
                    {
                        lookup_indexed(body, index, root, specs, &mut each);
                        return Ok(Lookup::Found(meta));
                    }
                }
                let stored_xattrs = header.xattrs(raw)?;
                let xattrs: &[u8] = if stored_xattrs.is_empty() {
                    b"{}"
                } else {
                    stored_xattrs
                };
                let parsed: SmallVec<[Result<path::Path<'_>, Status>; 16]> = specs
                    .iter()
                    .map(|spec| match spec.op {
                        LookupOp::WholeDoc => Ok(path::Path::new()),
                        _ => path::parse_path(spec.path),
                    })
                    .collect();
                let virtual_doc = if specs
                    .iter()
                    .any(|spec| spec.xattr && is_document_vattr(spec.path))
                {
                    let record = crate::record::DocRecord::decode(raw)?;
                    let meta = vattr::DocumentMeta {
                        cas: header.cas,
                        vbucket_uuid: self.vbucket_uuid(vbucket),
                        seqno: header.seqno,
                        rev_generation: record.winner().map_or(0, |leaf| leaf.rev.pos),
                        expiry: header.expiry,
                        item_flags: header.item_flags,
                        body,
                        json: header.json,
                        has_xattrs: !stored_xattrs.is_empty(),
                        deleted: header.deleted,
                    };
                    serde_json::to_vec(&serde_json::json!({ "$document": vattr::document(&meta) }))
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                // One walk per target, all of its paths at once.
                let mut answers: SmallVec<[Option<Result<scan::Span, Status>>; 16]> =
                    SmallVec::from_elem(None, specs.len());
                for (target, doc) in [(0u8, body), (1, xattrs), (2, virtual_doc.as_slice())] {
                    let mut indexes: SmallVec<[usize; 16]> = SmallVec::new();
                    let mut paths: SmallVec<[&[path::Component<'_>]; 16]> = SmallVec::new();
                    for (index, spec) in specs.iter().enumerate() {
                        let Ok(components) = &parsed[index] else {
                            continue;
                        };
                        if spec.op == LookupOp::WholeDoc {
                            continue;
                        }
                        let wanted = match target_of(spec.xattr, spec.path) {
                            Target::Body => 0,
                            Target::Xattrs => 1,
                            Target::Virtual if is_document_vattr(spec.path) => 2,
                            Target::Virtual => {
                                answers[index] = Some(Err(Status::XattrUnknownVattr));
                                continue;
                            }
                        };
                        if wanted != target {
                            continue;
                        }
                        if target == 0 && !header.json {
                            answers[index] = Some(Err(Status::DocNotJson));
                            continue;
                        }
                        indexes.push(index);
                        paths.push(components.as_slice());
                    }
                    if paths.is_empty() {
                        continue;
                    }
                    let walk_index = if target == 0 {
                        body_index.as_ref()
                    } else {
                        None
                    };
                    let found = json::resolve_all_indexed(doc, walk_index, &paths);
                    for (index, answer) in indexes.into_iter().zip(found) {
                        answers[index] = Some(answer);
                    }
                }
                for (index, spec) in specs.iter().enumerate() {
                    let doc = match target_of(spec.xattr, spec.path) {
                        Target::Body => body,
                        Target::Xattrs => xattrs,
                        Target::Virtual => virtual_doc.as_slice(),
                    };
                    if let Err(status) = &parsed[index] {
                        each(index, *status, &[]);
                        continue;
                    }
                    if spec.op == LookupOp::WholeDoc {
                        each(index, Status::Success, body);
                        continue;
                    }
                    let answer = answers[index].take().unwrap_or(Err(Status::PathEnoent));
                    answer_spec(index, spec.op, doc, answer, &mut each);
                }
                Ok(Lookup::Found(meta))
            },
        )?;
        found.unwrap_or(Ok(Lookup::NotFound))
    }
}

/// Hands one spec's outcome to the caller: the value's bytes for `get`, nothing for `exists`,
/// the number of members or elements for `count`.
fn answer_spec(
    index: usize,
    op: LookupOp,
    doc: &[u8],
    answer: Result<scan::Span, Status>,
    each: &mut impl FnMut(usize, Status, &[u8]),
) {
    match answer {
        Err(status) => each(index, status, &[]),
        Ok(span) => match op {
            LookupOp::Get | LookupOp::WholeDoc => {
                each(index, Status::Success, &doc[span.0..span.1])
            }
            LookupOp::Exists => each(index, Status::Success, &[]),
            LookupOp::Count => match json::count(doc, span) {
                Ok(count) => each(index, Status::Success, &status_text(count)),
                Err(status) => each(index, status, &[]),
            },
        },
    }
}

/// Body-only lookups on an indexed body, answered in spec order as they are resolved. A path
/// that shares leading components with the one before it starts where that one got to.
fn lookup_indexed(
    body: &[u8],
    index: &index::Index<'_>,
    root: scan::Span,
    specs: &[LookupSpec<'_>],
    each: &mut impl FnMut(usize, Status, &[u8]),
) {
    let mut previous = path::Path::new();
    let mut reached: SmallVec<[scan::Span; 8]> = SmallVec::new();
    for (position, spec) in specs.iter().enumerate() {
        if spec.op == LookupOp::WholeDoc {
            each(position, Status::Success, body);
            continue;
        }
        let components = match path::parse_path(spec.path) {
            Ok(components) => components,
            Err(status) => {
                each(position, status, &[]);
                continue;
            }
        };
        let shared = previous
            .iter()
            .zip(components.iter())
            .take_while(|(a, b)| a == b)
            .count();
        reached.truncate(shared);
        let answer = json::resolve_indexed(body, index, root, &components, &mut reached);
        answer_spec(position, spec.op, body, answer, each);
        previous = components;
    }
}

/// Couchbase's mutation macros, replaced by the write's own values once it has them.
const MACROS: [(&[u8], &str); 3] = [
    (br#""${Mutation.CAS}""#, "cas"),
    (br#""${Mutation.seqno}""#, "seqno"),
    (br#""${Mutation.value_crc32c}""#, "crc"),
];

/// The placeholder a macro stands as until the write's CAS and seqno are known: a JSON
/// string unique to this write (`nonce`), so it cannot collide with stored data.
fn placeholder(nonce: u64, name: &str) -> String {
    format!("\"settee-macro-{nonce:016x}-{name}\"")
}

/// Replaces the write's macro placeholders in `xattrs` with its values. The CAS is written
/// byte-reversed, as Couchbase Server does (the SDKs undo it: `convert_macro_cas_to_cas`).
pub(crate) fn expand_macros(xattrs: &[u8], nonce: u64, cas: u64, seqno: u64, body: &[u8]) -> Bytes {
    let mut text = String::from_utf8_lossy(xattrs).into_owned();
    for (name, value) in [
        ("cas", format!("\"0x{:016x}\"", cas.swap_bytes())),
        ("seqno", format!("\"0x{seqno:016x}\"")),
        ("crc", format!("\"0x{:08x}\"", crc32c::crc32c(body))),
    ] {
        text = text.replace(&placeholder(nonce, name), &value);
    }
    Bytes::from(text)
}

impl Bucket {
    /// Applies mutation specs to one document as one atomic, CAS-checked write: xattr specs
    /// to its extended attributes, the others to its body, in order; the first failing spec
    /// fails the whole request and nothing is written.
    pub async fn mutate_in<'k>(
        &self,
        key: impl Into<crate::DocKey<'k>>,
        request: MutateIn,
        writer: &crate::Writer,
    ) -> Result<MutateInOutcome, EngineError> {
        use crate::bucket::{PlannedWrite, Previous};
        use crate::record::Leaf;
        use crate::update::{empty_record, finish, revision_hash, COMMON_FLAGS_JSON};

        let key = key.into();
        crate::bucket::check_key_in(key.collection, key.key)?;
        self.check_active(self.vbucket_of(key.key))?;
        let _guards = self.lock_keys(std::iter::once(key)).await;
        let current = self.read_record(key)?;
        let mut cas = request.cas;
        let lock = self.current_lock(key);
        if let Some(lock) = lock {
            match current.as_ref() {
                Some(record) if cas == lock.cas => cas = record.cas,
                _ => return Ok(MutateInOutcome::Locked),
            }
        }
        let alive = current
            .as_ref()
            .filter(|record| !record.is_deleted() && !self.is_expired(record.expiry));
        let tombstone = current
            .as_ref()
            .filter(|record| record.is_deleted() && request.access_deleted);
        let existing = alive.or(tombstone);
        match (request.create, existing) {
            (CreateMode::Insert, Some(_)) if alive.is_some() => return Ok(MutateInOutcome::Exists),
            (CreateMode::Replace, None) => return Ok(MutateInOutcome::NotFound),
            _ => {}
        }
        if cas != 0 {
            match existing {
                None => return Ok(MutateInOutcome::NotFound),
                Some(record) if record.cas != cas => return Ok(MutateInOutcome::CasMismatch),
                Some(_) => {}
            }
        }
        let winner = existing
            .and_then(|record| record.winner())
            .filter(|_| alive.is_some());
        let starts_as_array = request
            .specs
            .iter()
            .find(|spec| !spec.xattr)
            .is_some_and(|spec| {
                spec.path.is_empty()
                    && matches!(
                        spec.op,
                        MutateOp::ArrayPushLast
                            | MutateOp::ArrayPushFirst
                            | MutateOp::ArrayAddUnique
                    )
            });
        let (mut body, mut json) = match winner {
            Some(leaf) => (leaf.body.to_vec(), leaf.json),
            None if starts_as_array => (b"[]".to_vec(), true),
            None => (b"{}".to_vec(), true),
        };
        let mut xattrs = match existing {
            Some(record) if !record.xattrs.is_empty() => record.xattrs.to_vec(),
            _ => b"{}".to_vec(),
        };
        let nonce = request
            .specs
            .iter()
            .any(|spec| spec.expand_macros)
            .then(|| self.hlc.next(self.clock.as_ref()));
        let mut values = Vec::new();
        let mut delete = false;
        for (index, spec) in request.specs.iter().enumerate() {
            let index = index as u8;
            let edit = match spec.op {
                MutateOp::SetDoc => {
                    json = crate::kv::is_json(&spec.value);
                    body = spec.value.to_vec();
                    continue;
                }
                MutateOp::DeleteDoc => {
                    delete = true;
                    continue;
                }
                MutateOp::DictAdd => json::Edit::DictAdd,
                MutateOp::DictUpsert => json::Edit::DictUpsert,
                MutateOp::Delete => json::Edit::Delete,
                MutateOp::Replace => json::Edit::Replace,
                MutateOp::ArrayPushLast => json::Edit::PushLast,
                MutateOp::ArrayPushFirst => json::Edit::PushFirst,
                MutateOp::ArrayInsert => json::Edit::Insert,
                MutateOp::ArrayAddUnique => json::Edit::AddUnique,
                MutateOp::Counter => json::Edit::Counter,
            };
            let target = if spec.xattr {
                &mut xattrs
            } else if !json {
                return Ok(MutateInOutcome::SpecFailed {
                    index,
                    status: Status::DocNotJson,
                });
            } else {
                &mut body
            };
            let mut value: &[u8] = &spec.value;
            let expanded;
            if let (true, Some(nonce)) = (spec.expand_macros, nonce) {
                let Some((_, name)) = MACROS.iter().find(|(text, _)| *text == value) else {
                    return Ok(MutateInOutcome::SpecFailed {
                        index,
                        status: Status::PathEinval,
                    });
                };
                expanded = placeholder(nonce, name);
                value = expanded.as_bytes();
            }
            match json::apply(target, edit, &spec.path, value, spec.mkdir_p) {
                Ok((new, returned)) => {
                    *target = new;
                    if let Some(returned) = returned {
                        values.push((index, returned));
                    }
                }
                Err(status) => return Ok(MutateInOutcome::SpecFailed { index, status }),
            }
        }
        let body = Bytes::from(if delete { b"{}".to_vec() } else { body });
        // The same limits as every other write, on the document the specs produced: body and
        // extended attributes together (Couchbase counts both in its item size).
        let xattrs_len = if xattrs == b"{}" { 0 } else { xattrs.len() };
        if let Err(error) = self.limits.check(&body, json && !delete, xattrs_len) {
            return Ok(MutateInOutcome::OverLimit(error));
        }
        let mut record = current.clone().unwrap_or_else(empty_record);
        let parent = record.winner().map(|leaf| leaf.rev.clone());
        let Some(pos) = RevId::next_pos(parent.as_ref()) else {
            return Ok(MutateInOutcome::GenerationOverflow);
        };
        let rev = RevId {
            pos,
            hash: revision_hash(parent.as_ref(), delete, &body, &[]),
        };
        if record
            .tree
            .edit(parent.as_ref(), rev.clone(), delete)
            .is_err()
        {
            return Ok(MutateInOutcome::Exists);
        }
        if let Some(parent) = &parent {
            record.leaves.retain(|leaf| &leaf.rev != parent);
        }
        record.leaves.push(Leaf {
            rev: rev.clone(),
            deleted: delete,
            json: json || delete,
            body,
            attachments: Vec::new(),
        });
        if alive.is_none() {
            record.item_flags = COMMON_FLAGS_JSON;
            record.expiry = 0;
        }
        if let Some(expiry) = request.expiry {
            record.expiry = expiry;
        }
        record.xattrs = if xattrs == b"{}" {
            Bytes::new()
        } else {
            Bytes::from(xattrs)
        };
        finish(&mut record, self.revs_limit());
        let verdict = self.validate_record(key, writer, &record, &rev, current.as_ref());
        if let Err(refusal) = verdict.await {
            return Ok(MutateInOutcome::Refused(refusal));
        }
        // kv_engine caps an expiry the request sets, or a document's it creates.
        let apply_max_ttl = request.expiry.is_some() || alive.is_none();
        let mut writes = [PlannedWrite {
            vbucket: self.vbucket_of(key.key),
            collection: key.collection,
            key: key.key.to_vec(),
            previous: current.as_ref().map(Previous::of),
            record: Some(record),
            new_attachments: Vec::new(),
            macro_nonce: nonce,
            apply_max_ttl,
            old_revisions: Default::default(),
        }];
        let committed = self.commit_writes(&mut writes).await?;
        if lock.is_some() {
            self.release_kv_lock(key);
        }
        Ok(MutateInOutcome::Done {
            cas: committed[0].cas,
            seqno: committed[0].seqno,
            rev,
            values,
            deleted: delete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macros_expand_to_the_writes_values() {
        let nonce = 0x1234;
        let xattrs = format!(
            r#"{{"m":{{"cas":{},"seq":{},"crc":{}}},"keep":"settee-macro-1234-cas"}}"#,
            placeholder(nonce, "cas"),
            placeholder(nonce, "seqno"),
            placeholder(nonce, "crc")
        );
        let expanded = expand_macros(xattrs.as_bytes(), nonce, 0x0102_0304_0506_0708, 9, b"{}");
        let value: serde_json::Value = serde_json::from_slice(&expanded).expect("json");
        assert_eq!(value["m"]["cas"], "0x0807060504030201");
        assert_eq!(value["m"]["seq"], "0x0000000000000009");
        assert_eq!(
            value["m"]["crc"],
            format!("0x{:08x}", crc32c::crc32c(b"{}")).as_str()
        );
        assert_eq!(value["keep"], "settee-macro-1234-cas");
        assert!(is_document_vattr(b"$document"));
        assert!(is_document_vattr(b"$document.exptime"));
        assert!(!is_document_vattr(b"$documents"));
    }

    /// Streamed lookups through the index (plain paths taken between the dots, shared leading
    /// names reused from the path before) answer every sequence of paths exactly as resolving
    /// each path on its own by scanning does.
    #[test]
    fn indexed_lookups_answer_like_a_scan_in_any_order() {
        let members: Vec<String> = (0..300)
            .map(|i| format!(r#""k{i:03}":{{"v":{i},"w":[{i},"x"]}}"#))
            .collect();
        let body = format!(
            r#"{{"data":{{{}}},"dat":1,"a.b":{{"c":2}},"list":[{}],"s":"x"}}"#,
            members.join(","),
            (0..400)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let raw_index = index::build(body.as_bytes()).expect("indexed");
        let idx = index::Index::open(&raw_index).expect("index");
        let root = json::indexed_root(body.as_bytes(), &idx).expect("indexed root");
        let paths: Vec<&[u8]> = vec![
            b"data.k299.v",
            b"data.k299.w",
            b"data.k299",
            b"data.k298.v",
            b"data.k29",
            b"data",
            b"dat",
            b"data.k299.v.z",
            b"s.x",
            b"`a.b`.c",
            b"a",
            b"list[399]",
            b"list[-1]",
            b"data.k001.w[1]",
            b"data.k001.w[0]",
            b"data..k001",
            b"data.",
            b"",
            b"nope.v",
            b"data.k001.v",
        ];
        let mut order: Vec<usize> = (0..paths.len()).collect();
        let mut seed = 7u64;
        for _ in 0..200 {
            for i in (1..order.len()).rev() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                order.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let chosen: Vec<&[u8]> = order.iter().take(16).map(|i| paths[*i]).collect();
            let specs: Vec<LookupSpec<'_>> = chosen
                .iter()
                .map(|path| LookupSpec {
                    op: LookupOp::Get,
                    xattr: false,
                    path,
                })
                .collect();
            let mut got = Vec::new();
            lookup_indexed(
                body.as_bytes(),
                &idx,
                root,
                &specs,
                &mut |_, status, value| got.push((status, value.to_vec())),
            );
            let expected: Vec<(Status, Vec<u8>)> = chosen
                .iter()
                .map(|path| match path::parse(path) {
                    Err(status) => (status, Vec::new()),
                    Ok(components) => {
                        match json::resolve_all(body.as_bytes(), &[&components[..]])[0] {
                            Ok((start, end)) => {
                                (Status::Success, body.as_bytes()[start..end].to_vec())
                            }
                            Err(status) => (status, Vec::new()),
                        }
                    }
                })
                .collect();
            assert_eq!(
                got,
                expected,
                "paths {:?}",
                chosen
                    .iter()
                    .map(|p| String::from_utf8_lossy(p))
                    .collect::<Vec<_>>()
            );
        }
    }
}
