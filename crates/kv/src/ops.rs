//! Data operations on the selected bucket. Reads answer inline, straight into the
//! connection's output buffer; writes wait for the group commit's fsync and so become futures.

use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{
    Bucket, DocKey, KvMutation, KvOutcome, KvRef, LimitError, LockOutcome, StoreMode,
    UnlockOutcome, KEY_BYTES_MAX,
};
use settee_kv_codec::{datatype, opcode, status, Frame, FramingExtras};

use crate::session::{error_reply, reply, unknown_reply, Features, Handled};
use crate::KvState;

/// Relative expiry times are at most this many seconds; larger ones are Unix times.
const RELATIVE_EXPIRY_MAX: u32 = 30 * 24 * 3600;
/// Couchbase's GET_LOCKED defaults: 15 s, at most 30 s.
const LOCK_SECS_DEFAULT: u32 = 15;
const LOCK_SECS_MAX: u32 = 30;
/// Replies are snappy-compressed (when negotiated) only from this size up.
const COMPRESS_MIN_BYTES: usize = 4096;

pub(crate) struct OpCtx {
    pub state: Arc<KvState>,
    pub bucket: Arc<Bucket>,
    pub features: Features,
    /// The opcode as sent (replies carry it), and its non-quiet form.
    pub opcode: u8,
    pub base: u8,
    pub quiet: bool,
    pub opaque: u32,
    pub framing: FramingExtras,
    pub heavy_permits: Arc<tokio::sync::Semaphore>,
    /// The collection the request's key names (0 without HELLO Collections).
    pub collection: u32,
    /// The connection's user as validation functions see them (set for writes).
    pub writer: settee_engine::Writer,
}

/// Operations addressed to a vbucket or the bucket, not to a document: their key field is
/// empty (or a stat group) and carries no collection prefix.
pub(crate) fn is_keyless(base: u8) -> bool {
    matches!(base, opcode::STAT | opcode::OBSERVE_SEQNO)
}

/// Operations that read a document's current value (a sync write not yet durable is hidden
/// from them: `sync_write::hidden`).
fn reads_document(base: u8) -> bool {
    use settee_kv_codec::subdoc::op;
    matches!(
        base,
        opcode::GET
            | opcode::GETK
            | opcode::GET_META
            | opcode::GET_LOCKED
            | op::GET
            | op::EXISTS
            | op::GET_COUNT
            | op::MULTI_LOOKUP
    )
}

pub(crate) fn is_data_op(base: u8) -> bool {
    matches!(
        base,
        opcode::GET
            | opcode::GETK
            | opcode::SET
            | opcode::ADD
            | opcode::REPLACE
            | opcode::DELETE
            | opcode::INCREMENT
            | opcode::DECREMENT
            | opcode::APPEND
            | opcode::PREPEND
            | opcode::TOUCH
            | opcode::GAT
            | opcode::GET_LOCKED
            | opcode::UNLOCK_KEY
            | opcode::GET_META
            | opcode::OBSERVE_SEQNO
            | opcode::STAT
    ) || crate::subdoc::is_subdoc(base)
}

/// Couchbase expiry: 0 never, up to 30 days relative seconds, above that a Unix time.
pub(crate) fn absolute_expiry(exptime: u32, now_secs: u32) -> u32 {
    match exptime {
        0 => 0,
        relative if relative <= RELATIVE_EXPIRY_MAX => now_secs.saturating_add(relative),
        absolute => absolute,
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().unwrap_or([0; 4]))
}

fn be_u64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes[..8].try_into().unwrap_or([0; 8]))
}

