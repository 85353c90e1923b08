#![no_main]
//! Any JSON request body (depth check + parse): never panics.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = settee_http::request::parse_json(data, 100);
});
