//! The management port's `/pools` endpoints: read-only ones, which go-couchbase-based tools and
//! gocbcorex read to find the buckets and their vbucket maps, and the scopes and collections
//! REST API of Couchbase 7 (`/pools/default/buckets/B/scopes`), which every SDK's collection
//! manager uses. On a cluster node the configs are the cluster's (`cluster.rs`), and buckets
//! are created and their configs streamed as `buckets.rs` says.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use settee_auth::UserCtx;
use settee_engine::Bucket;
use tokio::net::TcpListener;

use crate::{cluster, KvState};

pub mod buckets;
mod collections;
mod metrics;
mod nodes;
mod rebalance;

pub async fn serve(
    listener: TcpListener,
    state: Arc<KvState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with(
        listener,
        state,
        shutdown,
        |stream| async move { Ok(stream) },
    )
    .await
}

/// Serves the management endpoints over what `handshake` makes of each accepted socket (the
/// HTTPS port, `mgmtSSL`: a TLS stream; the binary passes `settee-tls`'s handshake).
pub async fn serve_with<H, F, S>(
    listener: TcpListener,
    state: Arc<KvState>,
    shutdown: impl std::future::Future<Output = ()>,
    handshake: H,
) where
    H: Fn(tokio::net::TcpStream) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = std::io::Result<S>> + Send,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, peer)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let state = state.clone();
        let handshake = handshake.clone();
        tokio::spawn(async move {
            let Ok(stream) = handshake(stream).await else {
                return;
            };
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, request, peer.ip()).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// The Basic-auth user, if the password is right (and the user not locked out after failed
/// logins from `peer`).
fn user_of<B>(state: &KvState, request: &Request<B>, peer: IpAddr) -> Option<UserCtx> {
    let header = request
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let encoded = header.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(BASE64.decode(encoded.trim()).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    let account = state
        .users
        .login(&state.engine, name, password, Some(peer))
        .ok()?;
    Some(UserCtx {
        name: Some(account.name),
        roles: account.roles,
        authenticated: Some("default"),
    })
}

/// The host the client used, so advertised addresses work through whatever it connected to.
fn host_of<B>(request: &Request<B>) -> String {
    request
        .headers()
        .get(hyper::header::HOST)
        .and_then(|host| host.to_str().ok())
        .and_then(|host| host.rsplit_once(':').map(|(name, _)| name).or(Some(host)))
        .unwrap_or("127.0.0.1")
        .to_string()
}

fn with_host(value: serde_json::Value, host: &str) -> serde_json::Value {
    let text = value.to_string().replace("$HOST", host);
    serde_json::from_str(&text).unwrap_or(value)
}

fn bucket_info(state: &KvState, bucket: &Bucket, host: &str) -> serde_json::Value {
    let mut info = cluster::bucket_config(state, bucket);
    info["uri"] = format!("/pools/default/buckets/{}", bucket.name()).into();
    info["streamingUri"] = format!("/pools/default/bucketsStreaming/{}", bucket.name()).into();
    info["bucketType"] = "membase".into();
    info["authType"] = "sasl".into();
    info["saslPassword"] = "".into();
    info["durabilityMinLevel"] = bucket.durability().min_level().name().into();
    info["nodes"] = node_list(state);
    with_host(info, host)
}

fn node_list(state: &KvState) -> serde_json::Value {
    if let Some(topology) = state.routing.topology() {
        let nodes: Vec<serde_json::Value> = topology
            .nodes
            .iter()
            .map(|node| {
                let host = node.host_or_placeholder();
                let mgmt = node.mgmt_port.unwrap_or(node.kv_port);
                let mut entry = serde_json::json!({
                    "hostname": format!("{host}:{mgmt}"),
                    "otpNode": node.otp_node,
                    "ports": {"direct": node.kv_port},
                    "services": if node.capi_port.is_some() { serde_json::json!(["kv", "capi"]) } else { serde_json::json!(["kv"]) },
                    "status": "healthy",
                    "clusterMembership": "active",
                    "version": concat!("7.6.0-settee-", env!("CARGO_PKG_VERSION")),
                });
                if let Some(capi) = node.capi_port {
                    entry["couchApiBase"] = format!("http://{host}:{capi}/").into();
                }
                if node.this_node {
                    entry["thisNode"] = true.into();
                }
                entry
            })
            .collect();
        return nodes.into();
    }
    serde_json::json!([{
        "hostname": format!("$HOST:{}", state.config.mgmt_addr.port()),
        "ports": {"direct": state.config.kv_addr.port()},
        "services": if state.config.capi_addr.is_some() { serde_json::json!(["kv", "capi"]) } else { serde_json::json!(["kv"]) },
        "status": "healthy",
        "clusterMembership": "active",
        "version": concat!("7.6.0-settee-", env!("CARGO_PKG_VERSION")),
        "thisNode": true,
        "couchApiBase": format!(
            "http://$HOST:{}/",
            state.config.capi_addr.unwrap_or(state.config.mgmt_addr).port()
        ),
    }])
}

/// `GET /settee/stats`: the engine's counters -- records readers skipped because they do not
/// decode or are past the document limits (issue 18), for the node and per bucket. Counters
/// only grow while the node runs.
fn stats_report(state: &KvState) -> serde_json::Value {
    let (total, per_bucket) = state.engine.skip_stats();
    let buckets: serde_json::Map<String, serde_json::Value> = per_bucket
        .into_iter()
        .map(|(name, stats)| (name, serde_json::json!(stats)))
        .collect();
    let mut report = serde_json::json!(total);
    report["buckets"] = serde_json::Value::Object(buckets);
    report
}

fn unauthorized() -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::UNAUTHORIZED)
        .header(
            "WWW-Authenticate",
            "Basic realm=\"Couchbase Server Admin / REST\"",
        )
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

/// The one streamed endpoint (`bucketsStreaming`), else [`handle`]'s whole answers.
async fn route(
    state: &Arc<KvState>,
    request: Request<hyper::body::Incoming>,
    peer: IpAddr,
) -> Response<buckets::Body> {
    let path = request.uri().path().trim_end_matches('/');
    let streamed = match path.strip_prefix("/pools/default/bucketsStreaming/") {
        Some(name) if request.method() == hyper::Method::GET && !name.contains('/') => {
            Some(name.to_string())
        }
        _ => None,
    };
    let Some(name) = streamed else {
        return handle(state, request, peer).await.map(BodyExt::boxed);
    };
    let Some(user) = user_of(state, &request, peer) else {
        return unauthorized().map(BodyExt::boxed);
    };
    let visible = move |state: &KvState| {
        state
            .engine
            .bucket(&name)
            .filter(|bucket| !name.starts_with('_') && crate::access::may_use(&user, bucket))
    };
    if visible(state).is_none() {
        return json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "Requested resource not found."}),
        )
        .map(BodyExt::boxed);
    }
    let host = host_of(&request);
    buckets::streaming(state.clone(), move |state| {
        visible(state).map(|bucket| bucket_info(state, &bucket, &host))
    })
}

