//! Sub-document lookups and mutations for HTTP clients, on the same engine calls and with the
//! same semantics as the Couchbase KV door (settee's own endpoints; CouchDB has none):
//!
//! `POST /{db}/{docid}/_lookup` `{"specs": [{"op": "get", "path": "a.b"}, ...]}`
//!   ops: `get`, `exists`, `count`, `get_doc`; `"xattr": true` for extended attributes;
//!   `"access_deleted": true` at the top reads a deleted document's xattrs.
//!   200 `{"cas": "…", "deleted": false, "results": [{"status": "success", "value": …}, …]}`.
//! `POST /{db}/{docid}/_mutate` `{"specs": [{"op": "upsert", "path": "a", "value": 1}, ...],
//!   "store": "replace" | "upsert" | "insert", "cas": "…", "expiry": seconds}`
//!   ops: `insert`, `upsert`, `replace`, `remove`, `array_append`, `array_prepend`,
//!   `array_insert`, `array_add_unique`, `counter` (value = delta), `set_doc`, `delete_doc`;
//!   per spec `"create_path"`, `"xattr"`, `"expand_macros"`.
//!   201 `{"ok": true, "id", "rev", "cas", "results": [{"index": i, "value": …}]}`; a failing
//!   spec is 400 `{"error": "path_not_found", "reason": …, "spec": i}` and nothing is written.

use bytes::Bytes;
use hyper::StatusCode;
use serde::Deserialize;
use settee_engine::subdoc::{
    CreateMode, LookupOp, LookupSpec, MutateIn, MutateInOutcome, MutateOp, MutateSpec, Status,
};

use crate::auth::Operation;
use crate::db_api::open;
use crate::error::{ApiError, ApiResult};
use crate::request::Req;
use crate::response::{json, HttpResponse};
use crate::HttpState;

