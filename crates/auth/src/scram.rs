//! SCRAM (RFC 5802; SHA-256 RFC 7677; SHA-512 as Couchbase uses it), server side. The client
//! proves it knows the password without sending it; the server keeps only StoredKey and
//! ServerKey (`ScramSecret`), never the password.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Digest;

use crate::constant_time_eq;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Sha1,
    Sha256,
    Sha512,
}

impl Mechanism {
    /// All mechanisms, strongest first: the order SASL_LIST_MECHS advertises.
    pub const ALL: [Mechanism; 3] = [Mechanism::Sha512, Mechanism::Sha256, Mechanism::Sha1];

    pub fn from_name(name: &[u8]) -> Option<Mechanism> {
        match name {
            b"SCRAM-SHA512" => Some(Mechanism::Sha512),
            b"SCRAM-SHA256" => Some(Mechanism::Sha256),
            b"SCRAM-SHA1" => Some(Mechanism::Sha1),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA1",
            Mechanism::Sha256 => "SCRAM-SHA256",
            Mechanism::Sha512 => "SCRAM-SHA512",
        }
    }

    /// The key in a `_users` document's `scram` object.
    pub fn field(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "sha1",
            Mechanism::Sha256 => "sha256",
            Mechanism::Sha512 => "sha512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        macro_rules! mac {
            ($digest:ty) => {{
                let mut mac = <Hmac<$digest> as Mac>::new_from_slice(key)
                    .expect("HMAC takes keys of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }};
        }
        match self {
            Mechanism::Sha1 => mac!(sha1::Sha1),
            Mechanism::Sha256 => mac!(sha2::Sha256),
            Mechanism::Sha512 => mac!(sha2::Sha512),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => sha2::Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => sha2::Sha512::digest(data).to_vec(),
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        macro_rules! derive {
            ($digest:ty, $len:expr) => {{
                let mut out = vec![0u8; $len];
                pbkdf2::pbkdf2::<Hmac<$digest>>(password, salt, iterations, &mut out)
                    .expect("HMAC takes keys of any length");
                out
            }};
        }
        match self {
            Mechanism::Sha1 => derive!(sha1::Sha1, 20),
            Mechanism::Sha256 => derive!(sha2::Sha256, 32),
            Mechanism::Sha512 => derive!(sha2::Sha512, 64),
        }
    }
}

/// What the server stores per user and mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramSecret {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramSecret {
    pub fn derive(mechanism: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = mechanism.salted_password(password.as_bytes(), salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        ScramSecret {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
        }
    }

    pub fn random_salt() -> Vec<u8> {
        let mut salt = vec![0u8; 16];
        rand::rng().fill_bytes(&mut salt);
        salt
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "salt": BASE64.encode(&self.salt),
            "iterations": self.iterations,
            "stored_key": BASE64.encode(&self.stored_key),
            "server_key": BASE64.encode(&self.server_key),
        })
    }

    pub fn from_json(value: &serde_json::Value) -> Option<ScramSecret> {
        let bytes = |field: &str| BASE64.decode(value.get(field)?.as_str()?).ok();
        Some(ScramSecret {
            salt: bytes("salt")?,
            iterations: u32::try_from(value.get("iterations")?.as_u64()?).ok()?,
            stored_key: bytes("stored_key")?,
            server_key: bytes("server_key")?,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The message does not follow RFC 5802's grammar.
    Malformed(&'static str),
    /// Wrong password, unknown user, or a tampered exchange: all look alike to the client.
    AuthenticationFailed,
}

/// An exchange after the client's first message.
pub struct ScramServer {
    mechanism: Mechanism,
    username: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    /// `None` for an unknown user: the exchange runs to the end with a made-up salt so that
    /// unknown names and wrong passwords are indistinguishable (RFC 5802, section 5.1).
    secret: Option<ScramSecret>,
}

fn attribute(part: &str, name: char) -> Option<&str> {
    let mut chars = part.chars();
    (chars.next()? == name && chars.next()? == '=').then(|| &part[2..])
}

/// `=2C` and `=3D` in a SCRAM user name stand for `,` and `=`.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(index) = rest.find('=') {
        out.push_str(&rest[..index]);
        match rest.get(index..index + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[index + 3..];
    }
    out.push_str(rest);
    Some(out)
}

impl ScramServer {
    /// Handles the client-first message; returns the exchange and the server-first message.
    /// `lookup` finds the user's secret for this mechanism.
    pub fn start(
        mechanism: Mechanism,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramSecret>,
        iterations_for_unknown: u32,
    ) -> Result<(ScramServer, String), ScramError> {
        let text =
            std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        // gs2 header: "n,," (no channel binding) or "y,,"; an authzid is not supported.
        let bare = text
            .strip_prefix("n,,")
            .or_else(|| text.strip_prefix("y,,"))
            .ok_or(ScramError::Malformed("unsupported GS2 header"))?;
        let mut parts = bare.splitn(3, ',');
        let username = parts
            .next()
            .and_then(|part| attribute(part, 'n'))
            .and_then(decode_saslname)
            .ok_or(ScramError::Malformed("missing user name"))?;
        // The client nonce is opaque printable text (some SDKs put spaces in it).
        let client_nonce = parts
            .next()
            .and_then(|part| attribute(part, 'r'))
            .filter(|nonce| !nonce.is_empty())
            .ok_or(ScramError::Malformed("missing client nonce"))?;
        let secret = lookup(&username);
        let (salt, iterations) = match &secret {
            Some(secret) => (secret.salt.clone(), secret.iterations),
            None => (ScramSecret::random_salt(), iterations_for_unknown),
        };
        let mut server_nonce = [0u8; 18];
        rand::rng().fill_bytes(&mut server_nonce);
        let nonce = format!("{client_nonce}{}", BASE64.encode(server_nonce));
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(&salt));
        Ok((
            ScramServer {
                mechanism,
                username,
                client_first_bare: bare.to_string(),
                server_first: server_first.clone(),
                nonce,
                secret,
            },
            server_first,
        ))
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Checks the client-final message; on success returns the server-final message
    /// (`v=<server signature>`).
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text =
            std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("missing proof"))?;
        let mut channel_binding = None;
        let mut nonce = None;
        for part in without_proof.split(',') {
            if let Some(value) = attribute(part, 'c') {
                channel_binding = Some(value);
            } else if let Some(value) = attribute(part, 'r') {
                nonce = Some(value);
            }
        }
        let channel_binding = channel_binding.ok_or(ScramError::Malformed("missing c="))?;
        // "biws" = base64("n,,"), "eSws" = base64("y,,"): no channel binding, no authzid.
        if channel_binding != "biws" && channel_binding != "eSws" {
            return Err(ScramError::Malformed("unsupported channel binding"));
        }
        if nonce != Some(self.nonce.as_str()) {
            return Err(ScramError::AuthenticationFailed);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let secret = self.secret.ok_or(ScramError::AuthenticationFailed)?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let client_signature = self
            .mechanism
            .hmac(&secret.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(ScramError::AuthenticationFailed);
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        if !constant_time_eq(&self.mechanism.hash(&client_key), &secret.stored_key) {
            return Err(ScramError::AuthenticationFailed);
        }
        let server_signature = self
            .mechanism
            .hmac(&secret.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}

/// The client side, for `settee bench kv` and tests: (client-first, state).
pub struct ScramClient {
    mechanism: Mechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    server_signature: Vec<u8>,
}

impl ScramClient {
    pub fn new(mechanism: Mechanism, username: &str, password: &str, nonce: &str) -> Self {
        let escaped = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={escaped},r={nonce}"),
            client_nonce: nonce.to_string(),
            server_signature: Vec::new(),
        }
    }

    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// Answers the server-first message with the client-final message.
    pub fn client_final(&mut self, server_first: &str) -> Result<String, ScramError> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in server_first.split(',') {
            if let Some(value) = attribute(part, 'r') {
                nonce = Some(value);
            } else if let Some(value) = attribute(part, 's') {
                salt = BASE64.decode(value).ok();
            } else if let Some(value) = attribute(part, 'i') {
                iterations = value.parse::<u32>().ok();
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(ScramError::Malformed("bad server-first message"));
        };
        if !nonce.starts_with(&self.client_nonce) || iterations == 0 {
            return Err(ScramError::AuthenticationFailed);
        }
        let salted = self
            .mechanism
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = self.mechanism.hmac(&salted, b"Server Key");
        self.server_signature = self.mechanism.hmac(&server_key, auth_message.as_bytes());
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)))
    }

    /// Checks the server-final message: the server knew the password too.
    pub fn verify_server(&self, server_final: &str) -> bool {
        attribute(server_final, 'v')
            .and_then(|value| BASE64.decode(value).ok())
            .is_some_and(|signature| constant_time_eq(&signature, &self.server_signature))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil", SCRAM-SHA-256.
    #[test]
    fn rfc7677_sha256_vector() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let secret = ScramSecret::derive(Mechanism::Sha256, "pencil", &salt, 4096);
        let client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let server = ScramServer {
            mechanism: Mechanism::Sha256,
            username: "user".into(),
            client_first_bare: client_first_bare.into(),
            server_first: server_first.into(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
            secret: Some(secret),
        };
        let server_final = server
            .finish(
                format!("{without_proof},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
                    .as_bytes(),
            )
            .unwrap();
        assert_eq!(
            server_final,
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    fn exchange(mechanism: Mechanism, stored_password: &str, given_password: &str) -> bool {
        let secret = ScramSecret::derive(mechanism, stored_password, b"salty", 64);
        let mut client = ScramClient::new(mechanism, "a,b=c", given_password, "nonce with spaces");
        let (server, server_first) = ScramServer::start(
            mechanism,
            client.client_first().as_bytes(),
            |name| (name == "a,b=c").then(|| secret.clone()),
            64,
        )
        .unwrap();
        assert_eq!(server.username(), "a,b=c");
        let client_final = client.client_final(&server_first).unwrap();
        match server.finish(client_final.as_bytes()) {
            Ok(server_final) => {
                assert!(client.verify_server(&server_final));
                true
            }
            Err(error) => {
                assert_eq!(error, ScramError::AuthenticationFailed);
                false
            }
        }
    }

    #[test]
    fn every_mechanism_accepts_the_right_password_only() {
        for mechanism in Mechanism::ALL {
            assert!(exchange(mechanism, "secret", "secret"));
            assert!(!exchange(mechanism, "secret", "Secret"));
        }
    }

    #[test]
    fn unknown_users_and_garbage_fail_cleanly() {
        let client = ScramClient::new(Mechanism::Sha512, "nobody", "pw", "abc");
        let (server, _) = ScramServer::start(
            Mechanism::Sha512,
            client.client_first().as_bytes(),
            |_| None,
            10,
        )
        .unwrap();
        assert_eq!(
            server.finish(b"c=biws,r=abc,p=AAAA"),
            Err(ScramError::AuthenticationFailed)
        );
        for garbage in [
            &b""[..],
            b"n,,",
            b"x,,n=a,r=b",
            b"n,,n=a",
            b"n,,n=a=ZZ,r=b",
            b"\xff",
        ] {
            assert!(ScramServer::start(Mechanism::Sha1, garbage, |_| None, 10).is_err());
        }
    }
}
