//! Proxy authentication as CouchDB's `proxy_authentication_handler` does it: a proxy in front
//! of the node has authenticated the user and names them in headers (user name, roles); with
//! `proxy_use_secret` it also proves it knows `[chttpd_auth] secret` by sending the hex HMAC
//! of the user name under that secret, made with one of `[chttpd_auth] hash_algorithms`.

use hmac::{Hmac, Mac};

use crate::constant_time_eq;

/// What the proxy's headers said.
#[derive(Clone, Copy, Debug)]
pub struct ProxyHeaders<'a> {
    pub user_name: &'a str,
    /// The roles header as sent: names separated by commas.
    pub roles: Option<&'a str>,
    pub token: Option<&'a str>,
}

/// How the node trusts its proxy.
#[derive(Clone, Copy, Debug)]
pub struct ProxyTrust<'a> {
    /// The token is required (`proxy_use_secret`).
    pub use_secret: bool,
    /// `[chttpd_auth] secret`. CouchDB trusts any proxy when the token is required and no
    /// secret is set; settee then trusts none.
    pub secret: Option<&'a str>,
    /// `[chttpd_auth] hash_algorithms`: `sha`, `sha224`, `sha256`, `sha384`, `sha512`.
    pub hash_algorithms: &'a [String],
}

/// The user (name, roles) the headers name, if the proxy is trusted; `None` leaves the
/// request to the next handler, as CouchDB does for a wrong token.
pub fn proxy_user(
    headers: ProxyHeaders<'_>,
    trust: ProxyTrust<'_>,
) -> Option<(String, Vec<String>)> {
    if trust.use_secret {
        let secret = trust.secret?;
        let token = headers.token?;
        let trusted = trust.hash_algorithms.iter().any(|algorithm| {
            hex_hmac(algorithm, secret.as_bytes(), headers.user_name.as_bytes())
                .is_some_and(|expected| constant_time_eq(expected.as_bytes(), token.as_bytes()))
        });
        if !trusted {
            return None;
        }
    }
    let roles = headers.roles.map(split_roles).unwrap_or_default();
    Some((headers.user_name.to_string(), roles))
}

/// CouchDB's split of the roles header: on commas with any spaces around them, trailing
/// empty names dropped.
fn split_roles(header: &str) -> Vec<String> {
    let parts: Vec<&str> = header.split(',').collect();
    let last = parts.len() - 1;
    let mut roles: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(index, part)| {
            let part = if index > 0 { part.trim_start() } else { part };
            let part = if index < last { part.trim_end() } else { part };
            part.to_string()
        })
        .collect();
    while roles.last().is_some_and(|role| role.is_empty()) {
        roles.pop();
    }
    roles
}

/// Lowercase hex of the HMAC of `message` under `key` with hash `algorithm` (CouchDB's names).
pub fn hex_hmac(algorithm: &str, key: &[u8], message: &[u8]) -> Option<String> {
    fn mac<M: Mac + hmac::digest::KeyInit>(key: &[u8], message: &[u8]) -> Option<Vec<u8>> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key).ok()?;
        mac.update(message);
        Some(mac.finalize().into_bytes().to_vec())
    }
    let bytes = match algorithm {
        "sha" => mac::<Hmac<sha1::Sha1>>(key, message),
        "sha224" => mac::<Hmac<sha2::Sha224>>(key, message),
        "sha256" => mac::<Hmac<sha2::Sha256>>(key, message),
        "sha384" => mac::<Hmac<sha2::Sha384>>(key, message),
        "sha512" => mac::<Hmac<sha2::Sha512>>(key, message),
        _ => None,
    }?;
    Some(settee_engine::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t";

    fn trust(use_secret: bool, secret: Option<&str>) -> ProxyTrust<'_> {
        static ALGORITHMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        ProxyTrust {
            use_secret,
            secret,
            hash_algorithms: ALGORITHMS.get_or_init(|| vec!["sha256".into(), "sha".into()]),
        }
    }

    #[test]
    fn a_token_of_the_secret_is_needed_when_asked_for() {
        let sha1 = hex_hmac("sha", SECRET.as_bytes(), b"bob").expect("sha1");
        let headers = |token| ProxyHeaders {
            user_name: "bob",
            roles: Some("a, b ,c,"),
            token,
        };
        let (name, roles) =
            proxy_user(headers(Some(&sha1)), trust(true, Some(SECRET))).expect("trusted");
        assert_eq!(name, "bob");
        assert_eq!(roles, ["a", "b", "c"]);
        assert!(proxy_user(headers(Some("00")), trust(true, Some(SECRET))).is_none());
        assert!(proxy_user(headers(None), trust(true, Some(SECRET))).is_none());
        assert!(proxy_user(headers(Some(&sha1)), trust(true, None)).is_none());
        assert!(proxy_user(headers(None), trust(false, None)).is_some());
        let sha512 = hex_hmac("sha512", SECRET.as_bytes(), b"bob").expect("sha512");
        assert!(proxy_user(headers(Some(&sha512)), trust(true, Some(SECRET))).is_none());
    }
}
