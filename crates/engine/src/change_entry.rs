//! The entries of a vbucket's change stream (CF `seq`, `docs/format/keys.md` and
//! `docs/format/collections.md`): a document's entry names its collection (versions 1-2:
//! collection 0, versions 3-4: the id in the entry), version 5 is a system event, version 6 a
//! purge marker (`docs/format/replica.md`).
//!
//! ```text
//! v1  0 ver=1 | 1 flags | 2 cas u64 | 10 keylen u8 | 11 key | rev
//! v2  as v1, the key field an id prefix (compaction only)
//! v3  0 ver=3 | 1 flags | 2 cas u64 | 10 cid u32 | 14 keylen u8 | 15 key | rev
//! v4  as v3, the key field an id prefix (compaction only)
//! v5  a system event (collections/event.rs)
//! v6  0 ver=6 | 1 flags u8 (0) | 2 cas u64 | 10 cid u32 | 14 keylen u8 | 15 key
//!     a purge marker: the key was purged whole at this seqno (purge_marker.rs)
//! ```

use settee_revtree::RevId;

use crate::collections::SystemEvent;
use crate::keys::FIRST_COLLECTION_ID;
use crate::record::DocRecord;
use settee_record::purge_marker::{PurgeMarker, VERSION_PURGE};

const VERSION: u8 = 1;
/// Same layout as [`VERSION`], but the key field holds only a prefix of the id (keys.md).
pub(crate) const VERSION_ABBREVIATED: u8 = 2;
const VERSION_COLLECTION: u8 = 3;
pub(crate) const VERSION_COLLECTION_ABBREVIATED: u8 = 4;
const FLAG_DELETED: u8 = 1;

/// One document's entry of a vbucket's change stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeEntry {
    pub vbucket: u16,
    pub seqno: u64,
    pub cas: u64,
    pub deleted: bool,
    /// The document's collection (0: `_default._default`).
    pub collection: u32,
    pub key: Vec<u8>,
    /// The winning revision.
    pub rev: RevId,
}

/// One entry of a vbucket-wide stream: a document's change in any collection, a system event,
/// or a purge marker ([`crate::Bucket::vbucket_stream`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEntry {
    Change(ChangeEntry),
    Event(SystemEvent),
    /// A document purged whole: sent to replicas only (replica.md).
    Purge(PurgeMarker),
}

impl StreamEntry {
    pub fn seqno(&self) -> u64 {
        match self {
            StreamEntry::Change(entry) => entry.seqno,
            StreamEntry::Event(event) => event.seqno,
            StreamEntry::Purge(marker) => marker.seqno,
        }
    }

    pub fn cas(&self) -> u64 {
        match self {
            StreamEntry::Change(entry) => entry.cas,
            StreamEntry::Event(event) => event.cas,
            StreamEntry::Purge(marker) => marker.cas,
        }
    }
}

/// A stored entry as decoded: a document's (and whether its id is only a prefix), an event, or
/// a purge marker.
pub(crate) enum StoredEntry {
    Change(ChangeEntry, bool),
    Event(SystemEvent),
    Purge(PurgeMarker),
}

impl StoredEntry {
    pub(crate) fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<StoredEntry> {
        match raw.first() {
            Some(&crate::collections::VERSION_EVENT) => {
                SystemEvent::decode(vbucket, seqno, raw).map(StoredEntry::Event)
            }
            Some(&VERSION_PURGE) => {
                PurgeMarker::decode(vbucket, seqno, raw).map(StoredEntry::Purge)
            }
            _ => ChangeEntry::decode(vbucket, seqno, raw)
                .map(|(entry, short)| StoredEntry::Change(entry, short)),
        }
    }
}

/// What the stream readers resolve abbreviated ids in: a list of document entries, or of
/// stream entries some of which are documents'.
pub(crate) trait HoldsChange {
    fn change(&self) -> Option<&ChangeEntry>;
    fn change_mut(&mut self) -> Option<&mut ChangeEntry>;
}

impl HoldsChange for ChangeEntry {
    fn change(&self) -> Option<&ChangeEntry> {
        Some(self)
    }
    fn change_mut(&mut self) -> Option<&mut ChangeEntry> {
        Some(self)
    }
}

impl HoldsChange for StreamEntry {
    fn change(&self) -> Option<&ChangeEntry> {
        match self {
            StreamEntry::Change(entry) => Some(entry),
            StreamEntry::Event(_) | StreamEntry::Purge(_) => None,
        }
    }
    fn change_mut(&mut self) -> Option<&mut ChangeEntry> {
        match self {
            StreamEntry::Change(entry) => Some(entry),
            StreamEntry::Event(_) | StreamEntry::Purge(_) => None,
        }
    }
}

