//! Unsigned LEB128, the encoding of collection ids in front of keys.

/// Decodes a u32 from the start of `bytes`: (value, bytes used). `None` if the encoding is
/// truncated or does not fit in 32 bits.
pub fn decode_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (index, byte) in bytes.iter().enumerate().take(5) {
        let bits = u32::from(byte & 0x7f);
        let shift = 7 * index as u32;
        if index == 4 && bits > 0x0f {
            return None;
        }
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

/// Appends the encoding of `value` to `out`.
pub fn encode_u32(mut value: u32, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        assert_eq!(decode_u32(&[0x00, 0xff]), Some((0, 1)));
        assert_eq!(decode_u32(&[0x08]), Some((8, 1)));
        assert_eq!(decode_u32(&[0x80, 0x01]), Some((128, 2)));
        assert_eq!(
            decode_u32(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
        assert_eq!(decode_u32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(decode_u32(&[0x80]), None);
        assert_eq!(decode_u32(&[]), None);
    }

    proptest! {
        #[test]
        fn round_trips(value: u32, tail: Vec<u8>) {
            let mut bytes = Vec::new();
            encode_u32(value, &mut bytes);
            let used = bytes.len();
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(decode_u32(&bytes), Some((value, used)));
        }
    }
}
