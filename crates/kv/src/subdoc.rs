//! Sub-document requests: which spec opcode takes which path flags, document flags and values,
//! checked before the document is touched, with the statuses kv_engine gives each mistake
//! (its `daemon/subdocument_traits.h` and `subdocument_validators.cc`).

use bytes::Bytes;
use settee_engine::subdoc::{
    CreateMode, Lookup, LookupOp, LookupSpec, MutateIn, MutateInOutcome, MutateOp, MutateSpec,
    Status,
};
use settee_engine::LimitError;
use settee_kv_codec::subdoc::{
    doc_flag, op, path_flag, put_lookup_result, put_mutation_result, MultiExtras, SingleExtras,
    Spec, Specs, SubdocError, MAX_PATH_BYTES,
};
use settee_kv_codec::{datatype, finish_response, opcode, start_response, status, Frame};
use smallvec::SmallVec;

use crate::ops::{absolute_expiry, request_value, OpCtx};
use crate::session::{reply, Handled};

/// The single-path sub-document opcodes and the two multi-path ones.
pub(crate) fn is_subdoc(base: u8) -> bool {
    matches!(
        base,
        op::GET..=op::COUNTER | op::MULTI_LOOKUP | op::MULTI_MUTATION | op::GET_COUNT
    )
}

/// The KV status code of a spec outcome.
fn status_code(outcome: Status) -> u16 {
    match outcome {
        Status::Success => status::SUCCESS,
        Status::PathEnoent => status::SUBDOC_PATH_ENOENT,
        Status::PathMismatch => status::SUBDOC_PATH_MISMATCH,
        Status::PathEinval => status::SUBDOC_PATH_EINVAL,
        Status::PathE2big => status::SUBDOC_PATH_E2BIG,
        Status::DocE2deep => status::SUBDOC_DOC_E2DEEP,
        Status::ValueCantinsert => status::SUBDOC_VALUE_CANTINSERT,
        Status::DocNotJson => status::SUBDOC_DOC_NOT_JSON,
        Status::NumErange => status::SUBDOC_NUM_ERANGE,
        Status::DeltaEinval => status::SUBDOC_DELTA_EINVAL,
        Status::PathEexists => status::SUBDOC_PATH_EEXISTS,
        Status::ValueEtoodeep => status::SUBDOC_VALUE_ETOODEEP,
        Status::XattrUnknownVattr => status::SUBDOC_XATTR_UNKNOWN_VATTR,
    }
}

fn lookup_op(spec_op: u8) -> LookupOp {
    match spec_op {
        op::EXISTS => LookupOp::Exists,
        op::GET_COUNT => LookupOp::Count,
        op::GET_DOC => LookupOp::WholeDoc,
        _ => LookupOp::Get,
    }
}

fn mutate_op(spec_op: u8) -> MutateOp {
    match spec_op {
        op::DICT_ADD => MutateOp::DictAdd,
        op::DICT_UPSERT => MutateOp::DictUpsert,
        op::DELETE => MutateOp::Delete,
        op::REPLACE => MutateOp::Replace,
        op::ARRAY_PUSH_LAST => MutateOp::ArrayPushLast,
        op::ARRAY_PUSH_FIRST => MutateOp::ArrayPushFirst,
        op::ARRAY_INSERT => MutateOp::ArrayInsert,
        op::ARRAY_ADD_UNIQUE => MutateOp::ArrayAddUnique,
        op::COUNTER => MutateOp::Counter,
        op::SET_DOC => MutateOp::SetDoc,
        _ => MutateOp::DeleteDoc,
    }
}

/// Runs a sub-document request. Lookups run on the heavy-request pool (they may walk a large
/// document); mutations are futures like every other write.
pub(crate) fn run(
    ctx: OpCtx,
    frame: &Frame<'_>,
    key: &[u8],
    bytes: &Bytes,
    out: &mut Vec<u8>,
) -> Handled {
    // A snappy-compressed request carries compressed specs: work on the inflated copy.
    let inflated = match request_value(&ctx, frame, bytes) {
        Ok(value) => value,
        Err((code, context)) => {
            ctx.error(out, code, context);
            return Handled::Done;
        }
    };
    let mut plain = *frame;
    plain.value = &inflated;
    let request = match parse(&plain, ctx.features.xattr) {
        Ok(request) => request,
        Err((code, context)) => {
            ctx.error(out, code, context);
            return Handled::Done;
        }
    };
    let key = bytes.slice_ref(key);
    if !request.mutation {
        return lookup(ctx, request, key, &inflated, out);
    }
    let specs: Vec<(u8, u8, Bytes, Bytes)> = request
        .specs
        .as_slice()
        .iter()
        .map(|spec| {
            (
                spec.op,
                spec.flags,
                inflated.slice_ref(spec.path),
                inflated.slice_ref(spec.value),
            )
        })
        .collect();
    mutate(ctx, request, frame.cas, key, specs)
}

