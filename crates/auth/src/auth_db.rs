//! Which databases hold accounts: CouchDB's `[chttpd_auth] authentication_db` (`_users` by
//! default), and every database named `_users`, whose documents get the accounts' rules
//! wherever they are (CouchDB's `is_users_db`).
//!
//! The setting is the node's, and both doors and every authorisation decision read it, so it
//! is held once per process: a node is one process. It is written only through
//! [`crate::Users::set_authentication_db`], which also forgets what was cached about accounts.

use parking_lot::RwLock;

use crate::users::USERS_DB;

/// The configured accounts database; `None` until configured, which means `_users`. Read on
/// every authorisation decision about a document, written when the setting changes.
static AUTHENTICATION_DB: RwLock<Option<String>> = RwLock::new(None);

/// The database accounts are read from now.
pub fn authentication_db() -> String {
    AUTHENTICATION_DB
        .read()
        .clone()
        .unwrap_or_else(|| USERS_DB.to_string())
}

pub(crate) fn set(name: &str) -> bool {
    let mut current = AUTHENTICATION_DB.write();
    let changed = current.as_deref().unwrap_or(USERS_DB) != name;
    *current = Some(name.to_string());
    changed
}

/// Whether `db`'s documents are accounts, under the accounts' rules: the configured
/// accounts database, or one named `_users` (also at the end of a path, as CouchDB says).
pub fn is_users_db(db: &str) -> bool {
    if db == USERS_DB || db.ends_with("/_users") {
        return true;
    }
    AUTHENTICATION_DB.read().as_deref() == Some(db)
}
