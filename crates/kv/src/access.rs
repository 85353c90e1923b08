//! The KV door's side of authorisation. Every data request asks `settee_auth::authorize` — the
//! decision the HTTP door asks too — with the operation its opcode performs on its key, so a
//! member who may not write `_design/x` over HTTP may not write it here either. A refusal is
//! EACCESS, as on Couchbase Server.
//!
//! What the connection's user may do on its bucket is derived once and cached with the engine's
//! access epoch (see `settee_engine::AccessEpoch`). Each request compares the epoch with the
//! cached one (one atomic load each) and derives the access again when it has moved, so
//! removing the user from `_security`, changing their roles or deleting them takes effect on
//! the very next request, as an RBAC change does on Couchbase Server. A deleted account, or one
//! whose password changed, ends the grant for good: the client must authenticate again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use settee_auth::{authorize, db_access, DbAccess, Decision, Operation, Principal, UserCtx};
use settee_engine::Bucket;
use settee_kv_codec::{opcode, subdoc::op};

use crate::KvState;

/// What an opcode does to the document named by `key` (or to the bucket).
pub(crate) fn operation_of(base: u8, key: &[u8]) -> Operation<'_> {
    match base {
        // The stored body as it is: `_replicator` documents only for database admins (the
        // HTTP door hides other users' credentials in them; nothing here could).
        opcode::GET | opcode::GETK | opcode::GET_META => Operation::ReadDocRaw(key),
        op::GET | op::EXISTS | op::GET_COUNT | op::MULTI_LOOKUP => Operation::ReadDocRaw(key),
        opcode::STAT | opcode::OBSERVE_SEQNO => Operation::ReadDb,
        // Stores, removals, counters, APPEND/PREPEND, TOUCH and GAT (which changes the expiry),
        // GET_LOCKED and UNLOCK_KEY (which change what others may write), sub-document
        // mutations; and, to be safe, anything not listed above.
        _ => Operation::WriteDocRaw(key),
    }
}

/// Whether `user` may use `bucket` at all (to list it, to select it).
pub(crate) fn may_use(user: &UserCtx, bucket: &Bucket) -> bool {
    authorize(
        user.principal(),
        db_access(bucket, user),
        bucket.name(),
        Operation::ReadDb,
    )
    .is_allowed()
}

/// The user's rights, as one byte next to the epoch they were derived at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Level {
    /// The account was deleted, re-created or given a new password, or the bucket dropped.
    Revoked = 0,
    None = 1,
    Member = 2,
    DbAdmin = 3,
    ServerAdmin = 4,
}

impl Level {
    fn from_byte(byte: u8) -> Level {
        match byte {
            1 => Level::None,
            2 => Level::Member,
            3 => Level::DbAdmin,
            4 => Level::ServerAdmin,
            _ => Level::Revoked,
        }
    }
}

const LEVEL_BITS: u32 = 8;

fn pack(epoch: u64, level: Level) -> u64 {
    (epoch << LEVEL_BITS) | level as u64
}

/// A connection's rights on its selected bucket.
pub(crate) struct BucketGrant {
    /// Who the connection authenticated as.
    name: String,
    /// The account's salt when it authenticated: a different one is a different password or a
    /// re-created account.
    salt: String,
    bucket: Arc<Bucket>,
    /// `epoch << 8 | level`: read on every request without a lock, written only under
    /// `deriving`.
    derived: AtomicU64,
    /// Serialises derivations, so a slow one cannot overwrite a newer one.
    deriving: Mutex<()>,
}

impl BucketGrant {
    /// The grant of the account `name` (authenticated with `salt`) on `bucket`, or `None` when
    /// it may not use the bucket.
    pub fn new(
        state: &KvState,
        name: &str,
        salt: &str,
        bucket: Arc<Bucket>,
    ) -> Option<BucketGrant> {
        let grant = BucketGrant {
            name: name.to_string(),
            salt: salt.to_string(),
            bucket,
            derived: AtomicU64::new(pack(0, Level::Revoked)),
            deriving: Mutex::new(()),
        };
        let epoch = state.engine.access_epoch().get();
        let level = grant.derive(state);
        grant.derived.store(pack(epoch, level), Ordering::Release);
        grant
            .decide(level, Operation::ReadDb)
            .is_allowed()
            .then_some(grant)
    }

