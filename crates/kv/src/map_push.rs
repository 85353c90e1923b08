//! The cluster map reaching clients without their asking: NOT_MY_VBUCKET replies carry the
//! config, and connections that asked in HELLO (Duplex + ClustermapChangeNotification or its
//! Brief form, kv_engine `docs/BinaryProtocol.md` "Server Commands") are pushed
//! CLUSTERMAP_CHANGE_NOTIFICATION (magic 0x82, opcode 0x01) whenever the node applies a new
//! map, so an SDK follows a failover without waiting for a NOT_MY_VBUCKET.

use settee_engine::Bucket;
use settee_kv_codec::{encode_server_request, feature, opcode, status};

use crate::session::{reply, Features, Session};
use crate::{cluster, KvState};

/// The cluster map pushes a connection asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapPush {
    #[default]
    None,
    /// Epoch and revision only: the client fetches the config itself.
    Brief,
    /// The whole config.
    Full,
}

/// Settles the map-push features of a HELLO, as kv_engine does: pushes need Duplex (without
/// it they are not accepted), and a client that asks for both forms gets the brief one.
pub(crate) fn negotiate(accepted: &mut Vec<u16>, features: &mut Features) {
    features.duplex = accepted.contains(&feature::DUPLEX);
    let brief = accepted.contains(&feature::CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF);
    let full = accepted.contains(&feature::CLUSTERMAP_CHANGE_NOTIFICATION);
    features.map_push = match (features.duplex, brief, full) {
        (false, _, _) => MapPush::None,
        (true, true, _) => MapPush::Brief,
        (true, false, true) => MapPush::Full,
        (true, false, false) => MapPush::None,
    };
    accepted.retain(|code| match *code {
        feature::CLUSTERMAP_CHANGE_NOTIFICATION => features.map_push == MapPush::Full,
        feature::CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF => features.map_push == MapPush::Brief,
        _ => true,
    });
}

/// NOT_MY_VBUCKET with the bucket's current config as its value.
pub(crate) fn not_my_vbucket(
    state: &KvState,
    bucket: &Bucket,
    frame_opcode: u8,
    opaque: u32,
    out: &mut Vec<u8>,
) {
    let config = cluster::bucket_config(state, bucket).to_string();
    reply(
        out,
        frame_opcode,
        opaque,
        status::NOT_MY_VBUCKET,
        0,
        0,
        &[],
        &[],
        config.as_bytes(),
    );
}

/// Appends a CLUSTERMAP_CHANGE_NOTIFICATION to `out` if the connection asked for pushes and
/// has not been given this node's current config revision yet. The key is the selected
/// bucket's name (empty: the node-level config); the extras are the epoch and the revision
/// (two signed 64-bit integers); the value, for a full push, is the config.
pub(crate) fn push(session: &mut Session, out: &mut Vec<u8>) {
    let mode = session.features.map_push;
    if mode == MapPush::None {
        return;
    }
    let state = session.state().clone();
    let bucket = session.bucket().cloned();
    let (epoch, rev) = cluster::config_version(&state, bucket.as_deref());
    if rev <= session.pushed_rev {
        return;
    }
    session.pushed_rev = rev;
    let mut extras = [0u8; 16];
    extras[..8].copy_from_slice(&i64::try_from(epoch).unwrap_or(i64::MAX).to_be_bytes());
    extras[8..].copy_from_slice(&i64::try_from(rev).unwrap_or(i64::MAX).to_be_bytes());
    let name = bucket
        .as_ref()
        .map_or("", |bucket| bucket.name())
        .to_owned();
    let value = match mode {
        MapPush::Full => {
            let config = match &bucket {
                Some(bucket) => cluster::bucket_config(&state, bucket),
                None => cluster::node_config(&state),
            }
            .to_string();
            match session.local_host() {
                Some(host) => config.replace("$HOST", host),
                None => config,
            }
        }
        MapPush::Brief | MapPush::None => String::new(),
    };
    encode_server_request(
        out,
        opcode::CLUSTERMAP_CHANGE_NOTIFICATION,
        0,
        &extras,
        name.as_bytes(),
        value.as_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiated(asked: &[u16]) -> (Vec<u16>, MapPush) {
        let mut accepted = asked.to_vec();
        let mut features = Features::default();
        negotiate(&mut accepted, &mut features);
        (accepted, features.map_push)
    }

    #[test]
    fn pushes_need_duplex_and_brief_wins() {
        use feature::{CLUSTERMAP_CHANGE_NOTIFICATION as FULL, DUPLEX};
        let brief = feature::CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF;
        assert_eq!(negotiated(&[FULL]), (vec![], MapPush::None));
        assert_eq!(
            negotiated(&[DUPLEX, FULL]),
            (vec![DUPLEX, FULL], MapPush::Full)
        );
        assert_eq!(
            negotiated(&[FULL, DUPLEX, brief]),
            (vec![DUPLEX, brief], MapPush::Brief)
        );
        assert_eq!(negotiated(&[DUPLEX]), (vec![DUPLEX], MapPush::None));
    }
}
