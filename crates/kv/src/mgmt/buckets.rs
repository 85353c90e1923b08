//! Buckets over the management REST API of a cluster node, as ns_server answers it:
//!
//! - `POST /pools/default/buckets` (form `name`, `replicaNumber` 0-3, `bucketType`
//!   couchbase/membase, `numVBuckets`, `durabilityMinLevel` none/majority/
//!   majorityAndPersistActive/persistToMajority; `ramQuota` and the rest are accepted and
//!   ignored):
//!   202 once the bucket is in the committed cluster map and open on this node; 400
//!   `{"errors":{"name":"Bucket with given name already exists"}}` and the like, whose texts
//!   the SDKs' bucket managers match. Server admins only. Offered when the binary set a
//!   [`BucketAdmin`] (a cluster node); elsewhere the method is refused as before.
//! - the node and failover requests of `nodes.rs`, through the same [`BucketAdmin`].
//! - `GET /pools/default/bucketsStreaming/B`: the bucket's config, then the new one after every
//!   cluster map change, each followed by four newlines (the stream older clients follow).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use settee_auth::UserCtx;
use settee_engine::durability::Level;

use super::collections::{errors, field, form};
use super::json;
use crate::KvState;

/// A bucket as `POST /pools/default/buckets` asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBucket {
    pub name: String,
    /// `replicaNumber`; `None`: the cluster's default.
    pub replicas: Option<u8>,
    /// `numVBuckets`; `None`: the node's default.
    pub vbuckets: Option<u16>,
    /// `durabilityMinLevel`: every write to the bucket is raised to it (default `none`).
    pub durability_min: Level,
}

/// Why a bucket was not created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BucketRefusal {
    Exists,
    /// A field that is not acceptable: (field, message).
    Invalid(&'static str, String),
    /// The cluster could not commit it now (no leader, shutting down).
    Unavailable(String),
}

pub type CreateFuture<'a> = Pin<Box<dyn Future<Output = Result<(), BucketRefusal>> + Send + 'a>>;

/// Creates buckets for the management door (the binary's cluster glue implements it).
pub trait BucketAdmin: Send + Sync {
    fn create_bucket(&self, bucket: NewBucket) -> CreateFuture<'_>;

    /// Fails the node named `otp_node` over (`POST /controller/failOver`); `Invalid` when the
    /// cluster has no such node.
    fn fail_over(&self, otp_node: String) -> CreateFuture<'_> {
        let _ = otp_node;
        Box::pin(async { Err(BucketRefusal::Unavailable("not a cluster node".into())) })
    }

    /// Adds a failed-over node back (`POST /controller/reAddNode`, delta recovery);
    /// `Invalid` when the cluster has no such node, `Unavailable` when it is not failed over.
    fn re_add_node(&self, otp_node: String) -> CreateFuture<'_> {
        let _ = otp_node;
        Box::pin(async { Err(BucketRefusal::Unavailable("not a cluster node".into())) })
    }

    /// Starts a rebalance (`POST /controller/rebalance`): `known` names every serving member
    /// (ns_server's `knownNodes`), `ejected` those that leave. `Invalid(key, why)` answers
    /// ns_server's `{key: 1}` (`mismatch`, `empty_known_nodes`, `noKVNodesLeft`, ...).
    fn rebalance(&self, known: Vec<String>, ejected: Vec<String>) -> CreateFuture<'_> {
        let _ = (known, ejected);
        Box::pin(async { Err(BucketRefusal::Unavailable("not a cluster node".into())) })
    }

    /// Stops the running rebalance (`POST /controller/stopRebalance`); none running is fine.
    fn stop_rebalance(&self) -> CreateFuture<'_> {
        Box::pin(async { Err(BucketRefusal::Unavailable("not a cluster node".into())) })
    }

    /// `GET /pools/default/rebalanceProgress`'s body; `None` outside a cluster.
    fn rebalance_progress(&self) -> Option<serde_json::Value> {
        None
    }

    /// The cluster's auto-failover settings (`GET /settings/autoFailover`).
    fn auto_failover(&self) -> Option<AutoFailoverSettings> {
        None
    }

    /// Changes them (`POST /settings/autoFailover`); the timeout is already checked.
    fn set_auto_failover(&self, settings: AutoFailoverSettings) -> CreateFuture<'_> {
        let _ = settings;
        Box::pin(async { Err(BucketRefusal::Unavailable("not a cluster node".into())) })
    }
}

/// Auto-failover as `/settings/autoFailover` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoFailoverSettings {
    pub enabled: bool,
    pub timeout_secs: u32,
    /// Members failed over now (Couchbase's `count`; settee keeps no separate counter).
    pub failed_over: usize,
}

/// The form of a cluster change and the binary's `BucketAdmin`, for an admin: ns_server's
/// 405 on a node that is not in a cluster, 403 naming `permission` for anyone else.
pub(crate) async fn admin_form<'a>(
    state: &'a KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
    permission: &str,
) -> Result<(Vec<(String, String)>, &'a Arc<dyn BucketAdmin>), Response<Full<Bytes>>> {
    let fields = form(request).await?;
    let Some(admin) = state.bucket_admin.get() else {
        return Err(json(
            StatusCode::METHOD_NOT_ALLOWED,
            serde_json::json!({"error": "method not allowed"}),
        ));
    };
    if !user.is_admin() {
        return Err(json(
            StatusCode::FORBIDDEN,
            serde_json::json!({
                "message": "Forbidden. User needs the following permissions",
                "permissions": [permission],
            }),
        ));
    }
    Ok((fields, admin))
}

