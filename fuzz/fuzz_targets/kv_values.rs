#![no_main]
//! The KV door's value checks (issue 18): a SET-like value (key, value, extended attributes)
//! and the results of sub-document edits of it, checked against the document limits both doors
//! share. Never a panic; a value accepted as JSON is within the limits and parses whole with
//! serde_json, so no reader of it (views, feeds, replication) can fail on it; a refusal names a
//! limit the value really passes.
use libfuzzer_sys::fuzz_target;
use settee_engine::limits::json_deeper_than;
use settee_engine::subdoc::json;
use settee_engine::{is_json, DocLimits, LimitError, KEY_BYTES_MAX};

/// Small limits, so that the fuzzer reaches both with short inputs.
const LIMITS: DocLimits = DocLimits {
    doc_bytes_max: 4096,
    json_depth_max: 24,
};

fn check(value: &[u8], xattrs_len: usize) {
    let json = is_json(value);
    match LIMITS.check(value, json, xattrs_len) {
        Ok(()) => {
            assert!(value.len() + xattrs_len <= LIMITS.doc_bytes_max);
            if json {
                assert!(!json_deeper_than(value, LIMITS.json_depth_max));
                serde_json::from_slice::<serde_json::Value>(value).unwrap_or_else(|error| {
                    panic!("accepted JSON does not parse ({error}): {}", String::from_utf8_lossy(value))
                });
            }
        }
        Err(LimitError::TooLarge { size, max }) => {
            assert!(size > max && size == value.len() + xattrs_len)
        }
        Err(LimitError::TooDeep { max }) => {
            assert!(json && json_deeper_than(value, max));
            // Deeper than serde_json's own limit or not, no reader gets it.
        }
        Err(LimitError::InvalidJson(_)) => {
            assert!(json);
            // Refused: either no reader parses it, or it names serde_json's raw-value marker
            // as a member (which breaks readers wherever it stands).
            let reserved = serde_json::from_slice::<MemberNames>(value)
                .is_ok_and(|names| names.0.iter().any(|name| name == RAW_VALUE_TOKEN));
            assert!(reserved || serde_json::from_slice::<serde_json::Value>(value).is_err());
        }
    }
}

const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Every member name of a JSON value, at any depth (read without serde_json's `Value`, which
/// treats the raw-value marker specially).
struct MemberNames(Vec<String>);

impl<'de> serde::Deserialize<'de> for MemberNames {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut names = Vec::new();
        deserializer.deserialize_any(Collect(&mut names))?;
        Ok(MemberNames(names))
    }
}

struct Collect<'a>(&'a mut Vec<String>);

impl<'de> serde::de::DeserializeSeed<'de> for Collect<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Collect<'_> {
    type Value = ();
    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Collect(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key::<String>()? {
            self.0.push(name);
            map.next_value_seed(Collect(self.0))?;
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: edit kind (low nibble), mkdir_p (bit 7); byte 1: key length; byte 2: path length;
    // byte 3: fragment length; byte 4: xattrs length / 16; then key, path, fragment, value.
    let [op, key_len, path_len, fragment_len, xattrs, rest @ ..] = data else { return };
    let (key_len, path_len, fragment_len) =
        (*key_len as usize, *path_len as usize, *fragment_len as usize);
    let Some(key) = rest.get(..key_len) else { return };
    let Some(path) = rest.get(key_len..key_len + path_len) else { return };
    let at = key_len + path_len;
    let Some(fragment) = rest.get(at..at + fragment_len) else { return };
    let value = &rest[at + fragment_len..];
    // The door refuses these keys before anything else (ops.rs).
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return;
    }
    let xattrs_len = usize::from(*xattrs) * 16;
    check(value, xattrs_len);
    // A sub-document mutation's result meets the same check before it is stored.
    let edits = json::Edit::ALL;
    let edit = edits[usize::from(op & 0x0f) % edits.len()];
    if let Ok((edited, _)) = json::apply(value, edit, path, fragment, op & 0x80 != 0) {
        check(&edited, xattrs_len);
    }
});
