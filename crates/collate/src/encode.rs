//! An order-preserving byte encoding of JSON values: for any two values `a` and `b`,
//! `encode_key(a).cmp(&encode_key(b)) == collate(a, b)`. The layout (type tags, the number
//! form, string sort keys, terminators) is specified in `docs/format/views.md`.
//!
//! The encoding is prefix-free: no value's encoding is a proper prefix of another's, so a view
//! row key can carry more bytes (the document id) after the encoded key, and the rows of one
//! key are exactly the keys that start with its encoding. The encoding of an array's first `n`
//! elements is a byte prefix of the array's, which is what `group_level` needs.

use serde_json::{Number, Value};

use crate::strings::{collation_elements, COMMON, LOWER};

/// Ends an array or an object, and a string's sort key: below every tag and weight.
const END: u8 = 0x00;
/// Separates the levels of a string's sort key, and starts each member of an object.
const SEPARATOR: u8 = 0x01;
const TAG_NULL: u8 = 0x10;
const TAG_FALSE: u8 = 0x20;
const TAG_TRUE: u8 = 0x21;
const TAG_NUMBER: u8 = 0x30;
const TAG_STRING: u8 = 0x40;
const TAG_ARRAY: u8 = 0x50;
const TAG_OBJECT: u8 = 0x60;

/// The encoding of `value` (see the module comment).
pub fn encode_key(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    encode_key_to(value, &mut out);
    out
}

/// [`encode_key`] appended to `out`. Values parsed by serde_json nest at most 128 levels, which
/// bounds the recursion.
pub fn encode_key_to(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(TAG_NULL),
        Value::Bool(false) => out.push(TAG_FALSE),
        Value::Bool(true) => out.push(TAG_TRUE),
        Value::Number(number) => {
            out.push(TAG_NUMBER);
            push_number(number, out);
        }
        Value::String(text) => {
            out.push(TAG_STRING);
            string_sort_key(text, out);
        }
        Value::Array(items) => {
            out.push(TAG_ARRAY);
            for item in items {
                encode_key_to(item, out);
            }
            out.push(END);
        }
        Value::Object(members) => {
            out.push(TAG_OBJECT);
            for (name, item) in members {
                out.push(SEPARATOR);
                string_sort_key(name, out);
                encode_key_to(item, out);
            }
            out.push(END);
        }
    }
}

/// A number as its nearest double in an order-preserving 8-byte form, then the signed distance
/// (2 bytes) from that double to the exact integer, so integers above 2^53 keep the exact order
/// CouchDB gives them. `-0.0` is `0`.
pub(crate) fn push_number(number: &Number, out: &mut Vec<u8>) {
    let (float, delta) = match crate::integer(number) {
        Some(exact) => {
            let float = exact as f64;
            // |exact| < 2^65, so the rounding error is at most 2^12 and fits in an i16.
            let delta = (exact - float as i128).clamp(i16::MIN.into(), i16::MAX.into()) as i16;
            (float, delta)
        }
        None => (number.as_f64().unwrap_or(0.0), 0),
    };
    let float = if float == 0.0 { 0.0 } else { float };
    let bits = float.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    out.extend_from_slice(&ordered.to_be_bytes());
    out.extend_from_slice(&((delta as u16) ^ 0x8000).to_be_bytes());
}

/// The sort key of a string in ICU root collation order, as used by
/// [`crate::compare_strings`]: the non-zero primary weights ([`push_primary`]), a separator,
/// the secondary weights, a separator, the tertiary weights, and [`END`]. The first byte of
/// every weight is at least 2, above both markers, so a string that runs out sorts first at
/// each level.
///
/// Trailing secondary weights equal to `COMMON` and trailing tertiary weights equal to `LOWER`
/// are left out (most strings then cost two or three bytes per character, not six). That keeps
/// the order exact: both are the smallest weight of their level, and among strings with equal
/// primaries an element with a common secondary is one with a primary, so two strings whose
/// trimmed secondaries are equal have the same number of elements.
pub fn string_sort_key(text: &str, out: &mut Vec<u8>) {
    let elements = collation_elements(text);
    for element in elements.iter().filter(|element| element.primary != 0) {
        push_primary(element.primary, out);
    }
    out.push(SEPARATOR);
    let secondaries = elements
        .iter()
        .rposition(|element| element.secondary != COMMON)
        .map_or(0, |last| last + 1);
    for element in &elements[..secondaries] {
        let secondary = element.secondary;
        if secondary < 0xFC00 {
            out.extend_from_slice(&(secondary + 0x0200).to_be_bytes());
        } else {
            out.push(0xFE);
            out.extend_from_slice(&secondary.to_be_bytes());
        }
    }
    out.push(SEPARATOR);
    let tertiaries = elements
        .iter()
        .rposition(|element| element.tertiary != LOWER)
        .map_or(0, |last| last + 1);
    for element in &elements[..tertiaries] {
        out.push(element.tertiary + 1);
    }
    out.push(END);
}

