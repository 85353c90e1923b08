//! Accounts: server admins (from the configuration, passwords in memory; or generated, kept
//! hashed in the data directory: docs/format/data-dir.md) and `_users` documents (CouchDB's PBKDF2 fields plus SCRAM secrets, so the KV door can authenticate the
//! same users without ever storing their passwords).
//!
//! What is cached about an account (verified passwords, roles, salts) is stamped with the
//! engine's accounts epoch (`AccessEpoch::accounts`), read before the account was: a write to
//! `_users` moves it, so a deleted user, a new role or a new password counts from the next
//! request on.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use hmac::Hmac;
use parking_lot::Mutex;
use rand::RngCore;
use settee_engine::{hex, Engine};
use sha2::{Digest, Sha256};

use crate::constant_time_eq;
use crate::lockout::{Lockout, LockoutConfig};
use crate::scram::{Mechanism, ScramSecret};

pub const USERS_DB: &str = "_users";
pub const USER_PREFIX: &str = "org.couchdb.user:";
/// PBKDF2 rounds of new `_users` passwords (CouchDB-style HTTP hashing).
pub const PBKDF2_ITERATIONS_DEFAULT: u32 = 10_000;
/// PBKDF2 rounds of SCRAM secrets. The client pays them once per connection, so they are
/// fewer than CouchDB's HTTP password hashing (which the server pays, once per cache miss).
pub const SCRAM_ITERATIONS: u32 = 10_000;
/// Verified credentials are cached this long (and only while the access epoch stands still),
/// so PBKDF2 is not paid per request.
const CREDENTIAL_CACHE_TTL: Duration = Duration::from_secs(60);
/// Most entries in each cache; a full cache is emptied.
const CREDENTIAL_CACHE_MAX: usize = 10_000;

/// sha256 of the user name's length (8 bytes, little-endian), the name and the password given:
/// one fixed-size key, so the cache lookup on every request allocates nothing.
type CredentialKey = [u8; 32];

fn credential_key(name: &str, password: &str) -> CredentialKey {
    let mut hasher = Sha256::new();
    hasher.update((name.len() as u64).to_le_bytes());
    hasher.update(name.as_bytes());
    hasher.update(password.as_bytes());
    hasher.finalize().into()
}

/// A user as the doors see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub roles: Vec<String>,
    /// The salt of the user's password (CouchDB's `salt`; for server admins from the
    /// configuration, one derived from the password). A new password brings a new salt, so
    /// it tells one set of credentials from the next: session cookies are signed with it.
    pub salt: String,
}

/// A server admin.
#[derive(Clone, Debug)]
pub struct ServerAdmin {
    name: String,
    secret: AdminSecret,
}

#[derive(Clone, Debug)]
enum AdminSecret {
    /// From the configuration (`--admin USER:PASSWORD`), in memory only.
    Password(String),
    /// Stored hashed, in the fields a `_users` document has (see [`Users::hashed_credentials`]).
    Hashed(serde_json::Value),
}

impl ServerAdmin {
    pub fn with_password(name: &str, password: &str) -> ServerAdmin {
        ServerAdmin {
            name: name.to_string(),
            secret: AdminSecret::Password(password.to_string()),
        }
    }

