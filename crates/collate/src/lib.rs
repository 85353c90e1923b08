//! CouchDB's view collation, shared by everything that orders JSON values: Mango selectors
//! (`settee-http`) compare with it, and the view indexer (`settee-views`) stores keys in its
//! order.
//!
//! [`collate`] compares two values the way CouchDB's `couch_ejson_compare` does: `null < false <
//! true < numbers < strings < arrays < objects`, strings by the Unicode Collation Algorithm with
//! ICU's root locale ([`compare_strings`], in `strings.rs`). [`TermOrder`] also offers Erlang's
//! term order, which Mango uses for `_id`. [`encode_key`] (in `encode.rs`) turns a value into bytes
//! whose plain byte order is the collation order, so a sorted key-value store can range-scan view
//! keys without a custom comparator; the layout is specified in `docs/format/views.md`.
#![deny(clippy::unwrap_used)]

/// The version of these collation rules, as `_info` reports it (`collator_versions`, where
/// CouchDB names its ICU collator's): it moves when the order of any two values changes, which
/// invalidates indexes built with the old order.
pub const COLLATION_VERSION: &str = "settee-collate/1";

mod encode;
mod raw;
mod strings;

use std::cmp::Ordering;

use serde_json::{Number, Value};

pub use encode::{encode_key, encode_key_to, string_sort_key};
pub use raw::{encode_raw_key, encode_raw_key_to};
pub use strings::compare_strings;

