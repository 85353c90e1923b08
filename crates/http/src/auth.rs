//! Authentication (basic, cookie sessions, `_users` with PBKDF2 passwords) and the checks that
//! decide who may do what, following CouchDB 3: server admins from the configuration, users in
//! the `_users` database, per-database `_security` members and admins.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use hyper::header::HeaderMap;
use parking_lot::Mutex;
use rand::RngCore;
use settee_engine::{hex, Bucket, Engine};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ApiResult};

pub const USERS_DB: &str = "_users";
pub const USER_PREFIX: &str = "org.couchdb.user:";
/// Verified credentials are cached this long, so PBKDF2 is not paid per request.
const CREDENTIAL_CACHE_TTL: Duration = Duration::from_secs(60);
const CREDENTIAL_CACHE_MAX: usize = 10_000;

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

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"name": self.name, "roles": self.roles})
    }
}

/// (user name, sha256 of the password given).
type CredentialKey = (String, [u8; 32]);

pub struct Auth {
    admins: Vec<(String, String)>,
    secret: Vec<u8>,
    session_timeout_secs: u64,
    pub pbkdf2_iterations: u32,
    /// (name, sha256(password)) -> (roles, verified at). Guarded by a mutex: short critical
    /// sections, read and written on authenticated requests only.
    cache: Mutex<HashMap<CredentialKey, (Vec<String>, Instant)>>,
}

