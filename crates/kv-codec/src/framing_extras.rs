//! Flexible framing extras: a list of (id, bytes) entries in front of the ordinary extras
//! (docs/format/kv-frames.md).

use thiserror::Error;

/// Request framing-extra ids.
pub const BARRIER: u8 = 0;
pub const DURABILITY: u8 = 1;
pub const DCP_STREAM_ID: u8 = 2;
pub const OPEN_TRACING: u8 = 3;
pub const IMPERSONATE: u8 = 4;
pub const PRESERVE_TTL: u8 = 5;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FramingExtrasError {
    #[error("framing extras end inside an entry")]
    Truncated,
    #[error("framing extra {id} has an invalid length {len}")]
    BadLength { id: u16, len: usize },
    #[error("unknown framing extra {0}")]
    Unknown(u16),
    #[error("invalid durability level {0}")]
    BadDurabilityLevel(u8),
}

/// The framing extras settee acts on. Unknown ids are an error (status UNKNOWN_FRAME_INFO),
/// as on Couchbase Server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FramingExtras {
    /// Durability level (1 majority, 2 majority + persist on active, 3 persist to majority)
    /// and the optional timeout in ms.
    pub durability: Option<(u8, Option<u16>)>,
    pub preserve_ttl: bool,
    pub barrier: bool,
}

/// One raw entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramingExtra<'a> {
    pub id: u16,
    pub data: &'a [u8],
}

/// Splits `bytes` into entries.
pub fn entries(mut bytes: &[u8]) -> Result<Vec<FramingExtra<'_>>, FramingExtrasError> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        bytes = rest;
        let mut id = u16::from(tag >> 4);
        let mut len = usize::from(tag & 0x0f);
        if id == 15 {
            let (&more, rest) = bytes.split_first().ok_or(FramingExtrasError::Truncated)?;
            id += u16::from(more);
            bytes = rest;
        }
        if len == 15 {
            let (&more, rest) = bytes.split_first().ok_or(FramingExtrasError::Truncated)?;
            len += usize::from(more);
            bytes = rest;
        }
        if bytes.len() < len {
            return Err(FramingExtrasError::Truncated);
        }
        let (data, rest) = bytes.split_at(len);
        out.push(FramingExtra { id, data });
        bytes = rest;
    }
    Ok(out)
}

impl FramingExtras {
    /// Parses request framing extras.
    pub fn parse(bytes: &[u8]) -> Result<FramingExtras, FramingExtrasError> {
        let mut parsed = FramingExtras::default();
        if bytes.is_empty() {
            return Ok(parsed);
        }
        for entry in entries(bytes)? {
            let bad_length = || FramingExtrasError::BadLength {
                id: entry.id,
                len: entry.data.len(),
            };
            match entry.id as u8 {
                _ if entry.id > 255 => return Err(FramingExtrasError::Unknown(entry.id)),
                BARRIER if entry.data.is_empty() => parsed.barrier = true,
                DURABILITY => {
                    let (level, timeout) = match entry.data {
                        [level] => (*level, None),
                        [level, high, low] => (*level, Some(u16::from_be_bytes([*high, *low]))),
                        _ => return Err(bad_length()),
                    };
                    if !(1..=3).contains(&level) {
                        return Err(FramingExtrasError::BadDurabilityLevel(level));
                    }
                    parsed.durability = Some((level, timeout));
                }
                PRESERVE_TTL if entry.data.is_empty() => parsed.preserve_ttl = true,
                // Tracing context: accepted and ignored (settee has no tracing backend).
                OPEN_TRACING => {}
                BARRIER | PRESERVE_TTL => return Err(bad_length()),
                _ => return Err(FramingExtrasError::Unknown(entry.id)),
            }
        }
        Ok(parsed)
    }

    /// Encodes a durability requirement (used by clients: `settee bench kv`, tests).
    pub fn encode_durability(level: u8, timeout_ms: Option<u16>, out: &mut Vec<u8>) {
        match timeout_ms {
            None => out.extend_from_slice(&[(DURABILITY << 4) | 1, level]),
            Some(timeout) => {
                out.extend_from_slice(&[(DURABILITY << 4) | 3, level]);
                out.extend_from_slice(&timeout.to_be_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durability_with_and_without_timeout() {
        let mut bytes = Vec::new();
        FramingExtras::encode_durability(1, None, &mut bytes);
        assert_eq!(
            FramingExtras::parse(&bytes).unwrap().durability,
            Some((1, None))
        );
        bytes.clear();
        FramingExtras::encode_durability(3, Some(2500), &mut bytes);
        bytes.push(PRESERVE_TTL << 4);
        let parsed = FramingExtras::parse(&bytes).unwrap();
        assert_eq!(parsed.durability, Some((3, Some(2500))));
        assert!(parsed.preserve_ttl);
    }

    #[test]
    fn rejects_bad_levels_lengths_unknown_ids_and_truncation() {
        assert_eq!(
            FramingExtras::parse(&[0x11, 4]),
            Err(FramingExtrasError::BadDurabilityLevel(4))
        );
        assert_eq!(
            FramingExtras::parse(&[0x12, 1, 2]),
            Err(FramingExtrasError::BadLength { id: 1, len: 2 })
        );
        assert_eq!(
            FramingExtras::parse(&[0x90]),
            Err(FramingExtrasError::Unknown(9))
        );
        assert_eq!(
            FramingExtras::parse(&[0x13, 1]),
            Err(FramingExtrasError::Truncated)
        );
        assert_eq!(
            FramingExtras::parse(&[0xf0]),
            Err(FramingExtrasError::Truncated)
        );
    }

    #[test]
    fn escaped_ids_and_lengths() {
        let mut bytes = vec![0xff, 0x02, 0x01];
        bytes.extend(std::iter::repeat_n(7u8, 16));
        let parsed = entries(&bytes).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].id, 17);
        assert_eq!(parsed[0].data.len(), 16);
    }
}
