#![no_main]
//! View query parameters from a query string or a JSON body, then the plan checks, never
//! panic; every key they accept encodes to collation-ordered bytes without panicking.
use libfuzzer_sys::fuzz_target;
use settee_http::view_params::ViewParams;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let pairs = settee_http::request::parse_query(Some(text));
    if let Ok(params) = ViewParams::from_query(&pairs) {
        // (reduce, raw collation): every combination a design document can ask for.
        for (reduce, raw) in [(true, false), (false, false), (true, true), (false, true)] {
            let _ = params.plan(reduce, raw);
        }
        for key in [&params.key, &params.start_key, &params.end_key].into_iter().flatten() {
            let _ = settee_collate::encode_key(key);
        }
    }
    if let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data) {
        let mut params = ViewParams::default();
        if params.merge_json(&body).is_ok() {
            let _ = params.plan(true, false);
            let _ = params.plan(false, true);
            for key in params.keys.iter().flatten() {
                let _ = settee_collate::encode_key(key);
            }
        }
    }
});
