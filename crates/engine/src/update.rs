//! CouchDB-style document updates: `PUT`, `DELETE`, `_bulk_docs` with and without `new_edits`.
//! Planning is a pure function of (current record, update) so it is tested without storage.

use std::collections::HashMap;

use bytes::Bytes;
use md5::{Digest, Md5};
use settee_revtree::RevId;

use crate::bucket::{Bucket, PlannedWrite, Previous};
use crate::doc_key::DocKey;
use crate::error::EngineError;
use crate::limits::{DocLimits, LimitError};
use crate::old_revs::OldRevisions;
use crate::record::{AttEncoding, AttachmentMeta, DocRecord, Leaf};
use crate::validate::{Refusal, WriteValidator, Writer};

/// An attachment as the writer describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachmentInput {
    /// Keep the attachment of this name from the revision being edited (`"stub": true`).
    /// A `revpos` the writer gave must be the kept attachment's (CouchDB's stub check).
    Stub { name: String, revpos: Option<u64> },
    /// A new body for this name: `data` as stored (gzipped when `encoding` says so; the
    /// CouchDB door compresses compressible types, docs/format/document.md).
    Data {
        name: String,
        content_type: String,
        data: Bytes,
        encoding: AttEncoding,
        /// The `revpos` the writer gave: kept by replicated (`new_edits=false`) writes, as
        /// CouchDB keeps a replicated attachment's; an edit gives its own generation.
        revpos: Option<u64>,
    },
}

/// One document write in CouchDB terms.
#[derive(Clone, Debug)]
pub struct DocUpdate {
    pub key: Vec<u8>,
    /// The revision being edited (`_rev`); `None` creates.
    pub parent: Option<RevId>,
    /// `new_edits=false` only: the revision history, newest first (`_revisions`, or `[_rev]`).
    pub history: Vec<RevId>,
    pub deleted: bool,
    /// The JSON object without CouchDB's underscore members.
    pub body: Bytes,
    pub attachments: Vec<AttachmentInput>,
}

/// What happened to one update. `Saved` carries the revision that now exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateOutcome {
    Saved {
        rev: RevId,
        seqno: u64,
        cas: u64,
    },
    Conflict,
    MissingStub {
        name: String,
    },
    Invalid(String),
    /// The document is larger or deeper than the document limits (`limits.rs`).
    OverLimit(LimitError),
    /// The document's stored record does not decode, so it cannot be edited (an admin can
    /// purge it); the other updates of the batch go on.
    CorruptRecord(String),
    /// A validation function refused the write (`throw({forbidden: reason})`).
    Forbidden(String),
    /// A validation function refused the write (`throw({unauthorized: reason})`).
    Unauthorized(String),
    /// A validation function threw something else, or could not run.
    ValidationFailed(String),
}

impl From<Refusal> for UpdateOutcome {
    fn from(refusal: Refusal) -> UpdateOutcome {
        match refusal {
            Refusal::Forbidden(reason) => UpdateOutcome::Forbidden(reason),
            Refusal::Unauthorized(reason) => UpdateOutcome::Unauthorized(reason),
            Refusal::Failed(reason) => UpdateOutcome::ValidationFailed(reason),
        }
    }
}

/// A planned new state of one document.
#[derive(Debug)]
pub(crate) struct Plan {
    pub record: DocRecord,
    pub rev: RevId,
    pub new_attachments: Vec<([u8; 16], Bytes)>,
    /// new_edits=false of a revision already present: nothing to write.
    pub unchanged: bool,
}

