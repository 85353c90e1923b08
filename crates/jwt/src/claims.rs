//! What a token must hold: `[jwt_auth] required_claims` read as CouchDB reads it, and the
//! header and payload checks it turns on.

use serde_json::{Map, Value};

use crate::{bad_request, JwtError};

/// CouchDB's default `[jwt_auth] required_claims`.
pub const REQUIRED_CLAIMS_DEFAULT: &str = "exp";

/// The checks a token goes through beyond its `alg` and signature (always checked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    /// The header must say `"typ": "JWT"`.
    pub typ: bool,
    /// The header must name its key (`kid`).
    pub kid: bool,
    /// The payload's `iss` must be this.
    pub iss: Option<String>,
    /// The payload must have an integer `iat`.
    pub iat: bool,
    /// The payload's `nbf` must be in the past.
    pub nbf: bool,
    /// The payload's `exp` must be in the future.
    pub exp: bool,
}

impl Checks {
    /// Reads `[jwt_auth] required_claims`: names (`exp, nbf`) and `{name, "value"}` pairs
    /// (`{iss, "MyCompany"}`), found anywhere in the text as CouchDB's pattern finds them.
    /// An empty value asks for nothing; text with neither is misconfigured (CouchDB's 500),
    /// and so is a claim named twice or one CouchDB cannot check.
    pub fn parse(required_claims: &str) -> Result<Checks, JwtError> {
        let misconfigured = || JwtError::Misconfigured("JWT is not configured correctly".into());
        let mut checks = Checks::default();
        let mut seen: Vec<String> = Vec::new();
        for (name, value) in scan(required_claims) {
            if seen.contains(&name) {
                return Err(misconfigured());
            }
            let flag = match (name.as_str(), &value) {
                ("iss", Some(value)) => {
                    checks.iss = Some(value.clone());
                    None
                }
                ("typ", None) => Some(&mut checks.typ),
                ("kid", None) => Some(&mut checks.kid),
                ("iat", None) => Some(&mut checks.iat),
                ("nbf", None) => Some(&mut checks.nbf),
                ("exp", None) => Some(&mut checks.exp),
                // `alg` and `sig` are always checked.
                ("alg" | "sig", None) => None,
                _ => return Err(misconfigured()),
            };
            if let Some(flag) = flag {
                *flag = true;
            }
            seen.push(name);
        }
        if seen.is_empty() && !required_claims.is_empty() {
            return Err(misconfigured());
        }
        Ok(checks)
    }

    /// `typ` and `alg` (which must name one of the nine algorithms).
    pub(crate) fn check_header(&self, header: &Map<String, Value>) -> Result<(), JwtError> {
        match header.get("typ") {
            None if self.typ => return Err(bad_request("Missing typ header parameter")),
            Some(typ) if self.typ && typ != "JWT" => {
                return Err(bad_request("Invalid typ header parameter"))
            }
            _ => {}
        }
        match header.get("alg") {
            None => Err(bad_request("Missing alg header parameter")),
            Some(Value::String(alg)) if crate::Algorithm::parse(alg).is_some() => Ok(()),
            Some(_) => Err(bad_request("Invalid alg header parameter")),
        }
    }

    /// `iss`, `iat`, `nbf` and `exp`, in CouchDB's order, each only when required.
    pub(crate) fn check_payload(
        &self,
        payload: &Map<String, Value>,
        now_secs: u64,
    ) -> Result<(), JwtError> {
        if let Some(expected) = &self.iss {
            match payload.get("iss") {
                None => return Err(bad_request("Missing iss claim")),
                Some(Value::String(iss)) if iss == expected => {}
                Some(_) => return Err(bad_request("Invalid iss claim")),
            }
        }
        if self.iat {
            match payload.get("iat") {
                None => return Err(bad_request("Missing iat claim")),
                Some(iat) if iat.is_i64() || iat.is_u64() => {}
                Some(_) => return Err(bad_request("Invalid iat claim")),
            }
        }
        let now = now_secs as f64;
        if self.nbf {
            let nbf = payload
                .get("nbf")
                .ok_or_else(|| bad_request("Missing nbf claim"))?;
            if !nbf.as_f64().is_some_and(|nbf| nbf < now) {
                return Err(JwtError::Unauthorized("nbf not in past".into()));
            }
        }
        if self.exp {
            let exp = payload
                .get("exp")
                .ok_or_else(|| bad_request("Missing exp claim"))?;
            if !exp.as_f64().is_some_and(|exp| exp > now) {
                return Err(JwtError::Unauthorized("exp not in future".into()));
            }
        }
        Ok(())
    }
}

/// Every `name` (lowercase ASCII letters) and `{name, "value"}` in `text`, left to right;
/// anything else between them is skipped.
fn scan(text: &str) -> Vec<(String, Option<String>)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at].is_ascii_lowercase() {
            let end = word_end(bytes, at);
            found.push((text[at..end].to_string(), None));
            at = end;
        } else if bytes[at] == b'{' {
            match pair(text, at) {
                Some((name, value, end)) => {
                    found.push((name, Some(value)));
                    at = end;
                }
                None => at += 1,
            }
        } else {
            at += 1;
        }
    }
    found
}

fn word_end(bytes: &[u8], start: usize) -> usize {
    let mut end = start;
    while end < bytes.len() && bytes[end].is_ascii_lowercase() {
        end += 1;
    }
    end
}

/// `{name\s*,\s*"value"}` starting at the `{` at `start`: the name, the value and the index
/// past the `}`.
fn pair(text: &str, start: usize) -> Option<(String, String, usize)> {
    let bytes = text.as_bytes();
    let name_start = start + 1;
    let name_end = word_end(bytes, name_start);
    if name_end == name_start {
        return None;
    }
    let mut at = skip_space(bytes, name_end);
    if bytes.get(at) != Some(&b',') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let value_start = at + 1;
    let value_len = text[value_start..].find('"')?;
    if value_len == 0 {
        return None;
    }
    let value_end = value_start + value_len;
    if bytes.get(value_end + 1) != Some(&b'}') {
        return None;
    }
    Some((
        text[name_start..name_end].to_string(),
        text[value_start..value_end].to_string(),
        value_end + 2,
    ))
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}
