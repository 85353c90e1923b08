#![no_main]
//! A document body as PUT/POST/_bulk_docs receive it: never panics, and a parsed body is
//! always a JSON object.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if settee_http::request::check_json_limits(data, 100).is_err() {
        return;
    }
    if let Ok(doc) = settee_http::couch_doc::parse_doc(data) {
        let value: serde_json::Value = serde_json::from_slice(&doc.body).expect("stored body is JSON");
        assert!(value.is_object());
    }
});
