//! Verifying a token's signature over `header.payload` with RustCrypto's primitives.

use hmac::{Hmac, Mac};
use p256::ecdsa::signature::hazmat::PrehashVerifier;
use rsa::signature::Verifier;
use sha2::{Digest, Sha256, Sha384, Sha512};

use crate::keys::{Algorithm, Hash, Key};
use crate::{bad_request, JwtError};

/// Checks `signature` (the token's third part, decoded) over `message` with `key`.
pub(crate) fn verify(
    algorithm: Algorithm,
    key: &Key,
    message: &[u8],
    signature: &[u8],
) -> Result<(), JwtError> {
    match (algorithm, key) {
        (Algorithm::Hmac(hash), Key::Hmac(secret)) => {
            if hmac_matches(hash, secret, message, signature) {
                Ok(())
            } else {
                Err(bad_request("Bad HMAC"))
            }
        }
        (Algorithm::Rsa(hash), Key::Rsa(public)) => {
            if rsa_matches(hash, public, message, signature) {
                Ok(())
            } else {
                Err(bad_request("Bad signature"))
            }
        }
        (Algorithm::Ecdsa(hash), key) => {
            if ecdsa_matches(hash, key, message, signature) {
                Ok(())
            } else {
                Err(bad_request("Bad signature"))
            }
        }
        _ => Err(bad_request("Bad signature")),
    }
}

fn hmac_matches(hash: Hash, secret: &[u8], message: &[u8], signature: &[u8]) -> bool {
    fn check<M: Mac + hmac::digest::KeyInit>(
        secret: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> bool {
        let Ok(mut mac) = <M as hmac::digest::KeyInit>::new_from_slice(secret) else {
            return false;
        };
        mac.update(message);
        mac.verify_slice(signature).is_ok()
    }
    match hash {
        Hash::Sha256 => check::<Hmac<Sha256>>(secret, message, signature),
        Hash::Sha384 => check::<Hmac<Sha384>>(secret, message, signature),
        Hash::Sha512 => check::<Hmac<Sha512>>(secret, message, signature),
    }
}

fn rsa_matches(hash: Hash, public: &rsa::RsaPublicKey, message: &[u8], signature: &[u8]) -> bool {
    let Ok(signature) = rsa::pkcs1v15::Signature::try_from(signature) else {
        return false;
    };
    let public = public.clone();
    match hash {
        Hash::Sha256 => rsa::pkcs1v15::VerifyingKey::<Sha256>::new(public)
            .verify(message, &signature)
            .is_ok(),
        Hash::Sha384 => rsa::pkcs1v15::VerifyingKey::<Sha384>::new(public)
            .verify(message, &signature)
            .is_ok(),
        Hash::Sha512 => rsa::pkcs1v15::VerifyingKey::<Sha512>::new(public)
            .verify(message, &signature)
            .is_ok(),
    }
}

/// ECDSA as CouchDB's jwtf does it: the message hashed with the name's hash whatever the
/// key's curve (a longer hash is cut to the curve's size, as ECDSA says), and the signature
/// `r || s`, each as many bytes as the name says, read as big-endian integers.
fn ecdsa_matches(hash: Hash, key: &Key, message: &[u8], signature: &[u8]) -> bool {
    if signature.len() != 2 * hash.bytes() {
        return false;
    }
    let prehash = match hash {
        Hash::Sha256 => Sha256::digest(message).to_vec(),
        Hash::Sha384 => Sha384::digest(message).to_vec(),
        Hash::Sha512 => Sha512::digest(message).to_vec(),
    };
    let (r, s) = signature.split_at(hash.bytes());
    match key {
        Key::P256(public) => {
            let (Some(r), Some(s)) = (fixed::<32>(r), fixed::<32>(s)) else {
                return false;
            };
            let Ok(signature) = p256::ecdsa::Signature::from_scalars(r, s) else {
                return false;
            };
            public.verify_prehash(&prehash, &signature).is_ok()
        }
        Key::P384(public) => {
            let (Some(r), Some(s)) = (fixed::<48>(r), fixed::<48>(s)) else {
                return false;
            };
            let Ok(signature) = p384::ecdsa::Signature::from_scalars(r, s) else {
                return false;
            };
            public.verify_prehash(&prehash, &signature).is_ok()
        }
        _ => false,
    }
}

/// A big-endian integer of any length as exactly `N` bytes, if it fits.
fn fixed<const N: usize>(number: &[u8]) -> Option<[u8; N]> {
    let first = number
        .iter()
        .position(|byte| *byte != 0)
        .unwrap_or(number.len());
    let digits = &number[first..];
    if digits.len() > N {
        return None;
    }
    let mut out = [0u8; N];
    out[N - digits.len()..].copy_from_slice(digits);
    Some(out)
}
