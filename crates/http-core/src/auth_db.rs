//! The node's accounts database as CouchDB keeps it: the settings that live beyond one
//! request (`[chttpd_auth] authentication_db`, `[chttpd_auth_lockout] mode`, `[admins]`) given
//! to the accounts (`settee-auth` `Users`) and the engine whenever `_config` changes, and the
//! `_design/_auth` design document every accounts database gets, whose `validate_doc_update`
//! holds the accounts' rules (`js/auth_validate.js`; CouchDB's rules and answers).

use bytes::Bytes;
use settee_engine::{DocUpdate, Engine, Keyspace, UpdateOutcome, Writer};
use settee_node_config::NodeConfig;

use crate::auth::{Auth, USERS_DB};
use crate::error::ApiResult;

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
