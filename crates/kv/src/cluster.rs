//! The documents that describe the cluster to a client: the terse bucket config (vbucket map),
//! the node-level config, the error map and the collections manifest. On a cluster node, a
//! bucket of the cluster map gets the cluster's config (every serving node, the real vbucket
//! map, `rev` = the map's revision: [`clustered_bucket_config`]); anything else, and every
//! bucket of a node without cluster flags, gets one node's config: every vbucket active here,
//! no replicas.

use serde_json::{json, Value};
use settee_engine::Bucket;
use settee_kv_codec::status;

use crate::routing::{BucketMap, Topology, REV_EPOCH};
use crate::{KvConfig, KvState};

/// The config revision of a single node, whose map never changes.
const CONFIG_REV: u64 = 1;

/// What Couchbase 7.6 lists for a couchbase bucket that settee can honour.
const BUCKET_CAPABILITIES: [&str; 10] = [
    "collections",
    "durableWrite",
    "xattr",
    "cccp",
    "nodesExt",
    "couchapi",
    "dcp",
    "cbhello",
    "touch",
    "cas",
];

/// The bucket config a client of this node gets for `bucket`.
pub fn bucket_config(state: &KvState, bucket: &Bucket) -> Value {
    let topology = state.routing.topology();
    let clustered = topology.as_ref().and_then(|topology| {
        let map = topology
            .buckets
            .get(bucket.name())
            .filter(|map| map.vbucket_count == bucket.vbuckets())?;
        Some((topology, map))
    });
    match clustered {
        Some((topology, map)) => clustered_bucket_config(
            topology,
            map,
            &BucketIdentity {
                name: bucket.name(),
                uuid: &format!("{:016x}", bucket.vbucket_uuid(u16::MAX)),
                manifest_uid: bucket.manifest().uid(),
            },
            &state.config,
        ),
        None => single_bucket_config(bucket, &state.config),
    }
}

/// GET_CLUSTER_CONFIG before a bucket is selected.
pub fn node_config(state: &KvState) -> Value {
    match state.routing.topology() {
        Some(topology) => json!({
            "rev": topology.rev,
            "revEpoch": REV_EPOCH,
            "nodesExt": clustered_nodes_ext(&topology, &state.config),
            "clusterCapabilitiesVer": [1, 0],
            "clusterCapabilities": {},
        }),
        None => single_node_config(&state.config),
    }
}

/// A config's `rev` and `revEpoch` for `bucket` (None: no bucket), as pushed to clients.
pub fn config_version(state: &KvState, bucket: Option<&Bucket>) -> (u64, u64) {
    match state.routing.topology() {
        Some(topology)
            if bucket.is_none_or(|bucket| topology.buckets.contains_key(bucket.name())) =>
        {
            (REV_EPOCH, topology.rev)
        }
        _ => (1, CONFIG_REV),
    }
}

/// What a bucket config says of the bucket beside its map.
pub struct BucketIdentity<'a> {
    pub name: &'a str,
    pub uuid: &'a str,
    pub manifest_uid: u64,
}

/// Every serving node's services: the ports of its addresses and the TLS ports it recorded
/// (this node's from its own settings).
fn clustered_nodes_ext(topology: &Topology, config: &KvConfig) -> Value {
    let nodes: Vec<Value> = topology
        .nodes
        .iter()
        .map(|node| {
            let mut services = json!({"kv": node.kv_port});
            if let Some(mgmt) = node.mgmt_port {
                services["mgmt"] = mgmt.into();
            }
            if let Some(capi) = node.capi_port {
                services["capi"] = capi.into();
            }
            if node.this_node {
                add_tls_services(&mut services, config);
            } else {
                let tls = node.tls_ports;
                for (name, port) in [
                    ("kvSSL", tls.kv),
                    ("capiSSL", tls.capi),
                    ("mgmtSSL", tls.mgmt),
                ] {
                    if let Some(port) = port {
                        services[name] = port.into();
                    }
                }
            }
            let mut entry = json!({
                "services": services,
                "hostname": node.host.clone().unwrap_or_else(|| "$HOST".into()),
            });
            if node.this_node {
                entry["thisNode"] = true.into();
            }
            entry
        })
        .collect();
    nodes.into()
}

