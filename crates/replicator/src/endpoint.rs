//! Source and target endpoints: `"db"`, `"http://user:pass@host/db"` or
//! `{"url": ..., "headers": {...}, "auth": {"basic": {"username", "password"}}}`.
//!
//! Credentials are normalised the way CouchDB 3.x does before the replication id is computed:
//! they are taken out of the URL and the headers and kept apart, with `auth.basic` winning over
//! URL userinfo, which wins over an `Authorization: Basic` header. The id then hashes the user
//! name but never the password, so changing a password keeps the checkpoints.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::Value;

use crate::error::ReplicatorError;
use crate::term::Term;

/// Headers every CouchDB replicator request carries; they never count in the replication id.
pub const DEFAULT_HEADERS: [(&str, &str); 2] =
    [("Accept", "application/json"), ("User-Agent", USER_AGENT)];
/// What CouchDB's replicator sends, so servers that special-case it treat settee alike.
pub const USER_AGENT: &str = "CouchDB-Replicator/3.5.0";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A database of this node, named without a URL. CouchDB 3.x refuses these; settee runs
    /// them over its own HTTP port as the user who asked.
    Local {
        db: String,
    },
    Remote(RemoteDb),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteDb {
    /// Without credentials; ends with `/` unless it has a query string.
    pub url: String,
    pub scheme: String,
    pub host: String,
    /// `None` when the URL names no port or the scheme's usual one (80/5984, 443).
    pub port: Option<u16>,
    pub path: String,
    /// Extra headers, normalised (no basic credentials, no default headers).
    pub headers: Vec<(String, String)>,
    pub basic: Option<(String, String)>,
}

impl Endpoint {
    pub fn parse(value: Option<&Value>, role: &str) -> Result<Endpoint, ReplicatorError> {
        let bad = |reason: String| ReplicatorError::BadRequest(reason);
        match value {
            None | Some(Value::Null) => Err(bad(format!("Missing {role} database"))),
            Some(Value::String(text)) if is_url(text) => {
                RemoteDb::parse(text, &[], None).map(Endpoint::Remote)
            }
            Some(Value::String(db)) if !db.is_empty() => Ok(Endpoint::Local { db: db.clone() }),
            Some(Value::Object(props)) => {
                let url = props
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("{role} has an invalid url")))?;
                if !is_url(url) {
                    return Err(bad(format!("{role} has an invalid url")));
                }
                let mut headers = Vec::new();
                match props.get("headers") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(map)) => {
                        for (key, value) in map {
                            let value = value
                                .as_str()
                                .ok_or_else(|| bad(format!("{role} headers must be strings")))?;
                            headers.push((key.clone(), value.to_string()));
                        }
                    }
                    Some(_) => return Err(bad(format!("{role} headers must be an object"))),
                }
                let basic = props
                    .get("auth")
                    .and_then(|auth| auth.get("basic"))
                    .and_then(|basic| {
                        let user = basic.get("username")?.as_str()?;
                        let password = basic.get("password")?.as_str()?;
                        Some((user.to_string(), password.to_string()))
                    });
                RemoteDb::parse(url, &headers, basic).map(Endpoint::Remote)
            }
            Some(_) => Err(bad(format!("{role} has an invalid url"))),
        }
    }

    /// The term CouchDB's version-4 replication id hashes for this endpoint.
    pub fn id_term(&self) -> Term {
        match self {
            // settee's own: CouchDB 3 has no local endpoints.
            Endpoint::Local { db } => Term::Tuple(vec![Term::atom("local"), Term::binary(db)]),
            Endpoint::Remote(remote) => remote.id_term(),
        }
    }

    /// For messages and `/_scheduler`: the URL without credentials, or the local name.
    pub fn display(&self) -> String {
        match self {
            Endpoint::Local { db } => db.clone(),
            Endpoint::Remote(remote) => remote.url.clone(),
        }
    }
}

fn is_url(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://")
}

