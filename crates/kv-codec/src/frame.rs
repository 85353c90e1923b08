//! The 24-byte header and the four body sections.

use thiserror::Error;

pub const HEADER_LEN: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    /// 0x80
    Request,
    /// 0x81
    Response,
    /// 0x08: request carrying flexible framing extras.
    AltRequest,
    /// 0x18: response carrying flexible framing extras.
    AltResponse,
    /// 0x82: a request the server sends unprompted (cluster-map change).
    ServerRequest,
    /// 0x83: the client's answer to a server request.
    ServerResponse,
}

impl Magic {
    pub fn from_byte(byte: u8) -> Option<Magic> {
        Some(match byte {
            0x80 => Magic::Request,
            0x81 => Magic::Response,
            0x08 => Magic::AltRequest,
            0x18 => Magic::AltResponse,
            0x82 => Magic::ServerRequest,
            0x83 => Magic::ServerResponse,
            _ => return None,
        })
    }

    pub fn byte(self) -> u8 {
        match self {
            Magic::Request => 0x80,
            Magic::Response => 0x81,
            Magic::AltRequest => 0x08,
            Magic::AltResponse => 0x18,
            Magic::ServerRequest => 0x82,
            Magic::ServerResponse => 0x83,
        }
    }

    /// Whether bytes 2-3 are (framing extras u8, key u8) rather than a key u16.
    pub fn is_alt(self) -> bool {
        matches!(self, Magic::AltRequest | Magic::AltResponse)
    }

    pub fn is_request(self) -> bool {
        matches!(
            self,
            Magic::Request | Magic::AltRequest | Magic::ServerRequest
        )
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("unknown magic byte 0x{0:02x}")]
    BadMagic(u8),
    #[error("frame sections ({sections} bytes) exceed the body length ({body})")]
    SectionsExceedBody { sections: usize, body: usize },
    #[error("frame body of {0} bytes exceeds the limit of {1}")]
    TooLarge(usize, usize),
}

/// One frame, borrowed from the buffer it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub magic: Magic,
    pub opcode: u8,
    pub datatype: u8,
    /// vbucket in requests, status in responses.
    pub vbucket_or_status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub framing_extras: &'a [u8],
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl Frame<'_> {
    pub fn vbucket(&self) -> u16 {
        self.vbucket_or_status
    }

    pub fn status(&self) -> u16 {
        self.vbucket_or_status
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole frame and the number of bytes it took.
    Frame(Frame<'a>, usize),
    /// More bytes are needed: at least this many in total.
    Incomplete(usize),
}

/// Decodes the frame at the start of `buffer`. `max_body` bounds the body length a peer may
/// announce, so a hostile length never makes the caller reserve memory.
pub fn decode(buffer: &[u8], max_body: usize) -> Result<Decoded<'_>, FrameError> {
    let Some(first) = buffer.first() else {
        return Ok(Decoded::Incomplete(HEADER_LEN));
    };
    let magic = Magic::from_byte(*first).ok_or(FrameError::BadMagic(*first))?;
    if buffer.len() < HEADER_LEN {
        return Ok(Decoded::Incomplete(HEADER_LEN));
    }
    let header = &buffer[..HEADER_LEN];
    let (framing_len, key_len) = if magic.is_alt() {
        (usize::from(header[2]), usize::from(header[3]))
    } else {
        (0, usize::from(u16::from_be_bytes([header[2], header[3]])))
    };
    let extras_len = usize::from(header[4]);
    let body_len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if body_len > max_body {
        return Err(FrameError::TooLarge(body_len, max_body));
    }
    let sections = framing_len + extras_len + key_len;
    if sections > body_len {
        return Err(FrameError::SectionsExceedBody {
            sections,
            body: body_len,
        });
    }
    let total = HEADER_LEN + body_len;
    if buffer.len() < total {
        return Ok(Decoded::Incomplete(total));
    }
    let body = &buffer[HEADER_LEN..total];
    let (framing_extras, rest) = body.split_at(framing_len);
    let (extras, rest) = rest.split_at(extras_len);
    let (key, value) = rest.split_at(key_len);
    Ok(Decoded::Frame(
        Frame {
            magic,
            opcode: header[1],
            datatype: header[5],
            vbucket_or_status: u16::from_be_bytes([header[6], header[7]]),
            opaque: u32::from_be_bytes([header[12], header[13], header[14], header[15]]),
            cas: u64::from_be_bytes(header[16..24].try_into().unwrap_or([0; 8])),
            framing_extras,
            extras,
            key,
            value,
        },
        total,
    ))
}

