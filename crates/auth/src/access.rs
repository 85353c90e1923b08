//! Per-bucket access from the `_security` object, as CouchDB 3 decides it.

use settee_engine::Bucket;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserCtx {
    pub name: Option<String>,
    pub roles: Vec<String>,
    /// "cookie" or "default" (basic), as `GET /_session` reports it.
    pub authenticated: Option<&'static str>,
}

impl UserCtx {
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|role| role == "_admin")
    }

    /// Who this is, for [`crate::authorize`].
    pub fn principal(&self) -> crate::Principal<'_> {
        crate::Principal {
            name: self.name.as_deref(),
            server_admin: self.is_admin(),
        }
    }

    /// Who writes, for the engine's write validation (`validate_doc_update`'s `userCtx`).
    pub fn writer(&self) -> settee_engine::Writer {
        settee_engine::Writer {
            name: self.name.clone(),
            roles: self.roles.clone(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"name": self.name, "roles": self.roles})
    }
}

/// Access a user has to one database, from its `_security` object (server admins: `Admin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DbAccess {
    None,
    Member,
    Admin,
}

fn listed(section: Option<&serde_json::Value>, user: &UserCtx) -> (bool, bool) {
    let names = section
        .and_then(|section| section.get("names"))
        .and_then(|names| names.as_array());
    let roles = section
        .and_then(|section| section.get("roles"))
        .and_then(|roles| roles.as_array());
    let empty =
        names.is_none_or(|names| names.is_empty()) && roles.is_none_or(|roles| roles.is_empty());
    let by_name = user.name.as_ref().is_some_and(|name| {
        names.is_some_and(|names| names.iter().any(|entry| entry.as_str() == Some(name)))
    });
    let by_role = roles.is_some_and(|roles| {
        roles.iter().any(|entry| {
            entry
                .as_str()
                .is_some_and(|role| user.roles.iter().any(|mine| mine == role))
        })
    });
    (empty, by_name || by_role)
}

pub fn db_access(bucket: &Bucket, user: &UserCtx) -> DbAccess {
    if user.is_admin() {
        return DbAccess::Admin;
    }
    bucket.with_security(|security| db_access_in(security, user))
}

/// [`db_access`] from a security object already read.
pub fn db_access_in(security: &serde_json::Value, user: &UserCtx) -> DbAccess {
    if user.is_admin() {
        return DbAccess::Admin;
    }
    let (_, is_db_admin) = listed(security.get("admins"), user);
    if is_db_admin {
        return DbAccess::Admin;
    }
    let (members_empty, is_member) = listed(security.get("members"), user);
    if members_empty || is_member {
        DbAccess::Member
    } else {
        DbAccess::None
    }
}

/// The security object new databases get (CouchDB 3 `default_security = admin_only`).
pub fn default_security() -> serde_json::Value {
    serde_json::json!({"members": {"roles": ["_admin"]}, "admins": {"roles": ["_admin"]}})
}
