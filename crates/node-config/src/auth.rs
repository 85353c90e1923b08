//! The authentication settings read at runtime, under CouchDB's names: which handlers run and
//! in which order (`[chttpd] authentication_handlers`), the accounts database
//! (`[chttpd_auth] authentication_db`), proxy authentication (`[chttpd_auth]`
//! `proxy_use_secret`, `secret`, `x_auth_*`, `hash_algorithms`), JWT (`[jwt_auth]`,
//! `[jwt_keys]`) and the failed-login lockout's mode (`[chttpd_auth_lockout] mode`).
//! `[couch_httpd_auth]` is read where `[chttpd_auth]` says nothing, as CouchDB reads it.

use std::collections::BTreeMap;

use crate::ConfigError;

/// One authentication handler of `[chttpd] authentication_handlers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthHandler {
    /// `Authorization: Bearer` JSON Web Tokens.
    Jwt,
    /// `X-Auth-CouchDB-UserName` and friends, set by a trusted proxy.
    Proxy,
    /// The `AuthSession` cookie of `POST /_session`.
    Cookie,
    /// HTTP Basic.
    Default,
}

impl AuthHandler {
    /// The name CouchDB shows in `/_session`'s `info` (the function name's first word).
    pub fn name(self) -> &'static str {
        match self {
            AuthHandler::Jwt => "jwt",
            AuthHandler::Proxy => "proxy",
            AuthHandler::Cookie => "cookie",
            AuthHandler::Default => "default",
        }
    }

    /// `jwt_authentication_handler` and the other function names CouchDB's modules export.
    fn from_function(function: &str) -> Option<AuthHandler> {
        match function {
            "jwt_authentication_handler" => Some(AuthHandler::Jwt),
            // CouchDB keeps the misspelt name as a deprecated alias.
            "proxy_authentication_handler" | "proxy_authentification_handler" => {
                Some(AuthHandler::Proxy)
            }
            "cookie_authentication_handler" => Some(AuthHandler::Cookie),
            "default_authentication_handler" => Some(AuthHandler::Default),
            _ => None,
        }
    }

    /// Reads CouchDB's list of `{module, function}` pairs: `{chttpd_auth,
    /// cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}`.
    /// Both of CouchDB's modules (`chttpd_auth`, `couch_httpd_auth`) name the same handlers;
    /// a pair settee has no handler for is refused.
    pub fn parse_list(value: &str) -> Result<Vec<AuthHandler>, ConfigError> {
        let mut handlers = Vec::new();
        let mut rest = value.trim();
        while !rest.is_empty() {
            let open = rest
                .strip_prefix('{')
                .ok_or_else(|| handlers_invalid(value))?;
            let (pair, after) = open
                .split_once('}')
                .ok_or_else(|| handlers_invalid(value))?;
            let (module, function) = pair
                .split_once(',')
                .ok_or_else(|| handlers_invalid(value))?;
            if !matches!(module.trim(), "chttpd_auth" | "couch_httpd_auth") {
                return Err(handlers_invalid(value));
            }
            let handler = AuthHandler::from_function(function.trim())
                .ok_or_else(|| handlers_invalid(value))?;
            handlers.push(handler);
            rest = after.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        Ok(handlers)
    }
}

fn handlers_invalid(value: &str) -> ConfigError {
    ConfigError::Invalid(format!(
        "authentication_handlers must list {{chttpd_auth, jwt_authentication_handler}}, \
         {{chttpd_auth, proxy_authentication_handler}}, {{chttpd_auth, \
         cookie_authentication_handler}} or {{chttpd_auth, default_authentication_handler}}, \
         not {value:?}"
    ))
}

/// The default `[chttpd] authentication_handlers`, CouchDB's `default.ini`: cookie, then Basic.
/// JWT and proxy authentication run once an operator lists them (CouchDB's own test
/// configuration lists all four: jwt, proxy, cookie, default).
pub const AUTHENTICATION_HANDLERS_DEFAULT: &str =
    "{chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}";

/// CouchDB's default `[chttpd_auth] authentication_db`.
pub const AUTHENTICATION_DB_DEFAULT: &str = "_users";

