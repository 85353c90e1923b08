//! The user's roles in a token's claims, where CouchDB's `[jwt_auth]` says they are.

use serde_json::{Map, Value};

use crate::{bad_request, JwtError};

/// CouchDB's default `[jwt_auth] roles_claim_name`.
pub const ROLES_CLAIM_NAME_DEFAULT: &str = "_couchdb.roles";

/// The roles in `claims`: at `roles_claim_path` (members separated by `.`, a `\.` being a dot
/// inside a name; a missing member is CouchDB's 404) when it is set, else in the top-level
/// member `roles_claim_name` (none when it is absent). A list must hold only strings; a
/// string is a comma-separated list.
pub fn roles(
    claims: &Map<String, Value>,
    roles_claim_name: Option<&str>,
    roles_claim_path: Option<&str>,
) -> Result<Vec<String>, JwtError> {
    let found = match roles_claim_path {
        Some(path) => {
            let mut at: Option<&Value> = None;
            for name in path_members(path) {
                let object = match at {
                    None => Some(claims),
                    Some(Value::Object(object)) => Some(object),
                    Some(_) => None,
                };
                at = Some(
                    object
                        .and_then(|object| object.get(&name))
                        .ok_or_else(|| JwtError::NotFound(format!("missing json key: {name}")))?,
                );
            }
            at.cloned().unwrap_or(Value::Array(Vec::new()))
        }
        None => claims
            .get(roles_claim_name.unwrap_or(ROLES_CLAIM_NAME_DEFAULT))
            .cloned()
            .unwrap_or(Value::Array(Vec::new())),
    };
    match found {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(role) => Ok(role),
                _ => Err(bad_request("Malformed token")),
            })
            .collect(),
        Value::String(list) => Ok(split_list(&list)),
        _ => Err(bad_request("Malformed token")),
    }
}

/// `a.b\.c` -> `a`, `b.c`.
fn path_members(path: &str) -> Vec<String> {
    let mut members = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '.' => members.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    members.push(current);
    members
}

/// CouchDB's split of a role list on commas with any spaces around them; trailing empty
/// items are dropped.
pub(crate) fn split_list(list: &str) -> Vec<String> {
    let parts: Vec<&str> = list.split(',').collect();
    let last = parts.len() - 1;
    let mut items: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let item = if index > 0 { item.trim_start() } else { item };
            let item = if index < last { item.trim_end() } else { item };
            item.to_string()
        })
        .collect();
    while items.last().is_some_and(|item| item.is_empty()) {
        items.pop();
    }
    items
}
