//! HTTP authentication (the configured handlers: JWT, proxy, cookie sessions, basic) and the checks that turn a missing permission
//! into CouchDB's 401/403. Accounts and `_security` decisions live in `settee-auth`, shared with
//! the KV door.

use std::net::IpAddr;
use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use hyper::header::HeaderMap;
use settee_engine::{hex, Bucket, Engine};
use sha2::Sha256;

use settee_auth::constant_time_eq;
pub use settee_auth::{
    db_access, default_security, now_secs, DbAccess, Operation, UserCtx, Users, REPLICATOR_DB,
    USERS_DB, USER_PREFIX,
};

use settee_node_config::{AuthHandler, Settings};

use crate::error::{ApiError, ApiResult};

pub struct Auth {
    pub users: Arc<Users>,
    /// Accounts whose password hash was upgraded lately, and when (`auth_db.rs`,
    /// CouchDB's `upgrade_hash_on_auth`): written on password logins that start an upgrade.
    pub(crate) upgrades: parking_lot::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    secret: Vec<u8>,
    session_timeout_secs: u64,
}

impl Auth {
    pub fn new(users: Arc<Users>, secret: Vec<u8>, session_timeout_secs: u64) -> Auth {
        Auth {
            users,
            upgrades: Default::default(),
            secret,
            session_timeout_secs,
        }
    }

    /// Who is asking, as the handlers of `[chttpd] authentication_handlers` say, in their
    /// order (`settings.auth.handlers`): the first that knows the user wins, one that refuses
    /// the credentials it reads answers the request with its error (a wrong Basic password,
    /// an invalid JWT, a user locked out after failed logins from `peer`), and without
    /// credentials any handler knows the user is anonymous.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        engine: &Arc<Engine>,
        peer: Option<IpAddr>,
        settings: &Settings,
    ) -> ApiResult<UserCtx> {
        for handler in &settings.auth.handlers {
            let user = match handler {
                AuthHandler::Jwt => crate::auth_handlers::jwt(headers, &settings.auth)?,
                AuthHandler::Proxy => crate::auth_handlers::proxy(headers, &settings.auth),
                AuthHandler::Cookie => self.cookie_user(headers, engine),
                AuthHandler::Default => self.basic_user(headers, engine, peer, settings)?,
            };
            if let Some(user) = user {
                return Ok(user);
            }
        }
        Ok(UserCtx::default())
    }

    /// HTTP Basic (CouchDB's `default_authentication_handler`).
    fn basic_user(
        &self,
        headers: &HeaderMap,
        engine: &Arc<Engine>,
        peer: Option<IpAddr>,
        settings: &Settings,
    ) -> ApiResult<Option<UserCtx>> {
        let Some(value) = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
        else {
            return Ok(None);
        };
        let Some(encoded) = value
            .strip_prefix("Basic ")
            .or_else(|| value.strip_prefix("basic "))
        else {
            return Ok(None);
        };
        let decoded = BASE64
            .decode(encoded.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(bad_credentials)?;
        let (name, password) = decoded.split_once(':').ok_or_else(bad_credentials)?;
        if (name, password) == ("_", "_") {
            // CouchDB's way to send Basic credentials that mean "nobody" (a logout).
            return Ok(None);
        }
        let account = self.login(engine, name, password, peer)?;
        if settings.auth.upgrade_hash_on_auth {
            self.upgrade_password_hash(engine, name, password);
        }
        Ok(Some(UserCtx {
            name: Some(account.name),
            roles: account.roles,
            authenticated: Some("default"),
        }))
    }

    /// The `AuthSession` cookie (CouchDB's `cookie_authentication_handler`): one that does not
    /// verify is no user.
    fn cookie_user(&self, headers: &HeaderMap, engine: &Engine) -> Option<UserCtx> {
        let account = self.verify_cookie(engine, cookie(headers, "AuthSession")?)?;
        Some(UserCtx {
            name: Some(account.name),
            roles: account.roles,
            authenticated: Some("cookie"),
        })
    }

    /// A password login (Basic, `POST /_session`) from `peer`: CouchDB's 401 for a wrong
    /// name or password, its 403 for a user locked out after repeated failures.
    pub fn login(
        &self,
        engine: &Engine,
        name: &str,
        password: &str,
        peer: Option<IpAddr>,
    ) -> ApiResult<settee_auth::Account> {
        self.users
            .login(engine, name, password, peer)
            .map_err(|refused| match refused {
                settee_auth::LoginRefused::Incorrect => bad_credentials(),
                settee_auth::LoginRefused::LockedOut => {
                    ApiError::Forbidden(settee_auth::LOCKED_OUT.into())
                }
                settee_auth::LoginRefused::Conflicted => {
                    ApiError::Unauthorized(settee_auth::CONFLICTED_ACCOUNT.into())
                }
            })
    }

    /// `AuthSession` cookie value for `account`: base64url("name:hextime:hmac"). As in
    /// CouchDB, the key is the server secret followed by the user's salt, so a new password
    /// (a new salt) or a deleted account makes every earlier cookie worthless.
    pub fn make_cookie(&self, account: &settee_auth::Account, now_secs: u64) -> String {
        let payload = format!("{}:{now_secs:X}", account.name);
        let signature = self.sign(&payload, &account.salt);
        URL_SAFE_NO_PAD.encode(format!("{payload}:{signature}"))
    }

    /// A cookie for the existing user `name`, if there is one.
    pub fn cookie_for(&self, engine: &Engine, name: &str, now_secs: u64) -> Option<String> {
        let account = self.users.account(engine, name)?;
        Some(self.make_cookie(&account, now_secs))
    }

    fn sign(&self, payload: &str, salt: &str) -> String {
        let mut key = self.secret.clone();
        key.extend_from_slice(salt.as_bytes());
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
            return String::new();
        };
        mac.update(payload.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    fn verify_cookie(&self, engine: &Engine, value: &str) -> Option<settee_auth::Account> {
        let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(value).ok()?).ok()?;
        let (payload, signature) = decoded.rsplit_once(':')?;
        let (name, time_hex) = payload.rsplit_once(':')?;
        let issued = u64::from_str_radix(time_hex, 16).ok()?;
        if now_secs().saturating_sub(issued) > self.session_timeout_secs {
            return None;
        }
        let account = self.users.account(engine, name)?;
        if !constant_time_eq(
            self.sign(payload, &account.salt).as_bytes(),
            signature.as_bytes(),
        ) {
            return None;
        }
        Some(account)
    }

    /// Replaces a plain `password` in a `_users` document by the stored secrets.
    pub fn hash_user_password(&self, user: &mut serde_json::Map<String, serde_json::Value>) {
        self.users.hash_user_password(user)
    }
}

