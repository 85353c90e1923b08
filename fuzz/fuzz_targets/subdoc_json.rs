#![no_main]
//! Sub-document lookups and edits on arbitrary bytes with arbitrary paths: never a panic, and
//! an edit of a valid JSON document yields valid JSON.
use libfuzzer_sys::fuzz_target;
use settee_engine::subdoc::{json, path};

fuzz_target!(|data: &[u8]| {
    // Layout: op byte, path length byte, path, value length byte, value, then the document.
    if data.len() < 3 {
        return;
    }
    let op = data[0];
    let path_len = data[1] as usize;
    let Some(path_bytes) = data.get(2..2 + path_len) else { return };
    let Some(&value_len) = data.get(2 + path_len) else { return };
    let value_at = 3 + path_len;
    let Some(value) = data.get(value_at..value_at + value_len as usize) else { return };
    let doc = &data[value_at + value_len as usize..];
    if let Ok(components) = path::parse(path_bytes) {
        let answers = json::resolve_all(doc, &[components.as_slice()]);
        if let Ok((start, end)) = answers[0] {
            assert!(start <= end && end <= doc.len());
        }
    }
    let edits = json::Edit::ALL;
    let edit = edits[op as usize % edits.len()];
    let mkdir_p = op & 0x80 != 0;
    if let Ok((edited, _)) = json::apply(doc, edit, path_bytes, value, mkdir_p) {
        if serde_json::from_slice::<serde::de::IgnoredAny>(doc).is_ok() {
            assert!(
                serde_json::from_slice::<serde::de::IgnoredAny>(&edited).is_ok(),
                "edit made invalid JSON: {}",
                String::from_utf8_lossy(&edited)
            );
        }
    }
});