impl Auth {
    pub fn new(
        admins: Vec<(String, String)>,
        secret: Vec<u8>,
        session_timeout_secs: u64,
        pbkdf2_iterations: u32,
    ) -> Auth {
        Auth {
            admins,
            secret,
            session_timeout_secs,
            pbkdf2_iterations,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Who is asking: anonymous without credentials, an error for wrong ones.
    pub fn authenticate(&self, headers: &HeaderMap, engine: &Engine) -> ApiResult<UserCtx> {
        if let Some(value) = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
        {
            if let Some(encoded) = value
                .strip_prefix("Basic ")
                .or_else(|| value.strip_prefix("basic "))
            {
                let decoded = BASE64
                    .decode(encoded.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or_else(bad_credentials)?;
                let (name, password) = decoded.split_once(':').ok_or_else(bad_credentials)?;
                let roles = self
                    .verify_password(engine, name, password)
                    .ok_or_else(bad_credentials)?;
                return Ok(UserCtx {
                    name: Some(name.to_string()),
                    roles,
                    authenticated: Some("default"),
                });
            }
        }
        if let Some(session) = cookie(headers, "AuthSession") {
            if let Some((name, roles)) = self.verify_cookie(engine, session) {
                return Ok(UserCtx {
                    name: Some(name),
                    roles,
                    authenticated: Some("cookie"),
                });
            }
        }
        Ok(UserCtx::default())
    }

    /// The roles of `name` if `password` is right.
    pub fn verify_password(
        &self,
        engine: &Engine,
        name: &str,
        password: &str,
    ) -> Option<Vec<String>> {
        let fingerprint: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        let cache_key = (name.to_string(), fingerprint);
        if let Some((roles, at)) = self.cache.lock().get(&cache_key) {
            if at.elapsed() < CREDENTIAL_CACHE_TTL {
                return Some(roles.clone());
            }
        }
        let roles = self.verify_uncached(engine, name, password)?;
        let mut cache = self.cache.lock();
        if cache.len() >= CREDENTIAL_CACHE_MAX {
            cache.clear();
        }
        cache.insert(cache_key, (roles.clone(), Instant::now()));
        Some(roles)
    }

    fn verify_uncached(&self, engine: &Engine, name: &str, password: &str) -> Option<Vec<String>> {
        if let Some((_, expected)) = self.admins.iter().find(|(admin, _)| admin == name) {
            return constant_time_eq(expected.as_bytes(), password.as_bytes())
                .then(|| vec!["_admin".to_string()]);
        }
        let user = user_doc(engine, name)?;
        let salt = user.get("salt")?.as_str()?;
        let derived = user.get("derived_key")?.as_str()?;
        let iterations = user.get("iterations")?.as_u64()? as u32;
        let prf = user
            .get("pbkdf2_prf")
            .and_then(|value| value.as_str())
            .unwrap_or("sha1");
        let computed = derive_key(password, salt, iterations, prf)?;
        if !constant_time_eq(computed.as_bytes(), derived.as_bytes()) {
            return None;
        }
        Some(roles_of(&user))
    }

    /// `AuthSession` cookie value for `name`: base64url("name:hextime:hmac").
    pub fn make_cookie(&self, name: &str, now_secs: u64) -> String {
        let payload = format!("{name}:{now_secs:X}");
        let signature = self.sign(&payload);
        URL_SAFE_NO_PAD.encode(format!("{payload}:{signature}"))
    }

    fn sign(&self, payload: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.secret) else {
            return String::new();
        };
        mac.update(payload.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    fn verify_cookie(&self, engine: &Engine, value: &str) -> Option<(String, Vec<String>)> {
        let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(value).ok()?).ok()?;
        let (payload, signature) = decoded.rsplit_once(':')?;
        if !constant_time_eq(self.sign(payload).as_bytes(), signature.as_bytes()) {
            return None;
        }
        let (name, time_hex) = payload.rsplit_once(':')?;
        let issued = u64::from_str_radix(time_hex, 16).ok()?;
        if now_secs().saturating_sub(issued) > self.session_timeout_secs {
            return None;
        }
        if self.admins.iter().any(|(admin, _)| admin == name) {
            return Some((name.to_string(), vec!["_admin".to_string()]));
        }
        let user = user_doc(engine, name)?;
        Some((name.to_string(), roles_of(&user)))
    }

    /// Replaces a plain `password` in a `_users` document by CouchDB's PBKDF2 fields.
    pub fn hash_user_password(&self, user: &mut serde_json::Map<String, serde_json::Value>) {
        let Some(password) = user
            .remove("password")
            .and_then(|value| value.as_str().map(str::to_string))
        else {
            return;
        };
        let mut salt_bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut salt_bytes);
        let salt = hex(&salt_bytes);
        let derived =
            derive_key(&password, &salt, self.pbkdf2_iterations, "sha256").unwrap_or_default();
        user.insert("password_scheme".into(), "pbkdf2".into());
        user.insert("pbkdf2_prf".into(), "sha256".into());
        user.insert("iterations".into(), self.pbkdf2_iterations.into());
        user.insert("salt".into(), salt.into());
        user.insert("derived_key".into(), derived.into());
        self.cache.lock().retain(|(name, _), _| {
            Some(name.as_str()) != user.get("name").and_then(|value| value.as_str())
        });
    }
}

fn bad_credentials() -> ApiError {
    ApiError::Unauthorized("Name or password is incorrect.".into())
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

fn derive_key(password: &str, salt: &str, iterations: u32, prf: &str) -> Option<String> {
    if iterations == 0 {
        return None;
    }
    match prf {
        "sha256" => {
            let mut out = [0u8; 32];
            pbkdf2::pbkdf2::<Hmac<Sha256>>(
                password.as_bytes(),
                salt.as_bytes(),
                iterations,
                &mut out,
            )
            .ok()?;
            Some(hex(&out))
        }
        "sha1" => {
            let mut out = [0u8; 20];
            pbkdf2::pbkdf2::<Hmac<sha1::Sha1>>(
                password.as_bytes(),
                salt.as_bytes(),
                iterations,
                &mut out,
            )
            .ok()?;
            Some(hex(&out))
        }
        _ => None,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn user_doc(engine: &Engine, name: &str) -> Option<serde_json::Value> {
    let users = engine.bucket(USERS_DB)?;
    let key = format!("{USER_PREFIX}{name}");
    let value = users.kv_get(key.as_bytes()).ok()??;
    serde_json::from_slice(&value.body).ok()
}

fn roles_of(user: &serde_json::Value) -> Vec<String> {
    user.get("roles")
        .and_then(|roles| roles.as_array())
        .map(|roles| {
            roles
                .iter()
                .filter_map(|role| role.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
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

/// Access a user has to one database, from its `_security` object.
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
    let security = bucket.security();
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

/// The error for a user without the access a request needs, CouchDB style: 401 for anonymous
/// users (they may log in), 403 for authenticated ones.
pub fn require_db_access(bucket: &Bucket, user: &UserCtx, needed: DbAccess) -> ApiResult<()> {
    if db_access(bucket, user) >= needed {
        return Ok(());
    }
    if user.name.is_none() {
        return Err(ApiError::Unauthorized(
            "You are not authorized to access this db.".into(),
        ));
    }
    Err(ApiError::Forbidden(match needed {
        DbAccess::Admin => "You are not a db or server admin.".into(),
        _ => "You are not allowed to access this db.".into(),
    }))
}

pub fn require_admin(user: &UserCtx) -> ApiResult<()> {
    if user.is_admin() {
        Ok(())
    } else {
        Err(ApiError::not_admin())
    }
}

/// The security object new databases get (CouchDB 3 `default_security = admin_only`).
pub fn default_security() -> serde_json::Value {
    serde_json::json!({"members": {"roles": ["_admin"]}, "admins": {"roles": ["_admin"]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_sha1_matches_rfc6070_vector() {
        // RFC 6070: P="password", S="salt", c=2 -> ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957
        assert_eq!(
            derive_key("password", "salt", 2, "sha1").as_deref(),
            Some("ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957")
        );
    }

    #[test]
    fn cookies_verify_only_with_the_secret() {
        let auth = Auth::new(
            vec![("admin".into(), "pw".into())],
            b"secret".to_vec(),
            600,
            10,
        );
        let other = Auth::new(
            vec![("admin".into(), "pw".into())],
            b"other".to_vec(),
            600,
            10,
        );
        let value = auth.make_cookie("admin", now_secs());
        let dir = tempfile::tempdir().expect("dir");
        let engine = Engine::open(dir.path(), Default::default()).expect("engine");
        assert!(auth.verify_cookie(&engine, &value).is_some());
        assert!(other.verify_cookie(&engine, &value).is_none());
        let old = auth.make_cookie("admin", now_secs() - 601);
        assert!(auth.verify_cookie(&engine, &old).is_none());
    }
}
