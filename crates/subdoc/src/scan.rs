//! A byte scanner over stored JSON: finds value boundaries and walks members and elements
//! without building anything. Stored JSON was validated on write, so the scanner only has to
//! be safe (never panic, never loop) on bad input, and report it as `DocNotJson`.

use super::Status;

pub type Span = (usize, usize);

pub fn skip_ws(doc: &[u8], mut at: usize) -> usize {
    while at < doc.len() && matches!(doc[at], b' ' | b'\t' | b'\n' | b'\r') {
        at += 1;
    }
    at
}

/// Bytes of a string searched word by word before a vectorised search takes over: most strings
/// (member names, short values) end within them, and for those the search's setup costs more
/// than the scan.
const SHORT_STRING_BYTES: usize = 24;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `at`, little-endian, if there are eight.
#[inline]
pub(crate) fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The high bit of every byte of `word` that equals `byte`. Exact up to and including the
/// lowest such byte (bytes above it may be marked too), so `trailing_zeros() / 8` of the
/// result, or of several results or-ed together, is the position of the first match.
#[inline]
pub(crate) fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// `at` is an opening quote; returns the index after the closing quote.
pub fn string_end(doc: &[u8], at: usize) -> Result<usize, Status> {
    let mut i = at + 1;
    let short_end = doc.len().min(i + SHORT_STRING_BYTES);
    while i + 8 <= short_end {
        let Some(word) = word_at(doc, i) else { break };
        let hits = bytes_equal(word, b'"') | bytes_equal(word, b'\\');
        if hits == 0 {
            i += 8;
            continue;
        }
        i += (hits.trailing_zeros() / 8) as usize;
        if doc[i] == b'"' {
            return Ok(i + 1);
        }
        i += 2;
    }
    while i < short_end {
        match doc[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    loop {
        let offset = memchr::memchr2(b'"', b'\\', doc.get(i..).ok_or(Status::DocNotJson)?)
            .ok_or(Status::DocNotJson)?;
        i += offset;
        if doc[i] == b'"' {
            return Ok(i + 1);
        }
        i += 2;
    }
}

/// `at` is the first byte of a value; returns the index after it.
pub fn value_end(doc: &[u8], at: usize) -> Result<usize, Status> {
    match doc.get(at) {
        Some(b'"') => string_end(doc, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while i < doc.len() {
                match doc[i] {
                    b'"' => {
                        i = string_end(doc, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(Status::DocNotJson)
        }
        Some(_) => {
            let end = doc[at..]
                .iter()
                .position(|byte| matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(doc.len(), |offset| at + offset);
            if end == at {
                Err(Status::DocNotJson)
            } else {
                Ok(end)
            }
        }
        None => Err(Status::DocNotJson),
    }
}

/// One member of an object: the key's span (quotes included) and the value's span.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub key: Span,
    pub value: Span,
}

/// Walks the members of the object starting at `at` (`{`), calling `each` until it returns
/// false. Returns whether the walk reached the end of the object.
pub fn for_each_member(
    doc: &[u8],
    at: usize,
    each: impl FnMut(Member) -> bool,
) -> Result<bool, Status> {
    for_each_member_in(doc, at, None, each)
}

/// [`for_each_member`] stepping over indexed containers without scanning them.
pub fn for_each_member_in(
    doc: &[u8],
    at: usize,
    index: Option<&super::index::Index<'_>>,
    mut each: impl FnMut(Member) -> bool,
) -> Result<bool, Status> {
    let mut i = skip_ws(doc, at + 1);
    if doc.get(i) == Some(&b'}') {
        return Ok(true);
    }
    loop {
        if doc.get(i) != Some(&b'"') {
            return Err(Status::DocNotJson);
        }
        let key_end = string_end(doc, i)?;
        let colon = skip_ws(doc, key_end);
        if doc.get(colon) != Some(&b':') {
            return Err(Status::DocNotJson);
        }
        let value_start = skip_ws(doc, colon + 1);
        let value_stop = match index {
            Some(index) => index.value_end(doc, value_start)?,
            None => value_end(doc, value_start)?,
        };
        if !each(Member {
            key: (i, key_end),
            value: (value_start, value_stop),
        }) {
            return Ok(false);
        }
        let next = skip_ws(doc, value_stop);
        match doc.get(next) {
            Some(b',') => i = skip_ws(doc, next + 1),
            Some(b'}') => return Ok(true),
            _ => return Err(Status::DocNotJson),
        }
    }
}

/// Walks the elements of the array starting at `at` (`[`), like [`for_each_member`].
pub fn for_each_element(
    doc: &[u8],
    at: usize,
    each: impl FnMut(usize, Span) -> bool,
) -> Result<bool, Status> {
    for_each_element_in(doc, at, None, each)
}

/// [`for_each_element`] stepping over indexed containers without scanning them.
pub fn for_each_element_in(
    doc: &[u8],
    at: usize,
    index: Option<&super::index::Index<'_>>,
    mut each: impl FnMut(usize, Span) -> bool,
) -> Result<bool, Status> {
    let mut i = skip_ws(doc, at + 1);
    if doc.get(i) == Some(&b']') {
        return Ok(true);
    }
    let mut position = 0;
    loop {
        let end = match index {
            Some(index) => index.value_end(doc, i)?,
            None => value_end(doc, i)?,
        };
        if !each(position, (i, end)) {
            return Ok(false);
        }
        position += 1;
        let next = skip_ws(doc, end);
        match doc.get(next) {
            Some(b',') => i = skip_ws(doc, next + 1),
            Some(b']') => return Ok(true),
            _ => return Err(Status::DocNotJson),
        }
    }
}

/// The name the JSON string at `key` (quotes included) spells, unescaped: borrowed from the
/// document unless it holds an escape. `None` if the escapes do not decode.
pub fn member_name(doc: &[u8], key: Span) -> Option<std::borrow::Cow<'_, [u8]>> {
    let inner = &doc[key.0 + 1..key.1 - 1];
    if memchr::memchr(b'\\', inner).is_none() {
        return Some(std::borrow::Cow::Borrowed(inner));
    }
    serde_json::from_slice::<String>(&doc[key.0..key.1])
        .ok()
        .map(|decoded| std::borrow::Cow::Owned(decoded.into_bytes()))
}

/// Whether the JSON string at `key` (quotes included) names `name` (raw bytes).
pub fn key_is(doc: &[u8], key: Span, name: &[u8]) -> bool {
    member_name(doc, key).is_some_and(|decoded| decoded.as_ref() == name)
}

/// The end of the container that starts at `at`.
pub fn container_end(doc: &[u8], at: usize) -> Result<usize, Status> {
    value_end(doc, at)
}

/// Whether the container at `at` has no members/elements.
pub fn is_empty_container(doc: &[u8], at: usize) -> bool {
    matches!(doc.get(skip_ws(doc, at + 1)), Some(b'}' | b']'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_members_and_elements() {
        let doc = br#"{"a" : [1, "x\"]", {"b":{}}], "c\u0064":true,"e":-1.5e3 }"#;
        assert_eq!(value_end(doc, 0), Ok(doc.len()));
        let mut seen = Vec::new();
        for_each_member(doc, 0, |member| {
            seen.push((
                String::from_utf8_lossy(&doc[member.key.0..member.key.1]).into_owned(),
                String::from_utf8_lossy(&doc[member.value.0..member.value.1]).into_owned(),
            ));
            true
        })
        .unwrap();
        assert_eq!(seen[0].1, r#"[1, "x\"]", {"b":{}}]"#);
        assert_eq!(seen[2].1, "-1.5e3");
        assert_eq!(seen[1].0, r#""c\u0064""#);
        let mut keys = Vec::new();
        for_each_member(doc, 0, |member| {
            keys.push(member.key);
            true
        })
        .unwrap();
        assert!(key_is(doc, keys[1], b"cd"));
        assert!(key_is(doc, keys[0], b"a"));
        assert!(!key_is(doc, keys[0], b"c"));
        let array_at = 7;
        let mut elements = Vec::new();
        for_each_element(doc, array_at, |index, span| {
            elements.push((index, span.1 - span.0));
            true
        })
        .unwrap();
        assert_eq!(elements, vec![(0, 1), (1, 6), (2, 8)]);
    }

    /// The word-at-a-time search agrees with a byte-by-byte one for every length, every
    /// escape position (including escapes straddling an eight-byte word) and unterminated
    /// strings.
    #[test]
    fn string_end_matches_a_byte_scan() {
        fn reference(doc: &[u8], at: usize) -> Result<usize, Status> {
            let mut i = at + 1;
            while i < doc.len() {
                match doc[i] {
                    b'"' => return Ok(i + 1),
                    b'\\' => i += 2,
                    _ => i += 1,
                }
            }
            Err(Status::DocNotJson)
        }
        for length in 0..70 {
            for escape_at in (0..length).map(Some).chain([None]) {
                for escaped in [b'"', b'\\', b'n'] {
                    let mut inner = vec![b'x'; length];
                    if let Some(at) = escape_at {
                        inner[at] = b'\\';
                        if at + 1 < length {
                            inner[at + 1] = escaped;
                        }
                    }
                    for closed in [true, false] {
                        let mut doc = vec![b'"'];
                        doc.extend_from_slice(&inner);
                        if closed {
                            doc.extend_from_slice(b"\",1]");
                        }
                        assert_eq!(
                            string_end(&doc, 0),
                            reference(&doc, 0),
                            "{}",
                            String::from_utf8_lossy(&doc)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn garbage_is_not_json_and_never_panics() {
        for bad in [
            &b"{"[..],
            b"{\"a\"",
            b"{\"a\":",
            b"[1,",
            b"\"abc",
            b"{\"a\" 1}",
            b"[1 2]",
        ] {
            let whole = value_end(bad, 0).and_then(|end| {
                if bad[0] == b'{' {
                    for_each_member(bad, 0, |_| true).map(|_| end)
                } else {
                    for_each_element(bad, 0, |_, _| true).map(|_| end)
                }
            });
            assert_eq!(
                whole,
                Err(Status::DocNotJson),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
