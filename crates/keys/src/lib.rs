//! Key encoders for every column family; the layout is specified in `docs/format/keys.md` and,
//! for collections, `docs/format/collections.md`. Nothing else in the engine builds storage keys
//! by hand.
//!
//! Every vbucket-owned key of `doc`, `local`, `att` and `exp` starts with one of two prefixes:
//! ```text
//! short, collection 0:    bucket u32 | vb u16            (bit 15 of vb clear)   6 bytes
//! long, collection >= 8:  bucket u32 | 0x8000|vb u16 | cid u32                  10 bytes
//! ```
//! `seq` keys always use the short prefix (the collection is in the entry).
//!
//! Split out of `settee-engine` (which reaches it as `crate::keys`) when the engine neared 10k
//! lines: pure functions over bytes, no storage.

/// Longest document key, in bytes, the layout holds (Couchbase's limit).
pub const KEY_BYTES_MAX: usize = 250;

/// Bytes of the short prefix (collection 0, and every `seq` key).
pub const PREFIX_LEN: usize = 6;
/// Bytes of the long prefix (collections other than 0).
pub const LONG_PREFIX_LEN: usize = 10;
/// Bit 15 of the vbucket field: set in a long prefix.
const LONG_BIT: u16 = 0x8000;
/// The lowest collection id a long prefix may hold (1..=7 are reserved).
pub use settee_manifest::FIRST_COLLECTION_ID;

/// The prefix of collection `cid`'s keys in `vbucket`: short for collection 0, long otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    bytes: [u8; LONG_PREFIX_LEN],
    len: usize,
}

