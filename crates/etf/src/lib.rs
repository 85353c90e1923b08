//! The part of Erlang's external term format that CouchDB hashes: replication ids and revision ids.
//!
//! CouchDB computes a replication id, and a revision id, as the MD5 of `term_to_binary(Term, [{minor_version, 1}])`
//! (`?term_to_bin` in `couch_db.hrl`), so settee must produce the same bytes for the same
//! term. Only the tags those terms use are encoded:
//!
//! ```text
//! 131                      version byte, once at the start
//! 97  u8                   SMALL_INTEGER_EXT   0..=255
//! 98  i32 BE               INTEGER_EXT         other i32
//! 110 n u8, sign u8, n LE  SMALL_BIG_EXT       everything wider
//! 70  f64 BE               NEW_FLOAT_EXT       floats (minor_version 1)
//! 100 u16 BE, latin-1      ATOM_EXT            atoms (minor_version 1 never uses UTF-8 atoms)
//! 104 u8 arity             SMALL_TUPLE_EXT     (105 u32 arity for LARGE_TUPLE_EXT)
//! 106                      NIL_EXT             []  and "" (an empty string is an empty list)
//! 107 u16 BE, bytes        STRING_EXT          lists of bytes shorter than 65,536
//! 108 u32 BE, items, 106   LIST_EXT            other lists, proper (NIL tail)
//! 109 u32 BE, bytes        BINARY_EXT          binaries
//! ```
//!
//! EJSON (the JSON terms jiffy decodes to) maps onto these: objects are `{[{Key, Value}]}`,
//! strings binaries, arrays lists, `true`/`false`/`null` atoms, integers integers and other
//! numbers floats. [`Term::from_json`] does that conversion.

use serde_json::Value;

mod decode;
mod json;
pub use json::json_to_ejson;

/// An Erlang term, as far as replication ids need them.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Atom(String),
    Binary(Vec<u8>),
    /// A list of bytes (an Erlang string such as `"localhost"`).
    Chars(Vec<u8>),
    List(Vec<Term>),
    Tuple(Vec<Term>),
    Integer(i128),
    Float(f64),
}

impl Term {
    pub fn atom(name: &str) -> Term {
        Term::Atom(name.to_string())
    }

    pub fn binary(bytes: impl AsRef<[u8]>) -> Term {
        Term::Binary(bytes.as_ref().to_vec())
    }

    pub fn chars(text: impl AsRef<[u8]>) -> Term {
        Term::Chars(text.as_ref().to_vec())
    }

    /// EJSON, as jiffy decodes JSON: object members keep their order.
    pub fn from_json(value: &Value) -> Term {
        match value {
            Value::Null => Term::atom("null"),
            Value::Bool(true) => Term::atom("true"),
            Value::Bool(false) => Term::atom("false"),
            Value::Number(number) => match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) => Term::Integer(i128::from(integer)),
                (None, Some(integer)) => Term::Integer(i128::from(integer)),
                (None, None) => Term::Float(number.as_f64().unwrap_or(0.0)),
            },
            Value::String(text) => Term::binary(text.as_bytes()),
            Value::Array(items) => Term::List(items.iter().map(Term::from_json).collect()),
            Value::Object(members) => Term::Tuple(vec![Term::List(
                members
                    .iter()
                    .map(|(key, value)| {
                        Term::Tuple(vec![Term::binary(key.as_bytes()), Term::from_json(value)])
                    })
                    .collect(),
            )]),
        }
    }

    /// `term_to_binary(Term, [{minor_version, 1}])`.
    pub fn to_binary(&self) -> Vec<u8> {
        let mut out = vec![131];
        self.encode(&mut out);
        out
    }

    /// Appends the term's encoding without the version byte (a part of a larger term).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Term::Atom(name) => {
                // Atoms here are ASCII names (remote, undefined, default, true, null...), which
                // are their own latin-1 encoding.
                out.push(100);
                out.extend_from_slice(&(name.len() as u16).to_be_bytes());
                out.extend_from_slice(name.as_bytes());
            }
            Term::Binary(bytes) => {
                out.push(109);
                out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                out.extend_from_slice(bytes);
            }
            Term::Chars(bytes) if bytes.is_empty() => out.push(106),
            Term::Chars(bytes) if bytes.len() < 65_536 => {
                out.push(107);
                out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                out.extend_from_slice(bytes);
            }
            Term::Chars(bytes) => {
                let items: Vec<Term> = bytes
                    .iter()
                    .map(|byte| Term::Integer(i128::from(*byte)))
                    .collect();
                Term::List(items).encode(out);
            }
            Term::List(items) if items.is_empty() => out.push(106),
            // Erlang writes a list of bytes as a string, whatever built it.
            Term::List(items)
                if items.len() < 65_536
                    && items
                        .iter()
                        .all(|item| matches!(item, Term::Integer(0..=255))) =>
            {
                out.push(107);
                out.extend_from_slice(&(items.len() as u16).to_be_bytes());
                out.extend(items.iter().map(|item| match item {
                    Term::Integer(byte) => *byte as u8,
                    _ => 0,
                }));
            }
            Term::List(items) => {
                out.push(108);
                out.extend_from_slice(&(items.len() as u32).to_be_bytes());
                for item in items {
                    item.encode(out);
                }
                out.push(106);
            }
            Term::Tuple(items) => {
                if items.len() < 256 {
                    out.push(104);
                    out.push(items.len() as u8);
                } else {
                    out.push(105);
                    out.extend_from_slice(&(items.len() as u32).to_be_bytes());
                }
                for item in items {
                    item.encode(out);
                }
            }
            Term::Integer(value) => encode_integer(*value, out),
            Term::Float(value) => {
                out.push(70);
                out.extend_from_slice(&value.to_bits().to_be_bytes());
            }
        }
    }
}

