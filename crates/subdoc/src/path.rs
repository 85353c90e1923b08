//! Couchbase sub-document paths: `a.b[2].c`, `` `a.b` `` (backticks quote a name, a doubled
//! backtick is one backtick), `[-1]` (the last element); the empty path is the whole value.

use std::borrow::Cow;

use smallvec::SmallVec;

use super::Status;

/// Most components a path may have (kv_engine's limit).
pub const MAX_COMPONENTS: usize = 32;
/// Longest path, bytes.
pub const MAX_PATH_BYTES: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Component<'a> {
    /// An object member name, unescaped.
    Key(Cow<'a, [u8]>),
    /// An array index; `-1` is the last element.
    Index(i64),
}

/// Bytes that end an unquoted name (a table: paths are parsed on every lookup).
const ENDS_NAME: [bool; 256] = {
    let mut table = [false; 256];
    table[b'.' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table[b'`' as usize] = true;
    table
};

/// A parsed path. Paths of up to four components (nearly all of them) live on the stack, so a
/// lookup of many paths allocates nothing for them.
pub type Path<'a> = SmallVec<[Component<'a>; 4]>;

/// [`parse_path`] into a `Vec`.
pub fn parse(path: &[u8]) -> Result<Vec<Component<'_>>, Status> {
    parse_path(path).map(SmallVec::into_vec)
}

pub fn parse_path(path: &[u8]) -> Result<Path<'_>, Status> {
    if path.len() > MAX_PATH_BYTES {
        return Err(Status::PathE2big);
    }
    let mut components = Path::new();
    let mut at = 0;
    // Whether a name may start here (start of path or after a dot).
    let mut expect_name = true;
    while at < path.len() {
        match path[at] {
            b'[' => {
                let end = path[at..]
                    .iter()
                    .position(|byte| *byte == b']')
                    .map(|offset| at + offset)
                    .ok_or(Status::PathEinval)?;
                let digits = &path[at + 1..end];
                let index = parse_index(digits)?;
                if expect_name && !components.is_empty() {
                    // `a.[0]`: a dot must be followed by a name.
                    return Err(Status::PathEinval);
                }
                components.push(Component::Index(index));
                at = end + 1;
                expect_name = false;
                if at < path.len() {
                    match path[at] {
                        b'.' => {
                            at += 1;
                            expect_name = true;
                            if at == path.len() {
                                return Err(Status::PathEinval);
                            }
                        }
                        b'[' => {}
                        _ => return Err(Status::PathEinval),
                    }
                }
            }
            b'`' => {
                if !expect_name {
                    return Err(Status::PathEinval);
                }
                let mut name = Vec::new();
                let mut i = at + 1;
                loop {
                    match path.get(i) {
                        None => return Err(Status::PathEinval),
                        Some(b'`') if path.get(i + 1) == Some(&b'`') => {
                            name.push(b'`');
                            i += 2;
                        }
                        Some(b'`') => break,
                        Some(byte) => {
                            name.push(*byte);
                            i += 1;
                        }
                    }
                }
                components.push(Component::Key(Cow::Owned(name)));
                at = i + 1;
                expect_name = false;
                at = after_name(path, at, &mut expect_name)?;
            }
            _ => {
                if !expect_name {
                    return Err(Status::PathEinval);
                }
                let end = name_end(path, at);
                if end == at || path.get(end) == Some(&b']') || path.get(end) == Some(&b'`') {
                    return Err(Status::PathEinval);
                }
                components.push(Component::Key(Cow::Borrowed(&path[at..end])));
                expect_name = false;
                at = after_name(path, end, &mut expect_name)?;
            }
        }
        if components.len() > MAX_COMPONENTS {
            return Err(Status::PathE2big);
        }
    }
    if expect_name && !components.is_empty() {
        return Err(Status::PathEinval);
    }
    Ok(components)
}

/// Where the unquoted name starting at `at` ends: the first of `.[]` or a backtick, or the end
/// of the path. Eight bytes at a time, then byte by byte.
fn name_end(path: &[u8], mut at: usize) -> usize {
    use super::scan::{bytes_equal, word_at};
    while let Some(word) = word_at(path, at) {
        let hits = bytes_equal(word, b'.')
            | bytes_equal(word, b'[')
            | bytes_equal(word, b']')
            | bytes_equal(word, b'`');
        if hits != 0 {
            return at + (hits.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    path[at..]
        .iter()
        .position(|byte| ENDS_NAME[*byte as usize])
        .map_or(path.len(), |offset| at + offset)
}

/// After a name: end of path, `.name`, or `[index]`.
fn after_name(path: &[u8], at: usize, expect_name: &mut bool) -> Result<usize, Status> {
    match path.get(at) {
        None | Some(b'[') => Ok(at),
        Some(b'.') => {
            *expect_name = true;
            if at + 1 == path.len() {
                return Err(Status::PathEinval);
            }
            Ok(at + 1)
        }
        Some(_) => Err(Status::PathEinval),
    }
}

fn parse_index(digits: &[u8]) -> Result<i64, Status> {
    if digits == b"-1" {
        return Ok(-1);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Status::PathEinval);
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .filter(|index| *index <= i64::from(i32::MAX))
        .ok_or(Status::PathEinval)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(name: &str) -> Component<'static> {
        Component::Key(Cow::Owned(name.as_bytes().to_vec()))
    }

    #[test]
    fn names_indexes_and_backticks() {
        assert_eq!(parse(b""), Ok(vec![]));
        assert_eq!(parse(b"a.b"), Ok(vec![key("a"), key("b")]));
        assert_eq!(
            parse(b"a[0][-1].c"),
            Ok(vec![
                key("a"),
                Component::Index(0),
                Component::Index(-1),
                key("c")
            ])
        );
        assert_eq!(parse(b"[2]"), Ok(vec![Component::Index(2)]));
        assert_eq!(parse(b"`a.b`.c"), Ok(vec![key("a.b"), key("c")]));
        assert_eq!(parse(b"`a``b`"), Ok(vec![key("a`b")]));
        assert_eq!(parse(b"`x`[1]"), Ok(vec![key("x"), Component::Index(1)]));
    }

    #[test]
    fn malformed_paths() {
        for bad in [
            &b"a."[..],
            b".a",
            b"a..b",
            b"a[",
            b"a[x]",
            b"a[-2]",
            b"a[]",
            b"`a",
            b"a]",
            b"a[0]b",
            b"a.[0]",
            b"a`b`",
        ] {
            assert_eq!(
                parse(bad),
                Err(Status::PathEinval),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = vec!["a"; MAX_COMPONENTS + 1].join(".");
        assert_eq!(parse(deep.as_bytes()), Err(Status::PathE2big));
        let long = "a".repeat(MAX_PATH_BYTES + 1);
        assert_eq!(parse(long.as_bytes()), Err(Status::PathE2big));
    }
}
