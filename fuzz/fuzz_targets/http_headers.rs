#![no_main]
//! Request headers the HTTP door parses itself: `Range` against an attachment of any size,
//! `If-None-Match`, a `Content-Encoding: gzip` body within a limit, and a CORS preflight. None
//! panics; every range lies inside the attachment, first byte before last; a decoded body is
//! never past its limit.
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use settee_http::cors::{split_list, CorsConfig};
use settee_http::encoding::{decode_body, BodyEncoding};
use settee_http::range::{self, RangeRequest};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            // The attachment's size comes from the text's length so both vary together.
            let size = (text.len() as u64 * 7) % 97;
            if let RangeRequest::Ranges(ranges) = range::parse(Some(text), size) {
                assert!(!ranges.is_empty() && ranges.len() <= range::RANGES_MAX);
                let attachment = Bytes::from(vec![b'a'; size as usize]);
                for (first, last) in &ranges {
                    assert!(first <= last && *last < size, "{text:?} {size}");
                    assert_eq!(range::slice(&attachment, (*first, *last)).len() as u64, last - first + 1);
                }
                let _ = range::byteranges_body(&attachment, &ranges, "application/octet-stream", "b");
            }
            let _ = settee_http::response::if_none_match(Some(text), "\"1-a\"");
        }
        1 => {
            let limit = 4096;
            if let Ok(decoded) = decode_body(BodyEncoding::Gzip, Bytes::copy_from_slice(rest), limit) {
                assert!(decoded.len() <= limit);
            }
        }
        _ => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            let mut parts = text.splitn(3, '\n');
            let (origin, method, headers) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            let config = CorsConfig {
                enabled: true,
                origins: split_list("http://a.example, *"),
                ..CorsConfig::default()
            };
            let mut request = hyper::HeaderMap::new();
            for (name, value) in [
                ("origin", origin),
                ("access-control-request-method", method),
                ("access-control-request-headers", headers),
            ] {
                if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
                    request.insert(name, value);
                }
            }
            let _ = config.preflight(&hyper::Method::OPTIONS, &request);
        }
    }
});
