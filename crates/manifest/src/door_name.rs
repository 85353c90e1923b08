//! The names under which the CouchDB door shows collections (`docs/format/collections.md`,
//! "CouchDB-door database names"). CouchDB database names are lower case; Couchbase names add
//! upper case and `%`. A collection other than `_default._default` of bucket `B` is the
//! database `B$scope$collection` with each name encoded: `[a-z0-9_-]` as is, a maximal run of
//! capitals as `(` the run in lower case `)`, `%` as `()`. The encoding never emits `$`, so the
//! last two `$` of a name split it even when the bucket's own name holds `$`.

use crate::manifest::DEFAULT_NAME;

use std::borrow::Cow;

/// A database name split into its bucket and the collection it names (names decoded; borrowed
/// from the name when it holds no capitals or `%`, the common case, so resolving a request's
/// database allocates nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoorName<'a> {
    pub bucket: &'a str,
    pub scope: Cow<'a, str>,
    pub collection: Cow<'a, str>,
}

/// A scope or collection name in the door's alphabet.
pub fn encode_part(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut in_capitals = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if !in_capitals {
                out.push('(');
                in_capitals = true;
            }
            out.push(c.to_ascii_lowercase());
            continue;
        }
        if in_capitals {
            out.push(')');
            in_capitals = false;
        }
        if c == '%' {
            out.push_str("()");
        } else {
            out.push(c);
        }
    }
    if in_capitals {
        out.push(')');
    }
    out
}

/// The name `encode_part` turned into `part`, or `None` when `part` is not a canonical
/// encoding (a character outside the alphabet, an unclosed or nested run, or a spelling such as
/// `(a)(b)` that encoding would not produce).
pub fn decode_part(part: &str) -> Option<String> {
    decode_part_cow(part).map(Cow::into_owned)
}

/// [`decode_part`], borrowing `part` when it needs no decoding.
fn decode_part_cow(part: &str) -> Option<Cow<'_, str>> {
    let plain = |byte: u8| {
        byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-'
    };
    if !part.is_empty() && part.bytes().all(plain) {
        return Some(Cow::Borrowed(part));
    }
    decode_part_owned(part).map(Cow::Owned)
}

fn decode_part_owned(part: &str) -> Option<String> {
    let mut out = String::with_capacity(part.len());
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        match c {
            'a'..='z' | '0'..='9' | '_' | '-' => out.push(c),
            '(' => {
                let mut run = 0;
                loop {
                    match chars.next()? {
                        ')' => break,
                        letter @ 'a'..='z' => {
                            out.push(letter.to_ascii_uppercase());
                            run += 1;
                        }
                        _ => return None,
                    }
                }
                if run == 0 {
                    out.push('%');
                }
            }
            _ => return None,
        }
    }
    (!out.is_empty() && encode_part(&out) == part).then_some(out)
}

/// The database name of a collection: the bucket's own name for `_default._default`.
pub fn door_name(bucket: &str, scope: &str, collection: &str) -> String {
    if scope == DEFAULT_NAME && collection == DEFAULT_NAME {
        return bucket.to_string();
    }
    format!(
        "{bucket}${}${}",
        encode_part(scope),
        encode_part(collection)
    )
}

/// Splits `name` at its last two `$` into a bucket and a collection, `None` when it has fewer,
/// a part does not decode, or it spells `_default._default` (whose name is the bucket's). The
/// caller first checks whether `name` is itself a bucket's name.
pub fn split_door_name(name: &str) -> Option<DoorName<'_>> {
    let (rest, collection) = name.rsplit_once('$')?;
    let (bucket, scope) = rest.rsplit_once('$')?;
    if bucket.is_empty() {
        return None;
    }
    let (scope, collection) = (decode_part_cow(scope)?, decode_part_cow(collection)?);
    if scope == DEFAULT_NAME && collection == DEFAULT_NAME {
        return None;
    }
    Some(DoorName {
        bucket,
        scope,
        collection,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples() {
        let table = [
            (("travel", "_default", "_default"), "travel"),
            (
                ("travel", "inventory", "airline"),
                "travel$inventory$airline",
            ),
            (("travel", "_default", "Hotels"), "travel$_default$(h)otels"),
            (("travel", "EU", "route_2024"), "travel$(eu)$route_2024"),
            (("travel", "tenant%1", "Users"), "travel$tenant()1$(u)sers"),
        ];
        for ((bucket, scope, collection), door) in table {
            assert_eq!(door_name(bucket, scope, collection), door);
            if door != bucket {
                assert_eq!(
                    split_door_name(door),
                    Some(DoorName {
                        bucket,
                        scope: Cow::Borrowed(scope),
                        collection: Cow::Borrowed(collection)
                    })
                );
            }
        }
    }

    #[test]
    fn non_canonical_spellings_are_refused() {
        for part in [
            "(a)(b)", "(", "(a", "a)", "(A)", "()()x(", "a$b", "", "(1)", "a.b", "x((a))",
        ] {
            assert_eq!(decode_part(part), None, "{part}");
        }
        assert_eq!(decode_part("()()"), Some("%%".into()));
        assert_eq!(decode_part("(ab)c(d)"), Some("ABcD".into()));
        assert_eq!(split_door_name("b$_default$_default"), None);
        assert_eq!(split_door_name("$s$c"), None);
        assert_eq!(split_door_name("b$c"), None);
    }

    #[test]
    fn a_bucket_name_holding_dollars_splits_at_the_last_two() {
        let split = split_door_name("a$b$c$d").unwrap();
        assert_eq!(
            (split.bucket, &*split.scope, &*split.collection),
            ("a$b", "c", "d")
        );
    }

    #[test]
    fn every_couchbase_name_round_trips() {
        use std::fmt::Write;
        // Names from the whole alphabet, by a fixed pseudo-random walk.
        let alphabet: Vec<char> = ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .chain(['_', '-', '%'])
            .collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5000 {
            let mut name = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 1 + (seed % 12) as usize;
            for i in 0..len {
                let _ = write!(name, "{}", alphabet[((seed >> (i * 5)) % 65) as usize]);
            }
            let encoded = encode_part(&name);
            assert!(encoded
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-()".contains(c)));
            assert_eq!(
                decode_part(&encoded).as_deref(),
                Some(name.as_str()),
                "{name}"
            );
        }
    }
}