/// The revision hash CouchDB gives this edit (`couch_doc:new_revid`): the MD5 of
/// `term_to_binary([Deleted, OldStart, OldRev, Body, Atts], [{minor_version, 1}])`, where
/// `OldStart`/`OldRev` are the parent's position and hash (the 16 bytes of a 32-hex-digit
/// hash, else its text; `0, 0` for a new document), `Body` the EJSON of the body (members in
/// the order sent) and `Atts` `{Name, Type, Md5}` of each attachment, last first. So the same
/// edit made on CouchDB and on the CouchDB door yields the same revision, and mixed replicas
/// converge without spurious conflicts. A body that is not JSON falls back to
/// [`revision_hash`].
pub fn couch_revision_hash(
    parent: Option<&RevId>,
    deleted: bool,
    body: &[u8],
    attachments: &[AttachmentMeta],
) -> String {
    use settee_etf::Term;
    let (start, old) = match parent {
        None => (Term::Integer(0), Term::Integer(0)),
        Some(parent) => (
            Term::Integer(i128::from(parent.pos)),
            match hex_bytes(&parent.hash) {
                Some(bytes) => Term::binary(bytes),
                None => Term::binary(parent.hash.as_bytes()),
            },
        ),
    };
    // [Deleted, OldStart, OldRev, Body, Atts]: the body is written straight from its text.
    let mut term = Vec::with_capacity(body.len() + 64);
    term.extend_from_slice(&[131, 108, 0, 0, 0, 5]);
    Term::atom(if deleted { "true" } else { "false" }).encode(&mut term);
    start.encode(&mut term);
    old.encode(&mut term);
    if settee_etf::json_to_ejson(body, &mut term).is_none() {
        return revision_hash(parent, deleted, body, attachments);
    }
    let atts = attachments
        .iter()
        .rev()
        .map(|attachment| {
            Term::Tuple(vec![
                Term::binary(attachment.name.as_bytes()),
                Term::binary(attachment.content_type.as_bytes()),
                Term::binary(attachment.md5),
            ])
        })
        .collect();
    Term::List(atts).encode(&mut term);
    term.push(106);
    hex(&Md5::digest(&term))
}

/// The 16 bytes of a 32-hex-digit revision hash (CouchDB keeps such hashes as binaries).
fn hex_bytes(hash: &str) -> Option<[u8; 16]> {
    if hash.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hash.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A revision hash of settee's own (md5 of parent, deleted flag, body and attachment
/// digests): the KV door's and sub-document writes, whose values need not be JSON and which
/// have no CouchDB counterpart, use it without parsing the value; the same edit made twice
/// still yields the same revision id.
pub fn revision_hash(
    parent: Option<&RevId>,
    deleted: bool,
    body: &[u8],
    attachments: &[AttachmentMeta],
) -> String {
    let mut hasher = Md5::new();
    if let Some(parent) = parent {
        hasher.update(parent.to_string().as_bytes());
    }
    hasher.update([u8::from(deleted)]);
    hasher.update(body);
    for attachment in attachments {
        hasher.update(attachment.name.as_bytes());
        hasher.update(attachment.md5);
    }
    hex(&hasher.finalize())
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 15) as usize] as char);
    }
    out
}

