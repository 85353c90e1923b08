//! Couchbase 7's scopes and collections REST API, as ns_server answers it:
//!
//! - `GET /pools/default/buckets/B/scopes`: the manifest tree, every collection but
//!   `_default` with `maxTTL` (0 = the bucket's, -1 = never) and all with `"history": false`;
//! - `POST .../scopes` (form `name=`), `DELETE .../scopes/S`;
//! - `POST .../scopes/S/collections` (form `name=`, `maxTTL=`), `DELETE .../scopes/S/collections/C`.
//!
//! A change answers `{"uid":"<hex>"}` (the manifest it left). Errors carry ns_server's status
//! and text, `{"errors":{"_":"Scope with name \"s\" already exists"}}` and the like: the SDKs
//! match those texts to raise ScopeExists, CollectionNotFound and the others. Reading the
//! manifest needs access to the bucket; changing it needs the bucket's admin.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, Response, StatusCode};
use settee_auth::{db_access, DbAccess, UserCtx};
use settee_engine::{Bucket, Engine, EngineError, Manifest, ManifestChange};

use super::json;
use crate::KvState;

/// Largest form body a change may send.
const FORM_BYTES_MAX: usize = 64 * 1024;

pub(crate) fn errors(status: StatusCode, field: &str, message: &str) -> Response<Full<Bytes>> {
    json(status, serde_json::json!({"errors": {field: message}}))
}

fn not_found() -> Response<Full<Bytes>> {
    json(
        StatusCode::NOT_FOUND,
        serde_json::json!({"error": "Requested resource not found."}),
    )
}

/// A path segment with its percent-escapes decoded (names may hold `%`, sent as `%25`).
fn segment(raw: &str) -> Option<String> {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()
        .map(|name| name.into_owned())
}

/// The manifest tree of `GET .../scopes`.
pub(crate) fn scopes_json(manifest: &Manifest) -> serde_json::Value {
    let scopes: Vec<serde_json::Value> = manifest
        .scopes()
        .iter()
        .map(|scope| {
            let collections: Vec<serde_json::Value> = scope
                .collections
                .iter()
                .map(|collection| {
                    let mut entry = serde_json::json!({
                        "name": collection.name,
                        "uid": format!("{:x}", collection.id),
                    });
                    if collection.id != 0 {
                        entry["maxTTL"] = match collection.max_ttl {
                            None => 0i64,
                            Some(0) => -1,
                            Some(seconds) => i64::from(seconds),
                        }
                        .into();
                    }
                    entry["history"] = false.into();
                    entry
                })
                .collect();
            serde_json::json!({
                "name": scope.name,
                "uid": format!("{:x}", scope.id),
                "collections": collections,
            })
        })
        .collect();
    serde_json::json!({"uid": format!("{:x}", manifest.uid()), "scopes": scopes})
}

/// `maxTTL` of a create: absent or 0 = the bucket's (`None`), -1 = never (`Some(0)`), else
/// seconds.
fn parse_max_ttl(raw: Option<&str>) -> Result<Option<u32>, &'static str> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match raw.trim().parse::<i64>() {
        Ok(0) => Ok(None),
        Ok(-1) => Ok(Some(0)),
        Ok(seconds) if (1..=i64::from(i32::MAX)).contains(&seconds) => Ok(Some(seconds as u32)),
        _ => Err("Must be an integer between -1 and 2147483647"),
    }
}

/// What a failed change answers, with ns_server's texts.
fn refusal(error: &EngineError, scope: &str, collection: Option<&str>) -> Response<Full<Bytes>> {
    match (error, collection) {
        (EngineError::ScopeExists(_), _) => errors(
            StatusCode::BAD_REQUEST,
            "_",
            &format!("Scope with name \"{scope}\" already exists"),
        ),
        (EngineError::CollectionExists(_), Some(collection)) => errors(
            StatusCode::BAD_REQUEST,
            "_",
            &format!("Collection with name \"{collection}\" in scope \"{scope}\" already exists"),
        ),
        (EngineError::UnknownScope { .. }, _) => errors(
            StatusCode::NOT_FOUND,
            "_",
            &format!("Scope with name \"{scope}\" is not found"),
        ),
        (EngineError::UnknownCollection { .. }, Some(collection)) => errors(
            StatusCode::NOT_FOUND,
            "_",
            &format!("Collection with name \"{collection}\" in scope \"{scope}\" is not found"),
        ),
        (EngineError::InvalidName(reason), _) => errors(StatusCode::BAD_REQUEST, "name", reason),
        (EngineError::LimitReached(reason), _) => errors(
            StatusCode::BAD_REQUEST,
            "_",
            &format!("Maximum number exceeded: {reason}"),
        ),
        (EngineError::Invalid(reason), _) => errors(StatusCode::BAD_REQUEST, "_", reason),
        (EngineError::Unavailable(reason), _) => {
            errors(StatusCode::SERVICE_UNAVAILABLE, "_", reason)
        }
        (error, _) if error.is_insufficient_storage() => errors(
            StatusCode::SERVICE_UNAVAILABLE,
            "_",
            "The disk is full; try again later",
        ),
        (error, _) => errors(StatusCode::INTERNAL_SERVER_ERROR, "_", &error.to_string()),
    }
}

fn changed(
    result: Result<std::sync::Arc<Manifest>, EngineError>,
    scope: &str,
    collection: Option<&str>,
) -> Response<Full<Bytes>> {
    match result {
        Ok(manifest) => json(
            StatusCode::OK,
            serde_json::json!({"uid": format!("{:x}", manifest.uid())}),
        ),
        Err(error) => refusal(&error, scope, collection),
    }
}

