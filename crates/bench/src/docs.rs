//! The documents every load generator writes and reads, so that `bench http` and `bench kv`
//! load the same data: ids `doc-00000000`, `doc-00000001`, ... and one JSON body of a chosen
//! size.

use bytes::Bytes;

/// The id (HTTP) or key (KV) of preloaded document `index`.
pub(crate) fn doc_id(index: usize) -> String {
    format!("doc-{index:08}")
}

/// `{"v":"xxxx"}` padded so the whole JSON text is `doc_size_bytes` long (or 9 bytes, the
/// shortest such body, when asked for less).
pub(crate) fn doc_body(doc_size_bytes: usize) -> Bytes {
    const ENVELOPE: &str = r#"{"v":""}"#;
    let padding = doc_size_bytes.saturating_sub(ENVELOPE.len()).max(1);
    Bytes::from(format!(r#"{{"v":"{}"}}"#, "x".repeat(padding)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_body_has_requested_size() {
        for size in [9, 10, 200, 4096] {
            let body = doc_body(size);
            assert_eq!(body.len(), size);
            let parsed: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
            assert!(parsed["v"].is_string());
        }
        assert_eq!(&doc_body(0)[..], br#"{"v":"x"}"#);
    }

    #[test]
    fn doc_ids_have_a_fixed_width_below_a_hundred_million() {
        assert_eq!(doc_id(0), "doc-00000000");
        assert_eq!(doc_id(99_999_999).len(), doc_id(7).len());
    }
}
