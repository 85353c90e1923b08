/// The vbucket a key belongs to, computed exactly as the Couchbase SDKs do:
/// `((crc32(key) >> 16) & 0x7fff) % vbucket_count`.
pub fn vbucket_of(key: &[u8], vbucket_count: u16) -> u16 {
    let crc = crc32fast::hash(key);
    (((crc >> 16) & 0x7fff) % u32::from(vbucket_count.max(1))) as u16
}

/// Bounds on a bucket's vbucket count (`PUT /db?q=N`).
pub const VBUCKETS_DEFAULT: u16 = 64;
pub const VBUCKETS_MAX: u16 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_libcouchbase_hash() {
        // crc32("hello") = 0x3610a686 -> (0x3610 & 0x7fff) = 13840 -> % 1024 = 528.
        assert_eq!(vbucket_of(b"hello", 1024), 528);
        assert_eq!(vbucket_of(b"hello", 64), 13840 % 64);
        assert!(vbucket_of(b"anything", 16) < 16);
    }
}
