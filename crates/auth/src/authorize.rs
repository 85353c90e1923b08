//! The one authorisation decision of the node: may this user do this operation on this
//! database? Both front doors ask it for every operation, so their rules cannot drift: the
//! HTTP door maps each endpoint to an [`Operation`], the KV door each opcode.
//!
//! The rules are CouchDB 3's: server admins may do anything; a database's admins (its
//! `_security` `admins`) may also write design documents, change `_security` and run
//! maintenance; its members (or everyone, when `members` is empty) read and write documents.
//! `_users` lets a user read and write their own account document and anyone sign up.
//! Writes that skip the door's document checks (the KV door's mutations, sub-document
//! mutations) may not reach what those checks protect: accounts and replication documents are
//! written that way only by database admins. Likewise reads that skip the door's read filter
//! (the KV door's reads, sub-document lookups), which hides other users' credentials in
//! replication documents: those are read that way only by database admins.

use crate::access::DbAccess;
use crate::users::USER_PREFIX;

/// The database whose documents describe replications (CouchDB's `_replicator`).
pub const REPLICATOR_DB: &str = "_replicator";
const DESIGN_PREFIX: &[u8] = b"_design/";

/// What a request wants to do. Document ids are bytes: KV keys need not be UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation<'a> {
    /// Whole-database reads: info, `_all_docs`, `_changes`, views, `_find`, `_revs_diff`, bulk
    /// reads, and the KV door's statistics and sequence numbers.
    ReadDb,
    /// Read one document through the HTTP document API, whose read filter for system
    /// databases (other users' credentials in `_replicator`) applies.
    ReadDoc(&'a [u8]),
    /// Read one document's stored body as it is, without that filter: KV reads, sub-document
    /// lookups.
    ReadDocRaw(&'a [u8]),
    /// Create, update or delete one document through the HTTP document API, whose checks for
    /// system databases (account hashing, `_replicator` owners) run.
    WriteDoc(&'a [u8]),
    /// Change one document without those checks: KV mutations, counters, locks, touch and
    /// expiry, sub-document mutations.
    WriteDocRaw(&'a [u8]),
    /// Read `_security`.
    ReadSecurity,
    /// Replace `_security`.
    WriteSecurity,
    /// Maintenance: compaction, purge, view cleanup, `_revs_limit`, Mango index definitions.
    AdminDb,
    /// Node-wide: create and delete databases, list them, tasks, the scheduler.
    AdminServer,
}

/// The answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// The user is anonymous and might be allowed after logging in (HTTP 401).
    Unauthorized(&'static str),
    /// The user is known and is not allowed (HTTP 403; KV EACCESS).
    Forbidden(&'static str),
}

impl Decision {
    pub fn is_allowed(self) -> bool {
        self == Decision::Allowed
    }
}

/// Who is asking, as far as the decision needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Principal<'a> {
    /// `None`: anonymous.
    pub name: Option<&'a str>,
    /// Has the `_admin` role.
    pub server_admin: bool,
}

pub const NOT_SERVER_ADMIN: &str = "You are not a server admin.";
pub const NOT_DB_ADMIN: &str = "You are not a db or server admin.";
pub const NOT_MEMBER: &str = "You are not allowed to access this db.";
pub const NOT_LOGGED_IN: &str = "You are not authorized to access this db.";

/// The level an operation needs on database `db`, or `None` when the rights the user already
/// has are enough whatever `_security` says.
fn needed(who: Principal<'_>, db: &str, operation: Operation<'_>) -> Option<DbAccess> {
    let is_design = |id: &[u8]| id.starts_with(DESIGN_PREFIX);
    match operation {
        Operation::ReadDb | Operation::ReadSecurity => Some(DbAccess::Member),
        Operation::WriteSecurity | Operation::AdminDb => Some(DbAccess::Admin),
        Operation::AdminServer => Some(DbAccess::Admin),
        Operation::ReadDoc(id) | Operation::ReadDocRaw(id) | Operation::WriteDoc(id)
            if crate::is_users_db(db) && id.starts_with(USER_PREFIX.as_bytes()) =>
        {
            let own = who.name.is_some_and(|name| {
                id.len() == USER_PREFIX.len() + name.len()
                    && &id[USER_PREFIX.len()..] == name.as_bytes()
            });
            let signup = matches!(operation, Operation::WriteDoc(_)) && who.name.is_none();
            if own || signup {
                None
            } else {
                Some(DbAccess::Member)
            }
        }
        Operation::ReadDoc(_) => Some(DbAccess::Member),
        Operation::ReadDocRaw(id) if db == REPLICATOR_DB && !is_design(id) => Some(DbAccess::Admin),
        Operation::ReadDocRaw(_) => Some(DbAccess::Member),
        Operation::WriteDoc(id) if is_design(id) => Some(DbAccess::Admin),
        Operation::WriteDoc(_) => Some(DbAccess::Member),
        Operation::WriteDocRaw(id)
            if is_design(id) || crate::is_users_db(db) || db == REPLICATOR_DB =>
        {
            Some(DbAccess::Admin)
        }
        Operation::WriteDocRaw(_) => Some(DbAccess::Member),
    }
}

/// May `who`, whose access to database `db` is `access` (from its `_security`, see
/// [`crate::db_access`]), do `operation` there?
pub fn authorize(
    who: Principal<'_>,
    access: DbAccess,
    db: &str,
    operation: Operation<'_>,
) -> Decision {
    if who.server_admin {
        return Decision::Allowed;
    }
    if operation == Operation::AdminServer {
        return Decision::Unauthorized(NOT_SERVER_ADMIN);
    }
    let Some(needed) = needed(who, db, operation) else {
        return Decision::Allowed;
    };
    if access >= needed {
        return Decision::Allowed;
    }
    if who.name.is_none() {
        return Decision::Unauthorized(NOT_LOGGED_IN);
    }
    Decision::Forbidden(match needed {
        DbAccess::Admin => NOT_DB_ADMIN,
        _ => NOT_MEMBER,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::USERS_DB;

    const BOB: Principal<'static> = Principal {
        name: Some("bob"),
        server_admin: false,
    };
    const ANONYMOUS: Principal<'static> = Principal {
        name: None,
        server_admin: false,
    };
    const ROOT: Principal<'static> = Principal {
        name: Some("root"),
        server_admin: true,
    };

    #[test]
    fn members_read_and_write_documents_but_not_design_documents() {
        let member = |op| authorize(BOB, DbAccess::Member, "db", op);
        assert!(member(Operation::ReadDoc(b"a")).is_allowed());
        assert!(member(Operation::WriteDoc(b"a")).is_allowed());
        assert!(member(Operation::WriteDocRaw(b"a")).is_allowed());
        assert!(member(Operation::ReadDoc(b"_design/x")).is_allowed());
        assert!(member(Operation::WriteDoc(b"_local/x")).is_allowed());
        assert_eq!(
            member(Operation::WriteDoc(b"_design/x")),
            Decision::Forbidden(NOT_DB_ADMIN)
        );
        assert_eq!(
            member(Operation::WriteDocRaw(b"_design/x")),
            Decision::Forbidden(NOT_DB_ADMIN)
        );
        assert_eq!(
            member(Operation::WriteSecurity),
            Decision::Forbidden(NOT_DB_ADMIN)
        );
        assert_eq!(
            member(Operation::AdminDb),
            Decision::Forbidden(NOT_DB_ADMIN)
        );
        assert_eq!(
            member(Operation::AdminServer),
            Decision::Unauthorized(NOT_SERVER_ADMIN)
        );
    }

    #[test]
    fn database_admins_write_design_documents() {
        let admin = |op| authorize(BOB, DbAccess::Admin, "db", op);
        assert!(admin(Operation::WriteDoc(b"_design/x")).is_allowed());
        assert!(admin(Operation::WriteDocRaw(b"_design/x")).is_allowed());
        assert!(admin(Operation::AdminDb).is_allowed());
        assert!(!admin(Operation::AdminServer).is_allowed());
    }

    #[test]
    fn outsiders_are_forbidden_and_anonymous_users_unauthorized() {
        assert_eq!(
            authorize(BOB, DbAccess::None, "db", Operation::ReadDoc(b"a")),
            Decision::Forbidden(NOT_MEMBER)
        );
        assert_eq!(
            authorize(ANONYMOUS, DbAccess::None, "db", Operation::ReadDb),
            Decision::Unauthorized(NOT_LOGGED_IN)
        );
        assert!(authorize(ROOT, DbAccess::None, "db", Operation::AdminServer).is_allowed());
    }

    #[test]
    fn users_reach_their_own_account_and_anyone_signs_up() {
        let own = b"org.couchdb.user:bob";
        let other = b"org.couchdb.user:eve";
        assert!(authorize(BOB, DbAccess::None, USERS_DB, Operation::ReadDoc(own)).is_allowed());
        assert!(authorize(BOB, DbAccess::None, USERS_DB, Operation::WriteDoc(own)).is_allowed());
        assert!(!authorize(BOB, DbAccess::None, USERS_DB, Operation::ReadDoc(other)).is_allowed());
        assert!(authorize(
            ANONYMOUS,
            DbAccess::None,
            USERS_DB,
            Operation::WriteDoc(own)
        )
        .is_allowed());
        assert!(
            !authorize(ANONYMOUS, DbAccess::None, USERS_DB, Operation::ReadDoc(own)).is_allowed()
        );
        // A prefix of the name is not the name.
        assert!(!authorize(
            BOB,
            DbAccess::None,
            USERS_DB,
            Operation::ReadDoc(b"org.couchdb.user:bo")
        )
        .is_allowed());
    }

    #[test]
    fn raw_writes_to_accounts_and_replications_need_a_database_admin() {
        for db in [USERS_DB, REPLICATOR_DB] {
            assert_eq!(
                authorize(
                    BOB,
                    DbAccess::Member,
                    db,
                    Operation::WriteDocRaw(b"org.couchdb.user:bob")
                ),
                Decision::Forbidden(NOT_DB_ADMIN)
            );
            assert!(authorize(BOB, DbAccess::Admin, db, Operation::WriteDocRaw(b"x")).is_allowed());
        }
    }

    #[test]
    fn raw_reads_of_replications_need_a_database_admin() {
        let raw = |access, db, id| authorize(BOB, access, db, Operation::ReadDocRaw(id));
        assert_eq!(
            raw(DbAccess::Member, REPLICATOR_DB, b"job"),
            Decision::Forbidden(NOT_DB_ADMIN)
        );
        assert!(raw(DbAccess::Admin, REPLICATOR_DB, b"job").is_allowed());
        // Design documents hold no credentials; other databases' documents are read as usual.
        assert!(raw(DbAccess::Member, REPLICATOR_DB, b"_design/x").is_allowed());
        assert!(raw(DbAccess::Member, "db", b"job").is_allowed());
        // Through the document API (which hides the credentials) a member reads them.
        assert!(authorize(
            BOB,
            DbAccess::Member,
            REPLICATOR_DB,
            Operation::ReadDoc(b"job")
        )
        .is_allowed());
        // Accounts: as ReadDoc.
        let own = b"org.couchdb.user:bob";
        assert!(raw(DbAccess::None, USERS_DB, own).is_allowed());
        assert!(!raw(DbAccess::None, USERS_DB, b"org.couchdb.user:eve").is_allowed());
    }
}
