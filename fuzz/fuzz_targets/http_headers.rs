#![no_main]
//! What the HTTP door parses itself of a request: `Range` against an attachment of any size,
//! `If-None-Match`, a `Content-Encoding: gzip` body within a limit, a CORS preflight, a form
//! part's `Content-Disposition`, and the request-line rewriter fed in chunks. None panics; every range lies inside the attachment,
//! first byte before last; a decoded body is never past its limit; the rewriter only grows
//! the bytes by two per encoded byte and changes nothing after the first line break.
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use settee_http_wire::cors::{split_list, CorsConfig};
use settee_http_wire::encoding::{decode_body, BodyEncoding};
use settee_http_wire::range::{self, RangeRequest};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 5 {
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
        4 => {
            // A form part's Content-Disposition (multipart/form-data uploads).
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = settee_http::form_upload::disposition(text);
            }
        }
        3 => {
            // The first byte of the rest says where the bytes are split into two reads.
            let Some((&split, input)) = rest.split_first() else {
                return;
            };
            let split = usize::from(split).min(input.len());
            let mut quoter = settee_http_wire::request_line::RequestLineQuoter::default();
            let mut out = Vec::new();
            for (index, chunk) in [&input[..split], &input[split..]].into_iter().enumerate() {
                match quoter.feed(chunk, index == 0) {
                    Some(rewritten) => out.extend_from_slice(&rewritten),
                    None => out.extend_from_slice(chunk),
                }
            }
            let encoded = out.len() - input.len();
            assert_eq!(encoded % 2, 0);
            let line_end = input.iter().position(|&byte| byte == b'\n').map_or(input.len(), |at| at + 1);
            assert_eq!(&out[line_end + encoded..], &input[line_end..]);
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