impl ChangeEntry {
    pub(crate) fn of_record(
        vbucket: u16,
        collection: u32,
        key: &[u8],
        record: &DocRecord,
    ) -> ChangeEntry {
        let winner = record.winner();
        ChangeEntry {
            vbucket,
            seqno: record.seqno,
            cas: record.cas,
            deleted: record.is_deleted(),
            collection,
            key: key.to_vec(),
            rev: winner.map(|leaf| leaf.rev.clone()).unwrap_or(RevId {
                pos: 0,
                hash: String::new(),
            }),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        self.encode_abbreviated(self.key.len())
    }

    /// The stored form with the id cut to its first `prefix_len` bytes: an abbreviated entry
    /// (version 2 or 4), or a whole one when the prefix would not be shorter than the id.
    pub(crate) fn encode_abbreviated(&self, prefix_len: usize) -> Vec<u8> {
        let stored = &self.key[..prefix_len.min(self.key.len())];
        let abbreviated = stored.len() < self.key.len();
        let rev = self.rev.to_string();
        let mut out = Vec::with_capacity(15 + stored.len() + rev.len());
        out.push(match (self.collection, abbreviated) {
            (0, false) => VERSION,
            (0, true) => VERSION_ABBREVIATED,
            (_, false) => VERSION_COLLECTION,
            (_, true) => VERSION_COLLECTION_ABBREVIATED,
        });
        out.push(if self.deleted { FLAG_DELETED } else { 0 });
        out.extend_from_slice(&self.cas.to_be_bytes());
        if self.collection != 0 {
            out.extend_from_slice(&self.collection.to_be_bytes());
        }
        out.push(stored.len() as u8);
        out.extend_from_slice(stored);
        out.extend_from_slice(rev.as_bytes());
        out
    }

    /// Decodes a stored document entry (versions 1-4). The flag says whether `key` is only a
    /// prefix of the id, to be resolved against the `doc` column family. A version 3 or 4
    /// entry naming a collection below 8 is corrupt (`None`), as is anything else.
    pub(crate) fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<(ChangeEntry, bool)> {
        let (abbreviated, long) = match *raw.first()? {
            VERSION => (false, false),
            VERSION_ABBREVIATED => (true, false),
            VERSION_COLLECTION => (false, true),
            VERSION_COLLECTION_ABBREVIATED => (true, true),
            _ => return None,
        };
        let flags = *raw.get(1)?;
        let cas = u64::from_be_bytes(raw.get(2..10)?.try_into().ok()?);
        let (collection, at) = if long {
            let cid = u32::from_be_bytes(raw.get(10..14)?.try_into().ok()?);
            if cid < FIRST_COLLECTION_ID {
                return None;
            }
            (cid, 14)
        } else {
            (0, 10)
        };
        let key_len = *raw.get(at)? as usize;
        let key = raw.get(at + 1..at + 1 + key_len)?.to_vec();
        let rev = RevId::parse(std::str::from_utf8(raw.get(at + 1 + key_len..)?).ok()?)?;
        let entry = ChangeEntry {
            vbucket,
            seqno,
            cas,
            deleted: flags & FLAG_DELETED != 0,
            collection,
            key,
            rev,
        };
        Some((entry, abbreviated))
    }
}

/// Whether a stored entry names its document by an id prefix (version 2 or 4).
pub(crate) fn is_abbreviated(raw: &[u8]) -> bool {
    matches!(
        raw.first(),
        Some(&VERSION_ABBREVIATED) | Some(&VERSION_COLLECTION_ABBREVIATED)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(collection: u32) -> ChangeEntry {
        ChangeEntry {
            vbucket: 2,
            seqno: 9,
            cas: 0x1122_3344_5566_7788,
            deleted: true,
            collection,
            key: b"document".to_vec(),
            rev: RevId {
                pos: 3,
                hash: "abc".into(),
            },
        }
    }

    #[test]
    fn collection_0_entries_keep_versions_1_and_2() {
        let whole = entry(0).encode();
        assert_eq!(whole[0], 1);
        assert_eq!(whole[10], 8);
        assert_eq!(&whole[11..19], b"document");
        assert_eq!(&whole[19..], b"3-abc");
        let short = entry(0).encode_abbreviated(3);
        assert_eq!(short[0], 2);
        let (decoded, abbreviated) = ChangeEntry::decode(2, 9, &short).expect("v2");
        assert!(abbreviated);
        assert_eq!((decoded.key, decoded.collection), (b"doc".to_vec(), 0));
    }

    #[test]
    fn other_collections_write_versions_3_and_4() {
        let whole = entry(0x0102_0304).encode();
        assert_eq!(whole[0], 3);
        assert_eq!(&whole[2..10], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&whole[10..14], &[1, 2, 3, 4]);
        assert_eq!(whole[14], 8);
        assert_eq!(&whole[15..23], b"document");
        assert_eq!(
            ChangeEntry::decode(2, 9, &whole),
            Some((entry(0x0102_0304), false))
        );
        let short = entry(8).encode_abbreviated(2);
        assert_eq!(short[0], 4);
        assert!(is_abbreviated(&short));
        let (decoded, abbreviated) = ChangeEntry::decode(2, 9, &short).expect("v4");
        assert!(abbreviated);
        assert_eq!((decoded.key, decoded.collection), (b"do".to_vec(), 8));
    }

    #[test]
    fn a_version_3_entry_below_collection_8_is_corrupt() {
        let mut raw = entry(8).encode();
        raw[13] = 7;
        assert_eq!(ChangeEntry::decode(2, 9, &raw), None);
        for cut in 0..raw.len() - 5 {
            assert_eq!(ChangeEntry::decode(2, 9, &entry(8).encode()[..cut]), None);
        }
    }
}
