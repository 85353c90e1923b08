//! Frames of the cluster transport (docs/format/cluster-transport.md): a length, a version, a
//! kind, a request id and a body. Pure: decoding looks at bytes already read and never panics.

/// The protocol version every frame carries.
pub const VERSION: u8 = 1;
/// Bytes of the length field.
const LENGTH_BYTES: usize = 4;
/// Bytes after the length field and before the body: version, kind, request id.
pub const HEAD_BYTES: usize = 10;
/// The largest frame, after its length field: a whole snapshot of the map fits many times.
pub const FRAME_BYTES_MAX: usize = 64 << 20;

/// One frame, its body borrowed from the bytes it was decoded from.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub kind: u8,
    pub request_id: u64,
    pub body: &'a [u8],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length {0} is out of range")]
    Length(u64),
    #[error("frame version {0} is not supported")]
    Version(u8),
}

/// Frames of the handshake are small: before a peer has proved the secret, it may not make a
/// node hold more than this for it.
pub const HANDSHAKE_FRAME_BYTES_MAX: usize = 256;

/// The frame at the start of `bytes` and how many bytes it took, `None` while it is incomplete.
/// A bad length or version is reported as soon as its bytes are there, before the body arrives.
pub fn decode(bytes: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    decode_within(bytes, FRAME_BYTES_MAX)
}

/// [`decode`] with a lower limit on the frame's length (after its length field).
pub fn decode_within(
    bytes: &[u8],
    frame_bytes_max: usize,
) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(length) = bytes.get(..LENGTH_BYTES) else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([length[0], length[1], length[2], length[3]]);
    let length_bytes = length as usize;
    if !(HEAD_BYTES..=frame_bytes_max.min(FRAME_BYTES_MAX)).contains(&length_bytes) {
        return Err(FrameError::Length(u64::from(length)));
    }
    let Some(&version) = bytes.get(LENGTH_BYTES) else {
        return Ok(None);
    };
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let total = LENGTH_BYTES + length_bytes;
    let Some(frame) = bytes.get(LENGTH_BYTES..total) else {
        return Ok(None);
    };
    let mut id = [0; 8];
    id.copy_from_slice(&frame[2..HEAD_BYTES]);
    Ok(Some((
        Frame {
            kind: frame[1],
            request_id: u64::from_be_bytes(id),
            body: &frame[HEAD_BYTES..],
        },
        total,
    )))
}

/// Whether a body of `len` bytes fits in one frame.
pub fn fits(len: usize) -> bool {
    len <= FRAME_BYTES_MAX - HEAD_BYTES
}

/// Appends one frame to `out`. The caller checks [`fits`] first; a body that does not fit
/// is cut to the limit here rather than announced with a wrong length.
pub fn encode(kind: u8, request_id: u64, body: &[u8], out: &mut Vec<u8>) {
    let body = &body[..body.len().min(FRAME_BYTES_MAX - HEAD_BYTES)];
    let length = (HEAD_BYTES + body.len()) as u32;
    out.extend_from_slice(&length.to_be_bytes());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&request_id.to_be_bytes());
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_decodes_only_once_whole_and_takes_exactly_its_bytes() {
        let mut bytes = Vec::new();
        encode(0x12, 7, b"body", &mut bytes);
        encode(0x16, 8, b"", &mut bytes);
        let first_len = LENGTH_BYTES + HEAD_BYTES + 4;
        for cut in 0..first_len {
            assert_eq!(decode(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        let (frame, used) = decode(&bytes).expect("valid").expect("whole");
        assert_eq!(used, first_len);
        assert_eq!(
            frame,
            Frame {
                kind: 0x12,
                request_id: 7,
                body: b"body"
            }
        );
        let (frame, used) = decode(&bytes[used..]).expect("valid").expect("whole");
        assert_eq!(
            (frame.kind, frame.request_id, frame.body, used),
            (0x16, 8, &b""[..], 14)
        );
    }

    #[test]
    fn bad_lengths_and_versions_are_refused_before_the_body_arrives() {
        assert_eq!(decode(&[0, 0, 0, 9]), Err(FrameError::Length(9)));
        let too_long = (FRAME_BYTES_MAX as u32 + 1).to_be_bytes();
        assert_eq!(
            decode(&too_long),
            Err(FrameError::Length(FRAME_BYTES_MAX as u64 + 1))
        );
        assert_eq!(decode(&[0, 0, 0, 10, 2]), Err(FrameError::Version(2)));
        assert_eq!(decode(&[0, 0, 0, 10, 1, 0x10]), Ok(None));
        let hello_sized = 300u32.to_be_bytes();
        assert_eq!(decode(&hello_sized), Ok(None));
        assert_eq!(
            decode_within(&hello_sized, HANDSHAKE_FRAME_BYTES_MAX),
            Err(FrameError::Length(300))
        );
    }
}
