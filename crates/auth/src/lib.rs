//! Users and permissions shared by the HTTP and KV doors: server admins from the configuration,
//! accounts in the `_users` database, each bucket's `_security` object, and SCRAM (RFC 5802),
//! the SASL mechanism the Couchbase SDKs authenticate with.
//!
//! Start at `authorize.rs`: the one decision both doors ask for every operation.
//!
//! Must not know: HTTP, the KV wire format, storage keys.

mod access;
mod auth_db;
mod authorize;
mod lockout;
mod node;
mod password_rules;
mod proxy;
pub mod scram;
mod users;

pub use access::{db_access, db_access_in, default_security, DbAccess, UserCtx};
pub use auth_db::{authentication_db, is_users_db};
pub use authorize::{
    authorize, Decision, Operation, Principal, NOT_DB_ADMIN, NOT_LOGGED_IN, NOT_MEMBER,
    NOT_SERVER_ADMIN, REPLICATOR_DB,
};
pub use lockout::{LockoutConfig, LockoutMode, LOCKED_OUT};
pub use node::{cluster_uuid, node_password, NODE_USER};
pub use password_rules::{
    check_password, PasswordRefused, PASSWORD_REQUIREMENT, PASSWORD_RULES_BROKEN,
};
pub use proxy::{hex_hmac, proxy_user, ProxyHeaders, ProxyTrust};
pub use users::{
    now_secs, parse_admin_hash, Account, LoginRefused, ServerAdmin, Users, CONFLICTED_ACCOUNT,
    PBKDF2_ITERATIONS_DEFAULT, SCRAM_ITERATIONS, USERS_DB, USER_PREFIX,
};

/// Equality whose time does not depend on where the inputs differ (for secrets).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