impl OpCtx {
    /// The document `key` names in this request's collection.
    pub(crate) fn doc<'k>(&self, key: &'k [u8]) -> DocKey<'k> {
        DocKey::new(self.collection, key)
    }

    pub(crate) fn error(&self, out: &mut Vec<u8>, code: u16, context: &str) {
        error_reply(out, &self.features, self.opcode, self.opaque, code, context);
    }

    /// The reply for an engine error: a full disk is a temporary failure (the SDKs retry it,
    /// as kv_engine's ETMPFAIL while it cannot take writes), anything else an internal error.
    /// Either text names no file (settee-storage keeps paths for its log).
    pub(crate) fn engine_error(&self, out: &mut Vec<u8>, error: &settee_engine::EngineError) {
        // The collection was dropped between the door's check and the engine's.
        match *error {
            settee_engine::EngineError::UnknownCollection { manifest_uid } => {
                return unknown_reply(
                    out,
                    &self.features,
                    self.opcode,
                    self.opaque,
                    status::UNKNOWN_COLLECTION,
                    manifest_uid,
                );
            }
            settee_engine::EngineError::UnknownScope { manifest_uid } => {
                return unknown_reply(
                    out,
                    &self.features,
                    self.opcode,
                    self.opaque,
                    status::UNKNOWN_SCOPE,
                    manifest_uid,
                );
            }
            // Not active here (docs/format/replica.md); the cluster config in the body comes
            // with routing by the map.
            // Its value is the bucket's config, as the routed NOT_MY_VBUCKET's: the SDKs read
            // it as the new map (one refused while a rebalance's takeover lands reaches here).
            settee_engine::EngineError::NotMyVbucket { .. } => {
                return crate::map_push::not_my_vbucket(
                    &self.state,
                    &self.bucket,
                    self.opcode,
                    self.opaque,
                    out,
                );
            }
            _ => {}
        }
        // A full disk, or a vbucket's writes paused by a takeover (rebalance.md): the SDKs
        // retry a temporary failure.
        let temporary = matches!(error, settee_engine::EngineError::Unavailable(_));
        let code = if error.is_insufficient_storage() || temporary {
            status::ETMPFAIL
        } else {
            status::EINTERNAL
        };
        self.error(out, code, &error.to_string());
    }

    pub(crate) fn locked_status(&self) -> u16 {
        if self.features.xerror {
            status::LOCKED
        } else {
            status::ETMPFAIL
        }
    }

    /// GET-style reply: 4 bytes of flags (as stored), optionally the key, the value.
    fn value_reply(&self, out: &mut Vec<u8>, key: &[u8], value: KvRef<'_>) {
        let flags = value.item_flags.to_be_bytes();
        let mut dt = if value.json && self.features.json {
            datatype::JSON
        } else {
            datatype::RAW
        };
        let key = if matches!(self.base, opcode::GETK) {
            key
        } else {
            &[]
        };
        if self.features.snappy && value.body.len() >= COMPRESS_MIN_BYTES {
            if let Ok(compressed) = snap::raw::Encoder::new().compress_vec(value.body) {
                if compressed.len() < value.body.len() / 8 * 7 {
                    dt |= datatype::SNAPPY;
                    reply(
                        out,
                        self.opcode,
                        self.opaque,
                        0,
                        value.cas,
                        dt,
                        &flags,
                        key,
                        &compressed,
                    );
                    return;
                }
            }
        }
        reply(
            out,
            self.opcode,
            self.opaque,
            0,
            value.cas,
            dt,
            &flags,
            key,
            value.body,
        );
    }

    /// A mutation reply's extras: the mutation token (vbucket uuid, seqno) when MutationSeqno
    /// was negotiated, else none.
    pub(crate) fn token_extras(&self, key: &[u8], seqno: u64) -> ([u8; 16], usize) {
        let mut extras = [0u8; 16];
        if !self.features.mutation_seqno {
            return (extras, 0);
        }
        let vbucket = self.bucket.vbucket_of(key);
        extras[..8].copy_from_slice(&self.bucket.vbucket_uuid(vbucket).to_be_bytes());
        extras[8..].copy_from_slice(&seqno.to_be_bytes());
        (extras, 16)
    }

    fn mutation_reply(&self, out: &mut Vec<u8>, key: &[u8], cas: u64, seqno: u64, value: &[u8]) {
        if self.quiet {
            return;
        }
        let (extras, len) = self.token_extras(key, seqno);
        reply(
            out,
            self.opcode,
            self.opaque,
            0,
            cas,
            0,
            &extras[..len],
            &[],
            value,
        );
    }

    fn outcome_reply(&self, out: &mut Vec<u8>, key: &[u8], outcome: KvOutcome) {
        match outcome {
            KvOutcome::Stored { cas, seqno, .. } => self.mutation_reply(out, key, cas, seqno, &[]),
            KvOutcome::Counted { cas, seqno, value } => {
                self.mutation_reply(out, key, cas, seqno, &value.to_be_bytes())
            }
            KvOutcome::NotFound => self.error(out, status::KEY_ENOENT, "Not found"),
            KvOutcome::Exists => self.error(out, status::KEY_EEXISTS, "Document exists"),
            KvOutcome::CasMismatch => self.error(out, status::KEY_EEXISTS, "CAS mismatch"),
            KvOutcome::Locked => self.error(out, self.locked_status(), "Document is locked"),
            KvOutcome::NotStored => self.error(out, status::NOT_STORED, "Not stored"),
            KvOutcome::NotANumber => self.error(
                out,
                status::DELTA_BADVAL,
                "Existing document is not a number",
            ),
            // The node's one document limit (the HTTP door's 413): E2BIG as kv_engine answers
            // for an item over its size limit.
            KvOutcome::OverLimit(LimitError::TooLarge { size, max }) => self.error(
                out,
                status::E2BIG,
                &format!("Value too big: {size} bytes, the document limit is {max}"),
            ),
            // kv_engine has no depth limit of its own (it stores what its JSON validator
            // accepts); the node's one JSON depth limit refuses the value with EINVAL and says
            // why in the error context, as kv_engine does for a value it will not store.
            KvOutcome::OverLimit(LimitError::TooDeep { max }) => self.error(
                out,
                status::EINVAL,
                &format!("JSON value nested deeper than {max} levels"),
            ),
            KvOutcome::OverLimit(LimitError::InvalidJson(reason)) => {
                self.error(out, status::EINVAL, reason)
            }
            KvOutcome::GenerationOverflow => self.error(
                out,
                status::EINVAL,
                "The document's revision is at the largest generation",
            ),
            KvOutcome::Refused(refusal) => self.refusal(out, &refusal),
        }
    }

    /// A write a validation function refused: EACCESS (what Couchbase answers a write the
    /// user may not make) with the function's reason in the error context; EINTERNAL when
    /// the function failed.
    pub fn refusal(&self, out: &mut Vec<u8>, refusal: &settee_engine::Refusal) {
        match refusal {
            settee_engine::Refusal::Forbidden(reason) => {
                self.error(out, status::EACCESS, &format!("forbidden: {reason}"))
            }
            settee_engine::Refusal::Unauthorized(reason) => {
                self.error(out, status::EACCESS, &format!("unauthorized: {reason}"))
            }
            settee_engine::Refusal::Failed(reason) => self.error(
                out,
                status::EINTERNAL,
                &format!("validate_doc_update failed: {reason}"),
            ),
        }
    }
}

