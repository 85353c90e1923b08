//! The shape every request must have before it runs: how many bytes of extras, whether a key
//! and a value may or must be present, whether the CAS may be set. kv_engine checks each
//! opcode this way (`daemon/mcbp_validators.cc`, `verify_header`) and answers EINVAL with a
//! reason otherwise; so does settee, for every opcode it implements. Sub-document requests
//! check their own extras and specs (settee-kv's `subdoc.rs`); unknown opcodes pass through here and get
//! UNKNOWN_COMMAND where they are dispatched.

use crate::{leb128, opcode, Frame};

/// Longest key of collection 0 (`_default._default`), the prefix not counted.
pub const DEFAULT_COLLECTION_KEY_MAX: usize = 250;
/// Longest key of any other collection: the key and the longest prefix fit 251 bytes.
pub const COLLECTION_KEY_MAX: usize = 246;
/// Collection ids below this, other than 0, are reserved (kv_engine refuses them).
const FIRST_USER_COLLECTION_ID: u32 = 8;

/// Bytes of extras a request carries.
#[derive(Clone, Copy)]
enum Extras {
    Exactly(usize),
    /// Either length (GET_LOCKED: optional lock time; GET_META: optional version byte;
    /// GET_CLUSTER_CONFIG: optional known epoch and revision).
    Either(usize, usize),
}

/// Whether a section must be empty, must not be, or may be either.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Presence {
    Zero,
    NonZero,
    Any,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cas {
    NotSet,
    Set,
    Any,
}

/// The shape of one opcode's requests.
#[derive(Clone, Copy)]
struct Shape {
    extras: Extras,
    key: Presence,
    value: Presence,
    cas: Cas,
}

const fn shape(extras: Extras, key: Presence, value: Presence, cas: Cas) -> Shape {
    Shape {
        extras,
        key,
        value,
        cas,
    }
}

use Extras::{Either, Exactly};
use Presence::{Any, NonZero, Zero};

/// kv_engine's validator for `opcode` (quiet variants share their loud form's), or `None` for
/// opcodes checked elsewhere or not implemented.
fn shape_of(opcode: u8) -> Option<Shape> {
    let (base, _) = opcode::unquiet(opcode);
    Some(match base {
        opcode::GET | opcode::GETK => shape(Exactly(0), NonZero, Zero, Cas::NotSet),
        opcode::SET | opcode::REPLACE => shape(Exactly(8), NonZero, Any, Cas::Any),
        opcode::ADD => shape(Exactly(8), NonZero, Any, Cas::NotSet),
        opcode::APPEND | opcode::PREPEND => shape(Exactly(0), NonZero, Any, Cas::Any),
        opcode::DELETE => shape(Exactly(0), NonZero, Zero, Cas::Any),
        opcode::INCREMENT | opcode::DECREMENT => shape(Exactly(20), NonZero, Zero, Cas::NotSet),
        opcode::TOUCH | opcode::GAT => shape(Exactly(4), NonZero, Zero, Cas::NotSet),
        opcode::GET_LOCKED => shape(Either(0, 4), NonZero, Zero, Cas::NotSet),
        opcode::UNLOCK_KEY => shape(Exactly(0), NonZero, Zero, Cas::Set),
        opcode::GET_META => shape(Either(0, 1), NonZero, Zero, Cas::NotSet),
        opcode::OBSERVE_SEQNO => shape(Exactly(0), Zero, NonZero, Cas::Any),
        opcode::STAT => shape(Exactly(0), Any, Any, Cas::NotSet),
        opcode::NOOP | opcode::VERSION | opcode::QUIT | opcode::SASL_LIST_MECHS => {
            shape(Exactly(0), Zero, Zero, Cas::NotSet)
        }
        opcode::HELLO => shape(Exactly(0), Any, Any, Cas::NotSet),
        opcode::SASL_AUTH | opcode::SASL_STEP => shape(Exactly(0), NonZero, Any, Cas::NotSet),
        opcode::SELECT_BUCKET => shape(Exactly(0), Any, Zero, Cas::Any),
        opcode::GET_CLUSTER_CONFIG => shape(Either(0, 16), Zero, Zero, Cas::NotSet),
        opcode::GET_ERROR_MAP => shape(Exactly(0), Zero, Any, Cas::NotSet),
        opcode::GET_COLLECTIONS_MANIFEST => shape(Exactly(0), Zero, Zero, Cas::NotSet),
        opcode::GET_COLLECTION_ID | opcode::GET_SCOPE_ID => {
            shape(Exactly(0), Any, Any, Cas::NotSet)
        }
        _ => return None,
    })
}

