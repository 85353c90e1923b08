//! `Location` headers as CouchDB writes them: an absolute URI built from the host the client
//! used (`X-Forwarded-Host` first, or the header `[httpd] x_forwarded_host` names, then
//! `Host`), the scheme a proxy reports (`X-Forwarded-Ssl: on`, `X-Forwarded-Proto`, or the
//! headers `x_forwarded_ssl` / `x_forwarded_proto` name), and
//! path segments percent-encoded as CouchDB's `couch_util:url_encode` encodes them: letters,
//! digits and `_ . - :` stay, every other byte (`/` of a design document's id included) is
//! `%XX`.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::request::Req;

/// Bytes a `Location` path segment keeps as they are besides letters and digits.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b':');

/// One path segment (a database name, a whole document id, an attachment name) encoded.
pub fn encode_segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// `scheme://host/seg/seg...` for the request's client; a request without any host header
/// (HTTP/1.0) gets the path alone.
pub fn absolute_uri(req: &Req, segments: &[&str]) -> String {
    let mut path = String::new();
    for segment in segments {
        path.push('/');
        path.push_str(&encode_segment(segment));
    }
    let host = req
        .header(&req.settings.x_forwarded_host)
        .or_else(|| req.header("host"))
        .map(str::trim)
        .filter(|host| !host.is_empty());
    match host {
        Some(host) => format!("{}://{host}{path}", scheme(req)),
        None => path,
    }
}

fn scheme(req: &Req) -> &str {
    if req.header(&req.settings.x_forwarded_ssl) == Some("on") {
        return "https";
    }
    match req.header(&req.settings.x_forwarded_proto).map(str::trim) {
        Some(proto)
            if !proto.is_empty() && proto.bytes().all(|byte| byte.is_ascii_alphabetic()) =>
        {
            proto
        }
        _ => "http",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded_as_couchdb_encodes_them() {
        assert_eq!(
            encode_segment("a~b c:d(e)!*'"),
            "a%7Eb%20c:d%28e%29%21%2A%27"
        );
        assert_eq!(encode_segment("_design/x~y/z"), "_design%2Fx%7Ey%2Fz");
        assert_eq!(encode_segment("f.1-x_y"), "f.1-x_y");
        assert_eq!(encode_segment("caf\u{e9}"), "caf%C3%A9");
    }
}