/// Appends a frame to `out`. The value is given in parts so a reply can be assembled from
/// pieces (e.g. a stored body) without first concatenating them. Lengths that do not fit
/// their fields are the caller's bug and panic in debug builds; the server never builds them
/// from peer input (keys <= 250 bytes, extras fixed-size).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode(
    out: &mut Vec<u8>,
    magic: Magic,
    opcode: u8,
    datatype: u8,
    vbucket_or_status: u16,
    opaque: u32,
    cas: u64,
    framing_extras: &[u8],
    extras: &[u8],
    key: &[u8],
    value: &[&[u8]],
) {
    let value_len: usize = value.iter().map(|part| part.len()).sum();
    let body_len = framing_extras.len() + extras.len() + key.len() + value_len;
    debug_assert!(extras.len() <= usize::from(u8::MAX));
    debug_assert!(body_len <= u32::MAX as usize);
    let magic = match magic {
        Magic::Request if !framing_extras.is_empty() => Magic::AltRequest,
        Magic::Response if !framing_extras.is_empty() => Magic::AltResponse,
        other => other,
    };
    out.reserve(HEADER_LEN + body_len);
    out.push(magic.byte());
    out.push(opcode);
    if magic.is_alt() {
        debug_assert!(framing_extras.len() <= 255 && key.len() <= 255);
        out.push(framing_extras.len() as u8);
        out.push(key.len() as u8);
    } else {
        debug_assert!(key.len() <= usize::from(u16::MAX));
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    }
    out.push(extras.len() as u8);
    out.push(datatype);
    out.extend_from_slice(&vbucket_or_status.to_be_bytes());
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(framing_extras);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    for part in value {
        out.extend_from_slice(part);
    }
}

/// Starts a response (magic 0x81, no extras, no key) whose value the caller appends to `out`
/// directly — e.g. sub-document results written as the engine produces them, without a
/// separate buffer. Returns where the frame starts; [`finish_response`] completes the header.
pub fn start_response(out: &mut Vec<u8>, opcode: u8, opaque: u32) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    out[start] = Magic::Response.byte();
    out[start + 1] = opcode;
    out[start + 12..start + 16].copy_from_slice(&opaque.to_be_bytes());
    start
}

/// Fills in the header of a response begun with [`start_response`]: everything after it in
/// `out` is its value.
pub fn finish_response(out: &mut [u8], start: usize, status: u16, cas: u64, datatype: u8) {
    let body_len = (out.len() - start - HEADER_LEN) as u32;
    out[start + 5] = datatype;
    out[start + 6..start + 8].copy_from_slice(&status.to_be_bytes());
    out[start + 8..start + 12].copy_from_slice(&body_len.to_be_bytes());
    out[start + 16..start + 24].copy_from_slice(&cas.to_be_bytes());
}

/// Appends a response (magic 0x81, or 0x18 when `framing_extras` is not empty).
#[allow(clippy::too_many_arguments)]
pub fn encode_response(
    out: &mut Vec<u8>,
    opcode: u8,
    status: u16,
    opaque: u32,
    cas: u64,
    datatype: u8,
    extras: &[u8],
    key: &[u8],
    value: &[&[u8]],
) {
    encode(
        out,
        Magic::Response,
        opcode,
        datatype,
        status,
        opaque,
        cas,
        &[],
        extras,
        key,
        value,
    );
}

/// Appends a request (magic 0x80, or 0x08 when `framing_extras` is not empty).
#[allow(clippy::too_many_arguments)]
pub fn encode_request(
    out: &mut Vec<u8>,
    opcode: u8,
    vbucket: u16,
    opaque: u32,
    cas: u64,
    datatype: u8,
    framing_extras: &[u8],
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    encode(
        out,
        Magic::Request,
        opcode,
        datatype,
        vbucket,
        opaque,
        cas,
        framing_extras,
        extras,
        key,
        &[value],
    );
}