/// Replicas Couchbase allows at most.
const REPLICAS_MAX: u8 = 3;

/// `POST /pools/default/buckets`.
pub(crate) async fn create(
    state: &KvState,
    user: &UserCtx,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let (fields, admin) = match admin_form(state, user, request, "cluster.buckets!create").await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let bucket = match parse(&fields) {
        Ok(bucket) => bucket,
        Err((field, message)) => return errors(StatusCode::BAD_REQUEST, field, &message),
    };
    match admin.create_bucket(bucket).await {
        Ok(()) => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()))
            .unwrap_or_default(),
        Err(BucketRefusal::Exists) => errors(
            StatusCode::BAD_REQUEST,
            "name",
            "Bucket with given name already exists",
        ),
        Err(BucketRefusal::Invalid(field, message)) => {
            errors(StatusCode::BAD_REQUEST, field, &message)
        }
        Err(BucketRefusal::Unavailable(reason)) => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"errors": {"_": reason}}),
        ),
    }
}

fn parse(fields: &[(String, String)]) -> Result<NewBucket, (&'static str, String)> {
    let name = field(fields, "name")
        .filter(|name| !name.is_empty())
        .ok_or(("name", "Bucket name needs to be specified".to_string()))?;
    match field(fields, "bucketType") {
        None | Some("couchbase" | "membase") => {}
        Some(other) => {
            return Err((
                "bucketType",
                format!("Bucket type {other} is not supported by settee"),
            ))
        }
    }
    let replicas = match field(fields, "replicaNumber") {
        None => None,
        Some(text) => match text.parse::<u8>() {
            Ok(replicas) if replicas <= REPLICAS_MAX => Some(replicas),
            _ => {
                return Err((
                    "replicaNumber",
                    "Replica number must be equal to or less than 3".into(),
                ))
            }
        },
    };
    let vbuckets = match field(fields, "numVBuckets") {
        None => None,
        Some(text) => match text.parse::<u16>() {
            Ok(count) if (1..=1024).contains(&count) => Some(count),
            _ => {
                return Err((
                    "numVBuckets",
                    "Number of vbuckets must be between 1 and 1024".into(),
                ))
            }
        },
    };
    let durability_min = match field(fields, "durabilityMinLevel") {
        None => Level::None,
        Some(text) => Level::from_name(text).ok_or((
            "durabilityMinLevel",
            "Durability minimum level must be one of none, majority, majorityAndPersistActive, \
             persistToMajority"
                .to_string(),
        ))?,
    };
    Ok(NewBucket {
        name: name.to_string(),
        replicas,
        vbuckets,
        durability_min,
    })
}

/// The management door's response body: whole, or a stream of configs.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// `GET /pools/default/bucketsStreaming/B`: `info` renders the bucket's config as it is at
/// each map change (`None` once the bucket is gone, which ends the stream).
pub(crate) fn streaming(
    state: Arc<KvState>,
    info: impl Fn(&KvState) -> Option<serde_json::Value> + Send + Sync + 'static,
) -> Response<Body> {
    let changes = state.routing.subscribe();
    let first = true;
    let stream = futures_util::stream::unfold(
        (state, changes, first, info),
        |(state, mut changes, first, info)| async move {
            if !first && changes.changed().await.is_err() {
                return None;
            }
            let config = info(&state)?;
            let chunk = Bytes::from(format!("{config}\n\n\n\n"));
            Some((
                Ok::<_, Infallible>(Frame::data(chunk)),
                (state, changes, false, info),
            ))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "application/json")
        .body(StreamBody::new(stream).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

#[cfg(test)]
mod tests {
    use super::super::collections::fields_of as fields;
    use super::*;

    #[test]
    fn the_form_as_ns_server_checks_it() {
        assert_eq!(
            parse(&fields(&[
                ("name", "b"),
                ("replicaNumber", "2"),
                ("ramQuota", "100")
            ])),
            Ok(NewBucket {
                name: "b".into(),
                replicas: Some(2),
                vbuckets: None,
                durability_min: Level::None,
            })
        );
        let strict = parse(&fields(&[
            ("name", "b"),
            ("durabilityMinLevel", "persistToMajority"),
        ]));
        assert_eq!(
            strict.map(|bucket| bucket.durability_min),
            Ok(Level::PersistToMajority)
        );
        assert_eq!(
            parse(&fields(&[("name", "b"), ("durabilityMinLevel", "all")])).map_err(|e| e.0),
            Err("durabilityMinLevel")
        );
        assert_eq!(
            parse(&fields(&[("replicaNumber", "1")])).map_err(|e| e.0),
            Err("name")
        );
        assert_eq!(
            parse(&fields(&[("name", "b"), ("replicaNumber", "4")])).map_err(|e| e.0),
            Err("replicaNumber")
        );
        assert_eq!(
            parse(&fields(&[("name", "b"), ("bucketType", "memcached")])).map_err(|e| e.0),
            Err("bucketType")
        );
    }
}