impl RemoteDb {
    /// Parses and normalises a remote endpoint (see the module comment for the precedence).
    pub fn parse(
        url: &str,
        headers: &[(String, String)],
        auth_basic: Option<(String, String)>,
    ) -> Result<RemoteDb, ReplicatorError> {
        let invalid = || ReplicatorError::BadRequest(format!("invalid url: {url}"));
        let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
        let scheme = scheme.to_ascii_lowercase();
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority),
        };
        let (host, port_text) = split_host_port(host_port);
        if host.is_empty() {
            return Err(invalid());
        }
        let port = match port_text {
            None => None,
            Some(text) => Some(text.parse::<u16>().map_err(|_| invalid())?),
        };
        let default_port = matches!(
            (scheme.as_str(), port),
            (_, None) | ("http", Some(80)) | ("http", Some(5984)) | ("https", Some(443))
        );
        let mut path = if path_and_query.is_empty() {
            "/".to_string()
        } else {
            path_and_query.to_string()
        };
        if !path.contains('?') && !path.ends_with('/') {
            path.push('/');
        }
        let url_creds = userinfo.and_then(|info| {
            info.split_once(':')
                .map(|(user, password)| (user.to_string(), password.to_string()))
        });
        let (header_creds, headers) = normalise_headers(headers);
        let basic = auth_basic.or(url_creds).or(header_creds);
        let port_part = port_text.map(|text| format!(":{text}")).unwrap_or_default();
        Ok(RemoteDb {
            url: format!("{scheme}://{host}{port_part}{path}"),
            scheme,
            host: host.to_string(),
            port: if default_port { None } else { port },
            path,
            headers,
            basic,
        })
    }

    fn id_term(&self) -> Term {
        let user = match &self.basic {
            Some((user, _)) => Term::chars(user),
            None => Term::atom("undefined"),
        };
        let port = match self.port {
            Some(port) => Term::Integer(i128::from(port)),
            None => Term::atom("default"),
        };
        let headers = Term::List(
            self.headers
                .iter()
                .map(|(key, value)| Term::Tuple(vec![Term::chars(key), Term::chars(value)]))
                .collect(),
        );
        Term::Tuple(vec![
            Term::atom("remote"),
            user,
            Term::chars(&self.host),
            port,
            Term::chars(&self.path),
            headers,
            // CouchDB keeps an always-undefined OAuth slot so old checkpoints stay valid.
            Term::atom("undefined"),
        ])
    }

    /// The `Authorization` header value for the basic credentials, if any. URL userinfo is
    /// percent-decoded here (it is hashed as written).
    pub fn authorization(&self) -> Option<String> {
        self.basic.as_ref().map(|(user, password)| {
            let decode = |text: &str| {
                percent_encoding::percent_decode_str(text)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            format!(
                "Basic {}",
                BASE64.encode(format!("{}:{}", decode(user), decode(password)))
            )
        })
    }
}

/// A basic-auth user name and password.
type Credentials = (String, String);

/// `host:port`, `host`, `[v6]:port` or `[v6]`.
fn split_host_port(text: &str) -> (&str, Option<&str>) {
    if let Some(rest) = text.strip_prefix('[') {
        if let Some((host, after)) = rest.split_once(']') {
            return (host, after.strip_prefix(':'));
        }
    }
    match text.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    }
}