/// Runs one data operation; `key` has its collection prefix removed.
pub(crate) fn run(
    ctx: OpCtx,
    frame: &Frame<'_>,
    key: &[u8],
    bytes: &Bytes,
    out: &mut Vec<u8>,
) -> Handled {
    if !is_keyless(ctx.base) && (key.is_empty() || key.len() > KEY_BYTES_MAX) {
        ctx.error(out, status::EINVAL, "Invalid key length");
        return Handled::Done;
    }
    if reads_document(ctx.base) && crate::sync_write::hidden(&ctx, key) {
        ctx.error(
            out,
            status::SYNC_WRITE_RE_COMMIT_IN_PROGRESS,
            "A sync write to this key is not durable yet",
        );
        return Handled::Done;
    }
    match ctx.base {
        opcode::GET | opcode::GETK => {
            match ctx
                .bucket
                .kv_read(ctx.doc(key), |value| ctx.value_reply(out, key, value))
            {
                Ok(Some(())) => {}
                Ok(None) if ctx.quiet => {}
                Ok(None) => ctx.error(out, status::KEY_ENOENT, "Not found"),
                Err(error) => ctx.engine_error(out, &error),
            }
            Handled::Done
        }
        opcode::GET_META => {
            match ctx.bucket.kv_meta(ctx.doc(key)) {
                Ok(Some(meta)) => {
                    let mut extras = Vec::with_capacity(21);
                    extras.extend_from_slice(&u32::from(meta.deleted).to_be_bytes());
                    extras.extend_from_slice(&meta.item_flags.to_be_bytes());
                    extras.extend_from_slice(&meta.expiry.to_be_bytes());
                    extras.extend_from_slice(&meta.rev_seqno.to_be_bytes());
                    if frame.extras == [2] {
                        extras.push(if meta.json {
                            datatype::JSON
                        } else {
                            datatype::RAW
                        });
                    }
                    reply(
                        out,
                        ctx.opcode,
                        ctx.opaque,
                        0,
                        meta.cas,
                        0,
                        &extras,
                        &[],
                        &[],
                    );
                }
                Ok(None) => ctx.error(out, status::KEY_ENOENT, "Not found"),
                Err(error) => ctx.engine_error(out, &error),
            }
            Handled::Done
        }
        opcode::OBSERVE_SEQNO => {
            if frame.value.len() != 8 {
                ctx.error(
                    out,
                    status::EINVAL,
                    "OBSERVE_SEQNO takes an 8-byte vbucket uuid",
                );
                return Handled::Done;
            }
            let vbucket = frame.vbucket();
            let uuid = ctx.bucket.vbucket_uuid(vbucket);
            let high = ctx.bucket.high_seqnos().get(vbucket);
            let mut value = Vec::with_capacity(27);
            value.push(0);
            value.extend_from_slice(&vbucket.to_be_bytes());
            value.extend_from_slice(&uuid.to_be_bytes());
            value.extend_from_slice(&high.to_be_bytes());
            value.extend_from_slice(&high.to_be_bytes());
            reply(out, ctx.opcode, ctx.opaque, 0, 0, 0, &[], &[], &value);
            Handled::Done
        }
        opcode::STAT => {
            stats(&ctx, frame.key, out);
            Handled::Done
        }
        base if crate::subdoc::is_subdoc(base) => crate::subdoc::run(ctx, frame, key, bytes, out),
        _ => mutation(ctx, frame, key, bytes, out),
    }
}

