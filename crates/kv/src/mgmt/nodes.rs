//! Node failover over the management REST API of a cluster node, as ns_server answers it
//! (server admins only; through the binary's [`BucketAdmin`]):
//!
//! - `POST /controller/failOver` (form `otpNode`: a member's name as `/_membership` gives it,
//!   or its node id): hard failover of that node through the cluster map, 200 once committed,
//!   400 "Unknown server given." for a name the map does not hold.
//! - `POST /controller/reAddNode` (form `otpNode`): delta recovery of a failed-over node: it
//!   serves again as a replica of its chains and catches up over DCP (docs/format/
//!   cluster-map.md, AddBack). 200 once committed; 400 for an unknown node or one that is not
//!   failed over. Couchbase then needs a rebalance; settee has nothing to move, so the node is
//!   back at once.
//! - `GET /settings/autoFailover`: `{"enabled", "timeout" (seconds), "count", "maxCount"}`.
//! - `POST /settings/autoFailover` (form `enabled` true/false, `timeout` seconds 1-3600):
//!   200 once committed; 400 `{"errors": {"timeout": ...}}` for a timeout out of range.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use settee_auth::UserCtx;

use super::buckets::{admin_form, AutoFailoverSettings, BucketRefusal, CreateFuture};
use super::collections::{errors, field};
use super::json;
use crate::KvState;

/// Couchbase's bounds on the auto-failover timeout, in seconds.
const TIMEOUT_SECS: std::ops::RangeInclusive<u32> = 1..=3600;

fn ok() -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::OK)
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

/// The answer to a cluster change `action` made (`unknown`: what ns_server says of a node
/// that is not a member).
async fn answer(action: CreateFuture<'_>, unknown: &str) -> Response<Full<Bytes>> {
    match action.await {
        Ok(()) => ok(),
        Err(BucketRefusal::Invalid(_, message)) => {
            json(StatusCode::BAD_REQUEST, serde_json::json!(message))
        }
        Err(BucketRefusal::Exists) => json(StatusCode::BAD_REQUEST, serde_json::json!(unknown)),
        Err(BucketRefusal::Unavailable(reason)) => {
            json(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!(reason))
        }
    }
}

/// `POST /controller/failOver` and `POST /controller/reAddNode`.
pub(crate) async fn node_change(
    state: &KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
    re_add: bool,
) -> Response<Full<Bytes>> {
    let (fields, admin) = match admin_form(state, user, request, "cluster.pools!write").await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let Some(node) = field(&fields, "otpNode").filter(|node| !node.is_empty()) else {
        return json(
            StatusCode::BAD_REQUEST,
            serde_json::json!("No server specified."),
        );
    };
    let action = if re_add {
        admin.re_add_node(node.to_owned())
    } else {
        admin.fail_over(node.to_owned())
    };
    answer(action, "Unknown server given.").await
}

/// `GET /settings/autoFailover`.
pub(crate) fn auto_failover(state: &KvState) -> Response<Full<Bytes>> {
    match state
        .bucket_admin
        .get()
        .and_then(|admin| admin.auto_failover())
    {
        Some(settings) => json(
            StatusCode::OK,
            serde_json::json!({
                "enabled": settings.enabled,
                "timeout": settings.timeout_secs,
                "count": settings.failed_over,
                "maxCount": 1,
            }),
        ),
        None => json(
            StatusCode::METHOD_NOT_ALLOWED,
            serde_json::json!({"error": "method not allowed"}),
        ),
    }
}

/// `POST /settings/autoFailover`.
pub(crate) async fn set_auto_failover(
    state: &KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let (fields, admin) = match admin_form(state, user, request, "cluster.settings!write").await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let current = admin.auto_failover();
    let settings = match parse(&fields, current) {
        Ok(settings) => settings,
        Err((name, message)) => return errors(StatusCode::BAD_REQUEST, name, &message),
    };
    answer(admin.set_auto_failover(settings), "Unknown server given.").await
}

/// The settings a form asks for, over the `current` ones.
fn parse(
    fields: &[(String, String)],
    current: Option<AutoFailoverSettings>,
) -> Result<AutoFailoverSettings, (&'static str, String)> {
    let enabled = match field(fields, "enabled") {
        Some("true") => true,
        Some("false") => false,
        Some(_) => return Err(("enabled", "The value must be one of: true, false".into())),
        None => return Err(("enabled", "The value must be supplied".into())),
    };
    let timeout_secs = match field(fields, "timeout") {
        Some(text) => match text.parse::<u32>() {
            Ok(secs) if TIMEOUT_SECS.contains(&secs) => secs,
            _ => {
                return Err((
                    "timeout",
                    format!(
                        "The value must be an integer between {} and {}",
                        TIMEOUT_SECS.start(),
                        TIMEOUT_SECS.end()
                    ),
                ))
            }
        },
        None if enabled && current.is_none() => {
            return Err(("timeout", "The value must be supplied".into()))
        }
        None => current.map_or(*TIMEOUT_SECS.start(), |settings| settings.timeout_secs),
    };
    Ok(AutoFailoverSettings {
        enabled,
        timeout_secs,
        failed_over: current.map_or(0, |settings| settings.failed_over),
    })
}

#[cfg(test)]
mod tests {
    use super::super::collections::fields_of as fields;
    use super::*;

    #[test]
    fn the_auto_failover_form_as_ns_server_checks_it() {
        let now = Some(AutoFailoverSettings {
            enabled: true,
            timeout_secs: 5,
            failed_over: 1,
        });
        let parsed = |pairs: &[(&str, &str)]| parse(&fields(pairs), now);
        assert_eq!(
            parsed(&[("enabled", "true"), ("timeout", "1")]),
            Ok(AutoFailoverSettings {
                enabled: true,
                timeout_secs: 1,
                failed_over: 1,
            })
        );
        assert_eq!(
            parsed(&[("enabled", "false")]).map(|s| (s.enabled, s.timeout_secs)),
            Ok((false, 5))
        );
        for bad in ["0", "3601", "-1", "1.5", ""] {
            assert_eq!(
                parsed(&[("enabled", "true"), ("timeout", bad)]).map_err(|e| e.0),
                Err("timeout"),
                "{bad}"
            );
        }
        assert_eq!(parsed(&[("timeout", "5")]).map_err(|e| e.0), Err("enabled"));
        assert_eq!(
            parsed(&[("enabled", "yes"), ("timeout", "5")]).map_err(|e| e.0),
            Err("enabled")
        );
    }
}
