//! `_find` bookmarks: where the last page stopped, as the index key and document id of the
//! last row that matched while the limit lasted (CouchDB's `mango_json_bookmark`). The next
//! request with the bookmark resumes strictly after that row. The text is opaque to clients:
//! unpadded base64url of the JSON `[key, id]` (CouchDB packs an Erlang term instead).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::error::{MangoError, MangoResult};

/// The row a page ended on. `key` is the index key: the id itself for `_all_docs`, the array
/// of field values for a JSON index.
#[derive(Debug, Clone, PartialEq)]
pub struct Bookmark {
    pub key: Value,
    pub id: String,
}

impl Bookmark {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(json!([self.key, self.id]).to_string())
    }

    pub fn decode(text: &str) -> MangoResult<Bookmark> {
        let invalid = || {
            MangoError::bad_request(
                "invalid_bookmark",
                format!("Invalid bookmark value: {}", json!(text)),
            )
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim_end_matches('='))
            .map_err(|_| invalid())?;
        match serde_json::from_slice::<Value>(&bytes).map_err(|_| invalid())? {
            Value::Array(mut parts) if parts.len() == 2 => {
                let Value::String(id) = parts.pop().unwrap_or_default() else {
                    return Err(invalid());
                };
                let key = parts.pop().unwrap_or_default();
                Ok(Bookmark { key, id })
            }
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_round_trip() {
        for bookmark in [
            Bookmark {
                key: json!("doc-1"),
                id: "doc-1".into(),
            },
            Bookmark {
                key: json!([30, "é", null, {"a": [1]}]),
                id: "x\u{0}y".into(),
            },
        ] {
            let text = bookmark.encode();
            assert!(text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            assert_eq!(Bookmark::decode(&text).expect("decodes"), bookmark);
        }
    }

    #[test]
    fn anything_else_is_an_invalid_bookmark() {
        for text in ["nil", "!!!", "e30", "WzFd", "WzEsMl0"] {
            let error = Bookmark::decode(text).expect_err("invalid");
            assert_eq!(error.error(), "invalid_bookmark", "{text}");
            assert_eq!(
                error.reason(),
                format!("Invalid bookmark value: \"{text}\"")
            );
        }
    }
}
