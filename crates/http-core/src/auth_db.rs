//! The node's accounts database as CouchDB keeps it: the settings that live beyond one
//! request (`[chttpd_auth] authentication_db`, `[chttpd_auth_lockout] mode`, `[admins]`) given
//! to the accounts (`settee-auth` `Users`) and the engine whenever `_config` changes, and the
//! `_design/_auth` design document every accounts database gets, whose `validate_doc_update`
//! holds the accounts' rules (`js/auth_validate.js`; CouchDB's rules and answers), and who
//! may read what there (CouchDB's `after_doc_read` and request rules for `_users`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use settee_engine::{Bucket, DocUpdate, Engine, Keyspace, UpdateOutcome, Writer};
use settee_node_config::NodeConfig;

use crate::auth::{db_access, Auth, DbAccess, UserCtx, USERS_DB, USER_PREFIX};
use crate::error::{ApiError, ApiResult};

/// The design document of every accounts database.
pub const AUTH_DDOC_ID: &str = "_design/_auth";

/// Its `validate_doc_update`.
pub const AUTH_VALIDATE_FUNCTION: &str = include_str!("js/auth_validate.js");

/// Gives the accounts and the engine what `node_config` says now; answers the accounts
/// database when it changed (the caller then makes sure it has [`AUTH_DDOC_ID`]).
pub fn configure(auth: &Auth, engine: &Engine, node_config: &NodeConfig) -> Option<String> {
    let settings = node_config.settings();
    let admins = node_config
        .section("admins")
        .into_iter()
        .filter_map(|(name, value)| {
            let stored = settee_auth::parse_admin_hash(&value)?;
            settee_auth::ServerAdmin::from_hashed(&name, stored)
        })
        .collect();
    auth.users.set_config_admins(admins);
    auth.users.set_password_hashing(
        settings
            .auth
            .iterations
            .unwrap_or(auth.users.pbkdf2_iterations),
        &settings.auth.pbkdf2_prf,
    );
    if let Ok(mode) = settings.auth.lockout_mode.parse() {
        auth.users.set_lockout_mode(mode);
    }
    let db = &settings.auth.authentication_db;
    if !auth.users.set_authentication_db(db) {
        return None;
    }
    let mut access = vec![USERS_DB.to_string()];
    if db != USERS_DB {
        access.push(db.clone());
    }
    engine.set_access_buckets(access);
    Some(db.clone())
}

/// Makes sure database `db` (when it exists) has [`AUTH_DDOC_ID`] with settee's accounts
/// validation: written when it is missing or deleted, its `validate_doc_update` replaced
/// when it is another (its other members kept), as CouchDB does for its accounts database.
pub async fn ensure_auth_ddoc(engine: &Engine, db: &str) -> ApiResult<()> {
    let Some(bucket) = engine.bucket(db) else {
        return Ok(());
    };
    let keyspace = Keyspace::default_of(bucket);
    let key = AUTH_DDOC_ID.as_bytes();
    let winner = keyspace
        .read_record(key)?
        .and_then(|record| record.winner().cloned())
        .filter(|leaf| !leaf.deleted);
    let mut body = serde_json::Map::new();
    if winner.is_some() {
        if let Some((_, bytes)) = keyspace.read_winner(key)? {
            if let Ok(serde_json::Value::Object(current)) = serde_json::from_slice(&bytes) {
                body = current;
            }
        }
        if body
            .get("validate_doc_update")
            .and_then(|value| value.as_str())
            == Some(AUTH_VALIDATE_FUNCTION)
        {
            return Ok(());
        }
    } else {
        body.insert("language".into(), "javascript".into());
    }
    body.insert("validate_doc_update".into(), AUTH_VALIDATE_FUNCTION.into());
    let update = DocUpdate {
        key: key.to_vec(),
        parent: winner.map(|leaf| leaf.rev),
        history: Vec::new(),
        deleted: false,
        body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
        attachments: Vec::new(),
    };
    match keyspace.update_doc(update, true, &Writer::system()).await? {
        // Someone else wrote it meanwhile: theirs stands, as in CouchDB.
        UpdateOutcome::Saved { .. } | UpdateOutcome::Conflict => Ok(()),
        other => {
            tracing::warn!(db, outcome = ?other, "the accounts database's _design/_auth");
            Ok(())
        }
    }
}

/// After an upgrade of an account's hash starts, none starts for it for this long (as
/// CouchDB's password hasher): a client logging in with HTTP Basic on every request costs one
/// background check per account per window, not one per request.
const UPGRADE_WINDOW: Duration = Duration::from_secs(5);
/// An upgrade waits this long before it reads the account: CouchDB's hasher runs behind its
/// queue, and a client that logs in to change its password must not lose its write (409) to
/// the node's own rewrite of the same revision.
const UPGRADE_DELAY: Duration = Duration::from_secs(1);
/// Most accounts remembered in the window; a full table is emptied of expired ones first.
const UPGRADES_MAX: usize = 10_000;

