//! `_replicator` documents written through the HTTP door. A document's job runs with the
//! rights of the user it names (`user_ctx.name`) or else of its `owner`, the user who wrote it
//! (`settee_replicator::ReplicationParams::user_name`), so both are checked here as CouchDB
//! checks them (its `before_doc_update` and the `_replicator` validation function):
//!
//! - the writer becomes the `owner` when the document names none;
//! - only a database admin may write a document owned by someone else, or change such a
//!   document (delete it included);
//! - only a database admin may name another user in `user_ctx`, or roles they do not have.
//!
//! Writes that skip these checks (the KV door, sub-document mutations) need a database admin
//! (`settee_auth::authorize`); the replicator's own state updates go to the engine directly.

use bytes::Bytes;
use serde_json::{Map, Value};
use settee_engine::Bucket;

use crate::auth::{db_access, DbAccess, UserCtx};
use crate::couch_doc::ParsedDoc;
use crate::error::{ApiError, ApiResult};

/// The member that records who wrote a replication document (CouchDB's).
const OWNER: &str = "owner";

fn forbidden(reason: &str) -> ApiError {
    ApiError::Forbidden(reason.to_string())
}

/// Whether `id` is a replication document (not a design or `_local` document).
fn is_replication(id: &str) -> bool {
    !id.starts_with("_design/") && !id.starts_with("_local/")
}

/// The owner of the current revision of `id`, if it has one.
fn stored_owner(bucket: &Bucket, id: &str) -> ApiResult<Option<String>> {
    let Some(record) = bucket.read_record(id.as_bytes())? else {
        return Ok(None);
    };
    let Some(winner) = record.winner().filter(|winner| !winner.deleted) else {
        return Ok(None);
    };
    let body: Value = serde_json::from_slice(&winner.body).unwrap_or(Value::Null);
    Ok(body.get(OWNER).and_then(Value::as_str).map(str::to_string))
}

/// Checks a write of replication document `id` by `user` and records the writer as its owner.
/// A deletion is checked against the stored document only.
pub fn prepare_replicator_doc(
    bucket: &Bucket,
    user: &UserCtx,
    id: &str,
    doc: &mut ParsedDoc,
) -> ApiResult<()> {
    if !is_replication(id) {
        return Ok(());
    }
    let is_admin = db_access(bucket, user) == DbAccess::Admin;
    let writer = user.name.as_deref();
    if !is_admin {
        if let Some(owner) = stored_owner(bucket, id)? {
            if Some(owner.as_str()) != writer {
                return Err(forbidden(
                    "Can't update replication documents from other users.",
                ));
            }
        }
    }
    if doc.deleted {
        return Ok(());
    }
    let mut body: Map<String, Value> = serde_json::from_slice(&doc.body)
        .map_err(|_| ApiError::BadRequest("invalid replication document".into()))?;
    check_user_ctx(&body, user, is_admin)?;
    match body.get(OWNER) {
        None | Some(Value::Null) => {
            if let Some(writer) = writer {
                body.insert(OWNER.into(), Value::String(writer.to_string()));
            }
        }
        Some(Value::String(owner)) if Some(owner.as_str()) == writer => {}
        Some(_) if is_admin => {}
        Some(_) => {
            return Err(forbidden(
                "Can't update replication documents from other users.",
            ))
        }
    }
    doc.body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    Ok(())
}

/// CouchDB's `user_ctx` rules: a name is a non-empty string or null; only admins name someone
/// else or roles they do not hold.
fn check_user_ctx(body: &Map<String, Value>, user: &UserCtx, is_admin: bool) -> ApiResult<()> {
    let Some(user_ctx) = body.get("user_ctx") else {
        return Ok(());
    };
    let Value::Object(user_ctx) = user_ctx else {
        return Err(forbidden(
            "The `user_ctx' property must be a non-null object.",
        ));
    };
    let name = match user_ctx.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) if !name.is_empty() => Some(name.as_str()),
        Some(_) => {
            return Err(forbidden(
                "The `user_ctx.name' property must be a non-empty string or null.",
            ))
        }
    };
    if !is_admin && name != user.name.as_deref() {
        return Err(forbidden("The given `user_ctx.name' is not valid"));
    }
    let roles = match user_ctx.get("roles") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(roles)) => roles,
        Some(_) => {
            return Err(forbidden(
                "The `user_ctx.roles' property must be an array of strings.",
            ))
        }
    };
    if is_admin {
        return Ok(());
    }
    for role in roles {
        let Some(role) = role.as_str().filter(|role| !role.is_empty()) else {
            return Err(forbidden("Roles must be non-empty strings."));
        };
        if !user.roles.iter().any(|mine| mine == role) {
            return Err(ApiError::Forbidden(format!(
                "Invalid role (`{role}') in the `user_ctx'"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, roles: &[&str]) -> UserCtx {
        UserCtx {
            name: Some(name.to_string()),
            roles: roles.iter().map(|role| role.to_string()).collect(),
            authenticated: None,
        }
    }

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn members_may_name_only_themselves_and_their_roles() {
        let bob = user("bob", &["ops"]);
        let ok = body(serde_json::json!({"user_ctx": {"name": "bob", "roles": ["ops"]}}));
        assert!(check_user_ctx(&ok, &bob, false).is_ok());
        let other = body(serde_json::json!({"user_ctx": {"name": "admin"}}));
        assert!(check_user_ctx(&other, &bob, false).is_err());
        assert!(check_user_ctx(&other, &bob, true).is_ok());
        let role = body(serde_json::json!({"user_ctx": {"name": "bob", "roles": ["_admin"]}}));
        assert!(check_user_ctx(&role, &bob, false).is_err());
        let empty = body(serde_json::json!({"user_ctx": {"name": ""}}));
        assert!(check_user_ctx(&empty, &bob, true).is_err());
        let nameless = body(serde_json::json!({"user_ctx": {"roles": []}}));
        assert!(check_user_ctx(&nameless, &bob, false).is_err());
        assert!(check_user_ctx(&body(serde_json::json!({})), &bob, false).is_ok());
    }
}