    /// An admin from its stored hashed credentials, if they hold CouchDB's PBKDF2 fields.
    pub fn from_hashed(name: &str, stored: serde_json::Value) -> Option<ServerAdmin> {
        for field in ["salt", "derived_key"] {
            stored.get(field)?.as_str()?;
        }
        stored.get("iterations")?.as_u64()?;
        Some(ServerAdmin {
            name: name.to_string(),
            secret: AdminSecret::Hashed(stored),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn account(&self) -> Account {
        match &self.secret {
            AdminSecret::Password(password) => admin_account(&self.name, password),
            AdminSecret::Hashed(stored) => Account {
                name: self.name.clone(),
                roles: vec!["_admin".to_string()],
                salt: salt_of(stored),
            },
        }
    }

    fn verify(&self, password: &str) -> bool {
        match &self.secret {
            AdminSecret::Password(expected) => {
                constant_time_eq(expected.as_bytes(), password.as_bytes())
            }
            AdminSecret::Hashed(stored) => pbkdf2_matches(stored, password),
        }
    }
}

/// A cache entry, valid while the access epoch is still `epoch`.
struct Stamped<T> {
    value: T,
    epoch: u64,
    at: Instant,
}

/// Why a password login was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginRefused {
    /// Unknown user or wrong password (CouchDB: 401 "Name or password is incorrect.").
    Incorrect,
    /// Too many recent failures ([`crate::LOCKED_OUT`]; CouchDB: 403), whatever the password.
    LockedOut,
    /// The account's document has conflicting revisions ([`CONFLICTED_ACCOUNT`]; CouchDB:
    /// 401), whatever the password.
    Conflicted,
}

/// CouchDB's answer to a login whose account document has conflicts.
pub const CONFLICTED_ACCOUNT: &str = "User document conflicts must be resolved before the document is used for authentication purposes.";

pub struct Users {
    /// From the node's own settings (`--admin`, generated, the cluster's node login).
    admins: Vec<ServerAdmin>,
    /// From `[admins]` of `/_node/{node}/_config`, stored hashed there; replaced whole when
    /// that section changes, read on logins that miss the caches.
    config_admins: parking_lot::RwLock<Vec<ServerAdmin>>,
    /// Failed logins by (client address, user, salt), shared by both doors.
    lockout: Lockout,
    pub pbkdf2_iterations: u32,
    /// How new passwords are hashed now: PBKDF2 rounds and PRF (`[chttpd_auth] iterations`,
    /// `pbkdf2_prf`), replaced when `_config` changes, read when a password is set.
    hashing: parking_lot::RwLock<(u32, String)>,
    /// [`credential_key`] of (name, password) -> the account the password opened.
    verified: Mutex<HashMap<CredentialKey, Stamped<Account>>>,
    /// name -> account, for callers that authenticated the user another way (cookies).
    accounts: Mutex<HashMap<String, Stamped<Account>>>,
    /// Accounts whose password was verified against a hash made another way than new
    /// passwords are (`upgrade_hash_on_auth`), until the HTTP door takes them.
    outdated_hashes: Mutex<std::collections::HashSet<String>>,
    /// `outdated_hashes` is not empty: read without the lock on every password login.
    any_outdated_hash: std::sync::atomic::AtomicBool,
    /// Admins' SCRAM secrets, derived on first use with a random salt.
    admin_scram: Mutex<HashMap<(String, Mechanism), ScramSecret>>,
}

impl Users {
    pub fn new(admins: Vec<ServerAdmin>, pbkdf2_iterations: u32) -> Users {
        Users {
            admins,
            config_admins: parking_lot::RwLock::new(Vec::new()),
            pbkdf2_iterations,
            hashing: parking_lot::RwLock::new((pbkdf2_iterations, "sha256".to_string())),
            lockout: Lockout::new(LockoutConfig::default()),
            verified: Mutex::new(HashMap::new()),
            accounts: Mutex::new(HashMap::new()),
            admin_scram: Mutex::new(HashMap::new()),
            outdated_hashes: Mutex::new(std::collections::HashSet::new()),
            any_outdated_hash: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// With `config` for failed logins instead of CouchDB's defaults.
    pub fn with_lockout(mut self, config: LockoutConfig) -> Users {
        self.lockout = Lockout::new(config);
        self
    }

    /// A password login from `peer` (HTTP Basic, `POST /_session`, SASL PLAIN), counted by the
    /// failed-login lockout (`lockout.rs`): a locked-out user is refused before the password
    /// is looked at, as CouchDB does.
    pub fn login(
        &self,
        engine: &Engine,
        name: &str,
        password: &str,
        peer: Option<IpAddr>,
    ) -> Result<Account, LoginRefused> {
        if self.is_locked_out(engine, name, peer) {
            return Err(LoginRefused::LockedOut);
        }
        match self.verify_password(engine, name, password) {
            Some(account) => Ok(account),
            None if self.admin(name).is_none() && user_doc_conflicted(engine, name) => {
                Err(LoginRefused::Conflicted)
            }
            None => {
                self.login_failed(engine, name, peer);
                Err(LoginRefused::Incorrect)
            }
        }
    }

    /// Whether logins of `name` from `peer` are refused for now (for SCRAM, which learns the
    /// name at its first message and the verdict at its last).
    pub fn is_locked_out(&self, engine: &Engine, name: &str, peer: Option<IpAddr>) -> bool {
        if !self.lockout.may_refuse() {
            return false;
        }
        self.account(engine, name)
            .is_some_and(|account| self.lockout.is_locked_out(peer, name, &account.salt))
    }

    /// Counts a failed login of `name` from `peer` (unknown users are not counted).
    pub fn login_failed(&self, engine: &Engine, name: &str, peer: Option<IpAddr>) {
        if let Some(account) = self.account(engine, name) {
            self.lockout.record_failure(peer, name, &account.salt);
        }
    }

    pub fn is_server_admin(&self, name: &str) -> bool {
        self.admins.iter().any(|admin| admin.name == name)
            || self
                .config_admins
                .read()
                .iter()
                .any(|admin| admin.name == name)
    }

    fn admin(&self, name: &str) -> Option<ServerAdmin> {
        if let Some(admin) = self.admins.iter().find(|admin| admin.name == name) {
            return Some(admin.clone());
        }
        self.config_admins
            .read()
            .iter()
            .find(|admin| admin.name == name)
            .cloned()
    }

    /// Replaces the server admins of `[admins]` (CouchDB's hashed values, see
    /// [`parse_admin_hash`]); what was cached about accounts is forgotten.
    pub fn set_config_admins(&self, admins: Vec<ServerAdmin>) {
        *self.config_admins.write() = admins;
        self.forget_accounts();
    }

    /// Reads accounts from database `name` from now on (CouchDB's `[chttpd_auth]
    /// authentication_db`); answers whether it changed.
    pub fn set_authentication_db(&self, name: &str) -> bool {
        let changed = crate::auth_db::set(name);
        if changed {
            self.forget_accounts();
        }
        changed
    }

    /// How new passwords are hashed from now on: `iterations` PBKDF2 rounds with `prf`
    /// (`sha`, `sha224`, `sha256`, `sha384`, `sha512`).
    pub fn set_password_hashing(&self, iterations: u32, prf: &str) {
        let hashing = (iterations.max(1), prf.to_string());
        let changed = *self.hashing.read() != hashing;
        *self.hashing.write() = hashing;
        if changed {
            // Verified passwords are checked again, which finds the hashes to upgrade.
            self.forget_accounts();
        }
    }

    fn hashing(&self) -> (u32, String) {
        self.hashing.read().clone()
    }

    /// Whether account document `user` was hashed with other iterations or another PRF than
    /// new passwords are now.
    pub fn hash_is_outdated(&self, user: &serde_json::Map<String, serde_json::Value>) -> bool {
        let (iterations, prf) = self.hashing();
        let stored_prf = user
            .get("pbkdf2_prf")
            .and_then(|value| value.as_str())
            .unwrap_or("sha");
        let stored_iterations = user.get("iterations").and_then(|value| value.as_u64());
        user.get("password_scheme").and_then(|value| value.as_str()) == Some("pbkdf2")
            && !(same_prf(stored_prf, &prf) && stored_iterations == Some(u64::from(iterations)))
    }

    /// CouchDB's `upgrade_hash_on_auth`: when `user` (an account document) was hashed with
    /// other iterations or another PRF than new passwords are, and `password` is its
    /// password, its key is derived again the current way with the same salt (so session
    /// cookies stay valid); answers whether it changed.
    pub fn upgrade_password_hash(
        &self,
        user: &mut serde_json::Map<String, serde_json::Value>,
        password: &str,
    ) -> bool {
        if !self.hash_is_outdated(user) {
            return false;
        }
        let (iterations, prf) = self.hashing();
        let document = serde_json::Value::Object(user.clone());
        if user.get("password_scheme").and_then(|value| value.as_str()) != Some("pbkdf2")
            || !pbkdf2_matches(&document, password)
        {
            return false;
        }
        let Some(salt) = user.get("salt").and_then(|value| value.as_str()) else {
            return false;
        };
        let Some(derived) = derive_key(password, salt, iterations, &prf) else {
            return false;
        };
        user.insert("derived_key".into(), derived.into());
        user.insert("iterations".into(), iterations.into());
        user.insert("pbkdf2_prf".into(), prf.into());
        true
    }

    /// `[chttpd_auth_lockout] mode`, from now on.
    pub fn set_lockout_mode(&self, mode: crate::LockoutMode) {
        self.lockout.set_mode(mode);
    }

    fn forget_accounts(&self) {
        self.verified.lock().clear();
        self.accounts.lock().clear();
        self.admin_scram.lock().clear();
    }

    /// CouchDB's stored form of an `[admins]` password: `-pbkdf2:sha256-KEY,SALT,ITERATIONS`
    /// with a new salt and this node's iterations.
    pub fn hash_admin_password(&self, password: &str) -> String {
        let mut salt_bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut salt_bytes);
        let salt = hex(&salt_bytes);
        let (iterations, prf) = self.hashing();
        let derived = derive_key(password, &salt, iterations, &prf).unwrap_or_default();
        format!("-pbkdf2:{prf}-{derived},{salt},{iterations}")
    }

    /// The account of `name` if `password` is right.
    pub fn verify_password(&self, engine: &Engine, name: &str, password: &str) -> Option<Account> {
        let epoch = engine.access_epoch().accounts();
        let cache_key = credential_key(name, password);
        if let Some(entry) = self.verified.lock().get(&cache_key) {
            if entry.epoch == epoch && entry.at.elapsed() < CREDENTIAL_CACHE_TTL {
                return Some(entry.value.clone());
            }
        }
        let account = self.verify_uncached(engine, name, password)?;
        remember(&self.verified, cache_key, &account, epoch);
        Some(account)
    }

    fn verify_uncached(&self, engine: &Engine, name: &str, password: &str) -> Option<Account> {
        if let Some(admin) = self.admin(name) {
            return admin.verify(password).then(|| admin.account());
        }
        let user = user_doc(engine, name)?;
        if !pbkdf2_matches(&user, password) {
            return None;
        }
        if user
            .as_object()
            .is_some_and(|fields| self.hash_is_outdated(fields))
        {
            let mut outdated = self.outdated_hashes.lock();
            if outdated.len() >= CREDENTIAL_CACHE_MAX {
                outdated.clear();
            }
            outdated.insert(name.to_string());
            self.any_outdated_hash
                .store(true, std::sync::atomic::Ordering::Release);
        }
        Some(user_account(name, &user))
    }

    /// Whether `name` logged in with a password whose stored hash was made another way than
    /// new passwords are (found when the password was checked against the account
    /// document); answers it once.
    pub fn take_outdated_hash(&self, name: &str) -> bool {
        if !self.may_have_outdated_hash() {
            return false;
        }
        let mut outdated = self.outdated_hashes.lock();
        let taken = outdated.remove(name);
        if outdated.is_empty() {
            self.any_outdated_hash
                .store(false, std::sync::atomic::Ordering::Release);
        }
        taken
    }

    /// Whether some account may be waiting for its hash to be upgraded (no lock taken).
    pub fn may_have_outdated_hash(&self) -> bool {
        self.any_outdated_hash
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The account of an existing user (admin or `_users`), without a password check: for
    /// callers that authenticated the user another way (a signed cookie, SCRAM) or that check
    /// it is still what it was (an open KV connection).
    pub fn account(&self, engine: &Engine, name: &str) -> Option<Account> {
        let epoch = engine.access_epoch().accounts();
        if let Some(entry) = self.accounts.lock().get(name) {
            if entry.epoch == epoch {
                return Some(entry.value.clone());
            }
        }
        let account = match self.admin(name) {
            Some(admin) => admin.account(),
            None => user_account(name, &user_doc(engine, name)?),
        };
        remember(&self.accounts, name.to_string(), &account, epoch);
        Some(account)
    }

    /// The roles of an existing user (admin or `_users` account), without a password check.
    pub fn roles(&self, engine: &Engine, name: &str) -> Option<Vec<String>> {
        self.account(engine, name).map(|account| account.roles)
    }

    /// The SCRAM secret of `name` for `mechanism`, if the user exists and has one (accounts
    /// whose password was set through settee do; ones replicated in from CouchDB do not).
    pub fn scram_secret(
        &self,
        engine: &Engine,
        name: &str,
        mechanism: Mechanism,
    ) -> Option<ScramSecret> {
        match self.admin(name).map(|admin| admin.secret) {
            Some(AdminSecret::Password(password)) => {
                let mut cache = self.admin_scram.lock();
                let secret = cache
                    .entry((name.to_string(), mechanism))
                    .or_insert_with(|| {
                        ScramSecret::derive(
                            mechanism,
                            &password,
                            &ScramSecret::random_salt(),
                            SCRAM_ITERATIONS,
                        )
                    });
                return Some(secret.clone());
            }
            Some(AdminSecret::Hashed(stored)) => {
                return ScramSecret::from_json(stored.get("scram")?.get(mechanism.field())?)
            }
            None => {}
        }
        let user = user_doc(engine, name)?;
        ScramSecret::from_json(user.get("scram")?.get(mechanism.field())?)
    }

    /// The stored form of a server admin's password (docs/format/data-dir.md): the fields a
    /// `_users` document gets, never the password.
    pub fn hashed_credentials(&self, name: &str, password: &str) -> serde_json::Value {
        let mut fields = serde_json::Map::new();
        fields.insert("name".into(), name.into());
        fields.insert("password".into(), password.into());
        self.hash_user_password(&mut fields);
        serde_json::Value::Object(fields)
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
        let (iterations, prf) = self.hashing();
        let derived = derive_key(&password, &salt, iterations, &prf).unwrap_or_default();
        user.insert("password_scheme".into(), "pbkdf2".into());
        user.insert("pbkdf2_prf".into(), prf.into());
        user.insert("iterations".into(), iterations.into());
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
    }
}

/// Caches `account` under `key`, stamped with `epoch` (the epoch read before the account was).
fn remember<K: std::hash::Hash + Eq>(
    cache: &Mutex<HashMap<K, Stamped<Account>>>,
    key: K,
    account: &Account,
    epoch: u64,
) {
    let mut cache = cache.lock();
    if cache.len() >= CREDENTIAL_CACHE_MAX {
        cache.clear();
    }
    cache.insert(
        key,
        Stamped {
            value: account.clone(),
            epoch,
            at: Instant::now(),
        },
    );
}

/// A configured server admin's account. Its salt is derived from the password, so it is the
/// same after a restart (cookies stay valid) and changes with the password (they do not).
fn admin_account(name: &str, password: &str) -> Account {
    let digest = Sha256::digest(format!("settee admin salt\0{name}\0{password}").as_bytes());
    Account {
        name: name.to_string(),
        roles: vec!["_admin".to_string()],
        salt: hex(&digest[..16]),
    }
}

fn user_account(name: &str, user: &serde_json::Value) -> Account {
    Account {
        name: name.to_string(),
        roles: roles_of(user),
        salt: salt_of(user),
    }
}

fn salt_of(stored: &serde_json::Value) -> String {
    stored
        .get("salt")
        .and_then(|salt| salt.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Whether `password` matches CouchDB's PBKDF2 fields in `stored` (a `_users` document or a
/// stored admin).
fn pbkdf2_matches(stored: &serde_json::Value, password: &str) -> bool {
    let field = |name: &str| stored.get(name).and_then(|value| value.as_str());
    let (Some(salt), Some(derived)) = (field("salt"), field("derived_key")) else {
        return false;
    };
    let Some(iterations) = stored
        .get("iterations")
        .and_then(|value| value.as_u64())
        .and_then(|iterations| u32::try_from(iterations).ok())
    else {
        return false;
    };
    let prf = field("pbkdf2_prf").unwrap_or("sha1");
    derive_key(password, salt, iterations, prf)
        .is_some_and(|computed| constant_time_eq(computed.as_bytes(), derived.as_bytes()))
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

fn derive_key(password: &str, salt: &str, iterations: u32, prf: &str) -> Option<String> {
    fn derive<M>(password: &str, salt: &str, iterations: u32) -> Option<String>
    where
        M: hmac::digest::KeyInit + hmac::digest::Update + hmac::digest::FixedOutput + Clone + Sync,
    {
        let mut out = vec![0u8; <M as hmac::digest::OutputSizeUser>::output_size()];
        pbkdf2::pbkdf2::<M>(password.as_bytes(), salt.as_bytes(), iterations, &mut out).ok()?;
        Some(hex(&out))
    }
    if iterations == 0 {
        return None;
    }
    match prf {
        "sha" | "sha1" => derive::<Hmac<sha1::Sha1>>(password, salt, iterations),
        "sha224" => derive::<Hmac<sha2::Sha224>>(password, salt, iterations),
        "sha256" => derive::<Hmac<Sha256>>(password, salt, iterations),
        "sha384" => derive::<Hmac<sha2::Sha384>>(password, salt, iterations),
        "sha512" => derive::<Hmac<sha2::Sha512>>(password, salt, iterations),
        _ => None,
    }
}

/// CouchDB names SHA-1 `sha`; account documents written elsewhere may say `sha1`.
fn same_prf(a: &str, b: &str) -> bool {
    let canonical = |name| if name == "sha1" { "sha" } else { name };
    canonical(a) == canonical(b)
}

/// An `[admins]` value as CouchDB stores it (`-pbkdf2-KEY,SALT,ITERATIONS` with SHA-1, or
/// `-pbkdf2:PRF-KEY,SALT,ITERATIONS`), as the fields [`ServerAdmin::from_hashed`] reads.
/// Anything else (a plain password CouchDB has not hashed yet, the old `-hashed-` form) is
/// `None`.
pub fn parse_admin_hash(value: &str) -> Option<serde_json::Value> {
    let rest = value.strip_prefix("-pbkdf2")?;
    let (prf, fields) = match rest.strip_prefix('-') {
        Some(fields) => ("sha1", fields),
        None => {
            let (prf, fields) = rest.strip_prefix(':')?.split_once('-')?;
            (if prf == "sha" { "sha1" } else { prf }, fields)
        }
    };
    let mut parts = fields.split(',');
    let (Some(derived), Some(salt), Some(iterations), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let iterations: u32 = iterations.parse().ok()?;
    Some(serde_json::json!({
        "derived_key": derived,
        "salt": salt,
        "iterations": iterations,
        "pbkdf2_prf": prf,
        "password_scheme": "pbkdf2",
    }))
}

/// The account document of `name` in the accounts database; none while it has conflicting
/// revisions (CouchDB refuses such an account until they are resolved).
fn user_doc(engine: &Engine, name: &str) -> Option<serde_json::Value> {
    let users = engine.bucket(&crate::authentication_db())?;
    let key = format!("{USER_PREFIX}{name}");
    let (header, body) = users.read_winner(key.as_bytes()).ok()??;
    if header.deleted || header.conflicts {
        return None;
    }
    serde_json::from_slice(&body).ok()
}

fn user_doc_conflicted(engine: &Engine, name: &str) -> bool {
    let Some(users) = engine.bucket(&crate::authentication_db()) else {
        return false;
    };
    let key = format!("{USER_PREFIX}{name}");
    matches!(users.read_winner(key.as_bytes()), Ok(Some((header, _))) if header.conflicts && !header.deleted)
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
    fn a_hashed_admin_verifies_and_keeps_no_password() {
        let users = Users::new(Vec::new(), 10);
        let stored = users.hashed_credentials("root", "s3cret");
        assert!(!stored.to_string().contains("s3cret"));
        let admin = ServerAdmin::from_hashed("root", stored.clone()).unwrap();
        assert!(admin.verify("s3cret"));
        assert!(!admin.verify("wrong"));
        assert_eq!(admin.account().salt, stored["salt"].as_str().unwrap());
        assert!(ServerAdmin::from_hashed("root", serde_json::json!({"salt": "x"})).is_none());
        let users = Users::new(vec![admin], 10);
        let dir = std::env::temp_dir().join(format!("settee-auth-{}", std::process::id()));
        let engine = Engine::open(&dir, Default::default()).unwrap();
        assert_eq!(
            users
                .verify_password(&engine, "root", "s3cret")
                .unwrap()
                .roles,
            vec!["_admin".to_string()]
        );
        assert!(users
            .scram_secret(&engine, "root", Mechanism::Sha256)
            .is_some());
        drop(engine);
        let _ = std::fs::remove_dir_all(dir);
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

    #[test]
    fn hashing_follows_the_settings_and_an_old_hash_upgrades_with_its_salt() {
        let users = Users::new(Vec::new(), 10);
        let mut doc = serde_json::json!({"name": "bob", "password": "pw", "roles": []})
            .as_object()
            .cloned()
            .unwrap();
        users.hash_user_password(&mut doc);
        assert!(!users.hash_is_outdated(&doc));
        users.set_password_hashing(3, "sha512");
        assert!(users.hash_is_outdated(&doc));
        let salt = doc["salt"].clone();
        assert!(!users.upgrade_password_hash(&mut doc, "wrong"));
        assert!(users.upgrade_password_hash(&mut doc, "pw"));
        assert_eq!(doc["salt"], salt);
        assert_eq!(doc["iterations"], 3);
        assert_eq!(doc["derived_key"].as_str().unwrap().len(), 128);
        assert!(pbkdf2_matches(
            &serde_json::Value::Object(doc.clone()),
            "pw"
        ));
        assert!(!users.hash_is_outdated(&doc));
        let admin = users.hash_admin_password("pw");
        assert!(admin.starts_with("-pbkdf2:sha512-"));
        let stored = parse_admin_hash(&admin).unwrap();
        assert!(ServerAdmin::from_hashed("root", stored)
            .unwrap()
            .verify("pw"));
        assert!(parse_admin_hash("plain").is_none());
    }
}
