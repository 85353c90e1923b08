//! Paths as a rewrite builds them: the design document's prefix, segments and query values
//! percent-encoded, and the `.` / `..` segments resolved against the prefix.

use crate::RewriteError;

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_escaped(byte: u8, out: &mut String) {
    out.push('%');
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0x0f)]));
}

/// Letters, digits and `-._~`: what mochiweb's `quote_plus` leaves as they are.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// A query string key or value as CouchDB encodes it (mochiweb `quote_plus`): a space is `+`,
/// every byte but letters, digits and `-._~` is `%XX`.
pub fn quote_plus(text: &str, out: &mut String) {
    for &byte in text.as_bytes() {
        if is_unreserved(byte) {
            out.push(char::from(byte));
        } else if byte == b' ' {
            out.push('+');
        } else {
            push_escaped(byte, out);
        }
    }
}

/// One path segment: as [`quote_plus`] but a space is `%20` (read the same whatever
/// `decode_plus_to_space` says), and a segment that is exactly `.` or `..` has its dots
/// escaped, so a value taken from the request can never climb out of where the rule put it.
pub fn quote_segment(text: &str, out: &mut String) {
    if text == "." || text == ".." {
        for _ in 0..text.len() {
            out.push_str("%2E");
        }
        return;
    }
    quote_literal(text, out);
}

/// A segment a rule wrote itself (`to`): as [`quote_segment`], but `.` and `..` keep their
/// meaning.
pub fn quote_literal(text: &str, out: &mut String) {
    for &byte in text.as_bytes() {
        if is_unreserved(byte) {
            out.push(char::from(byte));
        } else {
            push_escaped(byte, out);
        }
    }
}

/// `/{db}/_design/{ddoc}` with both names encoded as CouchDB's `couch_util:url_encode` does
/// (letters, digits and `_.-:` kept): a database name's `/` is `%2F`.
pub fn prefix(db: &str, ddoc: &str) -> String {
    let mut out = String::with_capacity(db.len() + ddoc.len() + 10);
    out.push('/');
    url_encode(db, &mut out);
    out.push_str("/_design/");
    url_encode(ddoc, &mut out);
    out
}

fn url_encode(text: &str, out: &mut String) {
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-' | b':') {
            out.push(char::from(byte));
        } else {
            push_escaped(byte, out);
        }
    }
}

/// A path a rewrite function wrote as it wants it sent: bytes a request target may not hold
/// (spaces, quotes, non-ASCII, a `%` not followed by two hex digits) are percent-encoded,
/// the rest is kept, `%2F` in a database name included.
pub fn as_target_path(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (index, &byte) in bytes.iter().enumerate() {
        let kept = is_unreserved(byte)
            || b"!$&'()*+,;=:@/".contains(&byte)
            || (byte == b'%'
                && bytes.get(index + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(index + 2).is_some_and(u8::is_ascii_hexdigit));
        if kept {
            out.push(char::from(byte));
        } else {
            push_escaped(byte, &mut out);
        }
    }
    out
}

/// `relative` (an encoded path, `/`-separated) resolved against `prefix` as CouchDB resolves
/// it: empty and `.` segments dropped, `..` removes the segment before it. The result starts
/// with `/`; a path that climbs above the server root is [`RewriteError::AboveRoot`].
pub fn resolve(prefix: &str, relative: &str) -> Result<String, RewriteError> {
    let mut kept: Vec<&str> = Vec::new();
    for segment in prefix.split('/').chain(relative.split('/')) {
        match segment {
            "" | "." => {}
            ".." => {
                if kept.pop().is_none() {
                    return Err(RewriteError::AboveRoot);
                }
            }
            segment => kept.push(segment),
        }
    }
    let mut out = String::with_capacity(prefix.len() + relative.len() + 1);
    for segment in &kept {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(text: &str, quote: fn(&str, &mut String)) -> String {
        let mut out = String::new();
        quote(text, &mut out);
        out
    }

    #[test]
    fn encodings_match_couchdbs() {
        assert_eq!(quoted("a b/c?d=é", quote_plus), "a+b%2Fc%3Fd%3D%C3%A9");
        assert_eq!(quoted("[\"a\",1]", quote_plus), "%5B%22a%22%2C1%5D");
        assert_eq!(quoted("a b/c", quote_segment), "a%20b%2Fc");
        assert_eq!(quoted("..", quote_segment), "%2E%2E");
        assert_eq!(quoted("...", quote_segment), "...");
        assert_eq!(
            prefix("test_suite/with_slashes", "app"),
            "/test_suite%2Fwith_slashes/_design/app"
        );
        assert_eq!(
            as_target_path("_show/a b/%2F/100%"),
            "_show/a%20b/%2F/100%25"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_design_document() {
        let prefix = "/db/_design/app";
        assert_eq!(
            resolve(prefix, "foo.txt"),
            Ok("/db/_design/app/foo.txt".into())
        );
        assert_eq!(resolve(prefix, "./a//b/"), Ok("/db/_design/app/a/b".into()));
        assert_eq!(resolve(prefix, "../../_changes"), Ok("/db/_changes".into()));
        assert_eq!(resolve(prefix, "../../../_uuids"), Ok("/_uuids".into()));
        assert_eq!(resolve(prefix, "/abs"), Ok("/db/_design/app/abs".into()));
        assert_eq!(resolve(prefix, "../../.."), Ok("/".into()));
        assert_eq!(
            resolve(prefix, "../../../../x"),
            Err(RewriteError::AboveRoot)
        );
    }
}