fn bad_credentials() -> ApiError {
    ApiError::Unauthorized("Name or password is incorrect.".into())
}

pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Asks the node's one authorisation decision (`settee_auth::authorize`, which the KV door
/// asks too) whether `user` may do `operation` on `bucket`; refusals become CouchDB's 401 for
/// anonymous users (they may log in) and 403 for authenticated ones.
pub fn require(bucket: &Bucket, user: &UserCtx, operation: Operation<'_>) -> ApiResult<()> {
    let access = db_access(bucket, user);
    decision_result(settee_auth::authorize(
        user.principal(),
        access,
        bucket.name(),
        operation,
    ))
}

/// Node-wide operations: server admins only.
pub fn require_admin(user: &UserCtx) -> ApiResult<()> {
    decision_result(settee_auth::authorize(
        user.principal(),
        DbAccess::None,
        "",
        Operation::AdminServer,
    ))
}

fn decision_result(decision: settee_auth::Decision) -> ApiResult<()> {
    match decision {
        settee_auth::Decision::Allowed => Ok(()),
        settee_auth::Decision::Unauthorized(reason) => Err(ApiError::Unauthorized(reason.into())),
        settee_auth::Decision::Forbidden(reason) => Err(ApiError::Forbidden(reason.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_verify_only_with_the_secret_and_the_same_password() {
        let users = Arc::new(Users::new(
            vec![settee_auth::ServerAdmin::with_password("admin", "pw")],
            10,
        ));
        let auth = Auth::new(users.clone(), b"secret".to_vec(), 600);
        let other = Auth::new(users, b"other".to_vec(), 600);
        let dir = tempfile::tempdir().expect("dir");
        let engine = Engine::open(dir.path(), Default::default()).expect("engine");
        let value = auth
            .cookie_for(&engine, "admin", now_secs())
            .expect("cookie");
        assert!(auth.verify_cookie(&engine, &value).is_some());
        assert!(other.verify_cookie(&engine, &value).is_none());
        let old = auth
            .cookie_for(&engine, "admin", now_secs() - 601)
            .expect("cookie");
        assert!(auth.verify_cookie(&engine, &old).is_none());
        // The same admin name with another password (a restart with a new --admin).
        let changed = Arc::new(Users::new(
            vec![settee_auth::ServerAdmin::with_password("admin", "new")],
            10,
        ));
        let after_restart = Auth::new(changed, b"secret".to_vec(), 600);
        assert!(after_restart.verify_cookie(&engine, &value).is_none());
        assert!(auth.cookie_for(&engine, "nobody", now_secs()).is_none());
    }
}