/// The terse config of a bucket in the cluster map: `serverList` and `nodesExt` list the
/// serving nodes in member order, `vBucketMap` rows are `[active, replica...]` indexes into
/// `serverList` (-1: none), `rev` is the map's revision.
pub fn clustered_bucket_config(
    topology: &Topology,
    map: &BucketMap,
    bucket: &BucketIdentity<'_>,
    config: &KvConfig,
) -> Value {
    let width = 1 + usize::from(map.replicas);
    let rows: Vec<Vec<i32>> = map
        .rows
        .iter()
        .map(|row| {
            (0..width)
                .map(|k| row.get(k).copied().unwrap_or(-1))
                .collect()
        })
        .collect();
    let server_list: Vec<String> = topology
        .nodes
        .iter()
        .map(|node| format!("{}:{}", node.host_or_placeholder(), node.kv_port))
        .collect();
    let nodes: Vec<Value> = topology
        .nodes
        .iter()
        .map(|node| {
            let host = node.host_or_placeholder();
            let mgmt = node.mgmt_port.unwrap_or(node.kv_port);
            let mut entry = json!({
                "hostname": format!("{host}:{mgmt}"),
                "ports": {"direct": node.kv_port},
            });
            if let Some(capi) = node.capi_port {
                entry["couchApiBase"] = format!("http://{host}:{capi}/{}", bucket.name).into();
            }
            entry
        })
        .collect();
    json!({
        "rev": topology.rev,
        "revEpoch": REV_EPOCH,
        "name": bucket.name,
        "uuid": bucket.uuid,
        "nodeLocator": "vbucket",
        "collectionsManifestUid": format!("{:x}", bucket.manifest_uid),
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": BUCKET_CAPABILITIES,
        "vBucketServerMap": {
            "hashAlgorithm": "CRC",
            "numReplicas": map.replicas,
            "serverList": server_list,
            "vBucketMap": rows,
        },
        "nodes": nodes,
        "nodesExt": clustered_nodes_ext(topology, config),
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {},
    })
}

fn add_tls_services(services: &mut Value, config: &KvConfig) {
    if let Some(kv_tls) = config.kv_tls_addr {
        services["kvSSL"] = kv_tls.port().into();
    }
    if let Some(capi_tls) = config.capi_tls_addr {
        services["capiSSL"] = capi_tls.port().into();
    }
    if let Some(mgmt_tls) = config.mgmt_tls_addr {
        services["mgmtSSL"] = mgmt_tls.port().into();
    }
}

fn nodes_ext(config: &KvConfig) -> serde_json::Value {
    let mut services =
        serde_json::json!({"kv": config.kv_addr.port(), "mgmt": config.mgmt_addr.port()});
    if let Some(capi) = config.capi_addr {
        services["capi"] = capi.port().into();
    }
    add_tls_services(&mut services, config);
    serde_json::json!([{
        "services": services,
        "thisNode": true,
        "hostname": "$HOST",
    }])
}

/// One node's terse bucket config (GET_CLUSTER_CONFIG and NOT_MY_VBUCKET replies); `$HOST` is
/// replaced by each client with the address it connected to.
fn single_bucket_config(bucket: &Bucket, config: &KvConfig) -> serde_json::Value {
    let kv = config.kv_addr.port();
    let map: Vec<[u8; 1]> = (0..bucket.vbuckets()).map(|_| [0]).collect();
    serde_json::json!({
        "rev": CONFIG_REV,
        "revEpoch": 1,
        "name": bucket.name(),
        "uuid": format!("{:016x}", bucket.vbucket_uuid(u16::MAX)),
        "nodeLocator": "vbucket",
        "collectionsManifestUid": format!("{:x}", bucket.manifest().uid()),
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": BUCKET_CAPABILITIES,
        "vBucketServerMap": {
            "hashAlgorithm": "CRC",
            "numReplicas": 0,
            "serverList": [format!("$HOST:{kv}")],
            "vBucketMap": map,
        },
        "nodes": [{
            "couchApiBase": format!(
                "http://$HOST:{}/{}",
                config.capi_addr.unwrap_or(config.mgmt_addr).port(),
                bucket.name()
            ),
            "hostname": format!("$HOST:{}", config.mgmt_addr.port()),
            "ports": {"direct": kv},
        }],
        "nodesExt": nodes_ext(config),
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {},
    })
}

/// One node's GET_CLUSTER_CONFIG before a bucket is selected.
fn single_node_config(config: &KvConfig) -> serde_json::Value {
    serde_json::json!({
        "rev": CONFIG_REV,
        "revEpoch": 1,
        "nodesExt": nodes_ext(config),
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {},
    })
}

