//! The cluster map as the KV door routes by it: a `settee_kv::routing::Topology` made from
//! each map the node applies (settee-kv knows nothing of the map's types or of Raft).
//!
//! Serving nodes are the active members in id order (a config's `serverList`); each vbucket's
//! row is `[active, replica...]` as indexes into that list, -1 where the map names no serving
//! node (no active after an unsafe failover, a failed replica, fewer nodes than replicas).

use std::collections::HashMap;
use std::net::SocketAddr;

use settee_cluster::map::{Bucket, ClusterMap, NodeId};
use settee_kv::routing::{BucketMap, NodeEntry, Topology};

/// The host and port of a "host:port" address; `None` for the host when it is every interface
/// (configs then say `$HOST`, the address the client used).
fn split_addr(addr: &str) -> (Option<String>, Option<u16>) {
    if let Ok(socket) = addr.parse::<SocketAddr>() {
        let ip = socket.ip();
        return (
            (!ip.is_unspecified()).then(|| ip.to_string()),
            Some(socket.port()),
        );
    }
    match addr.rsplit_once(':') {
        Some((host, port)) => (Some(host.to_owned()), port.parse().ok()),
        None => (None, None),
    }
}

/// The topology of `map` seen from node `this`. `routes(bucket)` says whether the node routes
/// that bucket by the map: false for a bucket whose local copy has another vbucket count (it
/// was here before the node joined), which then stays a local bucket.
pub fn topology_of(map: &ClusterMap, this: NodeId, routes: impl Fn(&Bucket) -> bool) -> Topology {
    let members: Vec<_> = map.active_members().collect();
    let index: HashMap<NodeId, i32> = members
        .iter()
        .enumerate()
        .filter_map(|(position, member)| Some((member.id, i32::try_from(position).ok()?)))
        .collect();
    let nodes = members
        .iter()
        .map(|member| {
            let (host, kv_port) = split_addr(&member.kv_addr);
            NodeEntry {
                host,
                kv_port: kv_port.unwrap_or(0),
                mgmt_port: split_addr(&member.mgmt_addr).1,
                capi_port: split_addr(&member.http_addr).1,
                tls_ports: settee_kv::routing::TlsPorts {
                    kv: Some(member.tls.kv).filter(|port| *port != 0),
                    capi: Some(member.tls.https).filter(|port| *port != 0),
                    mgmt: Some(member.tls.mgmt).filter(|port| *port != 0),
                },
                this_node: member.id == this,
                otp_node: crate::cluster::member_name(member.id, &member.cluster_addr),
            }
        })
        .collect();
    let slot = |node: Option<NodeId>| node.and_then(|id| index.get(&id).copied()).unwrap_or(-1);
    let buckets = map
        .buckets
        .values()
        .filter(|bucket| routes(bucket))
        .map(|bucket| {
            let rows = bucket
                .vbuckets
                .iter()
                .map(|entry| {
                    let replicas = (0..usize::from(bucket.replicas))
                        .map(|k| slot(entry.replicas.get(k).copied()));
                    std::iter::once(slot(entry.active))
                        .chain(replicas)
                        .collect()
                })
                .collect();
            let routed = BucketMap {
                vbucket_count: bucket.vbucket_count,
                replicas: bucket.replicas,
                rows,
            };
            (bucket.name.clone(), routed)
        })
        .collect();
    Topology {
        rev: map.revision,
        nodes,
        buckets,
    }
}

#[cfg(test)]
mod tests {
    use settee_cluster::command::{Applied, BucketSettings, Command};
    use settee_cluster::map::{Durability, Member, MemberState};
    use settee_cluster::placement;
    use settee_kv::cluster::{clustered_bucket_config, BucketIdentity};
    use settee_kv::routing::Routing;

    use super::*;

    fn kv_config() -> settee_kv::KvConfig {
        let addr: SocketAddr = "127.0.0.1:12000".parse().expect("address");
        settee_kv::KvConfig {
            kv_addr: addr,
            mgmt_addr: addr,
            capi_addr: None,
            kv_tls_addr: None,
            capi_tls_addr: None,
            mgmt_tls_addr: None,
            max_value_bytes: 1,
            allow_plain: false,
            server_uuid: String::new(),
            slow_op_after: std::time::Duration::from_secs(1),
            bulk_lane: None,
            limits: settee_kv::KvLimits::default(),
        }
    }

    /// Three members (ids 10, 20, 30 on 127.0.0.{1,2,3}) and bucket "b": 64 vbuckets, 1
    /// replica, placed as the orchestrator places it.
    fn map() -> ClusterMap {
        let mut map = ClusterMap::default();
        for (k, id) in [10u64, 20, 30].into_iter().enumerate() {
            let host = format!("127.0.0.{}", k + 1);
            let member = Member::joining(
                id,
                format!("{host}:4000"),
                format!("{host}:5984"),
                format!("{host}:11210"),
            )
            .with_mgmt_addr(format!("{host}:8091"));
            // Node 10 serves TLS; the others do not.
            let member = if id == 10 {
                member.with_tls(settee_cluster::map::TlsPorts {
                    kv: 11207,
                    https: 6984,
                    mgmt: 18091,
                })
            } else {
                member
            };
            assert!(matches!(
                map.apply(&Command::AddMember(member)),
                Applied::Revision(_)
            ));
        }
        let settings = BucketSettings {
            name: "b".into(),
            vbucket_count: 64,
            replicas: 1,
            durability_min: Durability::None,
            copies: Default::default(),
        };
        let bucket = placement::place(&settings, &[10, 20, 30]);
        assert!(matches!(
            map.apply(&Command::CreateBucket(bucket)),
            Applied::Revision(4)
        ));
        map
    }

