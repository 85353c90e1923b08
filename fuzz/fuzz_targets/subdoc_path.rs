#![no_main]
//! Sub-document paths as clients send them: parsing never panics, and what parses has at
//! most the allowed number of components.
use libfuzzer_sys::fuzz_target;
use settee_engine::subdoc::path;

fuzz_target!(|data: &[u8]| {
    if let Ok(components) = path::parse(data) {
        assert!(components.len() <= path::MAX_COMPONENTS);
        assert!(data.len() <= path::MAX_PATH_BYTES);
    }
});