/// An integer as Erlang writes it: SMALL_INTEGER_EXT, INTEGER_EXT or SMALL_BIG_EXT.
pub fn encode_integer(value: i128, out: &mut Vec<u8>) {
    if (0..=255).contains(&value) {
        out.push(97);
        out.push(value as u8);
    } else if let Ok(small) = i32::try_from(value) {
        out.push(98);
        out.extend_from_slice(&small.to_be_bytes());
    } else {
        let mut magnitude = value.unsigned_abs();
        let mut digits = Vec::new();
        while magnitude > 0 {
            digits.push(magnitude as u8);
            magnitude >>= 8;
        }
        out.push(110);
        out.push(digits.len() as u8);
        out.push(u8::from(value < 0));
        out.extend_from_slice(&digits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every expected byte string below was printed by Erlang/OTP 25 (Debian 12's erlang-base)
    // with `term_to_binary(T, [{minor_version, 1}])`.
    #[test]
    fn scalars_match_erlang() {
        assert_eq!(Term::atom("abc").to_binary(), [131, 100, 0, 3, 97, 98, 99]);
        assert_eq!(
            Term::binary("ab").to_binary(),
            [131, 109, 0, 0, 0, 2, 97, 98]
        );
        assert_eq!(Term::chars("ab").to_binary(), [131, 107, 0, 2, 97, 98]);
        assert_eq!(Term::chars("").to_binary(), [131, 106]);
        assert_eq!(Term::Integer(5).to_binary(), [131, 97, 5]);
        assert_eq!(Term::Integer(5984).to_binary(), [131, 98, 0, 0, 23, 96]);
        assert_eq!(Term::Integer(-1).to_binary(), [131, 98, 255, 255, 255, 255]);
        assert_eq!(
            Term::Integer(1 << 40).to_binary(),
            [131, 110, 6, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            Term::Integer(-(1 << 40)).to_binary(),
            [131, 110, 6, 1, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            Term::Float(1.5).to_binary(),
            [131, 70, 63, 248, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn containers_match_erlang() {
        let term = Term::Tuple(vec![
            Term::atom("remote"),
            Term::atom("undefined"),
            Term::chars("host"),
            Term::atom("default"),
            Term::chars("/db/"),
            Term::List(vec![]),
            Term::atom("undefined"),
        ]);
        assert_eq!(
            term.to_binary(),
            [
                131, 104, 7, 100, 0, 6, 114, 101, 109, 111, 116, 101, 100, 0, 9, 117, 110, 100,
                101, 102, 105, 110, 101, 100, 107, 0, 4, 104, 111, 115, 116, 100, 0, 7, 100, 101,
                102, 97, 117, 108, 116, 107, 0, 4, 47, 100, 98, 47, 106, 100, 0, 9, 117, 110, 100,
                101, 102, 105, 110, 101, 100
            ]
        );
        // {[{<<"a">>, 1}]}, i.e. the JSON object {"a": 1}.
        let json = Term::from_json(&serde_json::json!({"a": 1}));
        assert_eq!(
            json.to_binary(),
            [131, 104, 1, 108, 0, 0, 0, 1, 104, 2, 109, 0, 0, 0, 1, 97, 97, 1, 106]
        );
    }
}