/// The form fields of a change's body.
pub(crate) async fn form(
    request: Request<hyper::body::Incoming>,
) -> Result<Vec<(String, String)>, Response<Full<Bytes>>> {
    let body = Limited::new(request.into_body(), FORM_BYTES_MAX)
        .collect()
        .await
        .map_err(|_| {
            errors(
                StatusCode::BAD_REQUEST,
                "_",
                "The request body is unreadable or too large",
            )
        })?
        .to_bytes();
    Ok(form_urlencoded::parse(&body).into_owned().collect())
}

/// Form fields from pairs, as `form` gives them (for tests).
#[cfg(test)]
pub(crate) fn fields_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

pub(crate) fn field<'f>(fields: &'f [(String, String)], name: &str) -> Option<&'f str> {
    fields
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// `/pools/default/buckets/{bucket}/scopes{/rest}`.
pub(crate) async fn handle(
    state: &KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
    bucket: &str,
    rest: &[&str],
) -> Response<Full<Bytes>> {
    // The body is read before any answer: one left unread makes hyper close the connection,
    // and a client reusing it (every SDK's REST pool) then fails its next request.
    let method = request.method().clone();
    let fields = match form(request).await {
        Ok(fields) => fields,
        Err(response) => return response,
    };
    let Some(bucket) = segment(bucket)
        .filter(|name| !name.starts_with('_'))
        .and_then(|name| state.engine.bucket(&name))
        .filter(|bucket| crate::access::may_use(user, bucket))
    else {
        return not_found();
    };
    let Some(rest) = rest
        .iter()
        .map(|raw| segment(raw))
        .collect::<Option<Vec<String>>>()
    else {
        return not_found();
    };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    if method == Method::GET {
        return match rest.as_slice() {
            [] => json(StatusCode::OK, scopes_json(&bucket.manifest())),
            _ => not_found(),
        };
    }
    if db_access(&bucket, user) != DbAccess::Admin {
        return json(
            StatusCode::FORBIDDEN,
            serde_json::json!({
                "message": "Forbidden. User needs the following permissions",
                "permissions": [format!("cluster.collection[{}].collections!write", bucket.name())],
            }),
        );
    }
    change(&state.engine, &bucket, method, &fields, &rest).await
}

async fn change(
    engine: &Engine,
    bucket: &Bucket,
    method: Method,
    fields: &[(String, String)],
    rest: &[&str],
) -> Response<Full<Bytes>> {
    match (method, rest) {
        (Method::POST, []) => {
            let Some(name) = field(fields, "name") else {
                return errors(
                    StatusCode::BAD_REQUEST,
                    "name",
                    "The value must be supplied",
                );
            };
            let create = ManifestChange::CreateScope { name: name.into() };
            changed(engine.change_manifest(bucket, create).await, name, None)
        }
        (Method::DELETE, [scope]) => {
            let drop = ManifestChange::DropScope {
                name: (*scope).into(),
            };
            changed(engine.change_manifest(bucket, drop).await, scope, None)
        }
        (Method::POST, [scope, "collections"]) => {
            let Some(name) = field(fields, "name") else {
                return errors(
                    StatusCode::BAD_REQUEST,
                    "name",
                    "The value must be supplied",
                );
            };
            let max_ttl = match parse_max_ttl(field(fields, "maxTTL")) {
                Ok(max_ttl) => max_ttl,
                Err(reason) => return errors(StatusCode::BAD_REQUEST, "maxTTL", reason),
            };
            // Through the engine: it refuses a collection whose CouchDB-door name is a
            // bucket's name.
            let create = ManifestChange::CreateCollection {
                scope: scope.to_string(),
                name: name.to_string(),
                max_ttl,
            };
            changed(
                engine.change_manifest(bucket, create).await,
                scope,
                Some(name),
            )
        }
        (Method::DELETE, [scope, "collections", collection]) => {
            let drop = ManifestChange::DropCollection {
                scope: (*scope).into(),
                name: (*collection).into(),
            };
            changed(
                engine.change_manifest(bucket, drop).await,
                scope,
                Some(collection),
            )
        }
        (Method::POST | Method::DELETE, _) => not_found(),
        _ => json(
            StatusCode::METHOD_NOT_ALLOWED,
            serde_json::json!({"error": "method not allowed"}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_ttl_follows_ns_server() {
        assert_eq!(parse_max_ttl(None), Ok(None));
        assert_eq!(parse_max_ttl(Some("0")), Ok(None));
        assert_eq!(parse_max_ttl(Some("-1")), Ok(Some(0)));
        assert_eq!(parse_max_ttl(Some("3600")), Ok(Some(3600)));
        assert!(parse_max_ttl(Some("-2")).is_err());
        assert!(parse_max_ttl(Some("2147483648")).is_err());
        assert!(parse_max_ttl(Some("ten")).is_err());
    }

    #[test]
    fn the_default_manifest_as_ns_server_lists_it() {
        let manifest = Manifest::default();
        assert_eq!(
            scopes_json(&manifest),
            serde_json::json!({"uid": "0", "scopes": [{"name": "_default", "uid": "0",
                "collections": [{"name": "_default", "uid": "0", "history": false}]}]})
        );
    }

    #[test]
    fn refusals_carry_the_texts_the_sdks_match() {
        let exists = refusal(&EngineError::ScopeExists("s".into()), "s", None);
        assert_eq!(exists.status(), StatusCode::BAD_REQUEST);
        let missing = refusal(
            &EngineError::UnknownCollection { manifest_uid: 3 },
            "s",
            Some("c"),
        );
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let body = format!("{:?}", missing.body());
        assert!(body.contains("Collection with name"), "{body}");
    }
}