async fn handle(
    state: &KvState,
    request: Request<hyper::body::Incoming>,
    peer: IpAddr,
) -> Response<Full<Bytes>> {
    let Some(user) = user_of(state, &request, peer) else {
        return unauthorized();
    };
    let path = request.uri().path().trim_end_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').collect();
    if let ["", "pools", "default", "buckets", bucket, "scopes", rest @ ..] = segments.as_slice() {
        return collections::handle(state, &user, request, bucket, rest).await;
    }
    if request.method() == hyper::Method::POST
        && segments.as_slice() == ["", "pools", "default", "buckets"]
    {
        return buckets::create(state, &user, request).await;
    }
    if request.method() == hyper::Method::POST {
        match segments.as_slice() {
            ["", "controller", "failOver"] => {
                return nodes::node_change(state, &user, request, false).await
            }
            ["", "controller", "reAddNode"] => {
                return nodes::node_change(state, &user, request, true).await
            }
            ["", "settings", "autoFailover"] => {
                return nodes::set_auto_failover(state, &user, request).await
            }
            ["", "controller", "rebalance"] => {
                return rebalance::control(state, &user, request, false).await
            }
            ["", "controller", "stopRebalance"] => {
                return rebalance::control(state, &user, request, true).await
            }
            _ => {}
        }
    }
    if request.method() != hyper::Method::GET {
        return json(
            StatusCode::METHOD_NOT_ALLOWED,
            serde_json::json!({"error": "method not allowed"}),
        );
    }
    let host = host_of(&request);
    let uuid = &state.config.server_uuid;
    let visible = |name: &str| {
        state
            .engine
            .bucket(name)
            .filter(|bucket| !name.starts_with('_') && crate::access::may_use(&user, bucket))
    };
    match segments.as_slice() {
        ["", "settee", "timings"] if user.is_admin() => {
            json(StatusCode::OK, state.timings_report())
        }
        ["", "settee", "stats"] if user.is_admin() => json(StatusCode::OK, stats_report(state)),
        ["", "pools", "default", "rebalanceProgress"] => rebalance::progress(state, &user),
        ["", "metrics"] if user.is_admin() => Response::builder()
            .status(StatusCode::OK)
            .header("Content-Type", settee_metrics::text::CONTENT_TYPE)
            .body(Full::new(Bytes::from(metrics::render(state))))
            .unwrap_or_default(),
        ["", "settings", "autoFailover"] if user.is_admin() => nodes::auto_failover(state),
        ["", "settee", "timings" | "stats"]
        | ["", "metrics"]
        | ["", "settings", "autoFailover"] => json(
            StatusCode::FORBIDDEN,
            serde_json::json!({"error": "forbidden", "reason": "server admin required"}),
        ),
        ["", "pools"] => json(
            StatusCode::OK,
            serde_json::json!({
                "isAdminCreds": user.is_admin(),
                "isEnterprise": false,
                "implementationVersion": concat!("7.6.0-settee-", env!("CARGO_PKG_VERSION")),
                "componentsVersion": {},
                "uuid": uuid,
                "pools": [{
                    "name": "default",
                    "uri": format!("/pools/default?uuid={uuid}"),
                    "streamingUri": format!("/poolsStreaming/default?uuid={uuid}"),
                }],
            }),
        ),
        ["", "pools", "default"] => json(
            StatusCode::OK,
            with_host(
                serde_json::json!({
                    "name": "default",
                    "nodes": node_list(state),
                    "buckets": {"uri": format!("/pools/default/buckets?uuid={uuid}")},
                }),
                &host,
            ),
        ),
        ["", "pools", "default", "nodeServices"] => json(
            StatusCode::OK,
            with_host(cluster::node_config(state), &host),
        ),
        ["", "pools", "default", "buckets"] => {
            let buckets: Vec<serde_json::Value> = state
                .engine
                .bucket_names()
                .iter()
                .filter_map(|name| visible(name))
                .map(|bucket| bucket_info(state, &bucket, &host))
                .collect();
            json(StatusCode::OK, buckets.into())
        }
        ["", "pools", "default", "buckets", name] | ["", "pools", "default", "b", name] => {
            match visible(name) {
                Some(bucket) => json(StatusCode::OK, bucket_info(state, &bucket, &host)),
                None => json(
                    StatusCode::NOT_FOUND,
                    serde_json::json!({"error": "Requested resource not found."}),
                ),
            }
        }
        _ => json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "not found"}),
        ),
    }
}
