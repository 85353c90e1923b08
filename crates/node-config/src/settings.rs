//! The settings that take effect at runtime, typed, with the CouchDB section and key each is
//! read from. Their values are checked on every `_config` write, so a running node never
//! holds a value it cannot use; keys not listed here are stored without checks.

use std::collections::BTreeMap;

use crate::auth::AuthSettings;
use crate::ConfigError;

/// CouchDB's default `[attachments] compressible_types`.
pub const COMPRESSIBLE_TYPES_DEFAULT: &str =
    "text/*, application/javascript, application/json, application/xml";

/// CouchDB's default `[attachments] compression_level`.
pub const COMPRESSION_LEVEL_DEFAULT: u32 = 8;

/// CouchDB's default `[couchdb] max_document_size` (8 MB), settee's too.
pub const MAX_DOCUMENT_SIZE_DEFAULT: usize = 8_000_000;

/// `[uuids] algorithm`: how `/_uuids` and `POST /db` make ids (CouchDB's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UuidAlgorithm {
    Sequential,
    Random,
    UtcRandom,
    /// Microseconds since the epoch in 14 hex digits followed by `[uuids] utc_id_suffix`.
    UtcId,
}

impl UuidAlgorithm {
    pub fn parse(name: &str) -> Option<UuidAlgorithm> {
        match name {
            "sequential" => Some(UuidAlgorithm::Sequential),
            "random" => Some(UuidAlgorithm::Random),
            "utc_random" => Some(UuidAlgorithm::UtcRandom),
            "utc_id" => Some(UuidAlgorithm::UtcId),
            _ => None,
        }
    }
}

/// CouchDB's default `[chttpd] rewrite_limit`: how many `_rewrite`s one request may pass
/// through before it is refused as a loop.
pub const REWRITE_LIMIT_DEFAULT: u32 = 100;

/// One snapshot of the runtime settings; a write replaces the whole value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `[chttpd] allow_jsonp` (else `[httpd]`, as CouchDB reads the HTTP keys): answer `?callback=f` as `/* CouchDB */f(json);`.
    pub allow_jsonp: bool,
    /// `[couchdb] max_document_size`, bytes: the CouchDB door's writes obey it at once. The
    /// engine's own limit (the KV door, and readers) is the larger of the command-line value
    /// and this one as saved when the node started, so lowering it never hides stored
    /// documents from readers.
    pub max_document_size_bytes: usize,
    /// `[uuids] algorithm`.
    pub uuid_algorithm: UuidAlgorithm,
    /// `[uuids] utc_id_suffix`.
    pub utc_id_suffix: String,
    /// `[chttpd]` (else `[httpd]`) `x_forwarded_host`: the header a proxy names the original host in.
    pub x_forwarded_host: String,
    /// `[chttpd]` (else `[httpd]`) `x_forwarded_proto`: the header a proxy names the original scheme in.
    pub x_forwarded_proto: String,
    /// `[chttpd] decode_plus_to_space`: a raw `+` in the request path is a space (CouchDB's
    /// default, true); `%2B` is `+` either way.
    pub decode_plus_to_space: bool,
    /// `[query_server_config] partition_query_limit`: the most rows a partition query
    /// (`/db/_partition/{p}/...`) may ask for, and its default `limit`. Unset: no limit, as
    /// CouchDB 3.5 (its default.ini leaves it commented out).
    pub partition_query_limit: Option<u64>,
    /// `[couchdb] max_partition_size`, bytes: a partition at or past it takes no write that
    /// grows a document. Unset (or 0 or less): no limit (CouchDB's default.ini leaves its
    /// 10 GiB commented out; settee counts a partition's size by a scan, so it is only
    /// counted when a limit is set).
    pub max_partition_size: Option<u64>,
    /// `[chttpd]` (else `[httpd]`) `x_forwarded_ssl`: the header that says `on` for https.
    pub x_forwarded_ssl: String,
    /// `[chttpd] max_http_request_size`, bytes: a request body past it is 413 `too_large`.
    /// Unset: the node's `--max-request-size` alone (the base configuration shows it here).
    /// A body read never goes past the smaller of the two.
    pub max_http_request_size: Option<usize>,
    /// `[attachments] compressible_types`: attachments of these content types are stored
    /// gzipped (comma-separated, `*` wildcards; CouchDB's default list).
    pub compressible_types: String,
    /// `[attachments] compression_level`: 1-9, 0 stores every attachment as sent.
    pub compression_level: u32,
    /// `[chttpd]` (else `[httpd]`) `rewrite_limit`: the `_rewrite`s one request may pass
    /// through (a rewrite to another `_rewrite` included); one more is 400.
    pub rewrite_limit: u32,
    /// `[chttpd]` (else `[httpd]`) `secure_rewrites`: a rewrite rule may hold at most two `..`
    /// segments (it stays in its database); off, it may reach the server root.
    pub secure_rewrites: bool,
    /// Authentication: handlers, the accounts database, proxy and JWT (`auth.rs`).
    pub auth: AuthSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            allow_jsonp: false,
            max_document_size_bytes: MAX_DOCUMENT_SIZE_DEFAULT,
            uuid_algorithm: UuidAlgorithm::Sequential,
            utc_id_suffix: String::new(),
            x_forwarded_host: "X-Forwarded-Host".into(),
            x_forwarded_proto: "X-Forwarded-Proto".into(),
            x_forwarded_ssl: "X-Forwarded-Ssl".into(),
            decode_plus_to_space: true,
            partition_query_limit: None,
            max_partition_size: None,
            max_http_request_size: None,
            compressible_types: COMPRESSIBLE_TYPES_DEFAULT.into(),
            compression_level: COMPRESSION_LEVEL_DEFAULT,
            rewrite_limit: REWRITE_LIMIT_DEFAULT,
            secure_rewrites: true,
            auth: AuthSettings::default(),
        }
    }
}

