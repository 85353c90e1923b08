//! Rebalance over the management REST API of a cluster node, as ns_server answers it (server
//! admins only; through the binary's [`super::buckets::BucketAdmin`]; the moves themselves are
//! the binary's, docs/format/rebalance.md):
//!
//! - `POST /controller/rebalance` (form `knownNodes`, `ejectedNodes`: comma-separated member
//!   names as `/_membership` gives them, or node ids): 200 once the rebalance is committed to
//!   the cluster map; 400 `{"empty_known_nodes": 1}`, `{"mismatch": 1}` (the known nodes are
//!   not the cluster's serving members, or an ejected node is not known), `{"noKVNodesLeft":
//!   1}`, `{"rebalanceRunning": 1}`, each with a `reason`.
//! - `POST /controller/stopRebalance`: 200; each move not taken over yet is aborted, so every
//!   vbucket is wholly at its old or its new place.
//! - `GET /pools/default/rebalanceProgress`: `{"status": "none"}`, or `{"status": "running",
//!   <member name>: {"progress": 0.0 ..= 1.0}, ...}`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use settee_auth::UserCtx;

use super::buckets::{admin_form, BucketRefusal};
use super::collections::field;
use super::json;
use crate::KvState;

/// A form field's comma-separated names (empty: none).
fn names(fields: &[(String, String)], name: &str) -> Vec<String> {
    field(fields, name)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|node| !node.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `POST /controller/rebalance` and `POST /controller/stopRebalance`.
pub(crate) async fn control(
    state: &KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
    stop: bool,
) -> Response<Full<Bytes>> {
    let (fields, admin) = match admin_form(state, user, request, "cluster.pools!write").await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let done = if stop {
        admin.stop_rebalance().await
    } else {
        let known = names(&fields, "knownNodes");
        if known.is_empty() {
            return refused("empty_known_nodes", "knownNodes names no node");
        }
        admin.rebalance(known, names(&fields, "ejectedNodes")).await
    };
    match done {
        Ok(()) => Response::builder()
            .status(StatusCode::OK)
            .body(Full::new(Bytes::new()))
            .unwrap_or_default(),
        Err(BucketRefusal::Invalid(key, reason)) => refused(key, &reason),
        Err(BucketRefusal::Exists) => refused("rebalanceRunning", "a rebalance is running"),
        Err(BucketRefusal::Unavailable(reason)) => {
            json(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!(reason))
        }
    }
}

fn refused(key: &str, reason: &str) -> Response<Full<Bytes>> {
    json(
        StatusCode::BAD_REQUEST,
        serde_json::json!({ key: 1, "reason": reason }),
    )
}

/// `GET /pools/default/rebalanceProgress`.
pub(crate) fn progress(state: &KvState, user: &UserCtx) -> Response<Full<Bytes>> {
    if !user.is_admin() {
        return json(
            StatusCode::FORBIDDEN,
            serde_json::json!({
                "message": "Forbidden. User needs the following permissions",
                "permissions": ["cluster.tasks!read"],
            }),
        );
    }
    let progress = state
        .bucket_admin
        .get()
        .and_then(|admin| admin.rebalance_progress())
        .unwrap_or_else(|| serde_json::json!({"status": "none"}));
    json(StatusCode::OK, progress)
}
