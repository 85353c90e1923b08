#![no_main]
//! A request path as the router receives it: splitting and percent-decoding never panics, a
//! path that splits shows no replacement character that the raw path did not spell, and a
//! refused one names a segment that exists and gets an error.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    // `[chttpd] decode_plus_to_space` either way.
    let plus_to_space = data.first().is_some_and(|byte| byte & 1 == 1);
    match settee_http::request::split_path(path, plus_to_space) {
        Ok(segments) => {
            let replacement = '\u{FFFD}';
            let decoded_replacements: usize = segments.iter().map(|s| s.matches(replacement).count()).sum();
            // Every U+FFFD in a decoded segment was sent as such (raw or percent-encoded),
            // never made up for invalid bytes.
            let sent = path.matches(replacement).count() + path.to_ascii_uppercase().matches("%EF%BF%BD").count();
            assert!(decoded_replacements <= sent);
        }
        Err(refused) => {
            assert!(refused.index < refused.segments.len());
            let _ = refused.error();
        }
    }
});
