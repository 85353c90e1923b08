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
//!
//! Reads, as CouchDB's `after_doc_read`: a user who is neither a database admin nor the
//! document's owner is shown it without credentials — userinfo in the `source` and `target`
//! URLs, their `headers` and `auth` — and under a revision made up for that body. Every read of
//! a document's body through the HTTP door renders it with `couch_doc::render_doc`, which asks
//! [`hide_credentials`] with the reader's [`CredentialsShown`] (part of its `RenderOptions`):
//! GET, `open_revs`, `_bulk_get`, `_all_docs`, `_changes`, views and `_find` with their
//! documents, and the documents `_changes` filters and `_find` selectors are matched against.
//! Reads that skip it (KV reads, sub-document lookups) need a database admin.

use bytes::Bytes;
use md5::{Digest, Md5};
use serde_json::{Map, Value};
use settee_engine::{Keyspace, Leaf, RevId};

use crate::couch_doc::{Members, ParsedDoc};
use settee_http_core::auth::{db_access, DbAccess, UserCtx, REPLICATOR_DB};
use settee_http_core::error::{ApiError, ApiResult};

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
fn stored_owner(keyspace: &Keyspace, id: &str) -> ApiResult<Option<String>> {
    let Some(record) = keyspace.read_record(id.as_bytes())? else {
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
    keyspace: &Keyspace,
    user: &UserCtx,
    id: &str,
    doc: &mut ParsedDoc,
) -> ApiResult<()> {
    if !is_replication(id) {
        return Ok(());
    }
    let is_admin = db_access(keyspace.bucket(), user) == DbAccess::Admin;
    let writer = user.name.as_deref();
    if !is_admin {
        if let Some(owner) = stored_owner(keyspace, id)? {
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

/// Whose replication credentials a reader is shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialsShown {
    /// Every document as stored: a database other than `_replicator`, or one of its admins.
    All,
    /// Only those of the documents this user owns (`None`: anonymous, who owns none).
    OwnedBy(Option<String>),
}

/// What `user` is shown of the documents of `keyspace`.
pub fn credentials_shown(keyspace: &Keyspace, user: &UserCtx) -> CredentialsShown {
    if keyspace.bucket().name() != REPLICATOR_DB
        || db_access(keyspace.bucket(), user) == DbAccess::Admin
    {
        CredentialsShown::All
    } else {
        CredentialsShown::OwnedBy(user.name.clone())
    }
}

/// The body and revision a reader is shown of revision `leaf` of document `id`, when they are
/// not the stored ones: for a reader who sees only their own documents' credentials, another
/// user's replication document has them removed and a revision of its own (the same position,
/// a hash of the shown body), as CouchDB makes one up "since we're returning a technically
/// non-existent document body". `None`: shown as stored.
pub fn hide_credentials(
    shown: &CredentialsShown,
    id: &str,
    leaf: &Leaf,
) -> Option<(Vec<u8>, RevId)> {
    let CredentialsShown::OwnedBy(reader) = shown else {
        return None;
    };
    if !is_replication(id) || !leaf.json {
        return None;
    }
    let Ok(Members(members)) = serde_json::from_slice::<Members>(&leaf.body) else {
        // Not an object: no member to hide, nothing a client sees of it.
        return None;
    };
    let owner = members
        .iter()
        .find(|(name, _)| name == OWNER)
        .and_then(|(_, value)| serde_json::from_str::<String>(value.get()).ok());
    if owner.is_some() && owner.as_deref() == reader.as_deref() {
        return None;
    }
    let mut body = Vec::with_capacity(leaf.body.len());
    body.push(b'{');
    for (index, (name, value)) in members.iter().enumerate() {
        if index > 0 {
            body.push(b',');
        }
        body.extend_from_slice(settee_http_core::response::json_string(name).as_bytes());
        body.push(b':');
        let endpoint = (name == "source" || name == "target")
            .then(|| serde_json::from_str::<Value>(value.get()).ok())
            .flatten();
        match endpoint.and_then(without_credentials) {
            Some(stripped) => body.extend_from_slice(stripped.to_string().as_bytes()),
            None => body.extend_from_slice(value.get().as_bytes()),
        }
    }
    body.push(b'}');
    let mut hash = Md5::new();
    hash.update(leaf.rev.to_string().as_bytes());
    hash.update(&body);
    let rev = RevId {
        pos: leaf.rev.pos,
        hash: hash
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect(),
    };
    Some((body, rev))
}

/// A replication endpoint without its credentials, or `None` when it holds none: a URL loses
/// its userinfo; an object its `headers` and `auth` (as CouchDB's `strip_credentials`) and
/// the userinfo of its `url` (which CouchDB leaves).
fn without_credentials(endpoint: Value) -> Option<Value> {
    match endpoint {
        Value::String(url) => without_userinfo(&url).map(Value::String),
        Value::Object(mut members) => {
            let mut changed = members.shift_remove("headers").is_some();
            changed |= members.shift_remove("auth").is_some();
            if let Some(url) = members
                .get("url")
                .and_then(Value::as_str)
                .and_then(without_userinfo)
            {
                members.insert("url".into(), Value::String(url));
                changed = true;
            }
            changed.then_some(Value::Object(members))
        }
        _ => None,
    }
}

/// `scheme://user:password@host/...` without `user:password@`, or `None` when the URL's
/// authority holds no userinfo.
fn without_userinfo(url: &str) -> Option<String> {
    let authority_at = url.find("://")? + 3;
    let rest = &url[authority_at..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let userinfo_len = rest[..authority_len].rfind('@')? + 1;
    Some(format!("{}{}", &url[..authority_at], &rest[userinfo_len..]))
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

    fn leaf(body: Value) -> Leaf {
        Leaf {
            rev: RevId::parse("2-0123456789abcdef0123456789abcdef").expect("rev"),
            deleted: false,
            body: Bytes::from(body.to_string()),
            json: true,
            attachments: Vec::new(),
        }
    }

    fn shown_body(shown: &CredentialsShown, id: &str, stored: &Leaf) -> Option<Value> {
        hide_credentials(shown, id, stored)
            .map(|(body, _)| serde_json::from_slice(&body).expect("JSON"))
    }

    #[test]
    fn other_users_see_replications_without_credentials() {
        let stored = leaf(serde_json::json!({
            "source": "https://alice:s3cret@remote.example/db",
            "target": {
                "url": "http://bob:pw@other.example:5984/copy",
                "headers": {"Authorization": "Basic Ym9iOnB3"},
                "auth": {"basic": {"username": "bob", "password": "pw"}},
                "timeout": 10
            },
            "continuous": true,
            "owner": "alice"
        }));
        let mel = CredentialsShown::OwnedBy(Some("mel".into()));
        let shown = shown_body(&mel, "job", &stored).expect("hidden from mel");
        assert_eq!(
            shown,
            serde_json::json!({
                "source": "https://remote.example/db",
                "target": {"url": "http://other.example:5984/copy", "timeout": 10},
                "continuous": true,
                "owner": "alice"
            })
        );
        // Member order is kept.
        let keys: Vec<String> = shown.as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["source", "target", "continuous", "owner"]);
        // A revision of its own, at the same position, the same for the same body.
        let (_, rev) = hide_credentials(&mel, "job", &stored).expect("hidden");
        assert_eq!(rev.pos, 2);
        assert_ne!(rev, stored.rev);
        assert_eq!(
            hide_credentials(&mel, "job", &stored).map(|(_, rev)| rev),
            Some(rev)
        );
        // Anonymous readers see no one's; the owner and admins see them.
        assert!(shown_body(&CredentialsShown::OwnedBy(None), "job", &stored).is_some());
        let alice = CredentialsShown::OwnedBy(Some("alice".into()));
        assert_eq!(hide_credentials(&alice, "job", &stored), None);
        assert_eq!(
            hide_credentials(&CredentialsShown::All, "job", &stored),
            None
        );
        // Design documents are not replications.
        assert_eq!(hide_credentials(&mel, "_design/x", &stored), None);
    }

    #[test]
    fn userinfo_is_cut_from_the_authority_only() {
        assert_eq!(
            without_userinfo("http://a:b@host:5984/db").as_deref(),
            Some("http://host:5984/db")
        );
        assert_eq!(
            without_userinfo("https://token@host/db").as_deref(),
            Some("https://host/db")
        );
        assert_eq!(
            without_userinfo("http://u:p@s@host/db").as_deref(),
            Some("http://host/db")
        );
        assert_eq!(without_userinfo("http://host/db?x=a:b@c"), None);
        assert_eq!(without_userinfo("local-db"), None);
        assert_eq!(without_credentials(Value::String("db".into())), None);
        assert_eq!(
            without_credentials(serde_json::json!({"url": "http://host/db"})),
            None
        );
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