/// Answers a lookup on the request thread unless it is heavy (then `false`: nothing written).
/// Multi-path results are written into `out` as the engine produces them.
fn answer_lookup(
    ctx: &OpCtx,
    single: bool,
    access_deleted: bool,
    key: &[u8],
    lookups: &[LookupSpec<'_>],
    light_only: bool,
    out: &mut Vec<u8>,
) -> bool {
    if single {
        return answer_single_lookup(ctx, access_deleted, key, lookups, light_only, out);
    }
    let start = start_response(out, ctx.opcode, ctx.opaque);
    let mut failed = false;
    let each = |_: usize, outcome: Status, value: &[u8]| {
        let code = status_code(outcome);
        failed |= code != status::SUCCESS;
        put_lookup_result(out, code, value);
    };
    let found = run_lookup(ctx, key, lookups, access_deleted, light_only, each);
    match found {
        Ok(Lookup::Found(meta)) => {
            let code = match (failed, meta.deleted) {
                (false, false) => status::SUCCESS,
                (false, true) => status::SUBDOC_SUCCESS_DELETED,
                (true, false) => status::SUBDOC_MULTI_PATH_FAILURE,
                (true, true) => status::SUBDOC_MULTI_PATH_FAILURE_DELETED,
            };
            finish_response(out, start, code, meta.cas, datatype::RAW);
        }
        Ok(Lookup::Heavy) => {
            out.truncate(start);
            return false;
        }
        Ok(Lookup::NotFound) => {
            out.truncate(start);
            ctx.error(out, status::KEY_ENOENT, "Not found");
        }
        Err(error) => {
            out.truncate(start);
            ctx.engine_error(out, &error);
        }
    }
    true
}

/// Runs the lookup: on a request thread (`light_only`) one that would scan a large body is
/// refused as [`Lookup::Heavy`]; on the heavy pool every lookup runs.
fn run_lookup(
    ctx: &OpCtx,
    key: &[u8],
    lookups: &[LookupSpec<'_>],
    access_deleted: bool,
    light_only: bool,
    each: impl FnMut(usize, Status, &[u8]),
) -> Result<Lookup, settee_engine::EngineError> {
    if light_only {
        ctx.bucket
            .lookup_in_light(ctx.doc(key), lookups, access_deleted, each)
    } else {
        ctx.bucket
            .lookup_in(ctx.doc(key), lookups, access_deleted, each)
            .map(|found| found.map_or(Lookup::NotFound, Lookup::Found))
    }
}

fn answer_single_lookup(
    ctx: &OpCtx,
    access_deleted: bool,
    key: &[u8],
    lookups: &[LookupSpec<'_>],
    light_only: bool,
    out: &mut Vec<u8>,
) -> bool {
    let mut single_result: (u16, Vec<u8>) = (0, Vec::new());
    let each = |_: usize, outcome: Status, value: &[u8]| {
        single_result = (status_code(outcome), value.to_vec());
    };
    let found = run_lookup(ctx, key, lookups, access_deleted, light_only, each);
    match found {
        Ok(Lookup::Found(meta)) => {
            let (code, value) = single_result;
            if code != status::SUCCESS {
                ctx.error(out, code, "Sub-document path failed");
                return true;
            }
            let dt = if value.is_empty() || !ctx.features.json {
                datatype::RAW
            } else {
                datatype::JSON
            };
            let code = if meta.deleted {
                status::SUBDOC_SUCCESS_DELETED
            } else {
                code
            };
            reply(
                out,
                ctx.opcode,
                ctx.opaque,
                code,
                meta.cas,
                dt,
                &[],
                &[],
                &value,
            );
        }
        Ok(Lookup::Heavy) => return false,
        Ok(Lookup::NotFound) => ctx.error(out, status::KEY_ENOENT, "Not found"),
        Err(error) => ctx.engine_error(out, &error),
    }
    true
}

fn lookup_specs<'a>(
    specs: impl Iterator<Item = (u8, u8, &'a [u8])>,
) -> SmallVec<[LookupSpec<'a>; 16]> {
    specs
        .map(|(spec_op, flags, path)| LookupSpec {
            op: lookup_op(spec_op),
            xattr: flags & path_flag::XATTR != 0,
            path,
        })
        .collect()
}

/// A lookup the structural index makes cheap is answered right here; one that must scan a
/// large unindexed body or large xattrs goes to the heavy pool.
fn lookup(
    ctx: OpCtx,
    request: Request<'_>,
    key: Bytes,
    inflated: &Bytes,
    out: &mut Vec<u8>,
) -> Handled {
    let single = request.single;
    let access_deleted = request.doc_flags & doc_flag::ACCESS_DELETED != 0;
    let lookups = lookup_specs(
        request
            .specs
            .as_slice()
            .iter()
            .map(|spec| (spec.op, spec.flags, spec.path)),
    );
    if answer_lookup(&ctx, single, access_deleted, &key, &lookups, true, out) {
        return Handled::Done;
    }
    // Owned specs: the job outlives this frame's borrow.
    let specs: Vec<(u8, u8, Bytes)> = request
        .specs
        .as_slice()
        .iter()
        .map(|spec| (spec.op, spec.flags, inflated.slice_ref(spec.path)))
        .collect();
    let ctx = std::sync::Arc::new(ctx);
    let job_ctx = ctx.clone();
    let job = move || {
        let lookups = lookup_specs(
            specs
                .iter()
                .map(|(spec_op, flags, path)| (*spec_op, *flags, &path[..])),
        );
        let mut out = Vec::new();
        answer_lookup(
            &job_ctx,
            single,
            access_deleted,
            &key,
            &lookups,
            false,
            &mut out,
        );
        out
    };
    Handled::Later(Box::pin(async move {
        let pool = ctx.state.clone();
        match pool.heavy.run(&ctx.heavy_permits, job).await {
            Some(out) => out,
            None => {
                let mut out = Vec::new();
                ctx.error(&mut out, status::EINTERNAL, "Sub-document lookup failed");
                out
            }
        }
    }))
}

fn mutate(
    ctx: OpCtx,
    request: Request<'_>,
    cas: u64,
    key: Bytes,
    specs: Vec<(u8, u8, Bytes, Bytes)>,
) -> Handled {
    let now = ctx.bucket.now_secs();
    let expiry = match request.expiry {
        Some(exptime) => Some(absolute_expiry(exptime, now)),
        None if ctx.framing.preserve_ttl => None,
        None => Some(0),
    };
    let flags = request.doc_flags;
    let mutate_in = MutateIn {
        specs: specs
            .into_iter()
            .map(|(spec_op, path_flags, path, value)| MutateSpec {
                op: mutate_op(spec_op),
                xattr: path_flags & path_flag::XATTR != 0,
                mkdir_p: path_flags & path_flag::MKDIR_P != 0,
                expand_macros: path_flags & path_flag::EXPAND_MACROS != 0,
                path,
                value,
            })
            .collect(),
        create: if flags & doc_flag::ADD != 0 {
            CreateMode::Insert
        } else if flags & doc_flag::MKDOC != 0 {
            CreateMode::Upsert
        } else {
            CreateMode::Replace
        },
        access_deleted: flags & doc_flag::ACCESS_DELETED != 0,
        cas,
        expiry,
    };
    let single = request.single;
    Handled::Later(Box::pin(async move {
        let write = mutate_reply(&ctx, single, &key, mutate_in);
        crate::sync_write::run(&ctx, &key, write).await
    }))
}

/// Runs a sub-document mutation: its reply, and the seqno it stored at.
async fn mutate_reply(
    ctx: &OpCtx,
    single: bool,
    key: &[u8],
    mutate_in: MutateIn,
) -> (Vec<u8>, Option<u64>) {
    let mut out = Vec::new();
    let mut stored = None;
    match ctx
        .bucket
        .mutate_in(ctx.doc(key), mutate_in, &ctx.writer)
        .await
    {
        Ok(MutateInOutcome::Done {
            cas, seqno, values, ..
        }) => {
            stored = Some(seqno);
            let (token, len) = ctx.token_extras(key, seqno);
            let extras = &token[..len];
            let mut body = Vec::new();
            if single {
                if let Some((_, value)) = values.first() {
                    body.extend_from_slice(value);
                }
            } else {
                for (index, value) in &values {
                    put_mutation_result(&mut body, *index, status::SUCCESS, Some(value));
                }
            }
            let dt = if !body.is_empty() && single && ctx.features.json {
                datatype::JSON
            } else {
                datatype::RAW
            };
            reply(
                &mut out,
                ctx.opcode,
                ctx.opaque,
                0,
                cas,
                dt,
                extras,
                &[],
                &body,
            );
        }
        Ok(MutateInOutcome::SpecFailed {
            index,
            status: outcome,
        }) => {
            let code = status_code(outcome);
            if single {
                ctx.error(&mut out, code, "Sub-document path failed");
            } else {
                let mut body = Vec::new();
                put_mutation_result(&mut body, index, code, None);
                reply(
                    &mut out,
                    ctx.opcode,
                    ctx.opaque,
                    status::SUBDOC_MULTI_PATH_FAILURE,
                    0,
                    0,
                    &[],
                    &[],
                    &body,
                );
            }
        }
        Ok(MutateInOutcome::NotFound) => ctx.error(&mut out, status::KEY_ENOENT, "Not found"),
        Ok(MutateInOutcome::Exists) => ctx.error(&mut out, status::KEY_EEXISTS, "Document exists"),
        Ok(MutateInOutcome::CasMismatch) => {
            ctx.error(&mut out, status::KEY_EEXISTS, "CAS mismatch")
        }
        Ok(MutateInOutcome::Locked) => {
            ctx.error(&mut out, ctx.locked_status(), "Document is locked")
        }
        Ok(MutateInOutcome::NotJson) => ctx.error(
            &mut out,
            status::SUBDOC_DOC_NOT_JSON,
            "Document is not JSON",
        ),
        Ok(MutateInOutcome::OverLimit(LimitError::TooLarge { .. })) => {
            ctx.error(&mut out, status::E2BIG, "Document too big")
        }
        // kv_engine answers SUBDOC_DOC_E2DEEP for a document deeper than it can parse;
        // the same status says a mutation would leave one deeper than the limit.
        Ok(MutateInOutcome::OverLimit(LimitError::TooDeep { max })) => ctx.error(
            &mut out,
            status::SUBDOC_DOC_E2DEEP,
            &format!("Document would nest deeper than {max} levels"),
        ),
        Ok(MutateInOutcome::OverLimit(LimitError::InvalidJson(reason))) => {
            ctx.error(&mut out, status::EINVAL, reason)
        }
        Ok(MutateInOutcome::GenerationOverflow) => ctx.error(
            &mut out,
            status::EINVAL,
            "The document's revision is at the largest generation",
        ),
        Ok(MutateInOutcome::Refused(refusal)) => ctx.refusal(&mut out, &refusal),
        Err(error) => ctx.engine_error(&mut out, &error),
    }
    (out, stored)
}

/// What one spec opcode allows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Traits {
    pub path_flags: u8,
    pub doc_flags: u8,
    pub has_value: bool,
    pub empty_path: bool,
    pub mutator: bool,
    /// Whole-document ops inside multi-path commands: they take no path.
    pub whole_doc: bool,
}

const LOOKUP_DOC_FLAGS: u8 = doc_flag::ACCESS_DELETED | doc_flag::REVIVE | doc_flag::REPLICA_READ;
const CREATING_DOC_FLAGS: u8 = doc_flag::MKDOC
    | doc_flag::ACCESS_DELETED
    | doc_flag::REVIVE
    | doc_flag::ADD
    | doc_flag::CREATE_AS_DELETED;

pub(crate) fn traits(spec_op: u8) -> Option<Traits> {
    let lookup = |path_flags, empty_path| Traits {
        path_flags,
        doc_flags: LOOKUP_DOC_FLAGS,
        has_value: false,
        empty_path,
        mutator: false,
        whole_doc: false,
    };
    let mutation = |path_flags, doc_flags, has_value, empty_path| Traits {
        path_flags,
        doc_flags,
        has_value,
        empty_path,
        mutator: true,
        whole_doc: false,
    };
    let xattr = path_flag::XATTR;
    let mkdir_p = path_flag::MKDIR_P;
    let macros = path_flag::EXPAND_MACROS;
    let binary = path_flag::BINARY_VALUE;
    let keep_doc = doc_flag::ACCESS_DELETED | doc_flag::REVIVE;
    Some(match spec_op {
        op::GET => lookup(xattr | binary, false),
        op::EXISTS => lookup(xattr, false),
        op::GET_COUNT => lookup(xattr, true),
        op::GET_DOC => Traits {
            whole_doc: true,
            ..lookup(0, true)
        },
        op::DICT_ADD | op::DICT_UPSERT => mutation(
            mkdir_p | xattr | macros | binary,
            CREATING_DOC_FLAGS,
            true,
            false,
        ),
        op::DELETE => mutation(xattr, keep_doc, false, false),
        op::REPLACE => mutation(
            xattr | macros | binary,
            keep_doc | doc_flag::ADD,
            true,
            false,
        ),
        op::ARRAY_PUSH_LAST | op::ARRAY_PUSH_FIRST => {
            mutation(mkdir_p | xattr | macros, CREATING_DOC_FLAGS, true, true)
        }
        op::ARRAY_INSERT => mutation(
            xattr | macros,
            keep_doc | doc_flag::ADD | doc_flag::CREATE_AS_DELETED,
            true,
            false,
        ),
        op::ARRAY_ADD_UNIQUE => mutation(mkdir_p | xattr, CREATING_DOC_FLAGS, true, true),
        op::COUNTER => mutation(mkdir_p | xattr, CREATING_DOC_FLAGS, true, false),
        op::SET_DOC => Traits {
            whole_doc: true,
            ..mutation(0, doc_flag::MKDOC | doc_flag::ADD, true, true)
        },
        op::DELETE_DOC => Traits {
            whole_doc: true,
            ..mutation(0, keep_doc, false, true)
        },
        _ => return None,
    })
}

/// A checked sub-document request: one spec for the single-path opcodes, up to 16 otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub mutation: bool,
    /// The opcode is a single-path one: the reply is the spec's own status and value.
    pub single: bool,
    pub expiry: Option<u32>,
    pub doc_flags: u8,
    pub specs: Specs<'a>,
}

pub(crate) type Refusal = (u16, &'static str);

/// The first byte of a path's first component; xattr keys are checked on it.
fn xattr_key(path: &[u8]) -> &[u8] {
    let end = path
        .iter()
        .position(|byte| matches!(byte, b'.' | b'['))
        .unwrap_or(path.len());
    &path[..end]
}

/// kv_engine's xattr key rules: 1 to 16 bytes of UTF-8, no control characters; a leading
/// `$` names a virtual attribute (read-only).
fn check_xattr(spec: &Spec<'_>, mutator: bool, xattr_enabled: bool) -> Result<(), Refusal> {
    let macros = spec.flags & path_flag::EXPAND_MACROS != 0;
    let binary = spec.flags & path_flag::BINARY_VALUE != 0;
    if spec.flags & path_flag::XATTR == 0 {
        if macros {
            return Err((
                status::SUBDOC_XATTR_INVALID_FLAG_COMBO,
                "EXPAND_MACROS flag requires XATTR flag to be set",
            ));
        }
        if binary {
            return Err((
                status::SUBDOC_XATTR_INVALID_FLAG_COMBO,
                "BINARY_VALUE flag requires XATTR flag to be set",
            ));
        }
        return Ok(());
    }
    if binary && macros {
        return Err((
            status::SUBDOC_XATTR_INVALID_FLAG_COMBO,
            "BINARY_VALUE can't be used together with EXPAND_MACROS",
        ));
    }
    if !xattr_enabled {
        return Err((status::NOT_SUPPORTED, "Connection not XATTR enabled"));
    }
    let key = xattr_key(spec.path);
    let valid = !key.is_empty()
        && key.len() <= 16
        && std::str::from_utf8(key).is_ok_and(|text| !text.chars().any(char::is_control));
    if !valid {
        return Err((status::XATTR_EINVAL, "Request XATTR key invalid"));
    }
    if key.first() == Some(&b'$') && mutator {
        return Err((
            status::SUBDOC_XATTR_CANT_MODIFY_VATTR,
            "Virtual attributes can't be modified",
        ));
    }
    if macros && !is_known_macro(spec.value) {
        return Err((status::SUBDOC_XATTR_UNKNOWN_MACRO, "Unknown macro"));
    }
    Ok(())
}

pub(crate) fn is_known_macro(value: &[u8]) -> bool {
    matches!(
        value,
        br#""${Mutation.CAS}""# | br#""${Mutation.seqno}""# | br#""${Mutation.value_crc32c}""#
    ) || (value.starts_with(br#""${$document"#) && value.ends_with(br#"}""#))
}

fn check_doc_flags(doc_flags: u8, cas: u64) -> Result<(), Refusal> {
    if doc_flags & doc_flag::ADD != 0 && cas != 0 {
        return Err((status::EINVAL, "Request with add flag must have CAS 0"));
    }
    if doc_flags & doc_flag::ADD != 0 && doc_flags & doc_flag::MKDOC != 0 {
        return Err((
            status::EINVAL,
            "Request must not contain both add and mkdoc flags",
        ));
    }
    Ok(())
}

fn spec_error(error: SubdocError) -> Refusal {
    match error {
        SubdocError::BadExtras => (status::EINVAL, "Invalid extras section"),
        SubdocError::Truncated => (status::EINVAL, "Sub-document spec truncated"),
        SubdocError::SpecCount => (
            status::SUBDOC_INVALID_COMBO,
            "Request must contain between 1 and 16 paths",
        ),
    }
}

/// Checks a sub-document request (single- or multi-path opcode) and splits it into specs.
pub(crate) fn parse<'a>(frame: &Frame<'a>, xattr_enabled: bool) -> Result<Request<'a>, Refusal> {
    match frame.opcode {
        opcode::SUBDOC_MULTI_LOOKUP | opcode::SUBDOC_MULTI_MUTATION => {
            parse_multi(frame, xattr_enabled)
        }
        _ => parse_single(frame, xattr_enabled),
    }
}

fn parse_single<'a>(frame: &Frame<'a>, xattr_enabled: bool) -> Result<Request<'a>, Refusal> {
    let traits = traits(frame.opcode)
        .filter(|traits| !traits.whole_doc)
        .ok_or((status::UNKNOWN_COMMAND, "Unknown command"))?;
    let extras = SingleExtras::parse(frame.extras).map_err(spec_error)?;
    if !traits.mutator && extras.expiry.is_some() {
        return Err((status::EINVAL, "Request extras invalid"));
    }
    if extras.path_len as usize > MAX_PATH_BYTES {
        return Err((status::EINVAL, "Request path length exceeds maximum"));
    }
    let (path, value) = extras
        .split(frame.value)
        .map_err(|_| (status::EINVAL, "Path length can't exceed value"))?;
    let spec = Spec {
        op: frame.opcode,
        flags: extras.path_flags,
        path,
        value,
    };
    check_spec(&spec, &traits, extras.doc_flags, xattr_enabled)?;
    if extras.doc_flags & doc_flag::CREATE_AS_DELETED != 0 {
        if extras.doc_flags & (doc_flag::ADD | doc_flag::MKDOC) == 0 {
            return Err((status::EINVAL, "CreateAsDeleted requires Mkdoc or Add"));
        }
        if spec.flags & path_flag::XATTR == 0 {
            return Err((status::EINVAL, "CreateAsDeleted does not support body path"));
        }
    }
    check_doc_flags(extras.doc_flags, frame.cas)?;
    Ok(Request {
        mutation: traits.mutator,
        single: true,
        expiry: extras.expiry,
        doc_flags: extras.doc_flags,
        specs: Specs::single(spec),
    })
}

