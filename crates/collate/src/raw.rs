//! An order-preserving byte encoding of JSON values in Erlang's term order, for views whose
//! `options.collation` is `"raw"` (CouchDB then compares keys as Erlang terms): for any two
//! values `a` and `b`, `encode_raw_key(a).cmp(&encode_raw_key(b)) ==
//! TermOrder::Erlang.compare(a, b)`, that is `numbers < false < null < true < objects < arrays
//! < strings`, strings byte by byte. Like [`crate::encode_key`] it is prefix-free and an
//! array's first `n` elements encode to a byte prefix of the array (docs/format/views.md).

use serde_json::Value;

use crate::encode::push_number;

/// Ends an array or an object: below every tag.
const END: u8 = 0x00;
/// Starts each member of an object.
const MEMBER: u8 = 0x01;
/// A string's bytes end with `0x00 0x01`; a 0x00 byte inside it is `0x00 0xFF`.
const STRING_END: [u8; 2] = [0x00, 0x01];
const ESCAPED_ZERO: [u8; 2] = [0x00, 0xFF];
const TAG_NUMBER: u8 = 0x30;
const TAG_FALSE: u8 = 0x38;
const TAG_NULL: u8 = 0x39;
const TAG_TRUE: u8 = 0x3A;
const TAG_OBJECT: u8 = 0x40;
const TAG_ARRAY: u8 = 0x50;
const TAG_STRING: u8 = 0x60;

/// The raw-collation encoding of `value`.
pub fn encode_raw_key(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    encode_raw_key_to(value, &mut out);
    out
}

/// [`encode_raw_key`] appended to `out`. Values parsed by serde_json nest at most 128 levels,
/// which bounds the recursion.
pub fn encode_raw_key_to(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Number(number) => {
            out.push(TAG_NUMBER);
            push_number(number, out);
        }
        Value::Bool(false) => out.push(TAG_FALSE),
        Value::Null => out.push(TAG_NULL),
        Value::Bool(true) => out.push(TAG_TRUE),
        Value::Object(members) => {
            out.push(TAG_OBJECT);
            for (name, item) in members {
                out.push(MEMBER);
                push_bytes(name, out);
                encode_raw_key_to(item, out);
            }
            out.push(END);
        }
        Value::Array(items) => {
            out.push(TAG_ARRAY);
            for item in items {
                encode_raw_key_to(item, out);
            }
            out.push(END);
        }
        Value::String(text) => {
            out.push(TAG_STRING);
            push_bytes(text, out);
        }
    }
}

fn push_bytes(text: &str, out: &mut Vec<u8>) {
    for &byte in text.as_bytes() {
        if byte == 0 {
            out.extend_from_slice(&ESCAPED_ZERO);
        } else {
            out.push(byte);
        }
    }
    out.extend_from_slice(&STRING_END);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::TermOrder;

    #[test]
    fn couchdb_raw_collation_order() {
        // The order of CouchDB's view_collation_raw test.
        let ordered = [
            json!(1),
            json!(2),
            json!(3),
            json!(4),
            json!(false),
            json!(null),
            json!(true),
            json!({"a": 1}),
            json!({"a": 2}),
            json!({"b": 1}),
            json!({"b": 2}),
            serde_json::from_str::<Value>(r#"{"b": 2, "a": 1}"#).expect("json"),
            serde_json::from_str::<Value>(r#"{"b": 2, "c": 2}"#).expect("json"),
            json!(["a"]),
            json!(["b"]),
            json!(["b", "c"]),
            json!(["b", "c", "a"]),
            json!(["b", "d"]),
            json!(["b", "d", "e"]),
            json!("A"),
            json!("B"),
            json!("a"),
            json!("aa"),
            json!("b"),
            json!("ba"),
            json!("bb"),
            json!("b\u{0}"),
        ];
        let mut sorted = ordered.to_vec();
        sorted.sort_by_key(encode_raw_key);
        // "b\0" sorts after "b" and before "ba".
        let position = sorted.iter().position(|v| v == &json!("b\u{0}"));
        assert_eq!(position, Some(24));
        sorted.remove(24);
        assert_eq!(sorted, ordered[..ordered.len() - 1].to_vec());
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e20f64..1e20).prop_map(|n| json!(n)),
            "[a-cA-C\u{0}é]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[ab\u{0}]{0,2}", inner), 0..3)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn byte_order_equals_erlang_term_order(a in json_value(), b in json_value()) {
            prop_assert_eq!(
                encode_raw_key(&a).cmp(&encode_raw_key(&b)),
                TermOrder::Erlang.compare(&a, &b),
                "{} vs {}", a, b
            );
            let (x, y) = (encode_raw_key(&a), encode_raw_key(&b));
            prop_assert!(x == y || !y.starts_with(&x), "{} is a prefix of {}", a, b);
        }
    }
}
