//! Design documents a cluster node must know beyond its own vbuckets
//! (docs/format/cluster-map.md, "What every node does with the committed map"): a bucket's
//! design documents gathered from every node ([`Bucket::set_shared_designs`]), which the
//! write validator reads with the local ones, and the listener told of every design document
//! written here ([`DesignsListener`]), which the write's answer waits for. The engine does not
//! know the cluster: the binary sets both.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::bucket::Bucket;

/// One design document gathered from another node: its collection, id, revision and JSON
/// (`_id` and `_rev` included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedDesign {
    pub collection: u32,
    pub id: String,
    pub rev: String,
    pub json: Vec<u8>,
}

/// What a design document write waits for before it is answered.
pub type DesignsWritten = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Told after a design document of `bucket` was written here and is durable, and asked
/// before a write to `bucket` is validated.
pub trait DesignsListener: Send + Sync {
    /// `None`: nothing to wait for (a bucket this node has alone).
    fn designs_written(&self, bucket: &str) -> Option<DesignsWritten>;
    /// What to wait for before validating a write to `bucket` (`None`: the design documents
    /// this node knows are current). Called on every document write: must be cheap.
    fn designs_current(&self, bucket: &str) -> Option<DesignsWritten>;
}

/// The node's listener, if one is set.
pub(crate) type DesignsSlot = parking_lot::RwLock<Option<Arc<dyn DesignsListener>>>;

impl Bucket {
    /// The design documents last gathered from the cluster for this bucket (empty on a
    /// single node).
    pub fn shared_designs(&self) -> Arc<Vec<SharedDesign>> {
        self.shared_designs.read().clone()
    }

    /// Replaces the gathered design documents; what is derived from design documents is
    /// derived again (the design stamp moves).
    pub fn set_shared_designs(&self, designs: Vec<SharedDesign>) {
        *self.shared_designs.write() = Arc::new(designs);
        self.access.epoch.advance_designs();
    }

    /// Before a write is validated: the listener's wait, if any.
    pub(crate) async fn designs_current(&self) {
        let listener = self.designs.read().clone();
        if let Some(wait) = listener.and_then(|listener| listener.designs_current(self.name())) {
            wait.await;
        }
    }

    /// After a committed design document write: the listener's wait, if any.
    pub(crate) async fn designs_written(&self) {
        let listener = self.designs.read().clone();
        if let Some(wait) = listener.and_then(|listener| listener.designs_written(self.name())) {
            wait.await;
        }
    }
}
