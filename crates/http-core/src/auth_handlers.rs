//! The authentication handlers that read credentials a proxy or an identity provider made:
//! JWT (`Authorization: Bearer`, checked by `settee-jwt`) and proxy authentication
//! (`X-Auth-CouchDB-*` headers, checked by `settee-auth`). Their settings are the request's
//! snapshot of `[jwt_auth]`, `[jwt_keys]` and `[chttpd_auth]`.

use hyper::header::HeaderMap;
use settee_jwt::{Checks, JwtError};
use settee_node_config::AuthSettings;

use crate::auth::{now_secs, UserCtx};
use crate::error::{ApiError, ApiResult};

/// CouchDB's `jwt_authentication_handler`: without a `Bearer` token, no user; with one, the
/// token's `sub` and roles, or CouchDB's error for a token it refuses.
pub fn jwt(headers: &HeaderMap, settings: &AuthSettings) -> ApiResult<Option<UserCtx>> {
    let Some(token) = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return Ok(None);
    };
    let checks = Checks::parse(&settings.jwt_required_claims).map_err(jwt_error)?;
    let jwt_key = |name: &str| settings.jwt_keys.get(name).cloned();
    let claims =
        settee_jwt::decode(token.trim(), &checks, &jwt_key, now_secs()).map_err(jwt_error)?;
    let roles = settee_jwt::roles(
        &claims,
        settings.jwt_roles_claim_name.as_deref(),
        settings.jwt_roles_claim_path.as_deref(),
    )
    .map_err(jwt_error)?;
    let name = match claims.get("sub") {
        Some(serde_json::Value::String(sub)) => sub.clone(),
        Some(_) => return Err(ApiError::BadRequest("Malformed token".into())),
        None => return Err(ApiError::Unauthorized("Token missing sub claim.".into())),
    };
    Ok(Some(UserCtx {
        name: Some(name),
        roles,
        authenticated: Some("jwt"),
    }))
}

fn jwt_error(error: JwtError) -> ApiError {
    match error {
        JwtError::Unauthorized(reason) => ApiError::Unauthorized(reason),
        JwtError::NotFound(reason) => ApiError::NotFound(reason),
        JwtError::Misconfigured(reason) => ApiError::Internal(reason),
        JwtError::BadRequest(reason) => ApiError::BadRequest(reason),
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// CouchDB's `proxy_authentication_handler`: the user the proxy's headers name, when the
/// proxy is trusted (`proxy_use_secret`, `secret`); otherwise no user.
pub fn proxy(headers: &HeaderMap, settings: &AuthSettings) -> Option<UserCtx> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let user_name = header(&settings.x_auth_username)?;
    let (name, roles) = settee_auth::proxy_user(
        settee_auth::ProxyHeaders {
            user_name,
            roles: header(&settings.x_auth_roles),
            token: header(&settings.x_auth_token),
        },
        settee_auth::ProxyTrust {
            use_secret: settings.proxy_use_secret,
            secret: settings.secret.as_deref(),
            hash_algorithms: &settings.hash_algorithms,
        },
    )?;
    Some(UserCtx {
        name: Some(name),
        roles,
        authenticated: Some("proxy"),
    })
}