    fn config_from(map: &ClusterMap, this: NodeId) -> serde_json::Value {
        let topology = topology_of(map, this, |_| true);
        let identity = BucketIdentity {
            name: "b",
            uuid: "00",
            manifest_uid: 0,
        };
        clustered_bucket_config(&topology, &topology.buckets["b"], &identity, &kv_config())
    }

    #[test]
    fn the_config_of_three_nodes_one_replica_64_vbuckets() {
        let map = map();
        let config = config_from(&map, 20);
        assert_eq!(config["rev"], 4);
        assert_eq!(config["revEpoch"], 1);
        let server_map = &config["vBucketServerMap"];
        assert_eq!(server_map["numReplicas"], 1);
        assert_eq!(
            server_map["serverList"],
            serde_json::json!(["127.0.0.1:11210", "127.0.0.2:11210", "127.0.0.3:11210"])
        );
        let rows = server_map["vBucketMap"].as_array().expect("rows");
        assert_eq!(rows.len(), 64);
        let ids = [10u64, 20, 30];
        for (vb, row) in rows.iter().enumerate() {
            let entry = &map.buckets["b"].vbuckets[vb];
            let expected: Vec<i64> = entry
                .chain()
                .map(|id| ids.iter().position(|known| *known == id).expect("a member") as i64)
                .collect();
            assert_eq!(row, &serde_json::json!(expected), "vbucket {vb}");
        }
        // Actives are spread evenly: 22, 21, 21.
        let mut actives = [0; 3];
        for row in rows {
            actives[row[0].as_u64().expect("an index") as usize] += 1;
        }
        assert_eq!(actives, [22, 21, 21]);
        let nodes_ext = config["nodesExt"].as_array().expect("nodesExt");
        assert_eq!(nodes_ext.len(), 3);
        let this: Vec<bool> = nodes_ext
            .iter()
            .map(|node| node["thisNode"] == true)
            .collect();
        assert_eq!(this, [false, true, false]);
        assert_eq!(nodes_ext[2]["hostname"], "127.0.0.3");
        assert_eq!(
            nodes_ext[2]["services"],
            serde_json::json!({"kv": 11210, "mgmt": 8091, "capi": 5984})
        );
        // Another node's TLS ports, as its member recorded them.
        assert_eq!(
            nodes_ext[0]["services"],
            serde_json::json!({"kv": 11210, "mgmt": 8091, "capi": 5984,
                "kvSSL": 11207, "capiSSL": 6984, "mgmtSSL": 18091})
        );
        assert_eq!(config["nodes"][0]["hostname"], "127.0.0.1:8091");
        assert_eq!(
            config["nodes"][1]["couchApiBase"],
            "http://127.0.0.2:5984/b"
        );
    }

    #[test]
    fn a_failed_node_leaves_the_server_list_and_its_copies_are_minus_one() {
        let mut map = map();
        // Node 30 fails; its actives go to their replicas (the first in each chain).
        let changes = map.buckets["b"]
            .vbuckets
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry.active == Some(30))
            .map(|(vb, entry)| settee_cluster::command::VbucketChange {
                bucket: "b".into(),
                vbucket: vb as u16,
                expected_epoch: entry.epoch,
                entry: settee_cluster::map::Vbucket {
                    active: entry.replicas.first().copied(),
                    replicas: vec![30],
                    epoch: 0,
                },
            })
            .collect();
        let failover = Command::Failover { node: 30, changes };
        assert_eq!(map.apply(&failover), Applied::Revision(5));
        assert_eq!(map.members[&30].state, MemberState::Failed);
        let config = config_from(&map, 10);
        assert_eq!(config["rev"], 5);
        let server_map = &config["vBucketServerMap"];
        assert_eq!(server_map["serverList"].as_array().map(Vec::len), Some(2));
        for row in server_map["vBucketMap"].as_array().expect("rows") {
            let active = row[0].as_i64().expect("an index");
            assert!(active == 0 || active == 1, "{row}");
            assert!(row[1] != row[0]);
            assert!((-1..=1).contains(&row[1].as_i64().expect("an index")));
        }
    }

    #[test]
    fn routing_bits_follow_the_map_this_node_sees() {
        let map = map();
        let routing = Routing::default();
        routing.publish(topology_of(&map, 30, |_| true));
        let bits = routing.bits_for("b").expect("a cluster node");
        for (vb, entry) in map.buckets["b"].vbuckets.iter().enumerate() {
            assert_eq!(
                bits.is_active(vb as u16),
                entry.active == Some(30),
                "vb {vb}"
            );
        }
        // A bucket the node does not route by the map is served here whole.
        routing.publish(topology_of(&map, 30, |_| false));
        assert!((0..64).all(|vb| bits.is_active(vb)));
    }
}
