#![no_main]
//! multipart/related and multipart/mixed bodies: parsing never panics, and every part's body
//! lies inside the input.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let cut = (split as usize).min(rest.len()).min(70);
    let Ok(boundary) = std::str::from_utf8(&rest[..cut]) else { return };
    if boundary.is_empty() {
        return;
    }
    if let Ok(parts) = settee_http::multipart::parse_multipart(&rest[cut..], boundary) {
        let total: usize = parts.iter().map(|part| part.body.len()).sum();
        assert!(total <= rest.len());
    }
});