/// The authentication settings of one [`crate::Settings`] snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthSettings {
    /// `[chttpd] authentication_handlers`, in order.
    pub handlers: Vec<AuthHandler>,
    /// `[chttpd_auth] authentication_db`: the database accounts are read from.
    pub authentication_db: String,
    /// `[chttpd_auth] proxy_use_secret`: proxy logins need `X-Auth-CouchDB-Token`.
    pub proxy_use_secret: bool,
    /// `[chttpd_auth] secret`: the key of proxy tokens (settee signs its session cookies
    /// with its own secret in the data directory).
    pub secret: Option<String>,
    /// `[chttpd_auth] x_auth_username`.
    pub x_auth_username: String,
    /// `[chttpd_auth] x_auth_roles`.
    pub x_auth_roles: String,
    /// `[chttpd_auth] x_auth_token`.
    pub x_auth_token: String,
    /// `[chttpd_auth] hash_algorithms`: the HMACs a proxy token may be made with.
    pub hash_algorithms: Vec<String>,
    /// `[jwt_auth] required_claims` as written (checked when a token arrives, as CouchDB
    /// does).
    pub jwt_required_claims: String,
    /// `[jwt_auth] roles_claim_name`.
    pub jwt_roles_claim_name: Option<String>,
    /// `[jwt_auth] roles_claim_path` (wins over `roles_claim_name`).
    pub jwt_roles_claim_path: Option<String>,
    /// `[jwt_keys]`: `hmac:KID`, `rsa:KID`, `ec:KID` -> the key as written.
    pub jwt_keys: BTreeMap<String, String>,
    /// `[chttpd_auth_lockout] mode`: `off`, `warn` or `enforce`.
    pub lockout_mode: String,
    /// `[chttpd_auth] password_regexp` as written (read when a password is set, as CouchDB
    /// does: `settee_auth::check_password`).
    pub password_regexp: String,
    /// `[chttpd_auth] iterations`: PBKDF2 rounds of new passwords (`None`: the node's
    /// `--pbkdf2-iterations`, which the base section normally shows anyway).
    pub iterations: Option<u32>,
    /// `[chttpd_auth] pbkdf2_prf`: `sha`, `sha224`, `sha256` (default), `sha384`, `sha512`.
    pub pbkdf2_prf: String,
    /// `[chttpd_auth] upgrade_hash_on_auth` (default true, as CouchDB): a password login
    /// re-derives an account's key when it was hashed with other iterations or another PRF.
    pub upgrade_hash_on_auth: bool,
}

/// CouchDB's default `[chttpd_auth] hash_algorithms`.
pub const HASH_ALGORITHMS_DEFAULT: &str = "sha256, sha";

/// The HMAC hashes a proxy token may use.
const HASH_ALGORITHMS: &[&str] = &["sha", "sha224", "sha256", "sha384", "sha512"];

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            handlers: AuthHandler::parse_list(AUTHENTICATION_HANDLERS_DEFAULT).unwrap_or_default(),
            authentication_db: AUTHENTICATION_DB_DEFAULT.into(),
            proxy_use_secret: true,
            secret: None,
            x_auth_username: "X-Auth-CouchDB-UserName".into(),
            x_auth_roles: "X-Auth-CouchDB-Roles".into(),
            x_auth_token: "X-Auth-CouchDB-Token".into(),
            hash_algorithms: vec!["sha256".into(), "sha".into()],
            jwt_required_claims: "exp".into(),
            jwt_roles_claim_name: None,
            jwt_roles_claim_path: None,
            jwt_keys: BTreeMap::new(),
            lockout_mode: "enforce".into(),
            password_regexp: String::new(),
            iterations: None,
            pbkdf2_prf: "sha256".into(),
            upgrade_hash_on_auth: true,
        }
    }
}

