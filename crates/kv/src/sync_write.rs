//! Durable KV writes (docs/format/replica.md, "Sync writes on the active"; kv-frames.md): a
//! mutation whose durability framing extra — raised to the bucket's minimum level — asks for
//! more than `none` is refused when no majority can be formed (DURABILITY_IMPOSSIBLE: after
//! waiting within the write's timeout for replicas that never streamed from this node yet, as
//! after a rebalance's takeover, and a second for those whose stream ended) or when another
//! sync write to its key waits (SYNC_WRITE_IN_PROGRESS); otherwise it is
//! written like any other and its answer waits until a majority of the vbucket's chain holds
//! its seqno, or answers SYNC_WRITE_AMBIGUOUS when the timeout passes first. A write without
//! durability to a key with a sync write waiting answers SYNC_WRITE_IN_PROGRESS too, as on
//! Couchbase Server.
//!
//! The wait is the write's own future: other requests of an unordered connection go on; on an
//! ordered connection the replies behind it wait (replies leave in request order), as they do
//! behind any write's fsync.

use std::future::Future;

use settee_engine::durability::{timeout_of, Level, Refused, Waited};
use settee_kv_codec::status;

use crate::ops::OpCtx;

/// The key a sync write holds pending: the collection id then the key, so the same key in two
/// collections is two keys.
pub(crate) fn pending_key(collection: u32, key: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + key.len());
    bytes.extend_from_slice(&collection.to_be_bytes());
    bytes.extend_from_slice(key);
    bytes
}

/// Whether `key` (in the request's collection) has a sync write that is not durable yet:
/// reading it would show a write a failover may still lose, so readers are told to retry
/// (SYNC_WRITE_RE_COMMIT_IN_PROGRESS, which the SDKs retry; Couchbase shows such readers the
/// value before the write, which settee, having written it in place, no longer has).
pub(crate) fn hidden(ctx: &OpCtx, key: &[u8]) -> bool {
    let tracker = ctx.bucket.durability();
    // Every read asks: no key is built unless some sync write is pending.
    tracker.any_pending()
        && tracker.is_hidden(
            ctx.bucket.vbucket_of(key),
            &pending_key(ctx.collection, key),
        )
}

/// How long a durable write waits for a chain replica whose stream ended to stream again
/// before it is refused as impossible.
const STREAM_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs `write` — a mutation that yields its encoded reply and, when it stored something, the
/// seqno it stored at — as the request's durability asks.
pub(crate) async fn run<W>(ctx: &OpCtx, key: &[u8], write: W) -> Vec<u8>
where
    W: Future<Output = (Vec<u8>, Option<u64>)>,
{
    let tracker = ctx.bucket.durability();
    let vbucket = ctx.bucket.vbucket_of(key);
    let pending = pending_key(ctx.collection, key);
    let (asked, timeout_ms) = match ctx.framing.durability {
        Some((level, timeout_ms)) => (Level::from_wire(level).unwrap_or_default(), timeout_ms),
        None => (Level::None, None),
    };
    let mut out = Vec::new();
    if !tracker.effective(asked).is_sync() {
        if tracker.is_pending(vbucket, &pending) {
            ctx.error(
                &mut out,
                status::SYNC_WRITE_IN_PROGRESS,
                "A sync write to this key is in progress",
            );
            return out;
        }
        return write.await.0;
    }
    // A vbucket whose takeover paused it answers a temporary failure (the SDKs retry); one
    // that is not active here goes to the engine for its NOT_MY_VBUCKET (its chain here says
    // nothing any more).
    if ctx.bucket.writes_paused(vbucket) {
        ctx.error(
            &mut out,
            status::ETMPFAIL,
            "The vbucket is being taken over by another node; retry",
        );
        return out;
    }
    if ctx.bucket.vbucket_role(vbucket) != settee_engine::VbRole::Active {
        return write.await.0;
    }
    // Replicas that have not streamed from this node yet (a vbucket just taken over in a
    // rebalance, a bucket just created) are waited for within the write's timeout, replicas
    // whose streams ended (reconnecting, or a node down) for a moment.
    tracker
        .wait_possible_within(vbucket, timeout_of(timeout_ms), STREAM_GRACE)
        .await;
    let sync = match tracker.begin(vbucket, &pending) {
        Ok(sync) => sync,
        Err(refused) => {
            let (code, context) = match refused {
                Refused::Impossible => (
                    status::DURABILITY_IMPOSSIBLE,
                    "Too few replicas are streaming to form a majority",
                ),
                Refused::InProgress => (
                    status::SYNC_WRITE_IN_PROGRESS,
                    "A sync write to this key is in progress",
                ),
                Refused::TooMany => (status::ETMPFAIL, "Too many sync writes in progress"),
            };
            ctx.error(&mut out, code, context);
            return out;
        }
    };
    let (reply, stored) = write.await;
    let Some(seqno) = stored else {
        return reply;
    };
    match sync.wait(vbucket, seqno, timeout_of(timeout_ms)).await {
        Waited::Durable => reply,
        Waited::Ambiguous => {
            ctx.error(
                &mut out,
                status::SYNC_WRITE_AMBIGUOUS,
                "Not acknowledged by a majority in time: the write may or may not be durable",
            );
            out
        }
    }
}
