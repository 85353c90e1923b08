//! Cross-origin requests as CouchDB's `[cors]` section allows them, so a browser application
//! (PouchDB in a page served from another origin) can reach the node.
//!
//! Off by default (CouchDB's `[chttpd] enable_cors = false`). When on:
//! - a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an allowed
//!   origin, for an allowed method, asking only for allowed headers, is answered 204 before
//!   authentication, with `Access-Control-Allow-{Origin,Methods,Headers}`, `-Max-Age` and,
//!   with `credentials`, `-Allow-Credentials`; any other preflight is handled as the plain
//!   `OPTIONS` request it also is (usually 405), as CouchDB does;
//! - every other answer to a request whose `Origin` is allowed (errors included) carries
//!   `Access-Control-Allow-Origin` (the request's origin, echoed), `-Expose-Headers` and,
//!   with `credentials`, `-Allow-Credentials`.
//!
//! Origins are compared exactly (case-sensitively), or all are allowed by `*`.
//! `Access-Control-Allow-Credentials` is never sent to a request whose origin is the literal
//! `*`.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;

/// Methods a preflight may ask for when `methods` is not configured (CouchDB's list).
pub const METHODS_DEFAULT: &[&str] = &[
    "CONNECT", "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "TRACE",
];

/// Request headers a preflight may ask for when `headers` is not configured (CouchDB's list).
pub const HEADERS_DEFAULT: &[&str] = &[
    "accept",
    "accept-language",
    "authorization",
    "content-length",
    "content-range",
    "content-type",
    "destination",
    "expires",
    "if-match",
    "last-modified",
    "origin",
    "pragma",
    "x-couch-full-commit",
    "x-couch-id",
    "x-couch-persist",
    "x-couchdb-www-authenticate",
    "x-http-method-override",
    "x-requested-with",
    "x-couchdb-vhost-path",
];

/// Response headers a page's script may read besides the simple ones (CouchDB's list).
const EXPOSED_HEADERS: &[&str] = &[
    "accept-ranges",
    "etag",
    "server",
    "x-couch-request-id",
    "x-couch-update-newrev",
    "x-couchdb-body-time",
];

/// The CORS "simple response headers": exposed when a response has them.
const SIMPLE_HEADERS: &[&str] = &[
    "cache-control",
    "content-language",
    "content-type",
    "expires",
    "last-modified",
    "pragma",
];

/// Default [`CorsConfig::max_age_secs`] (CouchDB's `max_age`).
pub const MAX_AGE_SECS_DEFAULT: u64 = 600;

/// CouchDB's `[chttpd] enable_cors` and `[cors]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorsConfig {
    /// `enable_cors`: without it no request gets CORS headers.
    pub enabled: bool,
    /// `origins`: exact origins (`https://app.example:8080`), or `*` for any.
    pub origins: Vec<String>,
    /// `credentials`: answers say `Access-Control-Allow-Credentials: true` (cookies and
    /// HTTP authentication from the page).
    pub credentials: bool,
    /// `methods`: what a preflight may ask for, compared case-sensitively.
    pub methods: Vec<String>,
    /// `headers`: request headers a preflight may ask for (lower case).
    pub headers: Vec<String>,
    /// `max_age`: how long a browser may keep a preflight's answer, seconds.
    pub max_age_secs: u64,
}

impl Default for CorsConfig {
    fn default() -> Self {
        CorsConfig {
            enabled: false,
            origins: Vec::new(),
            credentials: false,
            methods: METHODS_DEFAULT
                .iter()
                .map(|method| method.to_string())
                .collect(),
            headers: HEADERS_DEFAULT
                .iter()
                .map(|name| name.to_string())
                .collect(),
            max_age_secs: MAX_AGE_SECS_DEFAULT,
        }
    }
}

/// Splits a configured list as CouchDB does: on commas with any spaces around them, empty
/// items dropped.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

impl CorsConfig {
    /// The configured `headers` list, lower-cased as CouchDB keeps it.
    pub fn with_headers(mut self, text: &str) -> CorsConfig {
        self.headers = split_list(text)
            .into_iter()
            .map(|name| name.to_ascii_lowercase())
            .collect();
        self
    }

    fn allows_origin(&self, origin: &str) -> bool {
        self.origins
            .iter()
            .any(|allowed| allowed == "*" || allowed == origin)
    }

    fn sends_credentials(&self, origin: &str) -> bool {
        self.credentials && origin != "*"
    }

    /// The headers of the 204 answer to a preflight this configuration allows; `None` for any
    /// other request (including a preflight it refuses, which is then routed as a plain
    /// `OPTIONS`).
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<HeaderMap> {
        if !self.enabled || method != Method::OPTIONS {
            return None;
        }
        let origin = header_text(headers, "origin")?;
        let asked_method = header_text(headers, "access-control-request-method")?;
        if !self.allows_origin(origin) || !self.methods.iter().any(|m| m == asked_method) {
            return None;
        }
        let asked_headers = header_text(headers, "access-control-request-headers").unwrap_or("");
        let all_allowed = asked_headers
            .split(',')
            .map(|name| name.trim().to_ascii_lowercase())
            .filter(|name| !name.is_empty())
            .all(|name| self.headers.contains(&name));
        if !all_allowed {
            return None;
        }
        let mut answer = HeaderMap::new();
        let out = &mut answer;
        insert(out, "access-control-allow-origin", origin);
        insert(
            out,
            "access-control-max-age",
            &self.max_age_secs.to_string(),
        );
        insert(
            out,
            "access-control-allow-methods",
            &self.methods.join(", "),
        );
        insert(out, "access-control-allow-headers", asked_headers);
        if self.sends_credentials(origin) {
            insert(out, "access-control-allow-credentials", "true");
        }
        Some(answer)
    }