fn stats(ctx: &OpCtx, group: &[u8], out: &mut Vec<u8>) {
    if !group.is_empty() {
        ctx.error(out, status::KEY_ENOENT, "Unknown stat group");
        return;
    }
    let (live, deleted) = ctx.bucket.doc_counts();
    let entries = [
        ("pid", std::process::id().to_string()),
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("curr_items", live.to_string()),
        ("curr_temp_items", "0".to_string()),
        ("vb_active_num", ctx.bucket.vbuckets().to_string()),
        ("ep_num_non_resident", "0".to_string()),
        ("deleted_items", deleted.to_string()),
    ];
    for (name, value) in entries {
        reply(
            out,
            ctx.opcode,
            ctx.opaque,
            0,
            0,
            0,
            &[],
            name.as_bytes(),
            value.as_bytes(),
        );
    }
    reply(out, ctx.opcode, ctx.opaque, 0, 0, 0, &[], &[], &[]);
}

/// The request's value, decompressed if the client sent it snappy-compressed.
pub(crate) fn request_value(
    ctx: &OpCtx,
    frame: &Frame<'_>,
    bytes: &Bytes,
) -> Result<Bytes, (u16, &'static str)> {
    let max = ctx.state.config.max_value_bytes;
    if frame.datatype & datatype::SNAPPY != 0 {
        if !ctx.features.snappy {
            return Err((status::EINVAL, "Snappy value without the Snappy feature"));
        }
        let len = snap::raw::decompress_len(frame.value)
            .map_err(|_| (status::EINVAL, "Invalid snappy value"))?;
        if len > max {
            return Err((status::E2BIG, "Value too big"));
        }
        let value = snap::raw::Decoder::new()
            .decompress_vec(frame.value)
            .map_err(|_| (status::EINVAL, "Invalid snappy value"))?;
        return Ok(Bytes::from(value));
    }
    if frame.value.len() > max {
        return Err((status::E2BIG, "Value too big"));
    }
    Ok(bytes.slice_ref(frame.value))
}