/// Checks a request's shape; the error is the reason kv_engine gives with EINVAL.
pub fn request(frame: &Frame<'_>) -> Result<(), &'static str> {
    let Some(shape) = shape_of(frame.opcode) else {
        return Ok(());
    };
    let extras = frame.extras.len();
    match shape.extras {
        Exactly(0) if extras != 0 => return Err("Request must not include extras"),
        Exactly(4) if extras != 4 => return Err("Request must include extras of length 4"),
        Exactly(8) if extras != 8 => return Err("Request must include extras of length 8"),
        Exactly(20) if extras != 20 => return Err("Request must include extras of length 20"),
        Either(first, second) if extras != first && extras != second => {
            return Err("Request extras have an invalid length")
        }
        _ => {}
    }
    match (shape.key, frame.key.is_empty()) {
        (Zero, false) => return Err("Request must not include key"),
        (NonZero, true) => return Err("Request must include key"),
        _ => {}
    }
    match (shape.value, frame.value.is_empty()) {
        (Zero, false) => return Err("Request must not include value"),
        (NonZero, true) => return Err("Request must include value"),
        _ => {}
    }
    match (shape.cas, frame.cas) {
        (Cas::NotSet, cas) if cas != 0 => return Err("Request CAS must not be set"),
        (Cas::Set, 0) => return Err("Request CAS must be set"),
        _ => {}
    }
    specific(frame)
}

/// The checks kv_engine adds for single opcodes beyond the shape.
fn specific(frame: &Frame<'_>) -> Result<(), &'static str> {
    match frame.opcode {
        opcode::HELLO if !frame.value.len().is_multiple_of(2) => {
            Err("Request value must be of even length")
        }
        opcode::OBSERVE_SEQNO if frame.value.len() != 8 => Err("Request value must be of length 8"),
        opcode::GET_META if frame.extras.first().is_some_and(|version| *version > 2) => {
            Err("Request extras invalid")
        }
        opcode::GET_ERROR_MAP
        | opcode::GET_COLLECTIONS_MANIFEST
        | opcode::GET_COLLECTION_ID
        | opcode::GET_SCOPE_ID
            if frame.vbucket() != 0 =>
        {
            Err("Request vbucket id must be 0")
        }
        opcode::GET_ERROR_MAP if frame.value.len() != 2 => Err("Request value must be of length 2"),
        opcode::GET_COLLECTION_ID | opcode::GET_SCOPE_ID
            if !frame.key.is_empty() && !frame.value.is_empty() =>
        {
            Err("Cannot set both key and value")
        }
        _ => Ok(()),
    }
}

/// Splits the key of a document command on a connection that negotiated HELLO Collections
/// into its collection id and the key proper, with kv_engine's rules: an unsigned LEB128 id in
/// canonical (shortest) form of at most 5 bytes, followed by at least one key byte; ids 1..=7
/// reserved; the key proper at most [`DEFAULT_COLLECTION_KEY_MAX`] bytes in collection 0 and
/// [`COLLECTION_KEY_MAX`] in others. The error is the reason sent with EINVAL.
pub fn collection_key(key: &[u8]) -> Result<(u32, &[u8]), &'static str> {
    let Some((cid, used)) = leb128::decode_u32(key) else {
        return Err("Invalid collection id: not a LEB128 u32");
    };
    if used > 1 && key[used - 1] == 0 {
        return Err("Invalid collection id: LEB128 not in canonical form");
    }
    let rest = &key[used..];
    if rest.is_empty() {
        return Err("Key must include at least one byte after the collection id");
    }
    if cid != 0 && cid < FIRST_USER_COLLECTION_ID {
        return Err("Invalid collection id: 1..=7 are reserved");
    }
    let max = if cid == 0 {
        DEFAULT_COLLECTION_KEY_MAX
    } else {
        COLLECTION_KEY_MAX
    };
    if rest.len() > max {
        return Err("Key length exceeds the maximum");
    }
    Ok((cid, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Magic;

    fn frame<'a>(opcode: u8, extras: &'a [u8], key: &'a [u8], value: &'a [u8]) -> Frame<'a> {
        Frame {
            magic: Magic::Request,
            opcode,
            datatype: 0,
            vbucket_or_status: 0,
            opaque: 1,
            cas: 0,
            framing_extras: &[],
            extras,
            key,
            value,
        }
    }

    #[test]
    fn gets_take_a_key_and_nothing_else() {
        assert!(request(&frame(opcode::GET, &[], b"k", &[])).is_ok());
        assert!(request(&frame(opcode::GETKQ, &[], b"k", &[])).is_ok());
        assert!(request(&frame(opcode::GET, &[0; 8], b"k", &[])).is_err());
        assert!(request(&frame(opcode::GETQ, &[0; 8], b"k", &[])).is_err());
        assert!(request(&frame(opcode::GET, &[], b"", &[])).is_err());
        assert!(request(&frame(opcode::GET, &[], b"k", b"v")).is_err());
        let mut with_cas = frame(opcode::GET, &[], b"k", &[]);
        with_cas.cas = 7;
        assert!(request(&with_cas).is_err());
    }

    #[test]
    fn mutations_need_their_extras() {
        assert!(request(&frame(opcode::SET, &[0; 8], b"k", b"v")).is_ok());
        assert!(request(&frame(opcode::SETQ, &[0; 8], b"k", b"")).is_ok());
        assert!(request(&frame(opcode::SET, &[0; 4], b"k", b"v")).is_err());
        assert!(request(&frame(opcode::INCREMENT, &[0; 20], b"k", b"")).is_ok());
        assert!(request(&frame(opcode::INCREMENT, &[0; 20], b"k", b"1")).is_err());
        assert!(request(&frame(opcode::TOUCH, &[0; 4], b"k", b"")).is_ok());
        assert!(request(&frame(opcode::TOUCH, &[], b"k", b"")).is_err());
        assert!(request(&frame(opcode::DELETE, &[0; 4], b"k", b"")).is_err());
        let mut add = frame(opcode::ADD, &[0; 8], b"k", b"v");
        add.cas = 1;
        assert!(request(&add).is_err());
        let unlock = frame(opcode::UNLOCK_KEY, &[], b"k", b"");
        assert_eq!(request(&unlock), Err("Request CAS must be set"));
    }

    #[test]
    fn optional_extras_and_handshake_opcodes() {
        assert!(request(&frame(opcode::GET_LOCKED, &[0; 4], b"k", b"")).is_ok());
        assert!(request(&frame(opcode::GET_LOCKED, &[0; 2], b"k", b"")).is_err());
        assert!(request(&frame(opcode::GET_META, &[2], b"k", b"")).is_ok());
        assert!(request(&frame(opcode::GET_META, &[3], b"k", b"")).is_err());
        assert!(request(&frame(opcode::HELLO, &[], b"agent", &[0, 1])).is_ok());
        assert!(request(&frame(opcode::HELLO, &[], b"agent", &[0, 1, 2])).is_err());
        assert!(request(&frame(opcode::NOOP, &[], b"", b"x")).is_err());
        assert!(request(&frame(opcode::GET_CLUSTER_CONFIG, &[0; 16], b"", b"")).is_ok());
        assert!(request(&frame(opcode::GET_CLUSTER_CONFIG, &[0; 8], b"", b"")).is_err());
        assert!(request(&frame(opcode::GET_ERROR_MAP, &[], b"", &[0, 2])).is_ok());
        assert!(request(&frame(opcode::GET_ERROR_MAP, &[], b"", &[2])).is_err());
        assert!(request(&frame(opcode::OBSERVE_SEQNO, &[], b"", &[0; 8])).is_ok());
        assert!(request(&frame(opcode::OBSERVE_SEQNO, &[], b"", &[0; 4])).is_err());
        assert!(request(&frame(opcode::SASL_AUTH, &[], b"", b"x")).is_err());
        // Opcodes checked elsewhere (sub-document) or unknown pass through.
        assert!(request(&frame(opcode::SUBDOC_MULTI_LOOKUP, &[1], b"k", b"")).is_ok());
        assert!(request(&frame(0x77, &[1], b"", b"")).is_ok());
    }

    #[test]
    fn collection_id_lookups_take_a_path_in_key_or_value() {
        for op in [opcode::GET_COLLECTION_ID, opcode::GET_SCOPE_ID] {
            assert!(request(&frame(op, &[], b"", b"s.c")).is_ok());
            assert!(request(&frame(op, &[], b"s.c", b"")).is_ok());
            assert!(request(&frame(op, &[], b"s.c", b"s.c")).is_err());
            assert!(request(&frame(op, &[0; 4], b"", b"s.c")).is_err());
            let mut vbucket = frame(op, &[], b"", b"s.c");
            vbucket.vbucket_or_status = 3;
            assert_eq!(request(&vbucket), Err("Request vbucket id must be 0"));
        }
    }

    #[test]
    fn collection_prefixes_follow_kv_engine() {
        assert_eq!(collection_key(b"\x00k"), Ok((0, &b"k"[..])));
        assert_eq!(collection_key(b"\x08key"), Ok((8, &b"key"[..])));
        assert_eq!(collection_key(&[0x80, 0x01, b'k']), Ok((128, &b"k"[..])));
        // Not canonical: 8 spelled in two bytes; 0 in two.
        assert!(collection_key(&[0x88, 0x00, b'k']).is_err());
        assert!(collection_key(&[0x80, 0x00, b'k']).is_err());
        // Truncated, more than 5 bytes, past u32.
        assert!(collection_key(&[0x88]).is_err());
        assert!(collection_key(&[0x80; 5]).is_err());
        assert!(collection_key(&[0xff, 0xff, 0xff, 0xff, 0x1f, b'k']).is_err());
        assert_eq!(
            collection_key(&[0xff, 0xff, 0xff, 0xff, 0x0f, b'k']),
            Ok((u32::MAX, &b"k"[..]))
        );
        // No key byte after the id; reserved ids.
        assert!(collection_key(&[0x08]).is_err());
        assert!(collection_key(&[0x00]).is_err());
        for reserved in 1..=7u8 {
            assert_eq!(
                collection_key(&[reserved, b'k']),
                Err("Invalid collection id: 1..=7 are reserved")
            );
        }
        // Key lengths: 250 in collection 0, 246 elsewhere.
        let mut key = vec![0u8];
        key.extend(vec![b'k'; 250]);
        assert!(collection_key(&key).is_ok());
        key.push(b'k');
        assert!(collection_key(&key).is_err());
        let mut key = vec![8u8];
        key.extend(vec![b'k'; 246]);
        assert!(collection_key(&key).is_ok());
        key.push(b'k');
        assert!(collection_key(&key).is_err());
    }
}