/// A primary weight in 2 bytes for the common ranges (whitespace, ASCII symbols, digits, Latin
/// letters) and 4 bytes for the rest. The first byte names the range and ranges are numbered
/// in weight order, so byte order stays weight order. Weight ranges are those of strings.rs.
fn push_primary(primary: u32, out: &mut Vec<u8>) {
    let [_, high, middle, low] = primary.to_be_bytes();
    match primary {
        0..0x1000 => out.extend_from_slice(&[0x02 + middle, low]),
        0x1000..0x20_0000 => out.extend_from_slice(&[0x12, high, middle, low]),
        0x20_0000..0x20_0100 => out.extend_from_slice(&[0x13, low]),
        0x20_0100..0x40_0000 => out.extend_from_slice(&[0x14, high, middle, low]),
        0x40_0000..0x40_0100 => out.extend_from_slice(&[0x15, low]),
        _ => out.extend_from_slice(&[0x16, high, middle, low]),
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::collate;

    fn golden() -> Vec<Value> {
        serde_json::from_str(include_str!("../testdata/collation/order.json"))
            .expect("golden file is JSON")
    }

    #[test]
    fn golden_order_is_byte_order() {
        let values = golden();
        for a in &values {
            for b in &values {
                assert_eq!(
                    encode_key(a).cmp(&encode_key(b)),
                    collate(a, b),
                    "{a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn encoding_is_prefix_free() {
        let values = golden();
        for a in &values {
            for b in &values {
                let (x, y) = (encode_key(a), encode_key(b));
                if x != y {
                    assert!(!y.starts_with(&x), "{a} is a prefix of {b}");
                }
            }
        }
    }

    #[test]
    fn array_prefixes_are_byte_prefixes() {
        let key = json!(["a", 2, [true], {"x": null}]);
        let full = encode_key(&key);
        for n in 0..4 {
            let prefix: Vec<Value> = key.as_array().map(|a| a[..n].to_vec()).unwrap_or_default();
            let encoded = encode_key(&Value::Array(prefix));
            // Without the array's closing END.
            assert!(full.starts_with(&encoded[..encoded.len() - 1]), "level {n}");
        }
    }

    #[test]
    fn numbers_keep_exact_integer_order() {
        let ordered = [
            json!(-1e300),
            json!(i64::MIN),
            json!(-9007199254740993i64),
            json!(-9007199254740992.0),
            json!(-1),
            json!(-0.5),
            json!(0),
            json!(1e-300),
            json!(1),
            json!(9007199254740992.0),
            json!(9007199254740993u64),
            json!(u64::MAX),
            json!(1e300),
        ];
        for pair in ordered.windows(2) {
            assert_eq!(
                encode_key(&pair[0]).cmp(&encode_key(&pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
        }
        assert_eq!(encode_key(&json!(-0.0)), encode_key(&json!(0)));
        assert_eq!(encode_key(&json!(1.0)), encode_key(&json!(1)));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e20f64..1e20).prop_map(|n| json!(n)),
            prop::sample::select(vec![-2.0, -1.0, 0.0, 0.5, 1.0, 2.0]).prop_map(|n| json!(n)),
            "[a-cA-C0-2 _~éÉè\u{200B}\u{301}ßæøŋ]{0,5}".prop_map(Value::String),
            "\\PC{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[ab]{0,2}", inner), 0..3)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn byte_order_equals_collation_order(a in json_value(), b in json_value()) {
            prop_assert_eq!(encode_key(&a).cmp(&encode_key(&b)), collate(&a, &b), "{} vs {}", a, b);
        }
    }
}
