//! Accounts: server admins (from the configuration, passwords in memory) and `_users`
//! documents (CouchDB's PBKDF2 fields plus SCRAM secrets, so the KV door can authenticate the
//! same users without ever storing their passwords).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hmac::Hmac;
use parking_lot::Mutex;
use rand::RngCore;
use settee_engine::{hex, Engine};
use sha2::{Digest, Sha256};

use crate::constant_time_eq;
use crate::scram::{Mechanism, ScramSecret};

pub const USERS_DB: &str = "_users";
pub const USER_PREFIX: &str = "org.couchdb.user:";
/// PBKDF2 rounds of new `_users` passwords (CouchDB-style HTTP hashing).
pub const PBKDF2_ITERATIONS_DEFAULT: u32 = 10_000;
/// PBKDF2 rounds of SCRAM secrets. The client pays them once per connection, so they are
/// fewer than CouchDB's HTTP password hashing (which the server pays, once per cache miss).
pub const SCRAM_ITERATIONS: u32 = 10_000;
/// Verified credentials are cached this long, so PBKDF2 is not paid per request.
const CREDENTIAL_CACHE_TTL: Duration = Duration::from_secs(60);
const CREDENTIAL_CACHE_MAX: usize = 10_000;

/// (user name, sha256 of the password given).
type CredentialKey = (String, [u8; 32]);

pub struct Users {
    admins: Vec<(String, String)>,
    pub pbkdf2_iterations: u32,
    /// (name, sha256(password)) -> (roles, verified at).
    cache: Mutex<HashMap<CredentialKey, (Vec<String>, Instant)>>,
    /// Admins' SCRAM secrets, derived on first use with a random salt.
    admin_scram: Mutex<HashMap<(String, Mechanism), ScramSecret>>,
}

impl Users {
    pub fn new(admins: Vec<(String, String)>, pbkdf2_iterations: u32) -> Users {
        Users {
            admins,
            pbkdf2_iterations,
            cache: Mutex::new(HashMap::new()),
            admin_scram: Mutex::new(HashMap::new()),
        }
    }

    /// The first configured server admin (jobs of the node's own `_replicator` run as it).
    pub fn first_admin(&self) -> Option<String> {
        self.admins.first().map(|(name, _)| name.clone())
    }

    pub fn is_server_admin(&self, name: &str) -> bool {
        self.admins.iter().any(|(admin, _)| admin == name)
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

    /// The roles of an existing user (admin or `_users` account), without a password check:
    /// for callers that authenticated the user another way (a signed cookie, SCRAM).
    pub fn roles(&self, engine: &Engine, name: &str) -> Option<Vec<String>> {
        if self.is_server_admin(name) {
            return Some(vec!["_admin".to_string()]);
        }
        user_doc(engine, name).map(|user| roles_of(&user))
    }

    /// The SCRAM secret of `name` for `mechanism`, if the user exists and has one (accounts
    /// whose password was set through settee do; ones replicated in from CouchDB do not).
    pub fn scram_secret(
        &self,
        engine: &Engine,
        name: &str,
        mechanism: Mechanism,
    ) -> Option<ScramSecret> {
        if let Some((_, password)) = self.admins.iter().find(|(admin, _)| admin == name) {
            let mut cache = self.admin_scram.lock();
            let secret = cache
                .entry((name.to_string(), mechanism))
                .or_insert_with(|| {
                    ScramSecret::derive(
                        mechanism,
                        password,
                        &ScramSecret::random_salt(),
                        SCRAM_ITERATIONS,
                    )
                });
            return Some(secret.clone());
        }
        let user = user_doc(engine, name)?;
        ScramSecret::from_json(user.get("scram")?.get(mechanism.field())?)
    }

    /// Replaces a plain `password` in a `_users` document by CouchDB's PBKDF2 fields and the
    /// SCRAM secrets of every mechanism.
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
        let mut scram = serde_json::Map::new();
        for mechanism in Mechanism::ALL {
            let secret = ScramSecret::derive(
                mechanism,
                &password,
                &ScramSecret::random_salt(),
                SCRAM_ITERATIONS,
            );
            scram.insert(mechanism.field().into(), secret.to_json());
        }
        user.insert("scram".into(), scram.into());
        self.cache.lock().retain(|(name, _), _| {
            Some(name.as_str()) != user.get("name").and_then(|value| value.as_str())
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pbkdf2_sha1_matches_rfc6070_vector() {
        assert_eq!(
            derive_key("password", "salt", 2, "sha1").unwrap(),
            "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"
        );
    }

    #[test]
    fn hashing_a_password_stores_pbkdf2_and_scram_and_drops_the_password() {
        let users = Users::new(Vec::new(), 10);
        let mut doc = serde_json::json!({"name": "bob", "password": "pw", "roles": []})
            .as_object()
            .cloned()
            .unwrap();
        users.hash_user_password(&mut doc);
        assert!(doc.get("password").is_none());
        assert_eq!(doc["iterations"], 10);
        for mechanism in Mechanism::ALL {
            let secret = ScramSecret::from_json(&doc["scram"][mechanism.field()]).unwrap();
            let again = ScramSecret::derive(mechanism, "pw", &secret.salt, secret.iterations);
            assert_eq!(secret, again);
        }
    }
}