fn mutation(
    ctx: OpCtx,
    frame: &Frame<'_>,
    key: &[u8],
    bytes: &Bytes,
    out: &mut Vec<u8>,
) -> Handled {
    let extras = frame.extras;
    let cas = frame.cas;
    let now = ctx.bucket.now_secs();
    // `key` is a sub-slice of this frame's bytes: the future shares them, no copy.
    let key_bytes = bytes.slice_ref(key);
    enum Job {
        Mutate(KvMutation),
        Lock(u32),
        Unlock(u64),
        GetAndTouch(u32),
    }
    let job = match ctx.base {
        opcode::SET | opcode::ADD | opcode::REPLACE => {
            if extras.len() != 8 {
                ctx.error(out, status::EINVAL, "Store commands take 8 bytes of extras");
                return Handled::Done;
            }
            if ctx.base == opcode::ADD && cas != 0 {
                ctx.error(out, status::EINVAL, "ADD does not take a CAS");
                return Handled::Done;
            }
            let value = match request_value(&ctx, frame, bytes) {
                Ok(value) => value,
                Err((code, context)) => {
                    ctx.error(out, code, context);
                    return Handled::Done;
                }
            };
            let mut expiry = absolute_expiry(be_u32(&extras[4..]), now);
            if ctx.framing.preserve_ttl && ctx.base != opcode::ADD {
                if let Ok(Some(meta)) = ctx.bucket.kv_meta(ctx.doc(key)) {
                    if !meta.deleted {
                        expiry = meta.expiry;
                    }
                }
            }
            Job::Mutate(KvMutation::Store {
                mode: match ctx.base {
                    opcode::ADD => StoreMode::Add,
                    opcode::REPLACE => StoreMode::Replace,
                    _ => StoreMode::Set,
                },
                json: settee_engine::is_json(&value),
                value,
                item_flags: be_u32(extras),
                expiry,
                cas,
            })
        }
        opcode::DELETE => {
            if !extras.is_empty() || !frame.value.is_empty() {
                ctx.error(out, status::EINVAL, "DELETE takes no extras and no value");
                return Handled::Done;
            }
            Job::Mutate(KvMutation::Remove { cas })
        }
        opcode::APPEND | opcode::PREPEND => {
            if !extras.is_empty() {
                ctx.error(out, status::EINVAL, "APPEND/PREPEND take no extras");
                return Handled::Done;
            }
            let data = match request_value(&ctx, frame, bytes) {
                Ok(value) => value,
                Err((code, context)) => {
                    ctx.error(out, code, context);
                    return Handled::Done;
                }
            };
            Job::Mutate(KvMutation::Concat {
                data,
                prepend: ctx.base == opcode::PREPEND,
                cas,
            })
        }
        opcode::INCREMENT | opcode::DECREMENT => {
            if extras.len() != 20 || !frame.value.is_empty() {
                ctx.error(
                    out,
                    status::EINVAL,
                    "Counters take 20 bytes of extras and no value",
                );
                return Handled::Done;
            }
            let exptime = be_u32(&extras[16..]);
            Job::Mutate(KvMutation::Counter {
                delta: be_u64(extras),
                decrement: ctx.base == opcode::DECREMENT,
                initial: (exptime != u32::MAX).then(|| be_u64(&extras[8..])),
                expiry: if exptime == u32::MAX {
                    0
                } else {
                    absolute_expiry(exptime, now)
                },
                cas,
            })
        }
        opcode::TOUCH | opcode::GAT => {
            if extras.len() != 4 {
                ctx.error(out, status::EINVAL, "TOUCH/GAT take 4 bytes of extras");
                return Handled::Done;
            }
            let expiry = absolute_expiry(be_u32(extras), now);
            if ctx.base == opcode::GAT {
                Job::GetAndTouch(expiry)
            } else {
                Job::Mutate(KvMutation::Touch { expiry })
            }
        }
        opcode::GET_LOCKED => {
            let secs = match extras {
                [] => LOCK_SECS_DEFAULT,
                [a, b, c, d] => match u32::from_be_bytes([*a, *b, *c, *d]) {
                    0 => LOCK_SECS_DEFAULT,
                    secs if secs > LOCK_SECS_MAX => LOCK_SECS_DEFAULT,
                    secs => secs,
                },
                _ => {
                    ctx.error(
                        out,
                        status::EINVAL,
                        "GET_LOCKED takes 0 or 4 bytes of extras",
                    );
                    return Handled::Done;
                }
            };
            Job::Lock(secs)
        }
        opcode::UNLOCK_KEY => Job::Unlock(cas),
        _ => {
            ctx.error(out, status::UNKNOWN_COMMAND, "Unknown command");
            return Handled::Done;
        }
    };
    let future = async move {
        let mut out = Vec::new();
        let key = &key_bytes[..];
        match job {
            Job::Mutate(mutation) => {
                let write = async {
                    let mut out = Vec::new();
                    let stored = match ctx
                        .bucket
                        .kv_mutate(ctx.doc(key), mutation, &ctx.writer)
                        .await
                    {
                        Ok(outcome) => {
                            let stored = match outcome {
                                KvOutcome::Stored { seqno, .. }
                                | KvOutcome::Counted { seqno, .. } => Some(seqno),
                                _ => None,
                            };
                            ctx.outcome_reply(&mut out, key, outcome);
                            stored
                        }
                        Err(error) => {
                            ctx.engine_error(&mut out, &error);
                            None
                        }
                    };
                    (out, stored)
                };
                out = crate::sync_write::run(&ctx, key, write).await;
            }
            Job::GetAndTouch(expiry) => {
                match ctx
                    .bucket
                    .kv_mutate(ctx.doc(key), KvMutation::Touch { expiry }, &ctx.writer)
                    .await
                {
                    Ok(KvOutcome::Stored { .. }) => match ctx.bucket.kv_get(ctx.doc(key)) {
                        Ok(Some(value)) => ctx.value_reply(&mut out, key, value.as_ref()),
                        Ok(None) => ctx.error(&mut out, status::KEY_ENOENT, "Not found"),
                        Err(error) => ctx.engine_error(&mut out, &error),
                    },
                    Ok(outcome) => ctx.outcome_reply(&mut out, key, outcome),
                    Err(error) => ctx.engine_error(&mut out, &error),
                }
            }
            Job::Lock(secs) => match ctx.bucket.kv_get_and_lock(ctx.doc(key), secs).await {
                Ok(LockOutcome::Locked(value)) => ctx.value_reply(&mut out, key, value.as_ref()),
                Ok(LockOutcome::NotFound) => ctx.error(&mut out, status::KEY_ENOENT, "Not found"),
                Ok(LockOutcome::AlreadyLocked) => {
                    ctx.error(&mut out, ctx.locked_status(), "Document is locked")
                }
                Err(error) => ctx.engine_error(&mut out, &error),
            },
            Job::Unlock(cas) => match ctx.bucket.kv_unlock(ctx.doc(key), cas).await {
                Ok(UnlockOutcome::Unlocked) => {
                    reply(&mut out, ctx.opcode, ctx.opaque, 0, 0, 0, &[], &[], &[])
                }
                Ok(UnlockOutcome::NotFound) => ctx.error(&mut out, status::KEY_ENOENT, "Not found"),
                Ok(UnlockOutcome::NotLocked) => {
                    ctx.error(&mut out, status::ETMPFAIL, "Document is not locked")
                }
                Ok(UnlockOutcome::CasMismatch) => {
                    ctx.error(&mut out, ctx.locked_status(), "Wrong lock CAS")
                }
                Err(error) => ctx.engine_error(&mut out, &error),
            },
        }
        out
    };
    Handled::Later(Box::pin(future))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_relative_up_to_thirty_days_then_absolute() {
        assert_eq!(absolute_expiry(0, 1_000), 0);
        assert_eq!(absolute_expiry(10, 1_000), 1_010);
        assert_eq!(absolute_expiry(RELATIVE_EXPIRY_MAX, 0), RELATIVE_EXPIRY_MAX);
        assert_eq!(
            absolute_expiry(RELATIVE_EXPIRY_MAX + 1, 5),
            RELATIVE_EXPIRY_MAX + 1
        );
        assert_eq!(absolute_expiry(1_900_000_000, 1_700_000_000), 1_900_000_000);
    }
}