/// Every key [`Settings`] is read from, as (section, key).
pub const RUNTIME_KEYS: &[(&str, &str)] = &[
    ("chttpd", "allow_jsonp"),
    ("httpd", "allow_jsonp"),
    ("couchdb", "max_document_size"),
    ("uuids", "algorithm"),
    ("uuids", "utc_id_suffix"),
    ("chttpd", "x_forwarded_host"),
    ("httpd", "x_forwarded_host"),
    ("chttpd", "x_forwarded_proto"),
    ("httpd", "x_forwarded_proto"),
    ("chttpd", "x_forwarded_ssl"),
    ("chttpd", "decode_plus_to_space"),
    ("query_server_config", "partition_query_limit"),
    ("couchdb", "max_partition_size"),
    ("httpd", "x_forwarded_ssl"),
    ("chttpd", "max_http_request_size"),
    ("attachments", "compressible_types"),
    ("attachments", "compression_level"),
    ("chttpd", "rewrite_limit"),
    ("httpd", "rewrite_limit"),
    ("chttpd", "secure_rewrites"),
    ("httpd", "secure_rewrites"),
    ("chttpd", "authentication_handlers"),
    ("chttpd_auth", "authentication_db"),
    ("chttpd_auth", "proxy_use_secret"),
    ("chttpd_auth", "secret"),
    ("chttpd_auth", "x_auth_username"),
    ("chttpd_auth", "x_auth_roles"),
    ("chttpd_auth", "x_auth_token"),
    ("chttpd_auth", "hash_algorithms"),
    ("chttpd_auth", "password_regexp"),
    ("chttpd_auth", "iterations"),
    ("chttpd_auth", "pbkdf2_prf"),
    ("chttpd_auth", "upgrade_hash_on_auth"),
    ("jwt_auth", "required_claims"),
    ("jwt_auth", "roles_claim_name"),
    ("jwt_auth", "roles_claim_path"),
    ("chttpd_auth_lockout", "mode"),
];