    pub fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    /// The connection's user as `validate_doc_update` sees them (`userCtx`): the account's
    /// current roles; none when the account is gone (its writes are refused anyway).
    pub fn writer(&self, state: &KvState) -> settee_engine::Writer {
        let roles = state
            .users
            .account(&state.engine, &self.name)
            .map(|account| account.roles)
            .unwrap_or_default();
        settee_engine::Writer {
            name: Some(self.name.clone()),
            roles,
        }
    }

    /// May the connection do `operation`? `Err` carries the reason for the EACCESS reply.
    pub fn check(&self, state: &KvState, operation: Operation<'_>) -> Result<(), &'static str> {
        let level = self.level(state);
        if level == Level::Revoked {
            return Err("Access revoked: authenticate again");
        }
        match self.decide(level, operation) {
            Decision::Allowed => Ok(()),
            Decision::Unauthorized(reason) | Decision::Forbidden(reason) => Err(reason),
        }
    }

    /// The level for the current access epoch, derived again if the epoch moved.
    fn level(&self, state: &KvState) -> Level {
        let epoch = state.engine.access_epoch().get();
        let derived = self.derived.load(Ordering::Acquire);
        if derived >> LEVEL_BITS == epoch {
            return Level::from_byte(derived as u8);
        }
        let _deriving = self.deriving.lock();
        let derived = self.derived.load(Ordering::Acquire);
        let previous = Level::from_byte(derived as u8);
        if derived >> LEVEL_BITS == epoch || previous == Level::Revoked {
            // Someone derived it meanwhile, or it is over for good.
            self.derived.store(
                pack(epoch.max(derived >> LEVEL_BITS), previous),
                Ordering::Release,
            );
            return previous;
        }
        // The epoch is read before what the level depends on: a change after this read moves
        // it again and the next request derives anew.
        let epoch = state.engine.access_epoch().get();
        let level = self.derive(state);
        self.derived.store(pack(epoch, level), Ordering::Release);
        level
    }

    fn derive(&self, state: &KvState) -> Level {
        let Some(account) = state.users.account(&state.engine, &self.name) else {
            return Level::Revoked;
        };
        if account.salt != self.salt {
            return Level::Revoked;
        }
        let current = state.engine.bucket(self.bucket.name());
        if !current.is_some_and(|current| Arc::ptr_eq(&current, &self.bucket)) {
            return Level::Revoked;
        }
        let user = UserCtx {
            name: Some(account.name),
            roles: account.roles,
            authenticated: None,
        };
        if user.is_admin() {
            return Level::ServerAdmin;
        }
        match db_access(&self.bucket, &user) {
            DbAccess::None => Level::None,
            DbAccess::Member => Level::Member,
            DbAccess::Admin => Level::DbAdmin,
        }
    }

    fn decide(&self, level: Level, operation: Operation<'_>) -> Decision {
        let who = Principal {
            name: Some(&self.name),
            server_admin: level == Level::ServerAdmin,
        };
        let access = match level {
            Level::Revoked | Level::None => DbAccess::None,
            Level::Member => DbAccess::Member,
            Level::DbAdmin | Level::ServerAdmin => DbAccess::Admin,
        };
        authorize(who, access, self.bucket.name(), operation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_map_to_their_operations() {
        assert_eq!(
            operation_of(opcode::GET, b"k"),
            Operation::ReadDocRaw(b"k".as_slice())
        );
        assert_eq!(
            operation_of(op::MULTI_LOOKUP, b"k"),
            Operation::ReadDocRaw(b"k".as_slice())
        );
        assert_eq!(operation_of(opcode::STAT, b""), Operation::ReadDb);
        for write in [
            opcode::SET,
            opcode::DELETE,
            opcode::INCREMENT,
            opcode::TOUCH,
            opcode::GAT,
            opcode::GET_LOCKED,
            opcode::UNLOCK_KEY,
            op::MULTI_MUTATION,
            op::DICT_UPSERT,
        ] {
            assert_eq!(
                operation_of(write, b"k"),
                Operation::WriteDocRaw(b"k".as_slice())
            );
        }
    }

    #[test]
    fn levels_pack_beside_the_epoch() {
        for level in [
            Level::Revoked,
            Level::None,
            Level::Member,
            Level::DbAdmin,
            Level::ServerAdmin,
        ] {
            let packed = pack(12_345, level);
            assert_eq!(packed >> LEVEL_BITS, 12_345);
            assert_eq!(Level::from_byte(packed as u8), level);
        }
    }
}
