//! MIME multipart bodies as CouchDB uses them: `multipart/related` documents with attachments
//! (PUT and GET with `attachments=true`) and `multipart/mixed` for `open_revs`.
//! The parser is a pure function over bytes, bounded and panic-free, so it can be fuzzed.

use bytes::{BufMut, Bytes, BytesMut};

/// Most parts accepted in one body.
pub const PARTS_MAX: usize = 10_000;
/// Most header bytes in one part.
const PART_HEADERS_BYTES_MAX: usize = 16 << 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Part {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The `boundary` parameter of a multipart content type.
pub fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|parameter| {
        let (key, value) = parameter.trim().split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let value = value.trim().trim_matches('"');
        (!value.is_empty() && value.len() <= 200).then(|| value.to_string())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|offset| from + offset)
}

/// Splits `body` into parts. Accepts CRLF or bare LF line ends; requires the closing delimiter.
pub fn parse_multipart(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let body_bytes = Bytes::copy_from_slice(body);
    let delimiter = format!("--{boundary}").into_bytes();
    let mut at = find(body, &delimiter, 0).ok_or("no opening boundary")?;
    let mut parts = Vec::new();
    loop {
        at += delimiter.len();
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        // Skip transport padding and the line end after the delimiter.
        while matches!(body.get(at), Some(b' ') | Some(b'\t')) {
            at += 1;
        }
        at = match body.get(at..at + 2) {
            Some(b"\r\n") => at + 2,
            _ if body.get(at) == Some(&b'\n') => at + 1,
            _ => return Err("malformed boundary line".into()),
        };
        let (headers, body_start) = parse_headers(body, at)?;
        let next = find(body, &delimiter, body_start).ok_or("missing closing boundary")?;
        // The line end before the delimiter belongs to the delimiter.
        let mut body_end = next;
        if body_end > body_start && body[body_end - 1] == b'\n' {
            body_end -= 1;
            if body_end > body_start && body[body_end - 1] == b'\r' {
                body_end -= 1;
            }
        }
        if body_end < body_start {
            return Err("malformed part".into());
        }
        parts.push(Part {
            headers,
            body: body_bytes.slice(body_start..body_end),
        });
        if parts.len() > PARTS_MAX {
            return Err("too many parts".into());
        }
        at = next;
    }
}

type Headers = Vec<(String, String)>;

fn parse_headers(body: &[u8], mut at: usize) -> Result<(Headers, usize), String> {
    let start = at;
    let mut headers = Vec::new();
    loop {
        if at - start > PART_HEADERS_BYTES_MAX {
            return Err("part headers too long".into());
        }
        let line_end = find(body, b"\n", at).ok_or("unterminated part headers")?;
        let mut line = &body[at..line_end];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        at = line_end + 1;
        if line.is_empty() {
            return Ok((headers, at));
        }
        let text = std::str::from_utf8(line).map_err(|_| "part header is not UTF-8")?;
        let (key, value) = text.split_once(':').ok_or("malformed part header")?;
        headers.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
}

/// Builds a multipart body from (headers, body) parts.
pub fn write_multipart(boundary: &str, parts: &[(Vec<(String, String)>, Bytes)]) -> Bytes {
    let mut out = BytesMut::new();
    for (headers, body) in parts {
        out.put_slice(format!("--{boundary}\r\n").as_bytes());
        for (key, value) in headers {
            out.put_slice(format!("{key}: {value}\r\n").as_bytes());
        }
        out.put_slice(b"\r\n");
        out.put_slice(body);
        out.put_slice(b"\r\n");
    }
    out.put_slice(format!("--{boundary}--").as_bytes());
    out.freeze()
}

/// A boundary that does not occur in any of the bodies.
pub fn new_boundary(bodies: &[&[u8]]) -> String {
    loop {
        let candidate = format!("{:032x}", rand::random::<u128>());
        let delimiter = format!("--{candidate}");
        if !bodies
            .iter()
            .any(|body| find(body, delimiter.as_bytes(), 0).is_some())
        {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_binary_bodies() {
        let parts = vec![
            (
                vec![("Content-Type".to_string(), "application/json".to_string())],
                Bytes::from_static(b"{\"a\":1}"),
            ),
            (
                vec![],
                Bytes::from_static(b"line1\r\n--not-the-boundary\r\n\x00\xff"),
            ),
        ];
        let body = write_multipart("B0UND", &parts);
        let parsed = parse_multipart(&body, "B0UND").expect("parse");
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].header("content-type"), Some("application/json"));
        assert_eq!(parsed[0].body, parts[0].1);
        assert_eq!(parsed[1].body, parts[1].1);
    }

    #[test]
    fn accepts_bare_line_feeds() {
        let body = b"--x\nContent-Type: text/plain\n\nhello\n--x--";
        let parsed = parse_multipart(body, "x").expect("parse");
        assert_eq!(&parsed[0].body[..], b"hello");
    }

    #[test]
    fn rejects_malformed_bodies() {
        assert!(parse_multipart(b"garbage", "x").is_err());
        assert!(parse_multipart(b"--x\r\nA: b\r\n\r\nbody without end", "x").is_err());
        assert!(parse_multipart(b"--x\r\nno colon\r\n\r\nb\r\n--x--", "x").is_err());
        assert!(parse_multipart(b"--xjunk", "x").is_err());
        for cut in 0..40 {
            let body = b"--x\r\nA: b\r\n\r\nhello\r\n--x\r\n\r\nworld\r\n--x--";
            let _ = parse_multipart(&body[..cut.min(body.len())], "x");
        }
    }

    #[test]
    fn reads_boundary_parameter() {
        assert_eq!(
            boundary("multipart/related; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert_eq!(
            boundary("multipart/mixed;boundary=xyz").as_deref(),
            Some("xyz")
        );
        assert_eq!(boundary("multipart/related"), None);
    }
}