pub fn md5_of(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// Attachment bodies a write adds: (md5, bytes).
type NewBodies = Vec<([u8; 16], Bytes)>;

fn resolve_attachments(
    inputs: &[AttachmentInput],
    sources: &[&Leaf],
    revpos: u64,
    replicated: bool,
) -> Result<(Vec<AttachmentMeta>, NewBodies), UpdateOutcome> {
    let mut metas = Vec::with_capacity(inputs.len());
    let mut bodies = Vec::new();
    for input in inputs {
        match input {
            AttachmentInput::Stub { name, revpos } => {
                let found = sources
                    .iter()
                    .find_map(|leaf| leaf.attachments.iter().find(|meta| &meta.name == name))
                    .filter(|meta| revpos.is_none_or(|revpos| revpos == meta.revpos));
                match found {
                    Some(meta) => metas.push(meta.clone()),
                    None => return Err(UpdateOutcome::MissingStub { name: name.clone() }),
                }
            }
            AttachmentInput::Data {
                name,
                content_type,
                data,
                encoding,
                revpos: given_revpos,
            } => {
                let md5 = md5_of(data);
                let revpos = match given_revpos {
                    Some(given) if replicated && *given >= 1 && *given <= revpos => *given,
                    _ => revpos,
                };
                metas.push(AttachmentMeta {
                    name: name.clone(),
                    content_type: content_type.clone(),
                    length: data.len() as u64,
                    md5,
                    revpos,
                    encoding: *encoding,
                });
                bodies.push((md5, data.clone()));
            }
        }
    }
    // In the order the writer gave them, as CouchDB keeps a document's attachments: the
    // revision id hashes them in that order, and readers list them so.
    Ok((metas, bodies))
}

/// Plans a `new_edits=true` edit: the parent must be a leaf, a create needs no live document.
pub(crate) fn plan_edit(
    current: Option<&DocRecord>,
    update: &DocUpdate,
    revs_limit: u32,
    expired: bool,
) -> Result<Plan, UpdateOutcome> {
    let parent = match (&update.parent, current) {
        (Some(parent), Some(record)) => {
            if !record.tree.is_leaf(parent) {
                return Err(UpdateOutcome::Conflict);
            }
            Some(parent.clone())
        }
        (Some(_), None) => return Err(UpdateOutcome::Conflict),
        (None, Some(record)) => match record.winner() {
            // Re-creating a deleted (or expired) document extends its winning leaf.
            Some(winner) if winner.deleted || expired => Some(winner.rev.clone()),
            Some(_) => return Err(UpdateOutcome::Conflict),
            None => None,
        },
        (None, None) => None,
    };
    let Some(pos) = RevId::next_pos(parent.as_ref()) else {
        return Err(UpdateOutcome::Invalid(
            "the document's revision is at the largest generation; it cannot be edited".into(),
        ));
    };
    let sources: Vec<&Leaf> = match (&parent, current) {
        (Some(parent), Some(record)) => record.leaf(parent).into_iter().collect(),
        _ => Vec::new(),
    };
    let (attachments, new_attachments) =
        resolve_attachments(&update.attachments, &sources, pos, false)?;
    let rev = RevId {
        pos,
        hash: couch_revision_hash(parent.as_ref(), update.deleted, &update.body, &attachments),
    };
    let mut record = current.cloned().unwrap_or_else(empty_record);
    if record
        .tree
        .edit(parent.as_ref(), rev.clone(), update.deleted)
        .is_err()
    {
        return Err(UpdateOutcome::Conflict);
    }
    if let Some(parent) = &parent {
        record.leaves.retain(|leaf| &leaf.rev != parent);
    }
    record.leaves.push(Leaf {
        rev: rev.clone(),
        deleted: update.deleted,
        json: true,
        body: update.body.clone(),
        attachments,
    });
    if expired {
        record.expiry = 0;
    }
    finish(&mut record, revs_limit);
    Ok(Plan {
        record,
        rev,
        new_attachments,
        unchanged: false,
    })
}

/// Plans a `new_edits=false` write (replication): merge the given history into the tree.
pub(crate) fn plan_replicated(
    current: Option<&DocRecord>,
    update: &DocUpdate,
    revs_limit: u32,
) -> Result<Plan, UpdateOutcome> {
    let Some(newest) = update.history.first() else {
        return Err(UpdateOutcome::Invalid("missing revision".into()));
    };
    // The doors check these too; a history the tree would ignore must never reach it, or the
    // record would be stored without its revision (0.1.0 stored empty trees that way).
    if let Some(bad) = update.history.iter().find(|rev| !rev.is_valid()) {
        return Err(UpdateOutcome::Invalid(format!("invalid revision id {bad}")));
    }
    for pair in update.history.windows(2) {
        if pair[1].child_pos() != Some(pair[0].pos) {
            return Err(UpdateOutcome::Invalid(
                "revision history is not consecutive".into(),
            ));
        }
    }
    let mut record = current.cloned().unwrap_or_else(empty_record);
    if record.tree.contains(newest) {
        return Ok(Plan {
            record,
            rev: newest.clone(),
            new_attachments: Vec::new(),
            unchanged: true,
        });
    }
    let sources: Vec<&Leaf> = current
        .map(|record| record.leaves.iter().collect())
        .unwrap_or_default();
    let (attachments, new_attachments) =
        resolve_attachments(&update.attachments, &sources, newest.pos, true)?;
    record.tree.merge_path(&update.history, update.deleted);
    record.leaves.push(Leaf {
        rev: newest.clone(),
        deleted: update.deleted,
        json: true,
        body: update.body.clone(),
        attachments,
    });
    finish(&mut record, revs_limit);
    // A document written through the CouchDB door is JSON: Couchbase clients read it with the
    // common "JSON" flags, as if an SDK had stored it.
    let mut record = record;
    if record.winner().is_some_and(|winner| winner.json) {
        record.item_flags = COMMON_FLAGS_JSON;
    }
    Ok(Plan {
        record,
        rev: newest.clone(),
        new_attachments,
        unchanged: false,
    })
}

/// The record one CouchDB update would leave, planned without storage exactly as
/// [`Bucket::update_docs`] plans it (limits, then `new_edits=true` edit or `new_edits=false`
/// merge, stemming). Public for the revision-fields fuzz target (`fuzz/`); writes go through
/// `update_docs`, which also checks the result is storable.
#[doc(hidden)]
pub fn plan_update(
    current: Option<&DocRecord>,
    update: &DocUpdate,
    new_edits: bool,
    revs_limit: u32,
    limits: &DocLimits,
) -> Result<DocRecord, UpdateOutcome> {
    check_update(limits, update).map_err(UpdateOutcome::OverLimit)?;
    let plan = if new_edits {
        plan_edit(current, update, revs_limit, false)?
    } else {
        plan_replicated(current, update, revs_limit)?
    };
    Ok(plan.record)
}

/// Checks a CouchDB update's body against the document limits (the HTTP door checks the
/// request first and answers 413 / 400; this is the engine's own check, the same one the KV
/// door's writes meet).
fn check_update(limits: &DocLimits, update: &DocUpdate) -> Result<(), LimitError> {
    limits.check(&update.body, true, 0)
}

/// Couchbase "common flags" for a JSON value (format 2 in the top byte).
pub const COMMON_FLAGS_JSON: u32 = 0x0200_0000;

pub(crate) fn empty_record() -> DocRecord {
    DocRecord {
        cas: 0,
        seqno: 0,
        expiry: 0,
        item_flags: 0,
        tree: settee_revtree::RevTree::new(),
        leaves: Vec::new(),
        xattrs: Bytes::new(),
        index: Bytes::new(),
    }
}

/// Stems to the revision limit and puts leaves in winner order (dropping non-leaf bodies).
pub(crate) fn finish(record: &mut DocRecord, revs_limit: u32) {
    record.tree.stem(revs_limit.max(1) as usize);
    record.normalise_leaves();
}

impl Bucket {
    /// Applies CouchDB updates to collection 0 (`_default._default`) as one durable batch,
    /// written by the node itself ([`Writer::system`]); one outcome per update, in order.
    pub async fn update_docs(
        &self,
        updates: Vec<DocUpdate>,
        new_edits: bool,
    ) -> Result<Vec<UpdateOutcome>, EngineError> {
        self.update_docs_in(0, updates, new_edits, &Writer::system())
            .await
    }

    /// [`Bucket::update_docs`] in collection `collection` (a CouchDB-door database is one
    /// collection, so a batch never spans two). [`EngineError::UnknownCollection`] unless the
    /// collection is live when the batch is staged. Each planned write is validated as
    /// `writer`'s (`validate.rs`) before it is staged.
    pub async fn update_docs_in(
        &self,
        collection: u32,
        updates: Vec<DocUpdate>,
        new_edits: bool,
        writer: &Writer,
    ) -> Result<Vec<UpdateOutcome>, EngineError> {
        self.check_live(collection)?;
        for update in &updates {
            self.wait_writable(self.vbucket_of(&update.key)).await;
            self.check_active(self.vbucket_of(&update.key))?;
        }
        self.designs_current().await;
        let validator = self.validator_for(collection);
        fn doc_key(collection: u32, update: &DocUpdate) -> DocKey<'_> {
            DocKey::new(collection, &update.key)
        }
        let _guards = self
            .lock_keys(updates.iter().map(|update| doc_key(collection, update)))
            .await;
        let revs_limit = self.revs_limit();
        let mut outcomes: Vec<UpdateOutcome> = Vec::with_capacity(updates.len());
        let mut writes: Vec<PlannedWrite> = Vec::new();
        // Outcome index -> write index, and latest planned record per key (a key may repeat).
        let mut write_of_outcome: Vec<Option<usize>> = Vec::with_capacity(updates.len());
        let mut latest: HashMap<Vec<u8>, usize> = HashMap::new();
        for update in &updates {
            if let Err(error) = check_update(&self.limits, update) {
                outcomes.push(UpdateOutcome::OverLimit(error));
                write_of_outcome.push(None);
                continue;
            }
            // A document locked by a KV client (GET_LOCKED) refuses other writers until the
            // lock is released or times out; interactive HTTP edits are other writers.
            if new_edits && self.is_kv_locked(doc_key(collection, update)) {
                outcomes.push(UpdateOutcome::Conflict);
                write_of_outcome.push(None);
                continue;
            }
            let stored;
            let (current, previous_write) = match latest.get(&update.key) {
                Some(index) => (writes[*index].record.as_ref(), Some(*index)),
                None => match self.read_record(doc_key(collection, update)) {
                    Ok(record) => {
                        stored = record;
                        (stored.as_ref(), None)
                    }
                    Err(EngineError::CorruptDocument(reason)) => {
                        outcomes.push(UpdateOutcome::CorruptRecord(reason));
                        write_of_outcome.push(None);
                        continue;
                    }
                    Err(error) => return Err(error),
                },
            };
            let expired = current.is_some_and(|record| self.is_expired(record.expiry));
            let planned = if new_edits {
                plan_edit(current, update, revs_limit, expired)
            } else {
                plan_replicated(current, update, revs_limit)
            };
            match planned {
                Err(outcome) => {
                    outcomes.push(outcome);
                    write_of_outcome.push(None);
                }
                Ok(plan) if plan.unchanged => {
                    outcomes.push(UpdateOutcome::Saved {
                        rev: plan.rev,
                        seqno: plan.record.seqno,
                        cas: plan.record.cas,
                    });
                    write_of_outcome.push(None);
                }
                Ok(plan) => {
                    if let Some(validator) = validator.as_deref() {
                        let key = doc_key(collection, update);
                        let verdict =
                            validate_plan(validator, self, key, writer, update, &plan, current);
                        if let Err(refusal) = verdict.await {
                            outcomes.push(refusal.into());
                            write_of_outcome.push(None);
                            continue;
                        }
                    }
                    outcomes.push(UpdateOutcome::Saved {
                        rev: plan.rev,
                        seqno: 0,
                        cas: 0,
                    });
                    match previous_write {
                        // A second update of the same key in one batch replaces the first write.
                        Some(index) => {
                            let old = OldRevisions::between(current, &plan.record);
                            writes[index].old_revisions.extend(old);
                            writes[index].record = Some(plan.record);
                            writes[index].new_attachments.extend(plan.new_attachments);
                            write_of_outcome.push(Some(index));
                        }
                        None => {
                            let previous = current.map(Previous::of);
                            let old_revisions = OldRevisions::between(current, &plan.record);
                            writes.push(PlannedWrite {
                                vbucket: self.vbucket_of(&update.key),
                                collection,
                                key: update.key.clone(),
                                previous,
                                record: Some(plan.record),
                                new_attachments: plan.new_attachments,
                                macro_nonce: None,
                                apply_max_ttl: true,
                                old_revisions,
                            });
                            latest.insert(update.key.clone(), writes.len() - 1);
                            write_of_outcome.push(Some(writes.len() - 1));
                        }
                    }
                }
            }
        }
        if writes.is_empty() {
            return Ok(outcomes);
        }
        let committed = self.commit_writes(&mut writes).await?;
        for (outcome, write) in outcomes.iter_mut().zip(write_of_outcome) {
            if let (UpdateOutcome::Saved { seqno, cas, .. }, Some(index)) = (outcome, write) {
                *seqno = committed[index].seqno;
                *cas = committed[index].cas;
            }
        }
        Ok(outcomes)
    }

    /// One update; see [`Bucket::update_docs`].
    pub async fn update_doc(
        &self,
        update: DocUpdate,
        new_edits: bool,
    ) -> Result<UpdateOutcome, EngineError> {
        self.update_doc_in(0, update, new_edits, &Writer::system())
            .await
    }

    /// One update in collection `collection`; see [`Bucket::update_docs_in`].
    pub async fn update_doc_in(
        &self,
        collection: u32,
        update: DocUpdate,
        new_edits: bool,
        writer: &Writer,
    ) -> Result<UpdateOutcome, EngineError> {
        let mut outcomes = self
            .update_docs_in(collection, vec![update], new_edits, writer)
            .await?;
        outcomes
            .pop()
            .ok_or_else(|| EngineError::Invalid("no outcome".into()))
    }
}

