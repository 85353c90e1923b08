//! Tokens signed here with RustCrypto's signers (test keys in `testdata/`) and checked as
//! CouchDB checks them.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use p256::ecdsa::signature::hazmat::PrehashSigner;
use p256::pkcs8::DecodePrivateKey;
use rsa::signature::{SignatureEncoding, Signer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::*;

const NOW: u64 = 1_700_000_000;
const SECRET: &[u8] = b"zxczxc12zxczxc12";

fn testdata(name: &str) -> String {
    let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).expect("test key")
}

/// A `[jwt_keys]` value as CouchDB's docs write PEM keys: line breaks as `\n`.
fn config_pem(pem: &str) -> String {
    pem.trim().replace('\n', "\\n")
}

fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn hs256(header: &Value, claims: &Value, key: &[u8]) -> String {
    let message = unsigned(header, claims);
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("key");
    mac.update(message.as_bytes());
    format!(
        "{message}.{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

fn claims() -> Value {
    json!({"sub": "couch@apache.org", "exp": NOW + 60, "nbf": NOW - 60,
           "_couchdb.roles": ["testing"]})
}

fn keys(entries: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
    let entries: Vec<(String, String)> = entries
        .iter()
        .map(|(name, value)| (name.to_string(), value.clone()))
        .collect();
    move |name| {
        entries
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }
}

fn decode_default(
    token: &str,
    jwt_key: &dyn Fn(&str) -> Option<String>,
) -> Result<Value, JwtError> {
    let checks = Checks::parse("exp").expect("checks");
    decode(token, &checks, jwt_key, NOW).map(Value::Object)
}

#[test]
fn hmac_tokens_verify_with_the_default_key_and_bad_macs_are_refused() {
    let key = keys(&[("hmac:_default", STANDARD.encode(SECRET))]);
    let header = json!({"alg": "HS256", "typ": "JWT"});
    let token = hs256(&header, &claims(), SECRET);
    let payload = decode_default(&token, &key).expect("valid");
    assert_eq!(payload["sub"], "couch@apache.org");
    let forged = hs256(&header, &claims(), b"another secret");
    assert_eq!(
        decode_default(&forged, &key),
        Err(JwtError::BadRequest("Bad HMAC".into()))
    );
    // The payload changed after signing.
    let (signed, signature) = token.rsplit_once('.').expect("three parts");
    let (head, _) = signed.split_once('.').expect("three parts");
    let other = URL_SAFE_NO_PAD.encode(json!({"sub": "admin", "exp": NOW + 60}).to_string());
    assert_eq!(
        decode_default(&format!("{head}.{other}.{signature}"), &key),
        Err(JwtError::BadRequest("Bad HMAC".into()))
    );
}

#[test]
fn hs384_and_hs512_use_their_hashes() {
    let key = keys(&[("hmac:_default", STANDARD.encode(SECRET))]);
    for (alg, length) in [("HS384", 48), ("HS512", 64)] {
        let message = unsigned(&json!({"alg": alg}), &claims());
        let mac = match alg {
            "HS384" => {
                let mut mac = Hmac::<Sha384>::new_from_slice(SECRET).expect("key");
                mac.update(message.as_bytes());
                mac.finalize().into_bytes().to_vec()
            }
            _ => {
                let mut mac = Hmac::<Sha512>::new_from_slice(SECRET).expect("key");
                mac.update(message.as_bytes());
                mac.finalize().into_bytes().to_vec()
            }
        };
        assert_eq!(mac.len(), length);
        let token = format!("{message}.{}", URL_SAFE_NO_PAD.encode(&mac));
        assert!(decode_default(&token, &key).is_ok(), "{alg}");
    }
}

#[test]
fn rsa_tokens_verify_with_spki_keys() {
    let private = rsa::RsaPrivateKey::from_pkcs8_pem(&testdata("rsa-private.pem")).expect("key");
    let key = keys(&[("rsa:_default", config_pem(&testdata("rsa-public.pem")))]);
    for alg in ["RS256", "RS384", "RS512"] {
        let message = unsigned(&json!({"alg": alg, "typ": "JWT"}), &claims());
        let signature = match alg {
            "RS256" => rsa::pkcs1v15::SigningKey::<Sha256>::new(private.clone())
                .sign(message.as_bytes())
                .to_vec(),
            "RS384" => rsa::pkcs1v15::SigningKey::<Sha384>::new(private.clone())
                .sign(message.as_bytes())
                .to_vec(),
            _ => rsa::pkcs1v15::SigningKey::<Sha512>::new(private.clone())
                .sign(message.as_bytes())
                .to_vec(),
        };
        let token = format!("{message}.{}", URL_SAFE_NO_PAD.encode(&signature));
        assert!(decode_default(&token, &key).is_ok(), "{alg}");
        // Claimed as another hash than it was signed with.
        let swapped = if alg == "RS256" { "RS512" } else { "RS256" };
        let message = unsigned(&json!({"alg": swapped}), &claims());
        let token = format!("{message}.{}", URL_SAFE_NO_PAD.encode(&signature));
        assert_eq!(
            decode_default(&token, &key),
            Err(JwtError::BadRequest("Bad signature".into()))
        );
    }
    // An EC key where an RSA key is expected.
    let wrong = keys(&[("rsa:_default", config_pem(&testdata("ec-p256-public.pem")))]);
    let message = unsigned(&json!({"alg": "RS256"}), &claims());
    assert_eq!(
        decode_default(&format!("{message}.AAAA"), &wrong),
        Err(JwtError::BadRequest("not an RSA public key".into()))
    );
}

/// jwtf's ES signature: the message hashed with the name's hash, `r || s` each as long as
/// the name says.
fn es_token(
    alg: &str,
    hash: &[u8],
    private_pem: &str,
    curve_bytes: usize,
    rs_bytes: usize,
) -> String {
    let message = unsigned(&json!({"alg": alg, "typ": "JWT"}), &claims());
    let digest = match hash {
        b"256" => Sha256::digest(message.as_bytes()).to_vec(),
        b"384" => Sha384::digest(message.as_bytes()).to_vec(),
        _ => Sha512::digest(message.as_bytes()).to_vec(),
    };
    let raw: Vec<u8> = if curve_bytes == 32 {
        let key = p256::ecdsa::SigningKey::from_pkcs8_pem(private_pem).expect("key");
        let signature: p256::ecdsa::Signature = key.sign_prehash(&digest).expect("sign");
        signature.to_bytes().to_vec()
    } else {
        let key = p384::ecdsa::SigningKey::from_pkcs8_pem(private_pem).expect("key");
        let signature: p384::ecdsa::Signature = key.sign_prehash(&digest).expect("sign");
        signature.to_bytes().to_vec()
    };
    let (r, s) = raw.split_at(curve_bytes);
    let mut jose = Vec::new();
    for half in [r, s] {
        jose.extend(std::iter::repeat_n(0u8, rs_bytes - curve_bytes));
        jose.extend_from_slice(half);
    }
    format!("{message}.{}", URL_SAFE_NO_PAD.encode(&jose))
}

#[test]
fn ec_tokens_verify_whatever_hash_the_name_chooses_on_a_p256_key() {
    let private = testdata("ec-p256-private.pem");
    let key = keys(&[("ec:_default", config_pem(&testdata("ec-p256-public.pem")))]);
    for (alg, hash, rs_bytes) in [
        ("ES256", &b"256"[..], 32),
        ("ES384", &b"384"[..], 48),
        ("ES512", &b"512"[..], 64),
    ] {
        let token = es_token(alg, hash, &private, 32, rs_bytes);
        assert!(decode_default(&token, &key).is_ok(), "{alg}");
    }
    let p384 = keys(&[("ec:_default", config_pem(&testdata("ec-p384-public.pem")))]);
    let token = es_token("ES384", b"384", &testdata("ec-p384-private.pem"), 48, 48);
    assert!(decode_default(&token, &p384).is_ok());
    // Signed by another key.
    assert_eq!(
        decode_default(&token, &key),
        Err(JwtError::BadRequest("Bad signature".into()))
    );
}

#[test]
fn keys_are_found_by_kid_and_unknown_ones_refused() {
    let header = json!({"alg": "HS256", "kid": "k1"});
    let token = hs256(&header, &claims(), SECRET);
    let by_kid = keys(&[("hmac:k1", STANDARD.encode(SECRET))]);
    assert!(decode_default(&token, &by_kid).is_ok());
    let only_default = keys(&[("hmac:_default", STANDARD.encode(SECRET))]);
    assert_eq!(
        decode_default(&token, &only_default),
        Err(JwtError::BadRequest("Unknown kid".into()))
    );
    let not_base64 = keys(&[("hmac:k1", "***".to_string())]);
    assert_eq!(
        decode_default(&token, &not_base64),
        Err(JwtError::BadRequest("Not a valid key".into()))
    );
}

#[test]
fn required_claims_are_checked_as_couchdb_checks_them() {
    let key = keys(&[("hmac:_default", STANDARD.encode(SECRET))]);
    let header = json!({"alg": "HS256"});
    let check = |required: &str, claims: Value| {
        let checks = Checks::parse(required)?;
        decode(&hs256(&header, &claims, SECRET), &checks, &key, NOW)
    };
    let iss = "{iss, \"hello\"}";
    assert!(check(iss, json!({"iss": "hello", "sub": "a"})).is_ok());
    assert_eq!(
        check(iss, json!({"iss": "goodbye", "sub": "a"})),
        Err(JwtError::BadRequest("Invalid iss claim".into()))
    );
    assert_eq!(
        check(iss, json!({"sub": "a"})),
        Err(JwtError::BadRequest("Missing iss claim".into()))
    );
    assert_eq!(
        check("exp", json!({"sub": "a"})),
        Err(JwtError::BadRequest("Missing exp claim".into()))
    );
    assert_eq!(
        check("exp", json!({"exp": NOW - 1})),
        Err(JwtError::Unauthorized("exp not in future".into()))
    );
    assert_eq!(
        check("exp, nbf", json!({"exp": NOW + 1, "nbf": NOW + 1})),
        Err(JwtError::Unauthorized("nbf not in past".into()))
    );
    assert_eq!(
        check("iat", json!({"iat": "yesterday"})),
        Err(JwtError::BadRequest("Invalid iat claim".into()))
    );
    assert!(check("", json!({})).is_ok());
    assert!(matches!(
        Checks::parse("EXP!"),
        Err(JwtError::Misconfigured(_))
    ));
    assert!(matches!(
        Checks::parse("exp, exp"),
        Err(JwtError::Misconfigured(_))
    ));
    assert!(matches!(
        Checks::parse("aud"),
        Err(JwtError::Misconfigured(_))
    ));
    let all = Checks::parse("exp, nbf, iat, typ, kid, {iss, \"x y\"}").expect("valid");
    assert!(all.exp && all.nbf && all.iat && all.typ && all.kid);
    assert_eq!(all.iss.as_deref(), Some("x y"));
}

#[test]
fn malformed_tokens_are_bad_requests() {
    let key = keys(&[("hmac:_default", STANDARD.encode(SECRET))]);
    for token in ["", "a.b", "a.b.c.d", "!!!.e30.e30", "e30.e30.e30"] {
        assert!(
            matches!(decode_default(token, &key), Err(JwtError::BadRequest(_))),
            "{token}"
        );
    }
    let none = unsigned(&json!({"alg": "none"}), &claims()) + ".";
    assert_eq!(
        decode_default(&none, &key),
        Err(JwtError::BadRequest("Invalid alg header parameter".into()))
    );
    let array = format!("{}.e30.e30", URL_SAFE_NO_PAD.encode("[1]"));
    assert_eq!(
        decode_default(&array, &key),
        Err(JwtError::BadRequest("Not an object".into()))
    );
}

#[test]
fn roles_come_from_the_name_or_the_path() {
    let claims = json!({
        "_couchdb.roles": ["a", "b"],
        "my": {"roles": "x, y", "dotted.name": ["z"]},
        "bad": [1],
    });
    let claims = claims.as_object().expect("object");
    assert_eq!(roles(claims, None, None).expect("roles"), ["a", "b"]);
    assert_eq!(
        roles(claims, Some("other"), None).expect("roles"),
        Vec::<String>::new()
    );
    assert_eq!(
        roles(claims, None, Some("my.roles")).expect("roles"),
        ["x", "y"]
    );
    assert_eq!(
        roles(claims, Some("ignored"), Some("my.dotted\\.name")).expect("roles"),
        ["z"]
    );
    assert_eq!(
        roles(claims, None, Some("my.missing")),
        Err(JwtError::NotFound("missing json key: missing".into()))
    );
    assert_eq!(
        roles(claims, Some("bad"), None),
        Err(JwtError::BadRequest("Malformed token".into()))
    );
}