impl Prefix {
    pub fn new(bucket_id: u32, vbucket: u16, cid: u32) -> Prefix {
        let mut bytes = [0u8; LONG_PREFIX_LEN];
        bytes[..4].copy_from_slice(&bucket_id.to_be_bytes());
        if cid == 0 {
            bytes[4..6].copy_from_slice(&vbucket.to_be_bytes());
            return Prefix {
                bytes,
                len: PREFIX_LEN,
            };
        }
        bytes[4..6].copy_from_slice(&(vbucket | LONG_BIT).to_be_bytes());
        bytes[6..].copy_from_slice(&cid.to_be_bytes());
        Prefix {
            bytes,
            len: LONG_PREFIX_LEN,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `prefix | rest` as one key.
    pub fn with(&self, rest: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len + rest.len());
        out.extend_from_slice(self.as_slice());
        out.extend_from_slice(rest);
        out
    }
}

/// `bucket u32 | vbucket u16`: the short prefix (collection 0, and `seq`).
pub fn vb_prefix(bucket_id: u32, vbucket: u16) -> [u8; PREFIX_LEN] {
    let mut out = [0u8; PREFIX_LEN];
    out[..4].copy_from_slice(&bucket_id.to_be_bytes());
    out[4..].copy_from_slice(&vbucket.to_be_bytes());
    out
}

/// The first key after every key starting with `prefix`; for an all-0xff prefix, a key longer
/// than any real one.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}

/// Range `[lower, upper)` of one vbucket's `seq` keys, or of collection 0's keys in `doc`,
/// `local`, `att` and `exp` (the short range).
pub fn vb_range(bucket_id: u32, vbucket: u16) -> (Vec<u8>, Vec<u8>) {
    let prefix = vb_prefix(bucket_id, vbucket);
    (prefix.to_vec(), prefix_end(&prefix))
}

/// Range `[lower, upper)` of collection `cid`'s keys in one vbucket (`doc`, `local`, `att`,
/// `exp`).
pub fn coll_range(bucket_id: u32, vbucket: u16, cid: u32) -> (Vec<u8>, Vec<u8>) {
    let prefix = Prefix::new(bucket_id, vbucket, cid);
    (prefix.as_slice().to_vec(), prefix_end(prefix.as_slice()))
}

/// Range `[lower, upper)` of every collection but 0 in one vbucket (the long range).
pub fn long_range(bucket_id: u32, vbucket: u16) -> (Vec<u8>, Vec<u8>) {
    let prefix = vb_prefix(bucket_id, vbucket | LONG_BIT);
    (prefix.to_vec(), prefix_end(&prefix))
}

/// Range `[lower, upper)` covering a whole bucket in any vbucket-keyed column family.
pub fn bucket_range(bucket_id: u32) -> (Vec<u8>, Vec<u8>) {
    let prefix = bucket_id.to_be_bytes();
    (prefix.to_vec(), prefix_end(&prefix))
}

/// Splits a key of `doc`, `local`, `att` or `exp` into (vbucket, collection, rest). `None` for
/// a key too short for its prefix, or a long prefix holding a collection id below 8 (corrupt:
/// collection 0 is always written with the short prefix).
pub fn split_prefix(raw: &[u8]) -> Option<(u16, u32, &[u8])> {
    let field = u16::from_be_bytes(raw.get(4..6)?.try_into().ok()?);
    if field & LONG_BIT == 0 {
        return Some((field, 0, raw.get(PREFIX_LEN..)?));
    }
    let cid = u32::from_be_bytes(raw.get(6..10)?.try_into().ok()?);
    if cid < FIRST_COLLECTION_ID {
        return None;
    }
    Some((field & !LONG_BIT, cid, raw.get(LONG_PREFIX_LEN..)?))
}

pub fn doc_key(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Vec<u8> {
    Prefix::new(bucket_id, vbucket, cid).with(key)
}

/// A document key built on the stack (no allocation), for hot read paths.
pub struct DocKeyBuf {
    bytes: [u8; LONG_PREFIX_LEN + KEY_BYTES_MAX],
    len: usize,
}

impl DocKeyBuf {
    /// `None` for keys longer than the document key limit.
    pub fn new(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Option<DocKeyBuf> {
        let prefix = Prefix::new(bucket_id, vbucket, cid);
        let mut bytes = [0u8; LONG_PREFIX_LEN + KEY_BYTES_MAX];
        let len = prefix.len() + key.len();
        bytes.get_mut(prefix.len()..len)?.copy_from_slice(key);
        bytes[..prefix.len()].copy_from_slice(prefix.as_slice());
        Some(DocKeyBuf { bytes, len })
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Same layout as a document key; a separate name keeps the call sites honest.
pub fn local_key(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Vec<u8> {
    doc_key(bucket_id, vbucket, cid, key)
}

pub fn seq_key(bucket_id: u32, vbucket: u16, seqno: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 8);
    out.extend_from_slice(&vb_prefix(bucket_id, vbucket));
    out.extend_from_slice(&seqno.to_be_bytes());
    out
}

pub fn seqno_of_seq_key(key: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = key.get(PREFIX_LEN..PREFIX_LEN + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

pub fn att_prefix(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Vec<u8> {
    let prefix = Prefix::new(bucket_id, vbucket, cid);
    let mut out = Vec::with_capacity(prefix.len() + 1 + key.len() + 16);
    out.extend_from_slice(prefix.as_slice());
    out.push(key.len() as u8);
    out.extend_from_slice(key);
    out
}

pub fn att_key(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8], md5: &[u8; 16]) -> Vec<u8> {
    let mut out = att_prefix(bucket_id, vbucket, cid, key);
    out.extend_from_slice(md5);
    out
}

/// Splits an `att` key back into (vbucket, collection, document key, md5).
pub fn parse_att_key(raw: &[u8]) -> Option<(u16, u32, &[u8], [u8; 16])> {
    let (vbucket, cid, rest) = split_prefix(raw)?;
    let len = *rest.first()? as usize;
    if len > KEY_BYTES_MAX {
        // An old revision entry (OLD_REV_MARK), not an attachment body.
        return None;
    }
    let key = rest.get(1..1 + len)?;
    let md5: [u8; 16] = rest.get(1 + len..)?.try_into().ok()?;
    Some((vbucket, cid, key, md5))
}

/// The byte in an `att` key's length position that marks an old revision entry (keys.md).
pub const OLD_REV_MARK: u8 = 0xff;

/// `prefix | 0xff | keylen | key`: the range of one document's old revision entries.
pub fn old_rev_prefix(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Vec<u8> {
    let prefix = Prefix::new(bucket_id, vbucket, cid);
    let mut out = Vec::with_capacity(prefix.len() + 2 + key.len() + 40);
    out.extend_from_slice(prefix.as_slice());
    out.push(OLD_REV_MARK);
    out.push(key.len() as u8);
    out.extend_from_slice(key);
    out
}

/// The `att` key of `rev`'s old revision entry in document `key`.
pub fn old_rev_key(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8], rev: &str) -> Vec<u8> {
    let mut out = old_rev_prefix(bucket_id, vbucket, cid, key);
    out.extend_from_slice(rev.as_bytes());
    out
}

/// Splits an old revision entry's key into (vbucket, collection, document key, rev text);
/// `None` for any other `att` key.
pub fn parse_old_rev_key(raw: &[u8]) -> Option<(u16, u32, &[u8], &[u8])> {
    let (vbucket, cid, rest) = split_prefix(raw)?;
    if *rest.first()? != OLD_REV_MARK {
        return None;
    }
    let len = *rest.get(1)? as usize;
    let key = rest.get(2..2 + len)?;
    let rev = rest.get(2 + len..)?;
    Some((vbucket, cid, key, rev))
}

/// The byte in an `att` key's length position that marks a purge marker's index entry (keys.md).
pub const PURGE_MARKER_MARK: u8 = 0xfe;

/// The `att` key of the index entry naming `key`'s purge marker (its value: the marker's
/// seqno). Always under the short prefix, so a vbucket's entries are one range.
pub fn purge_marker_key(bucket_id: u32, vbucket: u16, cid: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 6 + key.len());
    out.extend_from_slice(&vb_prefix(bucket_id, vbucket));
    out.push(PURGE_MARKER_MARK);
    out.extend_from_slice(&cid.to_be_bytes());
    out.push(key.len() as u8);
    out.extend_from_slice(key);
    out
}

/// Range `[lower, upper)` of one vbucket's purge marker index entries in `att`.
pub fn purge_marker_range(bucket_id: u32, vbucket: u16) -> (Vec<u8>, Vec<u8>) {
    let mut lower = vb_prefix(bucket_id, vbucket).to_vec();
    lower.push(PURGE_MARKER_MARK);
    let upper = prefix_end(&lower);
    (lower, upper)
}

/// Splits a purge marker index key into (vbucket, collection, document key); `None` for any
/// other key.
pub fn parse_purge_marker_key(raw: &[u8]) -> Option<(u16, u32, &[u8])> {
    let (vbucket, cid, rest) = split_prefix(raw)?;
    if cid != 0 || *rest.first()? != PURGE_MARKER_MARK {
        return None;
    }
    let cid = u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?);
    let len = *rest.get(5)? as usize;
    let key = rest.get(6..)?;
    (key.len() == len).then_some((vbucket, cid, key))
}

pub fn exp_key(bucket_id: u32, vbucket: u16, cid: u32, expiry: u32, key: &[u8]) -> Vec<u8> {
    let prefix = Prefix::new(bucket_id, vbucket, cid);
    let mut out = Vec::with_capacity(prefix.len() + 4 + key.len());
    out.extend_from_slice(prefix.as_slice());
    out.extend_from_slice(&expiry.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits an `exp` key into (expiry, document key).
pub fn parse_exp_key(raw: &[u8]) -> Option<(u32, &[u8])> {
    let (_, _, rest) = split_prefix(raw)?;
    let expiry: [u8; 4] = rest.get(..4)?.try_into().ok()?;
    Some((u32::from_be_bytes(expiry), rest.get(4..)?))
}

/// The document key of a `doc` or `local` key (empty for a key that does not split).
pub fn key_of_doc_key(raw: &[u8]) -> &[u8] {
    split_prefix(raw).map_or(&[], |(_, _, key)| key)
}

pub mod meta {
    pub const NEXT_BUCKET_ID: &[u8] = b"node/next_bucket_id";
    /// `u32`: the data directory's format version (absent = 1; collections.md).
    pub const FORMAT_VERSION: &[u8] = b"node/format_version";

    pub fn bucket_name(name: &str) -> Vec<u8> {
        [b"bucket/name/".as_slice(), name.as_bytes()].concat()
    }
    pub const BUCKET_NAME_PREFIX: &[u8] = b"bucket/name/";

    fn with_id(tag: &[u8], bucket_id: u32) -> Vec<u8> {
        [tag, &bucket_id.to_be_bytes()].concat()
    }
    pub fn bucket_conf(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/conf/", bucket_id)
    }
    pub fn bucket_security(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/security/", bucket_id)
    }
    pub fn bucket_purge_seq(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/purge_seq/", bucket_id)
    }
    /// Per-vbucket counters: high seqno floor, live docs, deleted docs (see bucket.rs).
    pub fn vb_stats(bucket_id: u32, vbucket: u16) -> Vec<u8> {
        [
            with_id(b"bucket/vbstats/", bucket_id).as_slice(),
            &vbucket.to_be_bytes(),
        ]
        .concat()
    }
    pub fn vb_stats_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/vbstats/", bucket_id)
    }
    /// The bucket's collections manifest (absent = the default manifest).
    pub fn bucket_manifest(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/manifest/", bucket_id)
    }
    /// One collection's counters in one vbucket (collection first: a collection's are one
    /// range).
    pub fn collection_stats(bucket_id: u32, cid: u32, vbucket: u16) -> Vec<u8> {
        [
            collection_stats_prefix(bucket_id).as_slice(),
            &cid.to_be_bytes(),
            &vbucket.to_be_bytes(),
        ]
        .concat()
    }
    pub fn collection_stats_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/cstats/", bucket_id)
    }
    /// A dropped collection whose data is not purged yet.
    pub fn dropped_collection(bucket_id: u32, cid: u32) -> Vec<u8> {
        [dropped_prefix(bucket_id).as_slice(), &cid.to_be_bytes()].concat()
    }
    pub fn dropped_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/dropped/", bucket_id)
    }
    /// The collection of a `dropped_collection` key.
    pub fn parse_dropped_collection(bucket_id: u32, raw: &[u8]) -> Option<u32> {
        let rest = raw.strip_prefix(dropped_prefix(bucket_id).as_slice())?;
        Some(u32::from_be_bytes(rest.try_into().ok()?))
    }
    /// CouchDB `purge_seq` of a collection other than 0.
    pub fn collection_purge_seq(bucket_id: u32, cid: u32) -> Vec<u8> {
        [
            collection_purge_seq_prefix(bucket_id).as_slice(),
            &cid.to_be_bytes(),
        ]
        .concat()
    }
    pub fn collection_purge_seq_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/cpurge_seq/", bucket_id)
    }
    /// A vbucket's failover log (docs/format/dcp.md; absent = one default entry).
    pub fn failover_log(bucket_id: u32, vbucket: u16) -> Vec<u8> {
        [
            failover_prefix(bucket_id).as_slice(),
            &vbucket.to_be_bytes(),
        ]
        .concat()
    }
    pub fn failover_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/failover/", bucket_id)
    }
    /// A vbucket's role and replica snapshot (docs/format/replica.md; absent = active).
    pub fn vb_role(bucket_id: u32, vbucket: u16) -> Vec<u8> {
        [vb_role_prefix(bucket_id).as_slice(), &vbucket.to_be_bytes()].concat()
    }
    pub fn vb_role_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/vbrole/", bucket_id)
    }
    /// A vbucket's purge seqno: the highest purge marker compaction deleted (replica.md).
    pub fn vb_purge_seqno(bucket_id: u32, vbucket: u16) -> Vec<u8> {
        [
            vb_purge_seqno_prefix(bucket_id).as_slice(),
            &vbucket.to_be_bytes(),
        ]
        .concat()
    }
    pub fn vb_purge_seqno_prefix(bucket_id: u32) -> Vec<u8> {
        with_id(b"bucket/vbpurged/", bucket_id)
    }
    /// One collection's purge log entries (partitions.md), in purge order.
    pub fn purge_log_prefix(bucket_id: u32, cid: u32) -> Vec<u8> {
        [
            with_id(b"bucket/purgelog/", bucket_id).as_slice(),
            &cid.to_be_bytes(),
        ]
        .concat()
    }
    pub fn purge_log(bucket_id: u32, cid: u32, purge_seq: u64) -> Vec<u8> {
        [
            purge_log_prefix(bucket_id, cid).as_slice(),
            &purge_seq.to_be_bytes(),
        ]
        .concat()
    }
    /// Every meta key (or prefix) that belongs to a bucket id, for dropping it.
    pub fn bucket_owned(bucket_id: u32) -> [Vec<u8>; 12] {
        [
            with_id(b"bucket/purgelog/", bucket_id),
            bucket_conf(bucket_id),
            bucket_security(bucket_id),
            bucket_purge_seq(bucket_id),
            vb_stats_prefix(bucket_id),
            bucket_manifest(bucket_id),
            collection_stats_prefix(bucket_id),
            dropped_prefix(bucket_id),
            collection_purge_seq_prefix(bucket_id),
            failover_prefix(bucket_id),
            vb_role_prefix(bucket_id),
            vb_purge_seqno_prefix(bucket_id),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_bucket_then_vbucket_then_seqno() {
        let a = seq_key(1, 2, 300);
        let b = seq_key(1, 2, 1000);
        let c = seq_key(1, 3, 1);
        let d = seq_key(2, 0, 1);
        assert!(a < b && b < c && c < d);
        assert_eq!(seqno_of_seq_key(&b), Some(1000));
    }

    #[test]
    fn att_and_exp_keys_round_trip() {
        let md5 = [7u8; 16];
        for cid in [0, 8, 0x1234_5678] {
            let raw = att_key(9, 4, cid, b"doc", &md5);
            assert_eq!(parse_att_key(&raw), Some((4, cid, b"doc".as_slice(), md5)));
            let raw = exp_key(9, 4, cid, 77, b"doc");
            assert_eq!(parse_exp_key(&raw), Some((77, b"doc".as_slice())));
        }
    }

    #[test]
    fn purge_marker_keys_round_trip_and_stay_out_of_attachment_readers() {
        for cid in [0, 8, 0x1234_5678] {
            let raw = purge_marker_key(9, 4, cid, b"doc");
            assert_eq!(
                parse_purge_marker_key(&raw),
                Some((4, cid, b"doc".as_slice()))
            );
            assert_eq!(parse_att_key(&raw), None);
            assert_eq!(parse_old_rev_key(&raw), None);
            let (lower, upper) = purge_marker_range(9, 4);
            assert!(raw >= lower && raw < upper);
            // Inside the vbucket's short range, past every attachment and before old revisions.
            let (short_lower, short_upper) = vb_range(9, 4);
            assert!(raw >= short_lower && raw < short_upper);
            assert!(raw > att_key(9, 4, 0, &[b'z'; 250], &[0xff; 16]));
            assert!(raw < old_rev_key(9, 4, 0, b"a", "1-a"));
        }
        assert_eq!(
            parse_purge_marker_key(&att_key(9, 4, 0, b"doc", &[1; 16])),
            None
        );
        let mut cut = purge_marker_key(9, 4, 0, b"doc");
        cut.pop();
        assert_eq!(parse_purge_marker_key(&cut), None);
    }

    #[test]
    fn prefix_end_carries() {
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(prefix_end(&[1, 2]), vec![1, 3]);
    }

    #[test]
    fn collection_zero_keeps_the_version_1_bytes() {
        // bucket 7, vbucket 3, key "k": exactly what 0.1.0 wrote.
        let old = [0, 0, 0, 7, 0, 3, b'k'];
        assert_eq!(doc_key(7, 3, 0, b"k"), old);
        assert_eq!(local_key(7, 3, 0, b"k"), old);
        assert_eq!(
            exp_key(7, 3, 0, 5, b"k"),
            [0, 0, 0, 7, 0, 3, 0, 0, 0, 5, b'k']
        );
        assert_eq!(
            att_prefix(7, 3, 0, b"k"),
            [0, 0, 0, 7, 0, 3, 1, b'k'].to_vec()
        );
        assert_eq!(coll_range(7, 3, 0), vb_range(7, 3));
    }

    #[test]
    fn long_prefix_sets_bit_15_and_holds_the_collection() {
        let key = doc_key(7, 3, 9, b"k");
        assert_eq!(key, [0, 0, 0, 7, 0x80, 3, 0, 0, 0, 9, b'k']);
        assert_eq!(split_prefix(&key), Some((3, 9, b"k".as_slice())));
        assert_eq!(
            split_prefix(&doc_key(7, 3, 0, b"k")),
            Some((3, 0, b"k".as_slice()))
        );
        assert_eq!(key_of_doc_key(&key), b"k");
    }

    #[test]
    fn a_long_prefix_below_collection_8_is_corrupt() {
        for cid in 0..FIRST_COLLECTION_ID {
            let raw = [0, 0, 0, 7, 0x80, 3, 0, 0, 0, cid as u8, b'k'];
            assert_eq!(split_prefix(&raw), None, "cid {cid}");
        }
        assert_eq!(split_prefix(&[0, 0, 0, 7, 0x80, 3, 0, 0]), None);
        assert_eq!(split_prefix(&[0, 0, 0]), None);
    }

    #[test]
    fn ranges_nest_and_do_not_overlap() {
        let (short_lower, short_upper) = vb_range(7, 1023);
        let (long_lower, long_upper) = long_range(7, 0);
        assert!(
            short_upper <= long_lower,
            "every short range sorts before the long ones"
        );
        let (c_lower, c_upper) = coll_range(7, 5, 8);
        let (l_lower, l_upper) = long_range(7, 5);
        assert!(l_lower <= c_lower && c_upper <= l_upper);
        let (d_lower, _) = coll_range(7, 5, 9);
        assert!(
            c_upper <= d_lower,
            "collections sort by id within a vbucket"
        );
        let (bucket_lower, bucket_upper) = bucket_range(7);
        assert!(bucket_lower <= short_lower && long_upper <= bucket_upper);
    }

    #[test]
    fn meta_keys_parse_back() {
        let raw = meta::collection_stats(3, 9, 17);
        assert!(raw.starts_with(&meta::collection_stats_prefix(3)));
        assert_eq!(&raw[raw.len() - 6..], &[0, 0, 0, 9, 0, 17]);
        let raw = meta::dropped_collection(3, 12);
        assert_eq!(meta::parse_dropped_collection(3, &raw), Some(12));
    }
}
