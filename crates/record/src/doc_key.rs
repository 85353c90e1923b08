//! How a caller names one document: its collection and its key. Plain byte keys convert into
//! a [`DocKey`] of collection 0 (`_default._default`), so code written before collections reads
//! and writes exactly what it did.

/// A document's address in a bucket: collection id and key. The vbucket comes from the key
/// alone (as the Couchbase SDKs compute it, without the collection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DocKey<'a> {
    pub collection: u32,
    pub key: &'a [u8],
}

impl<'a> DocKey<'a> {
    pub fn new(collection: u32, key: &'a [u8]) -> DocKey<'a> {
        DocKey { collection, key }
    }

    /// The name the bucket's per-document locks use: collection and key, so the same key in
    /// two collections is two documents.
    pub fn lock_name(&self) -> Vec<u8> {
        let mut name = Vec::with_capacity(4 + self.key.len());
        name.extend_from_slice(&self.collection.to_be_bytes());
        name.extend_from_slice(self.key);
        name
    }
}

impl<'a> From<&'a [u8]> for DocKey<'a> {
    fn from(key: &'a [u8]) -> DocKey<'a> {
        DocKey { collection: 0, key }
    }
}

impl<'a> From<&'a Vec<u8>> for DocKey<'a> {
    fn from(key: &'a Vec<u8>) -> DocKey<'a> {
        DocKey {
            collection: 0,
            key: key.as_slice(),
        }
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for DocKey<'a> {
    fn from(key: &'a [u8; N]) -> DocKey<'a> {
        DocKey {
            collection: 0,
            key: key.as_slice(),
        }
    }
}

impl<'a> From<&'a bytes::Bytes> for DocKey<'a> {
    fn from(key: &'a bytes::Bytes) -> DocKey<'a> {
        DocKey {
            collection: 0,
            key: key.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_collection_0_and_lock_names_tell_collections_apart() {
        let key = b"doc".to_vec();
        assert_eq!(DocKey::from(&key), DocKey::new(0, b"doc"));
        assert_eq!(DocKey::from(b"doc"), DocKey::new(0, b"doc"));
        assert_eq!(DocKey::from(key.as_slice()).collection, 0);
        assert_ne!(
            DocKey::new(0, b"doc").lock_name(),
            DocKey::new(8, b"doc").lock_name()
        );
    }
}