/// Appends a server-initiated request (magic 0x82), e.g. a cluster-map change notification.
pub fn encode_server_request(
    out: &mut Vec<u8>,
    opcode: u8,
    opaque: u32,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    encode(
        out,
        Magic::ServerRequest,
        opcode,
        0,
        0,
        opaque,
        0,
        &[],
        extras,
        key,
        &[value],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn decodes_a_get_request_by_hand() {
        // GET "foo", vbucket 5, opaque 0xdeadbeef.
        let mut bytes = vec![
            0x80, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x03, 0xde, 0xad,
            0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        bytes.extend_from_slice(b"foo");
        let Decoded::Frame(frame, used) = decode(&bytes, MAX).unwrap() else {
            panic!("incomplete")
        };
        assert_eq!(used, 27);
        assert_eq!(frame.magic, Magic::Request);
        assert_eq!(frame.key, b"foo");
        assert_eq!(frame.vbucket(), 5);
        assert_eq!(frame.opaque, 0xdeadbeef);
        assert!(frame.value.is_empty() && frame.extras.is_empty());
    }

    #[test]
    fn a_response_written_in_place_equals_an_encoded_one() {
        let mut whole = vec![7u8];
        encode_response(
            &mut whole,
            0xd0,
            0x00cc,
            9,
            42,
            1,
            &[],
            &[],
            &[b"ab", b"cde"],
        );
        let mut in_place = vec![7u8];
        let start = start_response(&mut in_place, 0xd0, 9);
        in_place.extend_from_slice(b"abcde");
        finish_response(&mut in_place, start, 0x00cc, 42, 1);
        assert_eq!(in_place, whole);
    }

    #[test]
    fn alt_request_carries_framing_extras_and_a_one_byte_key_length() {
        let mut out = Vec::new();
        encode_request(
            &mut out,
            0x01,
            9,
            7,
            42,
            1,
            &[0x11, 0x01],
            &[0; 8],
            b"k",
            b"{}",
        );
        assert_eq!(out[0], 0x08);
        assert_eq!(out[2], 2);
        assert_eq!(out[3], 1);
        let Decoded::Frame(frame, used) = decode(&out, MAX).unwrap() else {
            panic!("incomplete")
        };
        assert_eq!(used, out.len());
        assert_eq!(frame.framing_extras, &[0x11, 0x01]);
        assert_eq!(frame.extras.len(), 8);
        assert_eq!(frame.key, b"k");
        assert_eq!(frame.value, b"{}");
        assert_eq!(frame.cas, 42);
    }

    #[test]
    fn rejects_bad_magic_oversize_and_inconsistent_lengths() {
        let mut bytes = [0u8; 24];
        bytes[0] = 0x42;
        assert_eq!(decode(&bytes, MAX), Err(FrameError::BadMagic(0x42)));
        bytes[0] = 0x80;
        bytes[8..12].copy_from_slice(&(MAX as u32 + 1).to_be_bytes());
        assert!(matches!(decode(&bytes, MAX), Err(FrameError::TooLarge(..))));
        bytes[8..12].copy_from_slice(&2u32.to_be_bytes());
        bytes[2..4].copy_from_slice(&3u16.to_be_bytes());
        assert!(matches!(
            decode(&bytes, MAX),
            Err(FrameError::SectionsExceedBody { .. })
        ));
    }

    #[test]
    fn asks_for_more_until_the_frame_is_whole() {
        let mut out = Vec::new();
        encode_response(
            &mut out,
            0x00,
            0,
            1,
            2,
            0,
            &[0, 0, 0, 0],
            b"",
            &[b"hello", b" world"],
        );
        for cut in 0..out.len() {
            match decode(&out[..cut], MAX).unwrap() {
                Decoded::Incomplete(needed) => assert!(needed > cut),
                Decoded::Frame(..) => panic!("decoded a frame from {cut} of {} bytes", out.len()),
            }
        }
        let Decoded::Frame(frame, _) = decode(&out, MAX).unwrap() else {
            panic!("incomplete")
        };
        assert_eq!(frame.value, b"hello world");
        assert_eq!(frame.magic, Magic::Response);
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(
            opcode: u8, vbucket: u16, opaque: u32, cas: u64, datatype: u8,
            framing in proptest::collection::vec(any::<u8>(), 0..20),
            extras in proptest::collection::vec(any::<u8>(), 0..30),
            key in proptest::collection::vec(any::<u8>(), 0..250),
            value in proptest::collection::vec(any::<u8>(), 0..600),
            trailing in proptest::collection::vec(any::<u8>(), 0..30),
        ) {
            let mut out = Vec::new();
            encode_request(&mut out, opcode, vbucket, opaque, cas, datatype, &framing, &extras, &key, &value);
            let frame_len = out.len();
            out.extend_from_slice(&trailing);
            let Decoded::Frame(frame, used) = decode(&out, MAX).unwrap() else {
                panic!("incomplete");
            };
            prop_assert_eq!(used, frame_len);
            prop_assert_eq!(frame.opcode, opcode);
            prop_assert_eq!(frame.vbucket(), vbucket);
            prop_assert_eq!(frame.opaque, opaque);
            prop_assert_eq!(frame.cas, cas);
            prop_assert_eq!(frame.datatype, datatype);
            prop_assert_eq!(frame.framing_extras, &framing[..]);
            prop_assert_eq!(frame.extras, &extras[..]);
            prop_assert_eq!(frame.key, &key[..]);
            prop_assert_eq!(frame.value, &value[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decode(&bytes, 64);
        }
    }
}
