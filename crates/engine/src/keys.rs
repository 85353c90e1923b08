//! Key encoders for every column family; the layout is specified in `docs/format/keys.md`.
//! Nothing else in the engine builds storage keys by hand.

pub const PREFIX_LEN: usize = 6;

/// `bucket u32 | vbucket u16`: the prefix shared by every vbucket-owned key.
pub fn vb_prefix(bucket_id: u32, vbucket: u16) -> [u8; PREFIX_LEN] {
    let mut out = [0u8; PREFIX_LEN];
    out[..4].copy_from_slice(&bucket_id.to_be_bytes());
    out[4..].copy_from_slice(&vbucket.to_be_bytes());
    out
}

/// The first key after every key starting with `prefix` (prefix must not be all 0xff).
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

/// Range `[lower, upper)` covering one vbucket in any vbucket-keyed column family.
pub fn vb_range(bucket_id: u32, vbucket: u16) -> (Vec<u8>, Vec<u8>) {
    let prefix = vb_prefix(bucket_id, vbucket);
    (prefix.to_vec(), prefix_end(&prefix))
}

/// Range `[lower, upper)` covering a whole bucket in any vbucket-keyed column family.
pub fn bucket_range(bucket_id: u32) -> (Vec<u8>, Vec<u8>) {
    let prefix = bucket_id.to_be_bytes();
    (prefix.to_vec(), prefix_end(&prefix))
}

pub fn doc_key(bucket_id: u32, vbucket: u16, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + key.len());
    out.extend_from_slice(&vb_prefix(bucket_id, vbucket));
    out.extend_from_slice(key);
    out
}

/// A document key built on the stack (no allocation), for hot read paths.
pub struct DocKeyBuf {
    bytes: [u8; PREFIX_LEN + crate::bucket::KEY_BYTES_MAX],
    len: usize,
}

impl DocKeyBuf {
    /// `None` for keys longer than the document key limit.
    pub fn new(bucket_id: u32, vbucket: u16, key: &[u8]) -> Option<DocKeyBuf> {
        let mut bytes = [0u8; PREFIX_LEN + crate::bucket::KEY_BYTES_MAX];
        let len = PREFIX_LEN + key.len();
        bytes.get_mut(PREFIX_LEN..len)?.copy_from_slice(key);
        bytes[..PREFIX_LEN].copy_from_slice(&vb_prefix(bucket_id, vbucket));
        Some(DocKeyBuf { bytes, len })
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Same layout as a document key; a separate name keeps the call sites honest.
pub fn local_key(bucket_id: u32, vbucket: u16, key: &[u8]) -> Vec<u8> {
    doc_key(bucket_id, vbucket, key)
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

pub fn att_prefix(bucket_id: u32, vbucket: u16, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 1 + key.len() + 16);
    out.extend_from_slice(&vb_prefix(bucket_id, vbucket));
    out.push(key.len() as u8);
    out.extend_from_slice(key);
    out
}

pub fn att_key(bucket_id: u32, vbucket: u16, key: &[u8], md5: &[u8; 16]) -> Vec<u8> {
    let mut out = att_prefix(bucket_id, vbucket, key);
    out.extend_from_slice(md5);
    out
}

/// Splits an `att` key back into (document key, md5).
pub fn parse_att_key(raw: &[u8]) -> Option<(&[u8], [u8; 16])> {
    let len = *raw.get(PREFIX_LEN)? as usize;
    let key = raw.get(PREFIX_LEN + 1..PREFIX_LEN + 1 + len)?;
    let md5: [u8; 16] = raw.get(PREFIX_LEN + 1 + len..)?.try_into().ok()?;
    Some((key, md5))
}

pub fn exp_key(bucket_id: u32, vbucket: u16, expiry: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + 4 + key.len());
    out.extend_from_slice(&vb_prefix(bucket_id, vbucket));
    out.extend_from_slice(&expiry.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits an `exp` key into (expiry, document key).
pub fn parse_exp_key(raw: &[u8]) -> Option<(u32, &[u8])> {
    let expiry: [u8; 4] = raw.get(PREFIX_LEN..PREFIX_LEN + 4)?.try_into().ok()?;
    Some((u32::from_be_bytes(expiry), raw.get(PREFIX_LEN + 4..)?))
}

/// The document key of a `doc` or `local` key.
pub fn key_of_doc_key(raw: &[u8]) -> &[u8] {
    raw.get(PREFIX_LEN..).unwrap_or(&[])
}

pub mod meta {
    pub const NEXT_BUCKET_ID: &[u8] = b"node/next_bucket_id";

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
    /// Every meta key that belongs to a bucket id, for dropping it.
    pub fn bucket_owned(bucket_id: u32) -> [Vec<u8>; 4] {
        [
            bucket_conf(bucket_id),
            bucket_security(bucket_id),
            bucket_purge_seq(bucket_id),
            vb_stats_prefix(bucket_id),
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
        let raw = att_key(9, 4, b"doc", &md5);
        assert_eq!(parse_att_key(&raw), Some((b"doc".as_slice(), md5)));
        let raw = exp_key(9, 4, 77, b"doc");
        assert_eq!(parse_exp_key(&raw), Some((77, b"doc".as_slice())));
    }

    #[test]
    fn prefix_end_carries() {
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        assert_eq!(prefix_end(&[1, 2]), vec![1, 3]);
    }
}
