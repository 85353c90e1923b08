//! The reserved login other nodes of the cluster use on the KV port (docs/format/replica.md):
//! a server admin named [`NODE_USER`] whose password is derived from the cluster secret, so
//! only a process that knows the secret can log in as it (and stream DCP with its records).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The node account's name: a `_users` name cannot start with `_`, so no account can take it.
pub const NODE_USER: &str = "_settee_node";
const PASSWORD_MESSAGE: &[u8] = b"settee kv node password v1";

const UUID_MESSAGE: &[u8] = b"settee cluster server uuid v1";

/// The node account's password for `secret`: hex(HMAC-SHA256(secret, message)).
pub fn node_password(secret: &str) -> String {
    hex_mac(secret, PASSWORD_MESSAGE)
}

/// The server uuid every node of the cluster with `secret` shows (`GET /` `uuid`, `[couchdb]
/// uuid`), as CouchDB asks of a cluster's nodes: the first 16 bytes of HMAC-SHA256(secret,
/// message), in hex. PouchDB names a replication by it, so a replication started through one
/// node finds its checkpoint through another.
pub fn cluster_uuid(secret: &str) -> String {
    let mut uuid = hex_mac(secret, UUID_MESSAGE);
    uuid.truncate(32);
    uuid
}

fn hex_mac(secret: &str, message: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        // HMAC takes a key of any length; unreachable, but never a panic.
        return String::new();
    };
    mac.update(message);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_depend_on_the_secret_only() {
        let password = node_password("the secret of the test cluster");
        assert_eq!(password.len(), 64);
        assert!(password.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_eq!(password, node_password("the secret of the test cluster"));
        assert_ne!(password, node_password("another secret of sixteen bytes"));
        let uuid = cluster_uuid("the secret of the test cluster");
        assert_eq!(uuid.len(), 32);
        assert_eq!(uuid, cluster_uuid("the secret of the test cluster"));
        assert_ne!(uuid, cluster_uuid("another secret of sixteen bytes"));
        assert!(
            !password.starts_with(&uuid),
            "not a prefix of the node password"
        );
    }
}
