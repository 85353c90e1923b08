//! Users and permissions shared by the HTTP and KV doors: server admins from the configuration,
//! accounts in the `_users` database, each bucket's `_security` object, and SCRAM (RFC 5802),
//! the SASL mechanism the Couchbase SDKs authenticate with.
//!
//! Must not know: HTTP, the KV wire format, storage keys.

mod access;
pub mod scram;
mod users;

pub use access::{db_access, default_security, DbAccess, UserCtx};
pub use users::{
    now_secs, Users, PBKDF2_ITERATIONS_DEFAULT, SCRAM_ITERATIONS, USERS_DB, USER_PREFIX,
};

/// Equality whose time does not depend on where the inputs differ (for secrets).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
