//! The one set of document limits both doors obey (issue 18): a document's size and the
//! nesting depth of its JSON, checked by the engine's mutation entry points
//! (`Bucket::update_docs`, `Bucket::kv_mutate`, `Bucket::mutate_in`) whatever door the write
//! came through, and used by the readers that walk many documents (view and Mango indexers,
//! feeds, replication reads) to leave alone a document an older version stored past them.
//! Key length is the third limit, [`crate::KEY_BYTES_MAX`], checked on every write.

/// CouchDB's `max_document_size` default (8 MB). Couchbase allows 20 MiB items; one setting
/// serves both doors, so a document one door stores the other can always serve.
pub const DOC_BYTES_MAX_DEFAULT: usize = 8_000_000;

/// Deepest JSON nesting a document may have by default. A deeper value would be refused by
/// the HTTP door's request check, breaks the JavaScript map of every view that sees it, and
/// cannot be parsed by serde_json (recursion limit 128), so no reader could use it.
pub const JSON_DEPTH_MAX_DEFAULT: usize = 100;

/// Limits every stored document obeys (configured once, from `--max-document-size` and
/// `--max-json-depth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocLimits {
    /// Largest document: its body plus its extended attributes, in bytes.
    pub doc_bytes_max: usize,
    /// Deepest nesting of objects and arrays in a JSON body (1 for `{}`).
    pub json_depth_max: usize,
}

impl Default for DocLimits {
    fn default() -> Self {
        DocLimits {
            doc_bytes_max: DOC_BYTES_MAX_DEFAULT,
            json_depth_max: JSON_DEPTH_MAX_DEFAULT,
        }
    }
}

/// Which limit a document passes. An expected outcome of a write (the client sent too much),
/// mapped by each door: HTTP 413 / 400, KV `E2BIG` / `EINVAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("document of {size} bytes is larger than the limit of {max} bytes")]
    TooLarge { size: usize, max: usize },
    #[error("JSON nested deeper than {max} levels")]
    TooDeep { max: usize },
}

impl DocLimits {
    /// Checks a document: `body` (JSON when `json`) and `xattrs_len` bytes of extended
    /// attributes. Linear in the body; never parses it.
    pub fn check(&self, body: &[u8], json: bool, xattrs_len: usize) -> Result<(), LimitError> {
        let size = body.len().saturating_add(xattrs_len);
        if size > self.doc_bytes_max {
            return Err(LimitError::TooLarge {
                size,
                max: self.doc_bytes_max,
            });
        }
        if json && json_deeper_than(body, self.json_depth_max) {
            return Err(LimitError::TooDeep {
                max: self.json_depth_max,
            });
        }
        Ok(())
    }
}

/// Whether `bytes` (JSON, or anything: it is not validated) nests objects and arrays deeper
/// than `max`. Brackets inside strings do not count. Stops at the first level past `max`, so
/// a hostile 100,000-deep value costs no more than `max` levels of scanning plus the prefix.
pub fn json_deeper_than(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_containers_not_brackets_in_strings() {
        assert!(!json_deeper_than(br#"{"a":[1]}"#, 2));
        assert!(json_deeper_than(br#"{"a":[[1]]}"#, 2));
        assert!(!json_deeper_than(br#"{"a":"[[[[[[[[[["}"#, 1));
        assert!(!json_deeper_than(br#"{"a":"\"[[[["}"#, 1));
        assert!(!json_deeper_than(b"17", 0));
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(json_deeper_than(deep.as_bytes(), 100));
        assert!(!json_deeper_than(deep.as_bytes(), 100_000));
    }

    #[test]
    fn size_counts_the_body_and_the_xattrs() {
        let limits = DocLimits {
            doc_bytes_max: 10,
            json_depth_max: 2,
        };
        assert_eq!(limits.check(b"0123456789", false, 0), Ok(()));
        assert_eq!(
            limits.check(b"0123456789", false, 1),
            Err(LimitError::TooLarge { size: 11, max: 10 })
        );
        assert_eq!(
            limits.check(b"[[[1]]]", true, 0),
            Err(LimitError::TooDeep { max: 2 })
        );
        // A binary value is never parsed as JSON, so its brackets mean nothing.
        assert_eq!(limits.check(b"[[[1]]]", false, 0), Ok(()));
    }
}