/// Asks `validator` about one planned write (design and `_local` documents are exempt).
async fn validate_plan(
    validator: &dyn WriteValidator,
    bucket: &Bucket,
    key: DocKey<'_>,
    writer: &Writer,
    update: &DocUpdate,
    plan: &Plan,
    current: Option<&DocRecord>,
) -> Result<(), Refusal> {
    // A replicated revision merged below an existing leaf has no body in the record.
    let unstored;
    let new = match plan.record.leaf(&plan.rev) {
        Some(leaf) => leaf,
        None => {
            unstored = Leaf {
                rev: plan.rev.clone(),
                deleted: update.deleted,
                json: true,
                body: update.body.clone(),
                attachments: Vec::new(),
            };
            &unstored
        }
    };
    let history = plan
        .record
        .tree
        .path(&plan.rev)
        .unwrap_or_else(|| vec![plan.rev.clone()]);
    bucket
        .validate_leaf(validator, key, writer, new, history, current)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Revision ids a real CouchDB 3.5.0 gave these edits (read from it on this machine).
    #[test]
    fn revision_ids_are_couchdbs() {
        let new = |body: &[u8]| couch_revision_hash(None, false, body, &[]);
        assert_eq!(new(br#"{"a":1}"#), "23202479633c2b380f79507a776743d5");
        assert_eq!(new(br#"{"v":1}"#), "7a7e4b29f3af401e69b6f86e4c26b727");
        assert_eq!(
            new(br#"{"partitioned_doc":true}"#),
            "43d86359741cb629c0953a2beb6e9d7a"
        );
        assert_eq!(
            new("{\"b\":[1,2,3],\"c\":{\"d\":\"\u{e9}\",\"e\":1.5}}".as_bytes()),
            "957491dd5616d1cab68a83dd6ee03206"
        );
        assert_eq!(
            new(br#"{"x":[300,-1,"s",null,true,false]}"#),
            "33c86f3bdafd7cc4690ed64e0489f22b"
        );
        assert_eq!(
            new(br#"{"big":12345678901,"neg":-5,"f":1e21,"z":0.1}"#),
            "316bc3faa4b40b8365bae2e12bf1bb4f"
        );
        assert_eq!(new(b"{}"), "967a00dff5e02add41819138abb3284d");
        assert_eq!(new(br#"{"a":-0}"#), "dcf485487e051d7f9b7c62bd4265a425");
        let first = RevId::new(1, "23202479633c2b380f79507a776743d5");
        let second = couch_revision_hash(Some(&first), false, br#"{"a":2}"#, &[]);
        assert_eq!(second, "71173597778497e0a6aa176963f222db");
        let deleted = couch_revision_hash(Some(&RevId::new(2, second)), true, b"{}", &[]);
        assert_eq!(deleted, "e1cb868b6bf2272171643d381ecea5e2");
        // A value that is not JSON keeps settee's own hash.
        assert_eq!(
            couch_revision_hash(None, false, b"\x00raw", &[]),
            revision_hash(None, false, b"\x00raw", &[])
        );
    }

    fn update(parent: Option<&str>, body: &str, deleted: bool) -> DocUpdate {
        DocUpdate {
            key: b"doc".to_vec(),
            parent: parent.map(|text| RevId::parse(text).expect("rev")),
            history: Vec::new(),
            deleted,
            body: Bytes::copy_from_slice(body.as_bytes()),
            attachments: Vec::new(),
        }
    }

    #[test]
    fn create_edit_conflict_delete_recreate() {
        let created = plan_edit(None, &update(None, "{}", false), 1000, false).expect("create");
        assert_eq!(created.rev.pos, 1);
        let first = created.rev.to_string();
        let record = created.record;
        assert_eq!(
            plan_edit(Some(&record), &update(None, "{}", false), 1000, false).err(),
            Some(UpdateOutcome::Conflict)
        );
        let edited = plan_edit(
            Some(&record),
            &update(Some(&first), "{\"a\":1}", false),
            1000,
            false,
        )
        .expect("edit");
        assert_eq!(edited.rev.pos, 2);
        assert_eq!(
            plan_edit(
                Some(&edited.record),
                &update(Some(&first), "{}", false),
                1000,
                false
            )
            .err(),
            Some(UpdateOutcome::Conflict)
        );
        let second = edited.rev.to_string();
        let deleted = plan_edit(
            Some(&edited.record),
            &update(Some(&second), "{}", true),
            1000,
            false,
        )
        .expect("delete");
        assert!(deleted.record.is_deleted());
        let recreated = plan_edit(
            Some(&deleted.record),
            &update(None, "{}", false),
            1000,
            false,
        )
        .expect("recreate");
        assert_eq!(recreated.rev.pos, 4);
        assert!(!recreated.record.is_deleted());
        assert_eq!(recreated.record.leaves.len(), 1);
    }

    #[test]
    fn same_edit_gives_same_revision() {
        let a = plan_edit(None, &update(None, "{\"x\":1}", false), 10, false).expect("a");
        let b = plan_edit(None, &update(None, "{\"x\":1}", false), 10, false).expect("b");
        assert_eq!(a.rev, b.rev);
        let c = plan_edit(None, &update(None, "{\"x\":2}", false), 10, false).expect("c");
        assert_ne!(a.rev, c.rev);
    }

    #[test]
    fn stub_without_source_is_missing_stub() {
        let mut with_stub = update(None, "{}", false);
        with_stub.attachments = vec![AttachmentInput::Stub {
            name: "a".into(),
            revpos: None,
        }];
        assert_eq!(
            plan_edit(None, &with_stub, 10, false).err(),
            Some(UpdateOutcome::MissingStub { name: "a".into() })
        );
    }
}