/// CouchDB's header handling: user headers sorted by name (first of equal names kept), merged
/// with the defaults; a basic `Authorization` header is taken out as credentials. When any
/// `Authorization` header is present the list is rebuilt in case-insensitive name order (the
/// header store CouchDB passes it through sorts that way). Default headers are then dropped.
fn normalise_headers(user: &[(String, String)]) -> (Option<Credentials>, Vec<(String, String)>) {
    let mut sorted: Vec<(String, String)> = Vec::with_capacity(user.len());
    let mut by_name = user.to_vec();
    by_name.sort_by(|a, b| a.0.cmp(&b.0));
    for header in by_name {
        if sorted.last().is_none_or(|last| last.0 != header.0) {
            sorted.push(header);
        }
    }
    for (name, value) in DEFAULT_HEADERS {
        if !sorted.iter().any(|(key, _)| key == name) {
            sorted.push((name.to_string(), value.to_string()));
        }
    }
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let authorization = sorted
        .iter()
        .position(|(name, _)| name.eq_ignore_ascii_case("authorization"));
    let mut creds = None;
    if let Some(index) = authorization {
        let value = sorted[index].1.clone();
        let (scheme, rest) = value.split_at(value.find(' ').unwrap_or(value.len()));
        if scheme.eq_ignore_ascii_case("basic") {
            if let Some(encoded) = rest.strip_prefix(' ') {
                sorted.remove(index);
                creds = BASE64
                    .decode(encoded)
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .and_then(|text| {
                        text.split_once(':')
                            .map(|(user, password)| (user.to_string(), password.to_string()))
                    });
            }
        }
        sorted.sort_by_key(|(name, _)| name.to_ascii_lowercase());
    }
    let mut defaults: Vec<(&str, &str)> = DEFAULT_HEADERS.to_vec();
    sorted.retain(|(name, value)| {
        match defaults
            .iter()
            .position(|(key, default)| key == name && default == value)
        {
            Some(index) => {
                defaults.remove(index);
                false
            }
            None => true,
        }
    });
    (creds, sorted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, password: &str) -> (String, String) {
        (
            "Authorization".to_string(),
            format!("Basic {}", BASE64.encode(format!("{user}:{password}"))),
        )
    }

    fn header(name: &str, value: &str) -> (String, String) {
        (name.to_string(), value.to_string())
    }

    /// (user, host, port, path, headers) the version-4 id sees, for the inputs CouchDB's own
    /// `http_v4_endpoint_test_` lists (URLs here get the trailing slash CouchDB's parser adds).
    #[test]
    fn credentials_and_ports_normalise_like_couchdb() {
        let auth = |user: &str, password: &str| Some((user.to_string(), password.to_string()));
        type Headers = Vec<(String, String)>;
        // (url, headers, auth.basic) -> (user, port, path, headers kept)
        type Case<'a> = (
            &'a str,
            Headers,
            Option<Credentials>,
            Option<&'a str>,
            Option<u16>,
            &'a str,
            Headers,
        );
        let cases: Vec<Case> = vec![
            ("http://host", vec![], None, None, None, "/", vec![]),
            ("https://host", vec![], None, None, None, "/", vec![]),
            ("http://host:5984", vec![], None, None, None, "/", vec![]),
            ("http://host:1", vec![], None, None, Some(1), "/", vec![]),
            ("https://host:2", vec![], None, None, Some(2), "/", vec![]),
            (
                "http://host",
                vec![header("h", "v")],
                None,
                None,
                None,
                "/",
                vec![header("h", "v")],
            ),
            ("http://host/a/b", vec![], None, None, None, "/a/b/", vec![]),
            (
                "http://user:pass@host",
                vec![],
                None,
                Some("user"),
                None,
                "/",
                vec![],
            ),
            (
                "http://user:pass@host:3",
                vec![],
                None,
                Some("user"),
                Some(3),
                "/",
                vec![],
            ),
            (
                "http://host",
                vec![basic("user", "pass")],
                None,
                Some("user"),
                None,
                "/",
                vec![],
            ),
            (
                "http://user1:pass1@host",
                vec![basic("user2", "pass2")],
                auth("user3", "pass3"),
                Some("user3"),
                None,
                "/",
                vec![],
            ),
            (
                "http://host",
                vec![header("h", "v"), basic("user", "pass")],
                auth("user2", "pass2"),
                Some("user2"),
                None,
                "/",
                vec![header("h", "v")],
            ),
            (
                "http://host",
                vec![header("h", "v")],
                auth("user", "pass"),
                Some("user"),
                None,
                "/",
                vec![header("h", "v")],
            ),
            (
                "http://host",
                vec![header("Authorization", "Basic bad")],
                None,
                None,
                None,
                "/",
                vec![],
            ),
        ];
        for (url, headers, auth, user, port, path, kept) in cases {
            let remote = RemoteDb::parse(url, &headers, auth).expect(url);
            assert_eq!(
                remote.basic.as_ref().map(|(user, _)| user.as_str()),
                user,
                "{url}"
            );
            assert_eq!(remote.host, "host", "{url}");
            assert_eq!(remote.port, port, "{url}");
            assert_eq!(remote.path, path, "{url}");
            assert_eq!(remote.headers, kept, "{url}");
            assert!(!remote.url.contains('@'), "{url}");
        }
    }

    #[test]
    fn local_names_and_bad_values() {
        let local = Endpoint::parse(Some(&serde_json::json!("db")), "source").expect("local");
        assert_eq!(local, Endpoint::Local { db: "db".into() });
        assert!(Endpoint::parse(None, "source").is_err());
        assert!(Endpoint::parse(Some(&serde_json::json!(7)), "source").is_err());
        assert!(Endpoint::parse(Some(&serde_json::json!({"url": "ftp://x"})), "source").is_err());
        assert!(Endpoint::parse(Some(&serde_json::json!("http://:80/db")), "source").is_err());
        assert!(Endpoint::parse(Some(&serde_json::json!("http://h:99999/db")), "source").is_err());
    }
}