impl AuthSettings {
    /// Checks `value` for `[section] key` and sets it when it is an authentication setting;
    /// answers whether it was one.
    pub fn apply(&mut self, section: &str, key: &str, value: &str) -> Result<bool, ConfigError> {
        match (section, key) {
            ("chttpd", "authentication_handlers") => {
                self.handlers = AuthHandler::parse_list(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "authentication_db") => {
                if value.is_empty() {
                    return Err(ConfigError::Invalid(
                        "authentication_db must name a database".into(),
                    ));
                }
                self.authentication_db = value.to_string();
            }
            ("chttpd_auth" | "couch_httpd_auth", "proxy_use_secret") => {
                self.proxy_use_secret = crate::settings::parse_bool(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "secret") => {
                self.secret = Some(value.to_string()).filter(|secret| !secret.is_empty());
            }
            ("chttpd_auth" | "couch_httpd_auth", "x_auth_username") => {
                self.x_auth_username = crate::settings::header_name(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "x_auth_roles") => {
                self.x_auth_roles = crate::settings::header_name(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "x_auth_token") => {
                self.x_auth_token = crate::settings::header_name(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "hash_algorithms") => {
                let names: Vec<String> = value
                    .split(',')
                    .map(|name| name.trim().to_string())
                    .filter(|name| !name.is_empty())
                    .collect();
                if names.is_empty()
                    || names
                        .iter()
                        .any(|name| !HASH_ALGORITHMS.contains(&name.as_str()))
                {
                    return Err(ConfigError::Invalid(format!(
                        "hash_algorithms must list some of {}",
                        HASH_ALGORITHMS.join(", ")
                    )));
                }
                self.hash_algorithms = names;
            }
            ("chttpd_auth" | "couch_httpd_auth", "iterations") => {
                let iterations = value.parse::<u32>().ok().filter(|rounds| *rounds > 0);
                self.iterations = Some(iterations.ok_or_else(|| {
                    ConfigError::Invalid("iterations must be a positive integer".into())
                })?);
            }
            ("chttpd_auth" | "couch_httpd_auth", "pbkdf2_prf") => {
                if !HASH_ALGORITHMS.contains(&value) {
                    return Err(ConfigError::Invalid(format!(
                        "pbkdf2_prf must be one of {}",
                        HASH_ALGORITHMS.join(", ")
                    )));
                }
                self.pbkdf2_prf = value.to_string();
            }
            ("chttpd_auth" | "couch_httpd_auth", "upgrade_hash_on_auth") => {
                self.upgrade_hash_on_auth = crate::settings::parse_bool(value)?;
            }
            ("chttpd_auth" | "couch_httpd_auth", "password_regexp") => {
                self.password_regexp = value.to_string();
            }
            ("jwt_auth", "required_claims") => self.jwt_required_claims = value.to_string(),
            ("jwt_auth", "roles_claim_name") => self.jwt_roles_claim_name = Some(value.to_string()),
            ("jwt_auth", "roles_claim_path") => self.jwt_roles_claim_path = Some(value.to_string()),
            ("jwt_keys", name) => {
                self.jwt_keys.insert(name.to_string(), value.to_string());
            }
            ("chttpd_auth_lockout", "mode") => {
                if !matches!(value, "off" | "warn" | "enforce") {
                    return Err(ConfigError::Invalid(
                        "mode must be off, warn or enforce".into(),
                    ));
                }
                self.lockout_mode = value.to_string();
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;

    use crate::test_sections as sections;

    #[test]
    fn handlers_are_read_in_order_from_either_module() {
        let handlers = AuthHandler::parse_list(
            "{couch_httpd_auth, cookie_authentication_handler},{chttpd_auth, \
             proxy_authentification_handler}, {chttpd_auth,default_authentication_handler}",
        )
        .expect("valid");
        assert_eq!(
            handlers,
            [
                AuthHandler::Cookie,
                AuthHandler::Proxy,
                AuthHandler::Default
            ]
        );
        assert_eq!(AuthHandler::parse_list("").expect("empty"), []);
        for invalid in [
            "{chttpd_auth, null_authentication_handler}",
            "{other, cookie_authentication_handler}",
            "cookie",
            "{chttpd_auth, cookie_authentication_handler",
        ] {
            assert!(AuthHandler::parse_list(invalid).is_err(), "{invalid}");
        }
        let defaults = AuthSettings::default();
        assert_eq!(
            defaults
                .handlers
                .iter()
                .map(|handler| handler.name())
                .collect::<Vec<_>>(),
            ["cookie", "default"]
        );
        assert!(defaults.proxy_use_secret);
    }

    #[test]
    fn chttpd_auth_wins_over_couch_httpd_auth() {
        let settings = Settings::from_sections(&sections(&[
            ("couch_httpd_auth", "authentication_db", "old"),
            ("chttpd_auth", "authentication_db", "new"),
            ("couch_httpd_auth", "proxy_use_secret", "false"),
            ("jwt_keys", "hmac:_default", "aGVsbG8="),
        ]))
        .expect("valid");
        assert_eq!(settings.auth.authentication_db, "new");
        assert!(!settings.auth.proxy_use_secret);
        assert_eq!(
            settings
                .auth
                .jwt_keys
                .get("hmac:_default")
                .map(String::as_str),
            Some("aGVsbG8=")
        );
        for (section, key, value) in [
            ("chttpd_auth", "proxy_use_secret", "yes"),
            ("chttpd_auth", "authentication_db", ""),
            ("chttpd_auth", "hash_algorithms", "md5"),
            ("chttpd_auth_lockout", "mode", "loud"),
            ("chttpd_auth", "x_auth_roles", "not a header"),
        ] {
            assert!(
                AuthSettings::default().apply(section, key, value).is_err(),
                "[{section}] {key} = {value}"
            );
        }
    }
}
