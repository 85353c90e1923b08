//! CouchDB's `w` on a document write (PUT/POST/DELETE of a document, `_bulk_docs`), mapped onto
//! the bucket's sync writes (docs/format/replica.md, "The HTTP door's `w`"): answered 201 (200
//! for a DELETE) when met, 202 Accepted (`ok: true`) when not.
//!
//! - A bucket with no replicas (one node, or a cluster bucket with n=1) keeps one copy: a `w`
//!   above 1 is unmet at once, as on a single CouchDB node with n=1; nothing is waited for.
//! - With replicas, `w=1` asks for nothing beyond the active's fsync; any other `w`, or none
//!   (CouchDB's default is a quorum), asks for `majority`; the bucket's minimum level raises
//!   either. A `w` above the copies the bucket keeps is unmet. A majority write is met when a
//!   majority of each saved document's vbucket chain acknowledged it within the default
//!   durability timeout (one deadline for the whole request); unmet at once when too few
//!   replicas stream to form one (the documents are written all the same, as CouchDB writes
//!   them and answers 202).

use std::time::Instant;

use serde_json::Value;
use settee_engine::durability::{Level, Waited, DURABILITY_TIMEOUT_DEFAULT};
use settee_engine::Bucket;

use crate::request::Req;

/// Whether the write quorum of a request that saved `saved` (each document's key and seqno)
/// in `bucket` is unmet: the 202 answer.
pub async fn unmet(
    req: &Req,
    body_w: Option<&Value>,
    bucket: &Bucket,
    saved: &[(&[u8], u64)],
) -> bool {
    let w = req.write_quorum(body_w);
    let tracker = bucket.durability();
    let copies = i64::from(tracker.replicas()) + 1;
    if copies == 1 {
        return w.is_some_and(|w| w > 1);
    }
    if w.is_some_and(|w| w > copies) {
        return true;
    }
    let asked = if w == Some(1) {
        Level::None
    } else {
        Level::Majority
    };
    if !tracker.effective(asked).is_sync() {
        return false;
    }
    let deadline = Instant::now() + DURABILITY_TIMEOUT_DEFAULT;
    for (key, seqno) in saved {
        let vbucket = bucket.vbucket_of(key);
        // A replica that never streamed yet (a database just created) is waited for; one
        // whose stream ended (a node down) is not: 202 at once.
        let left = deadline.saturating_duration_since(Instant::now());
        if !tracker.wait_possible(vbucket, left).await {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if tracker.wait(vbucket, *seqno, left).await == Waited::Ambiguous {
            return true;
        }
    }
    false
}