/// The error map (kv_engine `docs/ErrorMap.md`, version 2): what each status settee sends
/// means and how a client should react to it.
pub fn error_map(version: u16) -> serde_json::Value {
    let entries: &[(u16, &str, &str, &[&str])] = &[
        (status::SUCCESS, "SUCCESS", "Success", &["success"]),
        (
            status::KEY_ENOENT,
            "KEY_ENOENT",
            "Not Found",
            &["item-only"],
        ),
        (
            status::KEY_EEXISTS,
            "KEY_EEXISTS",
            "key already exists, or CAS mismatch",
            &["item-only"],
        ),
        (
            status::E2BIG,
            "E2BIG",
            "Value is too big",
            &["invalid-input"],
        ),
        (
            status::EINVAL,
            "EINVAL",
            "Invalid packet",
            &["internal", "invalid-input"],
        ),
        (
            status::NOT_STORED,
            "NOT_STORED",
            "Not Stored",
            &["item-only"],
        ),
        (
            status::DELTA_BADVAL,
            "DELTA_BADVAL",
            "Existing document not a number",
            &["item-only", "invalid-input"],
        ),
        (
            status::NOT_MY_VBUCKET,
            "NOT_MY_VBUCKET",
            "Server which received this command is not the owner of the vbucket",
            &["fetch-config", "retry-now"],
        ),
        (
            status::NO_BUCKET,
            "NO_BUCKET",
            "Not connected to a bucket",
            &["conn-state-invalidated"],
        ),
        (
            status::LOCKED,
            "LOCKED",
            "Requested resource is locked",
            &["item-locked", "item-only"],
        ),
        (
            status::AUTH_STALE,
            "AUTH_STALE",
            "Authentication context is stale",
            &["conn-state-invalidated", "auth"],
        ),
        (
            status::AUTH_ERROR,
            "AUTH_ERROR",
            "Authentication failed",
            &["conn-state-invalidated", "auth"],
        ),
        (
            status::AUTH_CONTINUE,
            "AUTH_CONTINUE",
            "Authentication continue",
            &["conn-state-invalidated", "auth", "special-handling"],
        ),
        (
            status::ERANGE,
            "ERANGE",
            "Outside range",
            &["invalid-input"],
        ),
        (
            status::EACCESS,
            "EACCESS",
            "No access",
            &["conn-state-invalidated", "auth"],
        ),
        (
            status::UNKNOWN_FRAME_INFO,
            "UNKNOWN_FRAME_INFO",
            "Unknown frame info",
            &["invalid-input"],
        ),
        (
            status::UNKNOWN_COMMAND,
            "UNKNOWN_COMMAND",
            "Unknown command",
            &["support"],
        ),
        (
            status::ENOMEM,
            "ENOMEM",
            "Out of memory",
            &["temp", "retry-later"],
        ),
        (
            status::NOT_SUPPORTED,
            "NOT_SUPPORTED",
            "Not supported",
            &["support"],
        ),
        (
            status::EINTERNAL,
            "EINTERNAL",
            "Internal error",
            &["internal"],
        ),
        (
            status::EBUSY,
            "EBUSY",
            "Server too busy",
            &["temp", "retry-later"],
        ),
        (
            status::ETMPFAIL,
            "ETMPFAIL",
            "Temporary failure",
            &["temp", "retry-later"],
        ),
        (
            status::UNKNOWN_COLLECTION,
            "UNKNOWN_COLLECTION",
            "Unknown collection",
            &["fetch-config"],
        ),
        (
            status::UNKNOWN_SCOPE,
            "UNKNOWN_SCOPE",
            "Unknown scope",
            &["fetch-config"],
        ),
        (
            status::DURABILITY_INVALID_LEVEL,
            "DURABILITY_INVALID_LEVEL",
            "Invalid durability level",
            &["invalid-input"],
        ),
        (
            status::DURABILITY_IMPOSSIBLE,
            "DURABILITY_IMPOSSIBLE",
            "Durability impossible",
            &["item-only"],
        ),
        (
            status::SYNC_WRITE_IN_PROGRESS,
            "SYNC_WRITE_IN_PROGRESS",
            "Another sync write to the key is in progress",
            &["temp", "item-locked", "retry-later"],
        ),
        (
            status::SYNC_WRITE_RE_COMMIT_IN_PROGRESS,
            "SYNC_WRITE_RE_COMMIT_IN_PROGRESS",
            "A sync write to the key is not durable yet; retry",
            &["temp", "item-locked", "retry-later"],
        ),
        (
            status::SYNC_WRITE_AMBIGUOUS,
            "SYNC_WRITE_AMBIGUOUS",
            "The sync write was not acknowledged by a majority in time; it may or may not be durable",
            &["special-handling"],
        ),
        (
            status::SUBDOC_PATH_ENOENT,
            "SUBDOC_PATH_ENOENT",
            "Subdoc: Path not does not exist",
            &["subdoc", "item-only"],
        ),
        (
            status::SUBDOC_MULTI_PATH_FAILURE,
            "SUBDOC_MULTI_PATH_FAILURE",
            "Subdoc: One or more paths in a multi-path command failed",
            &["subdoc", "item-only"],
        ),
    ];
    let errors: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(code, name, desc, attrs)| {
            (
                format!("{code:x}"),
                serde_json::json!({"name": name, "desc": desc, "attrs": attrs}),
            )
        })
        .collect();
    serde_json::json!({"version": version.clamp(1, 2), "revision": 1, "errors": errors})
}