    /// Adds the CORS headers to the answer (its `headers`) of a request with this `Origin`, if
    /// it is allowed.
    pub fn decorate(&self, origin: Option<&str>, headers: &mut HeaderMap) {
        if !self.enabled {
            return;
        }
        let Some(origin) = origin else {
            return;
        };
        if !self.allows_origin(origin) {
            return;
        }
        let mut exposed = vec!["content-type".to_string()];
        for name in headers.keys() {
            let name = name.as_str();
            if name != "content-type" && SIMPLE_HEADERS.contains(&name) {
                exposed.push(name.to_string());
            }
        }
        exposed.extend(EXPOSED_HEADERS.iter().map(|name| name.to_string()));
        insert(headers, "access-control-allow-origin", origin);
        if self.sends_credentials(origin) {
            insert(headers, "access-control-allow-credentials", "true");
        }
        insert(
            headers,
            "access-control-expose-headers",
            &exposed.join(", "),
        );
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(HeaderName::from_static(name), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).expect("value"));
        }
        headers
    }

    fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
        headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The headers of a JSON answer as the door writes them.
    fn json_answer() -> HeaderMap {
        let mut headers = HeaderMap::new();
        insert(&mut headers, "content-type", "application/json");
        insert(&mut headers, "cache-control", "must-revalidate");
        headers
    }

    fn enabled(origins: &str) -> CorsConfig {
        CorsConfig {
            enabled: true,
            origins: split_list(origins),
            ..CorsConfig::default()
        }
    }

    #[test]
    fn preflights_from_allowed_origins_are_answered() {
        let config = enabled("http://app.example, https://Other.example");
        let asked = request(&[
            ("origin", "http://app.example"),
            ("access-control-request-method", "PUT"),
            (
                "access-control-request-headers",
                "Content-Type,Authorization",
            ),
        ]);
        let answer = config.preflight(&Method::OPTIONS, &asked).expect("allowed");
        assert_eq!(
            header(&answer, "access-control-allow-origin"),
            Some("http://app.example")
        );
        assert_eq!(
            header(&answer, "access-control-allow-headers"),
            Some("Content-Type,Authorization")
        );
        assert_eq!(
            header(&answer, "access-control-allow-methods"),
            Some("CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE")
        );
        assert_eq!(header(&answer, "access-control-max-age"), Some("600"));
        assert_eq!(header(&answer, "access-control-allow-credentials"), None);
        // Not a preflight this configuration answers: another origin (compared exactly), a
        // header not allowed, a method not allowed, no requested method, not OPTIONS, off.
        let refused = [
            ("HTTP://APP.example", "PUT", ""),
            ("http://evil.example", "PUT", ""),
            ("http://app.example", "PUT", "x-foo"),
            ("http://app.example", "PATCH", ""),
            ("http://app.example", "put", ""),
        ];
        for (origin, method, headers) in refused {
            let asked = request(&[
                ("origin", origin),
                ("access-control-request-method", method),
                ("access-control-request-headers", headers),
            ]);
            assert!(
                config.preflight(&Method::OPTIONS, &asked).is_none(),
                "{origin} {method}"
            );
        }
        let no_method = request(&[("origin", "http://app.example")]);
        assert!(config.preflight(&Method::OPTIONS, &no_method).is_none());
        let asked = request(&[
            ("origin", "http://app.example"),
            ("access-control-request-method", "PUT"),
        ]);
        assert!(config.preflight(&Method::GET, &asked).is_none());
        let off = CorsConfig {
            enabled: false,
            ..config.clone()
        };
        assert!(off.preflight(&Method::OPTIONS, &asked).is_none());
    }

    #[test]
    fn configured_methods_headers_credentials_and_max_age() {
        let config = CorsConfig {
            credentials: true,
            methods: split_list("GET, PUT"),
            max_age_secs: 3600,
            ..enabled("*")
        }
        .with_headers("Content-Type,X-Foo");
        let asked = request(&[
            ("origin", "http://app.example"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "content-type, x-foo"),
        ]);
        let answer = config.preflight(&Method::OPTIONS, &asked).expect("allowed");
        assert_eq!(
            header(&answer, "access-control-allow-methods"),
            Some("GET, PUT")
        );
        assert_eq!(header(&answer, "access-control-max-age"), Some("3600"));
        assert_eq!(
            header(&answer, "access-control-allow-credentials"),
            Some("true")
        );
        let authorization = request(&[
            ("origin", "http://app.example"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "authorization"),
        ]);
        assert!(config.preflight(&Method::OPTIONS, &authorization).is_none());
        // The literal origin `*` never gets credentials.
        let star = request(&[("origin", "*"), ("access-control-request-method", "GET")]);
        let answer = config.preflight(&Method::OPTIONS, &star).expect("allowed");
        assert_eq!(header(&answer, "access-control-allow-credentials"), None);
    }

    #[test]
    fn answers_to_allowed_origins_carry_the_headers() {
        let config = enabled("http://app.example");
        let mut answer = json_answer();
        config.decorate(Some("http://app.example"), &mut answer);
        assert_eq!(
            header(&answer, "access-control-allow-origin"),
            Some("http://app.example")
        );
        assert_eq!(
            header(&answer, "access-control-expose-headers"),
            Some(
                "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, \
                 x-couch-update-newrev, x-couchdb-body-time"
            )
        );
        for other in [
            Some("http://evil.example"),
            Some("HTTP://APP.EXAMPLE"),
            None,
        ] {
            let mut answer = json_answer();
            config.decorate(other, &mut answer);
            assert_eq!(header(&answer, "access-control-allow-origin"), None);
        }
    }
}