impl Auth {
    /// CouchDB's `upgrade_hash_on_auth`, after a successful password login of `name`: its
    /// account document is hashed again the current way (`[chttpd_auth] iterations`,
    /// `pbkdf2_prf`) with the same salt, when it was hashed another way. Done in the
    /// background; a write that loses to another is dropped.
    pub fn upgrade_password_hash(&self, engine: &Arc<Engine>, name: &str, password: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.users.is_server_admin(name) {
            return;
        }
        let id = format!("{USER_PREFIX}{name}");
        let outdated =
            account_doc(engine, &id).is_some_and(|(_, doc)| self.users.hash_is_outdated(&doc));
        if !outdated {
            return;
        }
        {
            let now = Instant::now();
            let mut upgrades = self.upgrades.lock();
            if upgrades
                .get(name)
                .is_some_and(|started| now.duration_since(*started) < UPGRADE_WINDOW)
            {
                return;
            }
            if upgrades.len() >= UPGRADES_MAX {
                upgrades.retain(|_, started| now.duration_since(*started) < UPGRADE_WINDOW);
                if upgrades.len() >= UPGRADES_MAX {
                    return;
                }
            }
            upgrades.insert(name.to_string(), now);
        }
        let (users, engine) = (self.users.clone(), engine.clone());
        let password = password.to_string();
        runtime.spawn(async move {
            tokio::time::sleep(UPGRADE_DELAY).await;
            upgrade_account(&users, &engine, &id, &password).await;
        });
    }
}

/// The account document `id` in the accounts database: its winning revision and body.
fn account_doc(
    engine: &Engine,
    id: &str,
) -> Option<(
    settee_engine::RevId,
    serde_json::Map<String, serde_json::Value>,
)> {
    let keyspace = Keyspace::default_of(engine.bucket(&settee_auth::authentication_db())?);
    let key = id.as_bytes();
    let winner = keyspace
        .read_record(key)
        .ok()??
        .winner()
        .cloned()
        .filter(|leaf| !leaf.deleted)?;
    let (_, body) = keyspace.read_winner(key).ok()??;
    match serde_json::from_slice(&body) {
        Ok(serde_json::Value::Object(doc)) => Some((winner.rev, doc)),
        _ => None,
    }
}

async fn upgrade_account(users: &settee_auth::Users, engine: &Engine, id: &str, password: &str) {
    let Some(bucket) = engine.bucket(&settee_auth::authentication_db()) else {
        return;
    };
    let keyspace = Keyspace::default_of(bucket);
    let key = id.as_bytes();
    let Some((rev, mut doc)) = account_doc(engine, id) else {
        return;
    };
    if !users.upgrade_password_hash(&mut doc, password) {
        return;
    }
    let update = DocUpdate {
        key: key.to_vec(),
        parent: Some(rev),
        history: Vec::new(),
        deleted: false,
        body: Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
        attachments: Vec::new(),
    };
    if let Err(error) = keyspace.update_doc(update, true, &Writer::system()).await {
        tracing::warn!(%error, "upgrading an account's password hash");
    }
}

/// CouchDB's answer to a non-admin reading a design document of an accounts database.
pub const DESIGN_DOCS_ADMINS_ONLY: &str =
    "Only administrators can view design docs in the users database.";

/// Whether `user` reads accounts database `bucket` as its admins do (server or database
/// admin): every document, every field.
fn reads_everything(bucket: &Bucket, user: &UserCtx) -> bool {
    db_access(bucket, user) == DbAccess::Admin
}

/// CouchDB's read rule of an accounts database's documents (`after_doc_read`): its admins
/// read everything; others read their own account document only: another account is
/// `not_found` (anonymous readers included), a design document 403. Other databases: no rule.
pub fn check_doc_read(bucket: &Bucket, user: &UserCtx, id: &str) -> ApiResult<()> {
    if !settee_auth::is_users_db(bucket.name()) || reads_everything(bucket, user) {
        return Ok(());
    }
    if id.starts_with("_design/") {
        return Err(ApiError::Forbidden(DESIGN_DOCS_ADMINS_ONLY.into()));
    }
    let own = user
        .name
        .as_deref()
        .is_some_and(|name| id.strip_prefix(USER_PREFIX) == Some(name));
    if own {
        Ok(())
    } else {
        Err(ApiError::missing())
    }
}

/// CouchDB's rules for requests on accounts databases beyond single documents: `_users`'
/// `_all_docs` and `_changes` are for server admins (401 `You are not a server admin.`, as
/// CouchDB's request authorisation names `_users`), another accounts database's `_all_docs`
/// for its admins (a system database's), and views and lists of any accounts database for
/// its admins (they read design documents).
pub fn check_request(engine: &Engine, user: &UserCtx, segments: &[&str]) -> ApiResult<()> {
    match segments {
        [USERS_DB, "_all_docs" | "_changes", ..] => crate::auth::require_admin(user),
        [db, "_all_docs", ..] if settee_auth::is_users_db(db) => match engine.bucket(db) {
            Some(bucket) if !reads_everything(&bucket, user) => Err(ApiError::Forbidden(
                "Only admins can access _all_docs of system databases.".into(),
            )),
            _ => Ok(()),
        },
        [db, "_design", _, "_view" | "_list", ..] if settee_auth::is_users_db(db) => {
            match engine.bucket(db) {
                Some(bucket) if !reads_everything(&bucket, user) => {
                    Err(ApiError::Forbidden(DESIGN_DOCS_ADMINS_ONLY.into()))
                }
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
