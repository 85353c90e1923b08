//! Purge markers (docs/format/replica.md, "Purges reach the replicas"): the version 6 entry of
//! a vbucket's change stream (CF `seq`) that a purge leaving a document with no leaf writes at
//! a new seqno, so that the purge travels the stream to the vbucket's replicas; and the rule by
//! which compaction forgets one.
//!
//! ```text
//! v6  0 ver=6 | 1 flags u8 (0) | 2 cas u64 | 10 cid u32 | 14 keylen u8 | 15 key
//! ```

use settee_keys::{FIRST_COLLECTION_ID, KEY_BYTES_MAX};

/// Seconds a purge marker is kept at least before compaction may delete it (replica.md).
pub const PURGE_MARKERS_KEEP_SECS: u64 = 86_400;
/// The first byte of a purge marker's stored entry.
pub const VERSION_PURGE: u8 = 6;
const HEADER_BYTES: usize = 15;

/// One purge marker of a vbucket's stream: `key` was purged whole at `seqno`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PurgeMarker {
    pub vbucket: u16,
    pub seqno: u64,
    /// The purge's HLC time, like a write's CAS.
    pub cas: u64,
    /// The document's collection (0: `_default._default`).
    pub collection: u32,
    pub key: Vec<u8>,
}

impl PurgeMarker {
    /// The stored entry (the seqno and vbucket are the `seq` key's).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.key.len());
        out.push(VERSION_PURGE);
        out.push(0);
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(&self.collection.to_be_bytes());
        out.push(self.key.len() as u8);
        out.extend_from_slice(&self.key);
        out
    }

    /// A stored version 6 entry; `None` for anything that does not keep the format's promises
    /// (flags 0, a collection 0 or >= 8, a key of 1..=250 bytes filling the entry exactly).
    pub fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<PurgeMarker> {
        if raw.first() != Some(&VERSION_PURGE) || raw.get(1) != Some(&0) {
            return None;
        }
        let cas = u64::from_be_bytes(raw.get(2..10)?.try_into().ok()?);
        let collection = u32::from_be_bytes(raw.get(10..14)?.try_into().ok()?);
        if collection != 0 && collection < FIRST_COLLECTION_ID {
            return None;
        }
        let key = raw.get(HEADER_BYTES..)?;
        if key.is_empty() || key.len() > KEY_BYTES_MAX || key.len() != *raw.get(14)? as usize {
            return None;
        }
        Some(PurgeMarker {
            vbucket,
            seqno,
            cas,
            collection,
            key: key.to_vec(),
        })
    }
}

/// Whether compaction deletes a marker at `seqno` written at `cas` (HLC nanoseconds), at
/// `now_ns`, when every replica of its vbucket has acknowledged `acknowledged`: it must be
/// older than [`PURGE_MARKERS_KEEP_SECS`] and acknowledged.
pub fn ages_out(seqno: u64, cas: u64, now_ns: u64, acknowledged: u64) -> bool {
    seqno <= acknowledged && now_ns.saturating_sub(cas) >= PURGE_MARKERS_KEEP_SECS * 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(collection: u32) -> PurgeMarker {
        PurgeMarker {
            vbucket: 3,
            seqno: 40,
            cas: 0x1122_3344_5566_7788,
            collection,
            key: b"gone".to_vec(),
        }
    }

    #[test]
    fn markers_take_the_version_6_layout() {
        let raw = marker(9).encode();
        assert_eq!(raw[..2], [6, 0]);
        assert_eq!(raw[2..10], 0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(raw[10..14], [0, 0, 0, 9]);
        assert_eq!(raw[14], 4);
        assert_eq!(&raw[15..], b"gone");
        assert_eq!(PurgeMarker::decode(3, 40, &raw), Some(marker(9)));
        assert_eq!(
            PurgeMarker::decode(3, 40, &marker(0).encode()),
            Some(marker(0))
        );
    }

    #[test]
    fn markers_that_break_a_promise_do_not_decode() {
        let good = marker(8).encode();
        for cut in 0..good.len() {
            assert_eq!(PurgeMarker::decode(3, 40, &good[..cut]), None, "cut {cut}");
        }
        let mut flags = good.clone();
        flags[1] = 1;
        let mut low_collection = good.clone();
        low_collection[13] = 7;
        let mut longer = good.clone();
        longer.push(b'x');
        let mut version = good.clone();
        version[0] = 5;
        let empty_key = PurgeMarker {
            key: Vec::new(),
            ..marker(8)
        }
        .encode();
        for bad in [flags, low_collection, longer, version, empty_key] {
            assert_eq!(PurgeMarker::decode(3, 40, &bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_marker_ages_out_once_old_and_acknowledged() {
        let day = PURGE_MARKERS_KEEP_SECS * 1_000_000_000;
        let cas = 5 * day;
        assert!(ages_out(40, cas, cas + day, u64::MAX));
        assert!(ages_out(40, cas, cas + day, 40));
        assert!(!ages_out(40, cas, cas + day - 1, u64::MAX));
        assert!(!ages_out(40, cas, cas + day, 39));
        // A clock behind the marker never ages it out.
        assert!(!ages_out(40, cas, cas - 1, u64::MAX));
    }
}
