//! The nine algorithm names and the keys of `[jwt_keys]`, found and read as CouchDB's
//! `jwtf_keystore` reads them: `hmac:KID` base64, `rsa:KID` and `ec:KID` PEM public keys with
//! their line breaks written as the two characters `\n`. A token without `kid` uses
//! `_default`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;

use crate::{bad_request, JwtError};

/// The key name a token without `kid` uses.
pub const DEFAULT_KID: &str = "_default";

/// What signs a token, and the hash it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Hmac(Hash),
    Rsa(Hash),
    Ecdsa(Hash),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The bytes of `r` and of `s` in an ES signature of this name (CouchDB's `rs_len`).
    pub(crate) fn bytes(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }
}

impl Algorithm {
    /// One of CouchDB's nine names (`HS256` ... `ES512`).
    pub fn parse(name: &str) -> Option<Algorithm> {
        let hash = match name.get(2..)? {
            "256" => Hash::Sha256,
            "384" => Hash::Sha384,
            "512" => Hash::Sha512,
            _ => return None,
        };
        match name.get(..2)? {
            "HS" => Some(Algorithm::Hmac(hash)),
            "RS" => Some(Algorithm::Rsa(hash)),
            "ES" => Some(Algorithm::Ecdsa(hash)),
            _ => None,
        }
    }

    /// The key type in `[jwt_keys]` names.
    fn key_type(self) -> &'static str {
        match self {
            Algorithm::Hmac(_) => "hmac",
            Algorithm::Rsa(_) => "rsa",
            Algorithm::Ecdsa(_) => "ec",
        }
    }
}

/// A key as the signature check uses it.
pub(crate) enum Key {
    Hmac(Vec<u8>),
    Rsa(rsa::RsaPublicKey),
    P256(p256::ecdsa::VerifyingKey),
    P384(p384::ecdsa::VerifyingKey),
}

/// The key `algorithm` and `kid` name in `[jwt_keys]` (through `jwt_key`), read.
pub(crate) fn key(
    algorithm: Algorithm,
    kid: Option<&str>,
    jwt_key: &dyn Fn(&str) -> Option<String>,
) -> Result<Key, JwtError> {
    let name = format!("{}:{}", algorithm.key_type(), kid.unwrap_or(DEFAULT_KID));
    let value = jwt_key(&name).ok_or_else(|| bad_request("Unknown kid"))?;
    match algorithm {
        Algorithm::Hmac(_) => STANDARD
            .decode(value.trim())
            .map(Key::Hmac)
            .map_err(|_| bad_request("Not a valid key")),
        Algorithm::Rsa(_) => {
            let pem = pem_text(&value)?;
            rsa::RsaPublicKey::from_public_key_pem(&pem)
                .or_else(|_| rsa::RsaPublicKey::from_pkcs1_pem(&pem))
                .map(Key::Rsa)
                .map_err(|_| bad_request("not an RSA public key"))
        }
        Algorithm::Ecdsa(_) => {
            let pem = pem_text(&value)?;
            if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_pem(&pem) {
                return Ok(Key::P256(key));
            }
            p384::ecdsa::VerifyingKey::from_public_key_pem(&pem)
                .map(Key::P384)
                .map_err(|_| bad_request("not an EC public key"))
        }
    }
}

/// The PEM text of a `[jwt_keys]` value: `\n` written as two characters becomes a line
/// break. Text without a PEM block is no key at all.
fn pem_text(value: &str) -> Result<String, JwtError> {
    let pem = value.replace("\\n", "\n");
    if !pem.contains("-----BEGIN ") {
        return Err(bad_request("Not a valid key"));
    }
    Ok(pem.trim().to_string() + "\n")
}
