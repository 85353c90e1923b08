//! JSON Web Tokens checked as CouchDB 3.5 checks them (its `jwtf` application), for the HTTP
//! door's JWT authentication handler (`[chttpd] authentication_handlers`).
//!
//! [`decode`] takes the token of an `Authorization: Bearer` header, the checks
//! `[jwt_auth] required_claims` asks for ([`Checks::parse`]) and the `[jwt_keys]` section,
//! and answers the token's claims, or the [`JwtError`] CouchDB answers (its status and
//! reason). [`roles`] reads the user's roles where `[jwt_auth] roles_claim_path` (or the older
//! `roles_claim_name`) says they are.
//!
//! Signatures: HS256/384/512 (HMAC, key base64 in `hmac:KID`), RS256/384/512 (RSA PKCS#1
//! v1.5, PEM public key in `rsa:KID`), ES256/384/512 (ECDSA, PEM public key of a P-256 or
//! P-384 curve in `ec:KID`). As in CouchDB, the name chooses the hash apart from the key:
//! ES512 is ECDSA with SHA-512 on whatever curve the key has, its `r` and `s` 64 bytes each.
//! The cryptography is RustCrypto's (`hmac`, `rsa`, `p256`, `p384`); this crate only parses.
//!
//! Reading order: [`decode`], then `claims.rs` (what is checked), `keys.rs` (how a key is
//! found and read), `signature.rs` (how a signature is verified).
//!
//! This crate knows nothing of HTTP, accounts or storage.
#![deny(clippy::unwrap_used)]

mod claims;
mod keys;
mod roles;
mod signature;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

pub use claims::{Checks, REQUIRED_CLAIMS_DEFAULT};
pub use keys::Algorithm;
pub use roles::{roles, ROLES_CLAIM_NAME_DEFAULT};

/// The most bytes of a token this crate reads (CouchDB has no own limit; the HTTP door's
/// header limit is larger than any sane token).
pub const TOKEN_BYTES_MAX: usize = 64 * 1024;

/// Why a token was refused, as CouchDB answers it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// 400 `bad_request`: a malformed token, an unknown key, a bad signature, a missing or
    /// wrong required claim.
    #[error("{0}")]
    BadRequest(String),
    /// 401 `unauthorized`: a token not yet valid or expired, one without `sub`.
    #[error("{0}")]
    Unauthorized(String),
    /// 404 `not_found`: `roles_claim_path` names a member the token does not have.
    #[error("{0}")]
    NotFound(String),
    /// 500: `[jwt_auth] required_claims` cannot be read (CouchDB's `misconfigured_server`).
    #[error("{0}")]
    Misconfigured(String),
}

fn bad_request(reason: &str) -> JwtError {
    JwtError::BadRequest(reason.to_string())
}

/// Checks `token` (`header.payload.signature`, each base64url) as CouchDB does, in its order:
/// the header (`typ`, `alg`), the payload's required claims, the key (`kid`), the signature.
/// `jwt_key` looks up a `[jwt_keys]` entry by its name (`hmac:_default`, `rsa:KID`, ...);
/// `now_secs` is the time `exp` and `nbf` are compared with. Answers the payload's claims.
pub fn decode(
    token: &str,
    checks: &Checks,
    jwt_key: &dyn Fn(&str) -> Option<String>,
    now_secs: u64,
) -> Result<Map<String, Value>, JwtError> {
    if token.len() > TOKEN_BYTES_MAX {
        return Err(bad_request("Malformed token"));
    }
    let mut parts = token.split('.');
    let (Some(header64), Some(payload64), Some(signature64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad_request("Malformed token"));
    };
    let header = json_object(header64)?;
    checks.check_header(&header)?;
    let payload = json_object(payload64)?;
    checks.check_payload(&payload, now_secs)?;
    // The header's `alg` was checked above: present and one of the nine names.
    let algorithm = header
        .get("alg")
        .and_then(Value::as_str)
        .and_then(Algorithm::parse)
        .ok_or_else(|| bad_request("Invalid alg header parameter"))?;
    let kid = match header.get("kid") {
        Some(Value::String(kid)) => Some(kid.as_str()),
        Some(_) => return Err(bad_request("Unknown kid")),
        None if checks.kid => return Err(bad_request("Missing kid claim")),
        None => None,
    };
    let key = keys::key(algorithm, kid, jwt_key)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature64.trim_end_matches('='))
        .map_err(|_| bad_request("Malformed token"))?;
    let message_bytes = header64.len() + 1 + payload64.len();
    let message = &token.as_bytes()[..message_bytes];
    signature::verify(algorithm, &key, message, &signature)?;
    Ok(payload)
}

/// One base64url part of the token, which must be a JSON object.
fn json_object(part: &str) -> Result<Map<String, Value>, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| bad_request("Malformed token"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(bad_request("Not an object")),
        Err(_) => Err(bad_request("Malformed token")),
    }
}

#[cfg(test)]
mod tests;
