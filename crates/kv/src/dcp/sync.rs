//! Sync replication on a producer connection (docs/format/replica.md, "Sync replication"): a
//! consumer node that set `consumer_name` and `enable_sync_writes` counts as streaming each
//! vbucket it has a stream of, for the bucket's durability tracker, until the stream or the
//! connection ends; its SEQNO_ACKNOWLEDGED messages are that node's acknowledgements.

use std::collections::BTreeSet;
use std::sync::Arc;

use settee_engine::durability::{NodeId, Tracker};

/// The vbuckets this connection's consumer node is counted as streaming.
pub(crate) struct SyncStreams {
    tracker: Arc<Tracker>,
    /// Set by `consumer_name`.
    pub node: Option<NodeId>,
    /// Set by `enable_sync_writes=true` (after `consumer_name`).
    pub enabled: bool,
    counted: BTreeSet<u16>,
}

impl SyncStreams {
    pub fn new(tracker: Arc<Tracker>) -> SyncStreams {
        SyncStreams {
            tracker,
            node: None,
            enabled: false,
            counted: BTreeSet::new(),
        }
    }

    /// The node whose acknowledgements this connection carries, once sync writes are on.
    pub fn acknowledger(&self) -> Option<NodeId> {
        self.node.filter(|_| self.enabled)
    }

    /// Counts exactly the vbuckets of `open` (the connection's streams) as streaming.
    pub fn follow(&mut self, open: impl Iterator<Item = u16>) {
        let Some(node) = self.acknowledger() else {
            return;
        };
        let open: BTreeSet<u16> = open.collect();
        if open == self.counted {
            return;
        }
        for &vb in self.counted.difference(&open) {
            self.tracker.stream_closed(vb, node);
        }
        for &vb in open.difference(&self.counted) {
            self.tracker.stream_opened(vb, node);
        }
        self.counted = open;
    }

    /// The consumer acknowledged `seqno` of `vb`; ignored for a vbucket it does not stream.
    pub fn ack(&self, vb: u16, seqno: u64) {
        if let Some(node) = self.acknowledger() {
            if self.counted.contains(&vb) {
                self.tracker.ack(vb, node, seqno);
            }
        }
    }
}

impl Drop for SyncStreams {
    fn drop(&mut self) {
        if let Some(node) = self.acknowledger() {
            for &vb in &self.counted {
                self.tracker.stream_closed(vb, node);
            }
        }
    }
}
