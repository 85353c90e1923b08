//! The key set a run reads and writes: `doc-00000000` .. (the same ids `bench http` loads), each
//! with its vbucket computed once, so the request loop only indexes two arrays.

/// Every key is `doc-` and eight digits, which is why `--keys` stops below 10^8.
pub(crate) const KEY_LEN: usize = 12;

/// The vbucket of `key` among `vbuckets`, as the Couchbase SDKs compute it: bits 16..31 of the
/// key's CRC-32 (IEEE), masked to 15 bits, modulo the vbucket count.
pub(crate) fn vbucket_of(key: &[u8], vbuckets: u16) -> u16 {
    let crc = crc32fast::hash(key);
    (((crc >> 16) & 0x7fff) % u32::from(vbuckets.max(1))) as u16
}

pub(crate) struct Keys {
    /// All keys back to back, `key_len` bytes each: one allocation, not one per key.
    bytes: Vec<u8>,
    key_len: usize,
    vbuckets: Vec<u16>,
}

impl Keys {
    /// `count` keys, each after `prefix` (a collection id in LEB128, or nothing); the vbucket
    /// is the key's alone, as the SDKs compute it.
    #[cfg(test)]
    pub(crate) fn new(count: usize, vbucket_count: u16, prefix: &[u8]) -> Keys {
        Keys::new_in(count, vbucket_count, prefix, |_| true)
    }

    /// [`Keys::new`] with only ids whose vbucket `keep` accepts (the vbuckets active on the
    /// addressed node of a cluster): the first `count` such `doc-` ids. `keep` must accept
    /// some vbucket.
    pub(crate) fn new_in(
        count: usize,
        vbucket_count: u16,
        prefix: &[u8],
        keep: impl Fn(u16) -> bool,
    ) -> Keys {
        let key_len = prefix.len() + KEY_LEN;
        let mut bytes = Vec::with_capacity(count * key_len);
        let mut vbuckets = Vec::with_capacity(count);
        let mut index = 0;
        while vbuckets.len() < count && index <= super::KEYS_MAX {
            let key = crate::docs::doc_id(index);
            index += 1;
            debug_assert_eq!(key.len(), KEY_LEN);
            let vbucket = vbucket_of(key.as_bytes(), vbucket_count);
            if !keep(vbucket) {
                continue;
            }
            vbuckets.push(vbucket);
            bytes.extend_from_slice(prefix);
            bytes.extend_from_slice(key.as_bytes());
        }
        Keys {
            bytes,
            key_len,
            vbuckets,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.vbuckets.len()
    }

    /// Key `index` and its vbucket.
    pub(crate) fn get(&self, index: usize) -> (&[u8], u16) {
        let start = index * self.key_len;
        (
            &self.bytes[start..start + self.key_len],
            self.vbuckets[index],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vbucket_uses_the_upper_crc_bits_like_the_sdks() {
        // CRC-32/IEEE of "123456789" is the catalogue check value 0xcbf43926:
        // (0xcbf4 & 0x7fff) = 19444; 19444 % 1024 = 1012, % 64 = 52.
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(vbucket_of(b"123456789", 1024), 1012);
        assert_eq!(vbucket_of(b"123456789", 64), 52);
        assert_eq!(vbucket_of(b"123456789", 1), 0);
    }

    #[test]
    fn keys_are_the_shared_document_ids() {
        let keys = Keys::new(3, 64, &[]);
        assert_eq!(keys.len(), 3);
        let (key, vbucket) = keys.get(2);
        assert_eq!(key, b"doc-00000002");
        assert_eq!(vbucket, vbucket_of(b"doc-00000002", 64));
    }

    #[test]
    fn a_collection_prefix_comes_before_each_key_and_not_into_its_vbucket() {
        let keys = Keys::new(3, 64, &[0x88, 0x01]);
        let (key, vbucket) = keys.get(1);
        assert_eq!(key, b"\x88\x01doc-00000001");
        assert_eq!(vbucket, vbucket_of(b"doc-00000001", 64));
    }
}