/// The error name of a spec outcome (Couchbase's status, in CouchDB's error style).
fn status_name(status: Status) -> &'static str {
    match status {
        Status::Success => "success",
        Status::PathEnoent => "path_not_found",
        Status::PathMismatch => "path_mismatch",
        Status::PathEinval => "path_invalid",
        Status::PathE2big => "path_too_big",
        Status::DocE2deep => "document_too_deep",
        Status::ValueCantinsert => "value_invalid",
        Status::DocNotJson => "document_not_json",
        Status::NumErange => "number_too_big",
        Status::DeltaEinval => "delta_invalid",
        Status::PathEexists => "path_exists",
        Status::ValueEtoodeep => "value_too_deep",
        Status::XattrUnknownVattr => "unknown_virtual_xattr",
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupBody {
    specs: Vec<LookupSpecBody>,
    #[serde(default)]
    access_deleted: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupSpecBody {
    op: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    xattr: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MutateBody {
    specs: Vec<MutateSpecBody>,
    #[serde(default)]
    store: Option<String>,
    #[serde(default)]
    cas: Option<String>,
    #[serde(default)]
    expiry: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MutateSpecBody {
    op: String,
    #[serde(default)]
    path: String,
    value: Option<serde_json::Value>,
    /// Several values for `array_append` / `array_prepend` / `array_insert`.
    values: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    create_path: bool,
    #[serde(default)]
    xattr: bool,
    #[serde(default)]
    expand_macros: bool,
}

/// The most specs one request may carry (as on the KV door).
const MAX_SPECS: usize = 16;

fn bad(reason: impl Into<String>) -> ApiError {
    ApiError::BadRequest(reason.into())
}

fn parse_body<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> ApiResult<T> {
    serde_json::from_value(value).map_err(|error| bad(format!("invalid request: {error}")))
}

pub async fn lookup(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    id: &str,
) -> ApiResult<HttpResponse> {
    if req.method != hyper::Method::POST {
        return Err(ApiError::MethodNotAllowed("POST"));
    }
    // Paths of the stored body as it is: no read filter (see `replicator_docs.rs`).
    let keyspace = open(state, req, db, Operation::ReadDocRaw(id.as_bytes()))?;
    let body: LookupBody = parse_body(req.json_body_within(&state.config).await?)?;
    if body.specs.is_empty() || body.specs.len() > MAX_SPECS {
        return Err(bad("between 1 and 16 specs"));
    }
    let mut specs = Vec::with_capacity(body.specs.len());
    for spec in &body.specs {
        let op = match spec.op.as_str() {
            "get" => LookupOp::Get,
            "exists" => LookupOp::Exists,
            "count" => LookupOp::Count,
            "get_doc" => LookupOp::WholeDoc,
            other => return Err(bad(format!("unknown lookup op {other:?}"))),
        };
        if op != LookupOp::WholeDoc && spec.path.is_empty() && !spec.xattr {
            return Err(bad("a path is required"));
        }
        specs.push(LookupSpec {
            op,
            xattr: spec.xattr,
            path: spec.path.as_bytes(),
        });
    }
    let mut results = Vec::with_capacity(specs.len());
    let found = keyspace
        .bucket()
        .lookup_in(
            keyspace.key(id.as_bytes()),
            &specs,
            body.access_deleted,
            |index, status, value| {
                let mut result = serde_json::json!({"status": status_name(status)});
                if status == Status::Success && !value.is_empty() {
                    let value = match specs[index].op {
                        LookupOp::Exists => serde_json::Value::Bool(true),
                        _ => serde_json::from_slice(value).unwrap_or_else(|_| {
                            serde_json::Value::String(String::from_utf8_lossy(value).into_owned())
                        }),
                    };
                    result["value"] = value;
                } else if status == Status::Success && specs[index].op == LookupOp::Exists {
                    result["value"] = serde_json::Value::Bool(true);
                }
                results.push(result);
            },
        )
        .map_err(ApiError::from)?;
    let Some(meta) = found else {
        return Err(ApiError::missing());
    };
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({
            "_id": id,
            "cas": meta.cas.to_string(),
            "deleted": meta.deleted,
            "results": results,
        }),
    ))
}

pub async fn mutate(
    state: &HttpState,
    req: &mut Req,
    db: &str,
    id: &str,
) -> ApiResult<HttpResponse> {
    if req.method != hyper::Method::POST {
        return Err(ApiError::MethodNotAllowed("POST"));
    }
    // Sub-document mutations edit the stored body directly, without the document API's
    // checks: a design document or a system database's document needs a database admin.
    let keyspace = open(state, req, db, Operation::WriteDocRaw(id.as_bytes()))?;
    let body: MutateBody = parse_body(req.json_body_within(&state.config).await?)?;
    if body.specs.is_empty() || body.specs.len() > MAX_SPECS {
        return Err(bad("between 1 and 16 specs"));
    }
    let mut specs = Vec::with_capacity(body.specs.len());
    for spec in body.specs {
        let op = match spec.op.as_str() {
            "insert" => MutateOp::DictAdd,
            "upsert" => MutateOp::DictUpsert,
            "replace" => MutateOp::Replace,
            "remove" => MutateOp::Delete,
            "array_append" => MutateOp::ArrayPushLast,
            "array_prepend" => MutateOp::ArrayPushFirst,
            "array_insert" => MutateOp::ArrayInsert,
            "array_add_unique" => MutateOp::ArrayAddUnique,
            "counter" => MutateOp::Counter,
            "set_doc" => MutateOp::SetDoc,
            "delete_doc" => MutateOp::DeleteDoc,
            other => return Err(bad(format!("unknown mutation op {other:?}"))),
        };
        let value: Vec<u8> = match (spec.value, spec.values) {
            (Some(value), None) => serde_json::to_vec(&value).unwrap_or_default(),
            (None, Some(values)) => values
                .iter()
                .map(|value| serde_json::to_string(value).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(",")
                .into_bytes(),
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => return Err(bad("give value or values, not both")),
        };
        let needs_value = !matches!(op, MutateOp::Delete | MutateOp::DeleteDoc);
        if needs_value == value.is_empty() {
            return Err(bad(if needs_value {
                "this op needs a value"
            } else {
                "this op takes no value"
            }));
        }
        if spec.path.is_empty()
            && !matches!(
                op,
                MutateOp::SetDoc
                    | MutateOp::DeleteDoc
                    | MutateOp::ArrayPushLast
                    | MutateOp::ArrayPushFirst
                    | MutateOp::ArrayAddUnique
            )
        {
            return Err(bad("a path is required"));
        }
        if spec.expand_macros && !spec.xattr {
            return Err(bad("expand_macros needs xattr"));
        }
        if spec.xattr && spec.path.starts_with('$') {
            return Err(bad("virtual xattrs cannot be modified"));
        }
        specs.push(MutateSpec {
            op,
            xattr: spec.xattr,
            mkdir_p: spec.create_path,
            expand_macros: spec.expand_macros,
            path: Bytes::from(spec.path.into_bytes()),
            value: Bytes::from(value),
        });
    }
    let create = match body.store.as_deref() {
        None | Some("replace") => CreateMode::Replace,
        Some("upsert") => CreateMode::Upsert,
        Some("insert") => CreateMode::Insert,
        Some(other) => return Err(bad(format!("unknown store semantics {other:?}"))),
    };
    let cas = match body.cas.as_deref() {
        None => 0,
        Some(text) => text
            .parse()
            .map_err(|_| bad("cas must be a decimal string"))?,
    };
    let now = keyspace.bucket().now_secs();
    let expiry = body.expiry.map(|secs| {
        if secs == 0 {
            0
        } else {
            now.saturating_add(secs)
        }
    });
    let outcome = keyspace
        .bucket()
        .mutate_in(
            keyspace.key(id.as_bytes()),
            MutateIn {
                specs,
                create,
                access_deleted: false,
                cas,
                expiry,
            },
            &req.user.writer(),
        )
        .await
        .map_err(ApiError::from)?;
    match outcome {
        MutateInOutcome::Done {
            cas, rev, values, ..
        } => {
            let results: Vec<serde_json::Value> = values
                .iter()
                .map(|(index, value)| {
                    serde_json::json!({
                        "index": index,
                        "value": serde_json::from_slice::<serde_json::Value>(value).unwrap_or_default(),
                    })
                })
                .collect();
            Ok(json(
                StatusCode::CREATED,
                &serde_json::json!({
                    "ok": true, "id": id, "rev": rev.to_string(), "cas": cas.to_string(),
                    "results": results,
                }),
            ))
        }
        MutateInOutcome::SpecFailed { index, status } => Ok(json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({
                "error": status_name(status),
                "reason": format!("spec {index} failed: {}", status_name(status)),
                "spec": index,
            }),
        )),
        MutateInOutcome::NotFound => Err(ApiError::missing()),
        MutateInOutcome::Exists | MutateInOutcome::CasMismatch | MutateInOutcome::Locked => {
            Err(ApiError::Conflict)
        }
        MutateInOutcome::NotJson => Err(bad("the document is not JSON")),
        MutateInOutcome::OverLimit(error) => Err(ApiError::over_limit(&error, id)),
        MutateInOutcome::GenerationOverflow => Err(bad(
            "the document's revision is at the largest generation; it cannot be edited",
        )),
        MutateInOutcome::Refused(refusal) => Err(crate::doc_api::outcome_error(
            &settee_engine::UpdateOutcome::from(refusal),
            id,
        )
        .unwrap_or(ApiError::Conflict)),
    }
}
