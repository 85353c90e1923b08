//! Each vbucket's failover log (Couchbase's): the uuids its history has had, newest first, each
//! with the seqno it began at. DCP consumers resume by (uuid, seqno) and roll back to the
//! common point when their uuid is not on this history (docs/format/dcp.md).
//!
//! `meta` holds a log only once a vbucket has more than its first entry; until then the log is
//! the one entry (`Bucket::vbucket_uuid`'s hash, 0), so the uuids in mutation tokens handed out
//! before logs were kept still name the vbucket's history.

use std::sync::atomic::{AtomicU64, Ordering};

use settee_storage::{Batch, Cf, Store};

use crate::bucket::Bucket;
use crate::error::EngineError;
use crate::keys;

/// kv_engine's default `max_failover_entries`.
pub const FAILOVER_ENTRIES_MAX: usize = 25;
const ENTRY_BYTES: usize = 16;

/// One branch of a vbucket's history: it began at `seqno` under `uuid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverEntry {
    pub uuid: u64,
    pub seqno: u64,
}

/// The wire and disk form: `uuid u64 | seqno u64` per entry, newest first.
pub fn encode_failover_log(log: &[FailoverEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(log.len() * ENTRY_BYTES);
    for entry in log {
        out.extend_from_slice(&entry.uuid.to_be_bytes());
        out.extend_from_slice(&entry.seqno.to_be_bytes());
    }
    out
}

pub(crate) fn decode_failover_log(raw: &[u8]) -> Option<Vec<FailoverEntry>> {
    if raw.is_empty() || !raw.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    raw.chunks_exact(ENTRY_BYTES)
        .map(|chunk| {
            Some(FailoverEntry {
                uuid: u64::from_be_bytes(chunk.get(..8)?.try_into().ok()?),
                seqno: u64::from_be_bytes(chunk.get(8..)?.try_into().ok()?),
            })
        })
        .collect()
}

/// The newest uuid of every vbucket with a stored log (0: none stored), read at open.
pub(crate) fn load_heads(
    store: &Store,
    bucket_id: u32,
    vbuckets: u16,
) -> Result<Vec<AtomicU64>, EngineError> {
    let heads: Vec<AtomicU64> = (0..vbuckets).map(|_| AtomicU64::new(0)).collect();
    let prefix = keys::meta::failover_prefix(bucket_id);
    let upper = keys::prefix_end(&prefix);
    for item in store.scan(Cf::Meta, &prefix, &upper, false) {
        let (key, value) = item?;
        let vbucket = key
            .get(prefix.len()..)
            .and_then(|rest| rest.try_into().ok())
            .map(u16::from_be_bytes);
        let log = decode_failover_log(&value);
        match (vbucket.and_then(|vb| heads.get(vb as usize)), log) {
            (Some(head), Some(log)) => head.store(log[0].uuid, Ordering::Relaxed),
            _ => return Err(EngineError::Corrupt("failover log".into())),
        }
    }
    Ok(heads)
}

/// The uuid of a new branch: mixes the old one, the seqno and the time, never 0 (0 means "no
/// history" in a stream request).
fn branch_uuid(previous: u64, seqno: u64, now_ns: u64) -> u64 {
    let mut hash = previous ^ 0x9e37_79b9_7f4a_7c15;
    for word in [seqno, now_ns] {
        hash ^= word;
        hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        hash ^= hash >> 31;
    }
    hash.max(1)
}

impl Bucket {
    /// `vbucket`'s failover log, newest first (never empty). `None` for a vbucket out of range.
    pub fn failover_log(&self, vbucket: u16) -> Result<Option<Vec<FailoverEntry>>, EngineError> {
        if vbucket >= self.vbuckets {
            return Ok(None);
        }
        let stored = self
            .store
            .get(Cf::Meta, &keys::meta::failover_log(self.id, vbucket))?;
        match stored {
            None => Ok(Some(vec![FailoverEntry {
                uuid: self.original_vbucket_uuid(vbucket),
                seqno: 0,
            }])),
            Some(raw) => decode_failover_log(&raw)
                .map(Some)
                .ok_or_else(|| EngineError::Corrupt("failover log".into())),
        }
    }

    /// Starts a new branch of `vbucket`'s history at its high seqno (a vbucket becoming active
    /// on this node), durably; returns the new entry. `None` for a vbucket out of range.
    pub async fn new_failover_entry(
        &self,
        vbucket: u16,
    ) -> Result<Option<FailoverEntry>, EngineError> {
        let _serial = self.failover_lock.lock().await;
        let Some(mut log) = self.failover_log(vbucket)? else {
            return Ok(None);
        };
        let seqno = self.high_seqnos().get(vbucket);
        let entry = FailoverEntry {
            uuid: branch_uuid(log[0].uuid, seqno, self.clock.now_ns()),
            seqno,
        };
        log.insert(0, entry);
        log.truncate(FAILOVER_ENTRIES_MAX);
        let mut batch = Batch::new();
        batch.put(
            Cf::Meta,
            keys::meta::failover_log(self.id, vbucket),
            encode_failover_log(&log),
        );
        self.store.commit(batch).await?;
        if let Some(head) = self.failover_heads.get(vbucket as usize) {
            head.store(entry.uuid, Ordering::Release);
        }
        Ok(Some(entry))
    }

    /// The newest uuid of `vbucket`'s failover log, without reading it.
    pub(crate) fn failover_head(&self, vbucket: u16) -> Option<u64> {
        self.failover_heads
            .get(vbucket as usize)
            .map(|head| head.load(Ordering::Acquire))
            .filter(|&uuid| uuid != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_round_trip_and_reject_torn_records() {
        let log = [
            FailoverEntry { uuid: 7, seqno: 40 },
            FailoverEntry { uuid: 3, seqno: 0 },
        ];
        let raw = encode_failover_log(&log);
        assert_eq!(raw.len(), 32);
        assert_eq!(decode_failover_log(&raw).as_deref(), Some(&log[..]));
        assert_eq!(decode_failover_log(&raw[..31]), None);
        assert_eq!(decode_failover_log(&[]), None);
    }

    #[test]
    fn branch_uuids_differ_and_are_never_zero() {
        let a = branch_uuid(1, 10, 1_000);
        assert_ne!(a, branch_uuid(1, 10, 1_001));
        assert_ne!(a, branch_uuid(1, 11, 1_000));
        assert_ne!(a, 0);
    }
}
