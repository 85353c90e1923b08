//! Extended attributes (Couchbase xattrs) kept with a document: a JSON object of named values.
//! Names starting with `_` are system attributes: they outlive the document's deletion (the
//! tombstone keeps them, as Couchbase does for e.g. Sync Gateway's `_sync`); user attributes
//! go with the body. A full-document write keeps all of them.

use bytes::Bytes;

/// The system attributes of `xattrs` (an encoded JSON object), re-encoded; empty when none.
/// Unparseable input (never written by settee) yields none rather than an error.
pub fn system_only(xattrs: &[u8]) -> Bytes {
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_slice(xattrs) else {
        return Bytes::new();
    };
    map.retain(|name, _| name.starts_with('_'));
    if map.is_empty() {
        return Bytes::new();
    }
    serde_json::to_vec(&map)
        .map(Bytes::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_keeps_system_attributes_only() {
        let kept = system_only(br#"{"_sync":{"rev":"2-a"},"user":1,"_meta":[1]}"#);
        assert_eq!(&kept[..], br#"{"_sync":{"rev":"2-a"},"_meta":[1]}"#);
        assert!(system_only(br#"{"user":1}"#).is_empty());
        assert!(system_only(b"").is_empty());
    }
}
