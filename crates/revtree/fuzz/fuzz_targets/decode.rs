//! `RevTree::decode` faces bytes read back from disk: it must never panic, and whatever it
//! accepts must re-encode to the very same bytes (the encoding is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_revtree::RevTree;

fuzz_target!(|data: &[u8]| {
    if let Ok(tree) = RevTree::decode(data) {
        let mut out = Vec::new();
        tree.encode(&mut out);
        assert_eq!(out, data);
    }
});