/// CouchDB's view collation (`couch_ejson_compare`): `null < false < true < numbers < strings <
/// arrays < objects`; numbers by value (`1 == 1.0`); strings by the Unicode Collation Algorithm
/// with ICU's root locale (see [`compare_strings`]); arrays element by element, a prefix first;
/// objects member by member in document order, comparing the key and then the value, a prefix
/// first.
pub fn collate(a: &Value, b: &Value) -> Ordering {
    TermOrder::Collation.compare(a, b)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermOrder {
    /// View collation, for every field but `_id`.
    Collation,
    /// Erlang's term order (`mango_json:cmp_raw/2`), for `_id`: `numbers < false < null < true <
    /// objects < arrays < strings`, strings byte by byte.
    Erlang,
}

impl TermOrder {
    fn rank(self, value: &Value) -> u8 {
        let (collation, erlang) = match value {
            Value::Null => (0, 2),
            Value::Bool(false) => (1, 1),
            Value::Bool(true) => (2, 3),
            Value::Number(_) => (3, 0),
            Value::String(_) => (4, 6),
            Value::Array(_) => (5, 5),
            Value::Object(_) => (6, 4),
        };
        match self {
            TermOrder::Collation => collation,
            TermOrder::Erlang => erlang,
        }
    }

    fn compare_strings(self, a: &str, b: &str) -> Ordering {
        match self {
            TermOrder::Collation => strings::compare_strings(a, b),
            TermOrder::Erlang => a.cmp(b),
        }
    }

    /// Walks both values with an explicit stack, so no document is too deep to compare.
    pub fn compare(self, a: &Value, b: &Value) -> Ordering {
        enum Pending<'a> {
            Arrays(std::slice::Iter<'a, Value>, std::slice::Iter<'a, Value>),
            Objects(serde_json::map::Iter<'a>, serde_json::map::Iter<'a>),
        }
        let mut stack: Vec<Pending> = Vec::new();
        let mut next = Some((a, b));
        loop {
            if let Some((x, y)) = next.take() {
                let by_rank = self.rank(x).cmp(&self.rank(y));
                if by_rank.is_ne() {
                    return by_rank;
                }
                let by_value = match (x, y) {
                    (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
                    (Value::String(x), Value::String(y)) => self.compare_strings(x, y),
                    (Value::Array(xs), Value::Array(ys)) => {
                        stack.push(Pending::Arrays(xs.iter(), ys.iter()));
                        Ordering::Equal
                    }
                    (Value::Object(xs), Value::Object(ys)) => {
                        stack.push(Pending::Objects(xs.iter(), ys.iter()));
                        Ordering::Equal
                    }
                    _ => Ordering::Equal,
                };
                if by_value.is_ne() {
                    return by_value;
                }
            }
            let Some(top) = stack.last_mut() else {
                return Ordering::Equal;
            };
            match top {
                Pending::Arrays(xs, ys) => match (xs.next(), ys.next()) {
                    (Some(x), Some(y)) => next = Some((x, y)),
                    (None, None) => {
                        stack.pop();
                    }
                    (None, Some(_)) => return Ordering::Less,
                    (Some(_), None) => return Ordering::Greater,
                },
                Pending::Objects(xs, ys) => match (xs.next(), ys.next()) {
                    (Some((kx, x)), Some((ky, y))) => {
                        let by_key = self.compare_strings(kx, ky);
                        if by_key.is_ne() {
                            return by_key;
                        }
                        next = Some((x, y));
                    }
                    (None, None) => {
                        stack.pop();
                    }
                    (None, Some(_)) => return Ordering::Less,
                    (Some(_), None) => return Ordering::Greater,
                },
            }
        }
    }
}

/// Numbers by value, exactly, whether integers or floats.
pub fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    fn float_against_integer(f: f64, i: i128) -> Ordering {
        // An integral float in range converts exactly; any other float is below 2^53 in
        // magnitude, where rounding the integer to f64 cannot cross it.
        if f.fract() == 0.0 && f.abs() < 1e38 {
            (f as i128).cmp(&i)
        } else {
            f.partial_cmp(&(i as f64)).unwrap_or(Ordering::Equal)
        }
    }
    match (integer(a), integer(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (None, Some(y)) => float_against_integer(a.as_f64().unwrap_or(0.0), y),
        (Some(x), None) => float_against_integer(b.as_f64().unwrap_or(0.0), x).reverse(),
        (None, None) => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

/// A JSON integer (what Erlang's `is_integer/1` accepts after decoding), widened so that
/// comparisons cannot overflow.
pub fn integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use serde_json::{json, Value};

    use super::*;

    /// The golden order: CouchDB's documented view collation example and the values of
    /// `couch_mrview_collation_tests.erl`, with strings ordered by ICU 72's root collator.
    #[test]
    fn collation_golden_order() {
        let golden: Vec<Value> =
            serde_json::from_str(include_str!("../testdata/collation/order.json"))
                .expect("golden file is JSON");
        for (i, a) in golden.iter().enumerate() {
            for b in &golden[i + 1..] {
                assert_ne!(
                    collate(a, b),
                    Ordering::Greater,
                    "{a} must not sort after {b}"
                );
                assert_eq!(collate(a, b), collate(b, a).reverse(), "{a} vs {b}");
            }
        }
        // Sort a deterministic shuffle and compare position by position (ties may swap).
        let mut shuffled = golden.clone();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        shuffled.sort_by(collate);
        for (got, want) in shuffled.iter().zip(&golden) {
            assert_eq!(
                collate(got, want),
                Ordering::Equal,
                "got {got}, want {want}"
            );
        }
    }

    #[test]
    fn collation_matches_couchdb_docs() {
        // "Key ranges" in CouchDB's "Views Collation": abc < Abc < ABC < abc1 < AbcZZZZZ.
        let keys = ["abc", "Abc", "ABC", "abc1", "AbcZZZZZ"];
        for pair in keys.windows(2) {
            assert_eq!(
                compare_strings(pair[0], pair[1]),
                Ordering::Less,
                "{pair:?}"
            );
        }
        assert_eq!(compare_strings("a", "aa"), Ordering::Less);
        assert_eq!(compare_strings("A", "aa"), Ordering::Less);
        assert_eq!(compare_strings("a", "AA"), Ordering::Less);
        assert_eq!(compare_strings("~", "0"), Ordering::Less);
        assert_eq!(compare_strings("c", "c\u{200B}"), Ordering::Equal);
        assert_eq!(compare_strings("é", "e\u{301}"), Ordering::Equal);
        assert_eq!(collate(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(collate(&json!(-0.0), &json!(0)), Ordering::Equal);
        assert_eq!(
            collate(&json!(9007199254740993u64), &json!(9007199254740992.0)),
            Ordering::Greater
        );
        assert_eq!(collate(&json!(u64::MAX), &json!(-1)), Ordering::Greater);
        assert_eq!(collate(&json!(1e300), &json!(u64::MAX)), Ordering::Greater);
    }

    #[test]
    fn deep_values_compare_without_recursion() {
        let mut a = json!(1);
        let mut b = json!(2);
        for _ in 0..500 {
            a = Value::Array(vec![a]);
            b = Value::Array(vec![b]);
        }
        assert_eq!(collate(&a, &b), Ordering::Less);
        assert_eq!(TermOrder::Erlang.compare(&b, &a), Ordering::Greater);
    }
}