impl Settings {
    /// The settings the effective sections give; a key that is absent has its default.
    pub fn from_sections(
        sections: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<Settings, ConfigError> {
        let mut settings = Settings::default();
        // `[chttpd]` and `[chttpd_auth]` are applied last: CouchDB reads the HTTP keys there
        // first and falls back to `[httpd]` and `[couch_httpd_auth]`.
        let last = ["chttpd", "chttpd_auth"];
        for (section, keys) in sections
            .iter()
            .filter(|(section, _)| !last.contains(&section.as_str()))
            .chain(last.iter().filter_map(|name| sections.get_key_value(*name)))
        {
            for (key, value) in keys {
                settings.apply(section, key, value)?;
            }
        }
        Ok(settings)
    }

    /// Checks `value` for `[section] key` and, when settee uses that key, sets it.
    pub fn apply(&mut self, section: &str, key: &str, value: &str) -> Result<(), ConfigError> {
        if self.auth.apply(section, key, value)? {
            return Ok(());
        }
        match (section, key) {
            ("chttpd" | "httpd", "allow_jsonp") => self.allow_jsonp = parse_bool(value)?,
            ("chttpd", "decode_plus_to_space") => self.decode_plus_to_space = parse_bool(value)?,
            ("couchdb", "max_partition_size") => {
                let size = value
                    .parse::<i64>()
                    .map_err(|_| invalid("max_partition_size must be an integer"))?;
                self.max_partition_size = u64::try_from(size).ok().filter(|size| *size > 0);
            }
            ("query_server_config", "partition_query_limit") => {
                let limit = value.parse::<u64>().ok().filter(|limit| *limit > 0);
                self.partition_query_limit =
                    Some(limit.ok_or_else(|| {
                        invalid("partition_query_limit must be a positive integer")
                    })?);
            }
            ("attachments", "compressible_types") => self.compressible_types = value.to_string(),
            ("attachments", "compression_level") => {
                self.compression_level = value
                    .parse::<u32>()
                    .ok()
                    .filter(|level| *level <= 9)
                    .ok_or_else(|| invalid("compression_level must be an integer from 0 to 9"))?;
            }
            ("chttpd", "max_http_request_size") => {
                self.max_http_request_size = Some(
                    value
                        .parse::<usize>()
                        .ok()
                        .filter(|size| *size > 0)
                        .ok_or_else(|| {
                            invalid("max_http_request_size must be a positive integer")
                        })?,
                );
            }
            ("couchdb", "max_document_size") => {
                self.max_document_size_bytes = value
                    .parse::<usize>()
                    .ok()
                    .filter(|size| *size > 0)
                    .ok_or_else(|| invalid("max_document_size must be a positive integer"))?;
            }
            ("uuids", "algorithm") => {
                self.uuid_algorithm = UuidAlgorithm::parse(value).ok_or_else(|| {
                    invalid("algorithm must be sequential, random, utc_random or utc_id")
                })?;
            }
            ("uuids", "utc_id_suffix") => {
                if !value.bytes().all(|byte| byte.is_ascii_graphic()) {
                    return Err(invalid("utc_id_suffix must be printable ASCII"));
                }
                self.utc_id_suffix = value.to_string();
            }
            ("chttpd" | "httpd", "x_forwarded_host") => self.x_forwarded_host = header_name(value)?,
            ("chttpd" | "httpd", "x_forwarded_proto") => {
                self.x_forwarded_proto = header_name(value)?
            }
            ("chttpd" | "httpd", "x_forwarded_ssl") => self.x_forwarded_ssl = header_name(value)?,
            ("chttpd" | "httpd", "rewrite_limit") => {
                self.rewrite_limit = value
                    .parse::<u32>()
                    .map_err(|_| invalid("rewrite_limit must be a non-negative integer"))?;
            }
            ("chttpd" | "httpd", "secure_rewrites") => self.secure_rewrites = parse_bool(value)?,
            _ => {}
        }
        Ok(())
    }
}

fn invalid(reason: &str) -> ConfigError {
    ConfigError::Invalid(reason.to_string())
}

pub(crate) fn parse_bool(value: &str) -> Result<bool, ConfigError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid("value must be true or false")),
    }
}

/// An HTTP header name (RFC 9110 token characters), as the door looks it up.
pub(crate) fn header_name(value: &str) -> Result<String, ConfigError> {
    let token = |byte: u8| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte);
    if value.is_empty() || !value.bytes().all(token) {
        return Err(invalid("value must be an HTTP header name"));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_sections as sections;

    #[test]
    fn absent_keys_have_couchdbs_defaults() {
        let settings = Settings::from_sections(&sections(&[("other", "k", "v")])).expect("valid");
        assert_eq!(settings, Settings::default());
        assert!(!settings.allow_jsonp);
        assert_eq!(settings.x_forwarded_host, "X-Forwarded-Host");
    }

    #[test]
    fn used_keys_are_typed_and_checked() {
        let settings = Settings::from_sections(&sections(&[
            ("httpd", "allow_jsonp", "true"),
            ("couchdb", "max_document_size", "1024"),
            ("uuids", "algorithm", "utc_id"),
            ("uuids", "utc_id_suffix", "-node1"),
            ("httpd", "x_forwarded_host", "X-Host"),
        ]))
        .expect("valid");
        assert!(settings.allow_jsonp);
        assert_eq!(settings.max_document_size_bytes, 1024);
        assert_eq!(settings.uuid_algorithm, UuidAlgorithm::UtcId);
        assert_eq!(settings.utc_id_suffix, "-node1");
        assert_eq!(settings.x_forwarded_host, "X-Host");
        let chttpd_first = Settings::from_sections(&sections(&[
            ("httpd", "allow_jsonp", "false"),
            ("chttpd", "allow_jsonp", "true"),
        ]))
        .expect("valid");
        assert!(chttpd_first.allow_jsonp);
        let rewrites = Settings::from_sections(&sections(&[
            ("httpd", "rewrite_limit", "7"),
            ("chttpd", "secure_rewrites", "false"),
        ]))
        .expect("valid");
        assert_eq!(rewrites.rewrite_limit, 7);
        assert!(!rewrites.secure_rewrites);
        assert_eq!(Settings::default().rewrite_limit, 100);
        assert!(Settings::default().secure_rewrites);
        for (section, key, value) in [
            ("httpd", "allow_jsonp", "yes"),
            ("couchdb", "max_document_size", "abc"),
            ("couchdb", "max_document_size", "0"),
            ("uuids", "algorithm", "bogus"),
            ("httpd", "x_forwarded_host", "bad header"),
            ("chttpd", "rewrite_limit", "-1"),
            ("httpd", "secure_rewrites", "no"),
        ] {
            assert!(
                Settings::default().apply(section, key, value).is_err(),
                "[{section}] {key} = {value}"
            );
        }
        assert!(Settings::default()
            .apply("anything", "else", "any value")
            .is_ok());
    }
}