fn check_spec(
    spec: &Spec<'_>,
    traits: &Traits,
    doc_flags: u8,
    xattr_enabled: bool,
) -> Result<(), Refusal> {
    if traits.has_value == spec.value.is_empty() {
        return Err((
            status::EINVAL,
            if traits.has_value {
                "Request must include value"
            } else {
                "Request must not include value"
            },
        ));
    }
    if spec.flags & !traits.path_flags != 0 {
        return Err((status::EINVAL, "Request flags invalid"));
    }
    if doc_flags & !traits.doc_flags != 0 {
        return Err((status::EINVAL, "Request document flags invalid"));
    }
    if spec.path.len() > MAX_PATH_BYTES {
        return Err((status::EINVAL, "Request path length exceeds maximum"));
    }
    if traits.whole_doc && !spec.path.is_empty() {
        return Err((
            status::EINVAL,
            "Request must not include path for wholedoc operations",
        ));
    }
    check_xattr(spec, traits.mutator, xattr_enabled)?;
    if spec.flags & path_flag::XATTR == 0 && !traits.empty_path && spec.path.is_empty() {
        return Err((status::EINVAL, "Request must include path"));
    }
    Ok(())
}

fn parse_multi<'a>(frame: &Frame<'a>, xattr_enabled: bool) -> Result<Request<'a>, Refusal> {
    let mutation = frame.opcode == opcode::SUBDOC_MULTI_MUTATION;
    let extras = MultiExtras::parse(frame.extras).map_err(spec_error)?;
    if !mutation && extras.expiry.is_some() {
        return Err((status::EINVAL, "Request extras invalid"));
    }
    check_doc_flags(extras.doc_flags, frame.cas)?;
    if extras.doc_flags & doc_flag::REVIVE != 0 {
        if extras.doc_flags & doc_flag::ACCESS_DELETED == 0 {
            return Err((
                status::EINVAL,
                "ReviveDocument can't be used without AccessDeleted",
            ));
        }
        if extras.doc_flags & doc_flag::CREATE_AS_DELETED != 0 {
            return Err((
                status::EINVAL,
                "ReviveDocument can't be used with CreateAsDeleted",
            ));
        }
    }
    let specs = if mutation {
        Specs::mutations(frame.value)
    } else {
        Specs::lookups(frame.value)
    }
    .map_err(spec_error)?;
    let mut xattrs_allowed = true;
    let mut body_closed = false;
    for spec in specs.as_slice() {
        if body_closed {
            return Err((
                status::SUBDOC_INVALID_COMBO,
                "Request contains an invalid combination of commands",
            ));
        }
        let traits = traits(spec.op)
            .filter(|traits| traits.mutator == mutation)
            .ok_or((
                status::SUBDOC_INVALID_COMBO,
                "Opcode not allowed in this multi-path command",
            ))?;
        check_spec(spec, &traits, extras.doc_flags, xattr_enabled)?;
        let is_xattr = spec.flags & path_flag::XATTR != 0;
        if xattrs_allowed {
            xattrs_allowed = is_xattr;
        } else if is_xattr {
            return Err((
                status::SUBDOC_INVALID_XATTR_ORDER,
                "XATTR specs must come first",
            ));
        }
        // A whole-document delete must be the last spec on the body.
        if spec.op == op::DELETE_DOC {
            body_closed = true;
        }
    }
    Ok(Request {
        mutation,
        single: false,
        expiry: extras.expiry,
        doc_flags: extras.doc_flags,
        specs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_kv_codec::subdoc::{put_lookup_spec, put_mutation_spec};
    use settee_kv_codec::{decode, encode_request, Decoded};

    fn frame_bytes(opcode: u8, cas: u64, extras: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(&mut out, opcode, 0, 1, cas, 0, &[], extras, b"doc", value);
        out
    }

    fn check(opcode: u8, cas: u64, extras: &[u8], value: &[u8], xattr: bool) -> Result<usize, u16> {
        let bytes = frame_bytes(opcode, cas, extras, value);
        let Ok(Decoded::Frame(frame, _)) = decode(&bytes, 1 << 20) else {
            panic!("frame");
        };
        parse(&frame, xattr)
            .map(|request| request.specs.as_slice().len())
            .map_err(|(status, _)| status)
    }

    #[test]
    fn single_path_rules() {
        // GET "a.b": extras pathlen 3, no flags.
        assert_eq!(check(op::GET, 0, &[0, 3, 0], b"a.b", false), Ok(1));
        // A lookup with a value, a mutation without one, an empty path, a bad flag.
        assert_eq!(
            check(op::GET, 0, &[0, 1, 0], b"ab", false),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(op::DICT_UPSERT, 0, &[0, 1, 0], b"a", false),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(op::GET, 0, &[0, 0, 0], b"", false),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(op::GET, 0, &[0, 1, path_flag::MKDIR_P], b"a", false),
            Err(status::EINVAL)
        );
        // Expiry on a lookup; ADD with a CAS; ADD with MKDOC.
        assert_eq!(
            check(op::GET, 0, &[0, 1, 0, 0, 0, 0, 5], b"a", false),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(op::DICT_ADD, 9, &[0, 1, 0, doc_flag::ADD], b"a1", false),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(
                op::DICT_ADD,
                0,
                &[0, 1, 0, doc_flag::ADD | doc_flag::MKDOC],
                b"a1",
                false
            ),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(
                op::DICT_UPSERT,
                0,
                &[0, 1, 0, 0, 0, 0, 5, doc_flag::MKDOC],
                b"a1",
                false
            ),
            Ok(1)
        );
        // Xattrs: only when negotiated, keys of 1..=16 bytes, virtual ones read-only.
        let xattr = path_flag::XATTR;
        assert_eq!(
            check(op::GET, 0, &[0, 5, xattr], b"_sync", false),
            Err(status::NOT_SUPPORTED)
        );
        assert_eq!(check(op::GET, 0, &[0, 5, xattr], b"_sync", true), Ok(1));
        assert_eq!(
            check(op::GET, 0, &[0, 17, xattr], b"abcdefghijklmnopq", true),
            Err(status::XATTR_EINVAL)
        );
        assert_eq!(
            check(op::DICT_UPSERT, 0, &[0, 11, xattr], b"$document.x1", true),
            Err(status::SUBDOC_XATTR_CANT_MODIFY_VATTR)
        );
        assert_eq!(
            check(
                op::DICT_UPSERT,
                0,
                &[0, 1, path_flag::EXPAND_MACROS],
                b"a1",
                true
            ),
            Err(status::SUBDOC_XATTR_INVALID_FLAG_COMBO)
        );
        assert_eq!(
            check(
                op::DICT_UPSERT,
                0,
                &[0, 3, xattr | path_flag::EXPAND_MACROS],
                b"_x1\"${Nope}\"",
                true
            ),
            Err(status::SUBDOC_XATTR_UNKNOWN_MACRO)
        );
        assert_eq!(
            check(
                op::DICT_UPSERT,
                0,
                &[0, 3, xattr | path_flag::EXPAND_MACROS],
                b"_x1\"${Mutation.CAS}\"",
                true
            ),
            Ok(1)
        );
    }

    #[test]
    fn multi_path_rules() {
        let lookups = |specs: &[(u8, u8, &[u8])]| {
            let mut body = Vec::new();
            for (spec_op, flags, path) in specs {
                put_lookup_spec(&mut body, *spec_op, *flags, path);
            }
            body
        };
        let xattr = path_flag::XATTR;
        let ok = lookups(&[
            (op::GET, xattr, b"_a"),
            (op::GET, 0, b"x"),
            (op::GET_DOC, 0, b""),
        ]);
        assert_eq!(check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[], &ok, true), Ok(3));
        let order = lookups(&[(op::GET, 0, b"x"), (op::GET, xattr, b"_a")]);
        assert_eq!(
            check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[], &order, true),
            Err(status::SUBDOC_INVALID_XATTR_ORDER)
        );
        let mutator = lookups(&[(op::DELETE, 0, b"x")]);
        assert_eq!(
            check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[], &mutator, true),
            Err(status::SUBDOC_INVALID_COMBO)
        );
        let whole_with_path = lookups(&[(op::GET_DOC, 0, b"x")]);
        assert_eq!(
            check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[], &whole_with_path, true),
            Err(status::EINVAL)
        );
        assert_eq!(
            check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[], b"", true),
            Err(status::SUBDOC_INVALID_COMBO)
        );
        assert_eq!(
            check(opcode::SUBDOC_MULTI_LOOKUP, 0, &[0, 0, 0, 1], &ok, true),
            Err(status::EINVAL)
        );

        let mut body = Vec::new();
        put_mutation_spec(&mut body, op::DICT_UPSERT, 0, b"a", b"1");
        put_mutation_spec(&mut body, op::COUNTER, 0, b"n", b"5");
        assert_eq!(
            check(opcode::SUBDOC_MULTI_MUTATION, 0, &[0, 0, 0, 9], &body, true),
            Ok(2)
        );
        let mut lookup_in_mutation = Vec::new();
        put_mutation_spec(&mut lookup_in_mutation, op::GET, 0, b"a", b"");
        assert_eq!(
            check(
                opcode::SUBDOC_MULTI_MUTATION,
                0,
                &[],
                &lookup_in_mutation,
                true
            ),
            Err(status::SUBDOC_INVALID_COMBO)
        );
        let mut after_delete = Vec::new();
        put_mutation_spec(&mut after_delete, op::DELETE_DOC, 0, b"", b"");
        put_mutation_spec(&mut after_delete, op::DICT_UPSERT, 0, b"a", b"1");
        assert_eq!(
            check(opcode::SUBDOC_MULTI_MUTATION, 0, &[], &after_delete, true),
            Err(status::SUBDOC_INVALID_COMBO)
        );
        // REVIVE needs ACCESS_DELETED.
        assert_eq!(
            check(
                opcode::SUBDOC_MULTI_MUTATION,
                0,
                &[doc_flag::REVIVE],
                &body,
                true
            ),
            Err(status::EINVAL)
        );
    }
}
