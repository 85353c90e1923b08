//! The documents that describe the cluster to a client: the terse bucket config (vbucket map),
//! the node-level config, the error map and the collections manifest. One node today, so
//! every vbucket is active here and there are no replicas.

use settee_engine::Bucket;
use settee_kv_codec::status;

use crate::KvConfig;

/// Cluster map revision. Constant until the cluster map (openraft) can change it.
const CONFIG_REV: u64 = 1;

fn nodes_ext(config: &KvConfig) -> serde_json::Value {
    let mut services =
        serde_json::json!({"kv": config.kv_addr.port(), "mgmt": config.mgmt_addr.port()});
    if let Some(capi) = config.capi_addr {
        services["capi"] = capi.port().into();
    }
    if let Some(kv_tls) = config.kv_tls_addr {
        services["kvSSL"] = kv_tls.port().into();
    }
    if let Some(capi_tls) = config.capi_tls_addr {
        services["capiSSL"] = capi_tls.port().into();
    }
    if let Some(mgmt_tls) = config.mgmt_tls_addr {
        services["mgmtSSL"] = mgmt_tls.port().into();
    }
    serde_json::json!([{
        "services": services,
        "thisNode": true,
        "hostname": "$HOST",
    }])
}

/// The terse bucket config of GET_CLUSTER_CONFIG and NOT_MY_VBUCKET replies; `$HOST` is
/// replaced by each client with the address it connected to.
pub fn bucket_config(bucket: &Bucket, config: &KvConfig) -> serde_json::Value {
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
        "bucketCapabilities": ["collections", "durableWrite", "xattr", "cccp", "nodesExt", "couchapi", "dcp", "cbhello", "touch", "cas"],
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

/// GET_CLUSTER_CONFIG before a bucket is selected.
pub fn node_config(config: &KvConfig) -> serde_json::Value {
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
