//! The server under test: where to connect, and the headers every request carries.

use anyhow::{bail, Context};
use base64::Engine;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{HeaderMap, Uri};

use super::HttpArgs;

/// Everything needed to reach the database under test, resolved once from [`HttpArgs`] so the
/// request loops only clone ready-made values.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `host:port` for `TcpStream::connect`.
    pub(crate) address: String,
    /// Path of the database, `{url path}/{db}`, without a trailing slash (e.g. `/bench`).
    pub(crate) db_path: String,
    /// Host, Authorization (if any) and `Content-Type: application/json`. Cloned per request:
    /// building headers from strings on every request would cost more than the copy.
    pub(crate) headers: HeaderMap,
}

impl Target {
    /// Parses `args.url` (`http://[user:password@]host[:port][/prefix]`).
    ///
    /// Credentials in the URL win over `--user`/`--password`; without a password no
    /// Authorization header is sent (CouchDB "admin party"). Userinfo is used verbatim, not
    /// percent-decoded.
    pub(crate) fn from_args(args: &HttpArgs) -> anyhow::Result<Self> {
        let uri: Uri = args
            .url
            .parse()
            .with_context(|| format!("invalid --url {:?}", args.url))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => bail!("--url scheme {other:?} is not supported, only http"),
            None => bail!(
                "--url {:?} needs a scheme, e.g. http://127.0.0.1:5984",
                args.url
            ),
        }
        let Some(authority) = uri.authority() else {
            bail!("--url {:?} has no host", args.url);
        };
        let host_and_port = match authority.as_str().rsplit_once('@') {
            Some((_, host_and_port)) => host_and_port,
            None => authority.as_str(),
        };
        let address = match authority.port_u16() {
            Some(_) => host_and_port.to_string(),
            None => format!("{host_and_port}:80"),
        };

        let credentials = match authority.as_str().rsplit_once('@') {
            Some((userinfo, _)) => Some(userinfo.to_string()),
            None => match (&args.user, &args.password) {
                (Some(user), Some(password)) => Some(format!("{user}:{password}")),
                (None, Some(password)) => Some(format!(":{password}")),
                (_, None) => None,
            },
        };

        if args.db.is_empty() || args.db.contains('/') {
            bail!("--db {:?} must be a plain database name", args.db);
        }
        let prefix = uri.path().trim_end_matches('/');
        let db_path = format!("{prefix}/{}", args.db);

        let mut headers = HeaderMap::with_capacity(4);
        headers.insert(
            HOST,
            HeaderValue::from_str(host_and_port).context("host is not a valid header value")?,
        );
        if let Some(credentials) = credentials {
            let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
            let value = HeaderValue::from_str(&format!("Basic {encoded}"))
                .context("credentials are not a valid header value")?;
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));

        Ok(Self {
            address,
            db_path,
            headers,
        })
    }

    /// Parses `path` (which must start with `/`) into an origin-form request URI.
    pub(crate) fn uri(path: String) -> anyhow::Result<Uri> {
        Uri::from_maybe_shared(bytes::Bytes::from(path)).context("invalid request path")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        http: HttpArgs,
    }

    fn target(argv: &[&str]) -> Target {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))
            .expect("flags parse");
        Target::from_args(&cli.http).expect("target resolves")
    }

    #[test]
    fn defaults_send_no_authorization() {
        let target = target(&[]);
        assert_eq!(target.address, "127.0.0.1:5984");
        assert_eq!(target.db_path, "/bench");
        assert!(target.headers.get(AUTHORIZATION).is_none());
    }

    #[test]
    fn url_userinfo_wins_over_flags() {
        let target = target(&[
            "--url",
            "http://admin:secret@localhost:5986/couch/",
            "--password",
            "other",
            "--db",
            "b1",
        ]);
        assert_eq!(target.address, "localhost:5986");
        assert_eq!(target.db_path, "/couch/b1");
        assert_eq!(target.headers[HOST], "localhost:5986");
        // base64("admin:secret")
        assert_eq!(target.headers[AUTHORIZATION], "Basic YWRtaW46c2VjcmV0");
    }

    #[test]
    fn password_flag_uses_default_user() {
        let target = target(&["--password", "password"]);
        // base64("admin:password")
        assert_eq!(target.headers[AUTHORIZATION], "Basic YWRtaW46cGFzc3dvcmQ=");
    }
}
