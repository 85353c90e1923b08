//! The KV door's side of authorisation. Every data request asks `settee_auth::authorize` — the
//! decision the HTTP door asks too — with the operation its opcode performs on its key, so a
//! member who may not write `_design/x` over HTTP may not write it here either. A refusal is
//! EACCESS, as on Couchbase Server.

use std::sync::Arc;

use settee_auth::{authorize, db_access, DbAccess, Decision, Operation, Principal, UserCtx};
use settee_engine::Bucket;
use settee_kv_codec::{opcode, subdoc::op};

/// What an opcode does to the document named by `key` (or to the bucket).
pub(crate) fn operation_of(base: u8, key: &[u8]) -> Operation<'_> {
    match base {
        opcode::GET | opcode::GETK | opcode::GET_META => Operation::ReadDoc(key),
        op::GET | op::EXISTS | op::GET_COUNT | op::MULTI_LOOKUP => Operation::ReadDoc(key),
        opcode::STAT | opcode::OBSERVE_SEQNO => Operation::ReadDb,
        // Stores, removals, counters, APPEND/PREPEND, TOUCH and GAT (which changes the expiry),
        // GET_LOCKED and UNLOCK_KEY (which change what others may write), sub-document
        // mutations; and, to be safe, anything not listed above.
        _ => Operation::WriteDocRaw(key),
    }
}

/// A connection's rights on its selected bucket: who it authenticated as and the access that
/// user has there.
pub(crate) struct BucketGrant {
    user: UserCtx,
    bucket: Arc<Bucket>,
    access: DbAccess,
}

impl BucketGrant {
    /// The grant of `user` on `bucket`, or `None` when the user may not use the bucket at all.
    pub fn new(user: &UserCtx, bucket: Arc<Bucket>) -> Option<BucketGrant> {
        let access = db_access(&bucket, user);
        let grant = BucketGrant {
            user: user.clone(),
            bucket,
            access,
        };
        grant
            .decide(Operation::ReadDb)
            .is_allowed()
            .then_some(grant)
    }

    pub fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    /// May the connection do `operation`? `Err` carries the reason for the EACCESS reply.
    pub fn check(&self, operation: Operation<'_>) -> Result<(), &'static str> {
        match self.decide(operation) {
            Decision::Allowed => Ok(()),
            Decision::Unauthorized(reason) | Decision::Forbidden(reason) => Err(reason),
        }
    }

    fn decide(&self, operation: Operation<'_>) -> Decision {
        let who = Principal {
            name: self.user.name.as_deref(),
            server_admin: self.user.is_admin(),
        };
        authorize(who, self.access, self.bucket.name(), operation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_map_to_their_operations() {
        assert_eq!(
            operation_of(opcode::GET, b"k"),
            Operation::ReadDoc(b"k".as_slice())
        );
        assert_eq!(
            operation_of(op::MULTI_LOOKUP, b"k"),
            Operation::ReadDoc(b"k".as_slice())
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
}
