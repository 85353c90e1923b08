//! `Range` requests on attachments, read as CouchDB 3.5 reads them (measured against it; see
//! docs/compatibility.md):
//! - only `bytes=` (that spelling) is a range request; any other unit, or an item that does
//!   not parse (`x-1`, `1-2-3`), makes the header ignored: the whole attachment, 200;
//! - items are separated by commas, spaces around them and empty items are ignored;
//! - `0-` (from the first byte to the end), anywhere in the list, is the whole attachment;
//! - `a-b` with `a > b`, a start past the end, or the suffix `-0` make the whole request
//!   416; an end past the end is clamped;
//! - a suffix `-n` is the last `n` bytes; one at least as long as the attachment starts at
//!   its second byte (CouchDB's arithmetic, kept so clients see the same bytes);
//! - one range is a 206 with `Content-Range`; several (up to nine) are a
//!   `multipart/byteranges` 206 with a part per range, in the order asked, overlaps and
//!   repeats included; ten or more are ignored.

use bytes::{Bytes, BytesMut};

/// What a `Range` header asks of an attachment of a given size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// No range request (or one CouchDB ignores): the whole attachment, 200.
    Whole,
    /// Byte ranges, first and last byte included, each within the attachment.
    Ranges(Vec<(u64, u64)>),
    /// 416.
    Unsatisfiable,
}

/// Most ranges one request may ask for; a longer list is answered with the whole attachment,
/// as CouchDB answers ten or more (a list of thousands of one-byte ranges would make a
/// response many times the attachment's size).
pub const RANGES_MAX: usize = 9;

/// One item of the list before it meets the attachment's size.
enum Item {
    From(u64),
    Between(u64, u64),
    Suffix(u64),
}

/// Reads a `Range` header against an attachment of `size` bytes.
pub fn parse(header: Option<&str>, size: u64) -> RangeRequest {
    let Some(list) = header.and_then(|header| header.strip_prefix("bytes=")) else {
        return RangeRequest::Whole;
    };
    let mut items = Vec::new();
    for item in list
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        match parse_item(item) {
            Some(item) => items.push(item),
            None => return RangeRequest::Whole,
        }
    }
    if items.is_empty() || items.len() > RANGES_MAX {
        return RangeRequest::Whole;
    }
    if items.iter().any(|item| matches!(item, Item::From(0))) {
        return RangeRequest::Whole;
    }
    let mut ranges = Vec::with_capacity(items.len());
    for item in items {
        let range = match item {
            Item::From(first) if first < size => (first, size - 1),
            Item::Between(first, last) if first <= last && first < size => {
                (first, last.min(size - 1))
            }
            Item::Suffix(length) if length > 0 && size > 0 => {
                let first = if length < size {
                    size - length
                } else {
                    1.min(size - 1)
                };
                (first, size - 1)
            }
            _ => return RangeRequest::Unsatisfiable,
        };
        ranges.push(range);
    }
    RangeRequest::Ranges(ranges)
}

fn parse_item(item: &str) -> Option<Item> {
    let (first, last) = item.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    match (first.is_empty(), last.is_empty()) {
        (true, true) => None,
        (true, false) => Some(Item::Suffix(number(last)?)),
        (false, true) => Some(Item::From(number(first)?)),
        (false, false) => Some(Item::Between(number(first)?, number(last)?)),
    }
}

/// A non-negative decimal integer as Erlang's `list_to_integer` reads it (a leading `+` is
/// allowed); one too large for 64 bits is the largest value, past any attachment's end.
fn number(text: &str) -> Option<u64> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// `bytes FIRST-LAST/SIZE`.
pub fn content_range(range: (u64, u64), size: u64) -> String {
    format!("bytes {}-{}/{size}", range.0, range.1)
}

/// The bytes of `range` (which [`parse`] keeps within `data`).
pub fn slice(data: &Bytes, range: (u64, u64)) -> Bytes {
    let end = usize::try_from(range.1)
        .map(|last| last.saturating_add(1))
        .unwrap_or(usize::MAX)
        .min(data.len());
    let start = usize::try_from(range.0).unwrap_or(usize::MAX).min(end);
    data.slice(start..end)
}

/// A `multipart/byteranges` body: one part per range, each with the attachment's type and its
/// `Content-Range`, as CouchDB writes it (no line break after the closing boundary).
pub fn byteranges_body(
    data: &Bytes,
    ranges: &[(u64, u64)],
    content_type: &str,
    boundary: &str,
) -> Bytes {
    let size = data.len() as u64;
    let mut body = BytesMut::new();
    for (index, range) in ranges.iter().enumerate() {
        if index > 0 {
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: {}\r\n\r\n",
                content_range(*range, size)
            )
            .as_bytes(),
        );
        body.extend_from_slice(&slice(data, *range));
    }
    body.extend_from_slice(format!("\r\n--{boundary}--").as_bytes());
    body.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(header: &str) -> RangeRequest {
        parse(Some(header), 11)
    }

    #[test]
    fn ranges_are_read_as_couchdb_reads_them() {
        use RangeRequest::*;
        // Measured on CouchDB 3.5.0 with an 11-byte attachment.
        let cases: &[(&str, RangeRequest)] = &[
            ("bytes=0-4", Ranges(vec![(0, 4)])),
            ("bytes=-3", Ranges(vec![(8, 10)])),
            ("bytes=6-", Ranges(vec![(6, 10)])),
            ("bytes=0-100", Ranges(vec![(0, 10)])),
            ("bytes=-10", Ranges(vec![(1, 10)])),
            ("bytes=-11", Ranges(vec![(1, 10)])),
            ("bytes=-100", Ranges(vec![(1, 10)])),
            ("bytes=10-", Ranges(vec![(10, 10)])),
            ("bytes=01-2", Ranges(vec![(1, 2)])),
            ("bytes=+1-2", Ranges(vec![(1, 2)])),
            ("bytes= 0-1", Ranges(vec![(0, 1)])),
            ("bytes=0-1,", Ranges(vec![(0, 1)])),
            ("bytes=,0-1", Ranges(vec![(0, 1)])),
            ("bytes=0-1,3-4", Ranges(vec![(0, 1), (3, 4)])),
            ("bytes=0-1, 3-4", Ranges(vec![(0, 1), (3, 4)])),
            ("bytes=0-1,,3-4", Ranges(vec![(0, 1), (3, 4)])),
            ("bytes=3-4,0-1", Ranges(vec![(3, 4), (0, 1)])),
            ("bytes=0-1,0-1", Ranges(vec![(0, 1), (0, 1)])),
            ("bytes=2-3,0-20", Ranges(vec![(2, 3), (0, 10)])),
            ("bytes=0-0,-1,2-", Ranges(vec![(0, 0), (10, 10), (2, 10)])),
            ("bytes=1-,2-5", Ranges(vec![(1, 10), (2, 5)])),
            ("bytes=0-", Whole),
            ("bytes=0-,2-5", Whole),
            ("bytes=2-5,0-", Whole),
            ("items=0-1", Whole),
            ("Bytes=0-1", Whole),
            ("bytes=x-1", Whole),
            ("bytes=1-2-3", Whole),
            ("bytes=0-1,x", Whole),
            ("bytes=", Whole),
            ("bytes=-", Whole),
            ("bytes=20-30", Unsatisfiable),
            ("bytes=11-", Unsatisfiable),
            ("bytes=5-2", Unsatisfiable),
            ("bytes=-0", Unsatisfiable),
            ("bytes=0-1,20-30", Unsatisfiable),
            ("bytes=2-1,3-4", Unsatisfiable),
            ("bytes=99999999999999999999999-", Unsatisfiable),
        ];
        for (header, expected) in cases {
            assert_eq!(&ranges(header), expected, "{header}");
        }
        assert_eq!(parse(None, 11), Whole);
        assert_eq!(parse(Some("bytes=0-1"), 0), Unsatisfiable);
        assert_eq!(parse(Some("bytes=-5"), 1), Ranges(vec![(0, 0)]));
        // Nine ranges are served, ten ignored, as CouchDB does.
        let nine = format!("bytes={}", ["0-1"; RANGES_MAX].join(","));
        assert_eq!(parse(Some(&nine), 11), Ranges(vec![(0, 1); 9]));
        let ten = format!("bytes={}", ["0-1"; RANGES_MAX + 1].join(","));
        assert_eq!(parse(Some(&ten), 11), Whole);
    }

    #[test]
    fn byteranges_bodies_are_written_as_couchdb_writes_them() {
        let data = Bytes::from_static(b"hello world");
        let body = byteranges_body(&data, &[(0, 1), (3, 4)], "application/octet-stream", "B");
        assert_eq!(
            &body[..],
            b"--B\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 0-1/11\r\n\r\nhe\
              \r\n--B\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 3-4/11\r\n\r\nlo\
              \r\n--B--"
        );
        assert_eq!(&slice(&data, (6, 10))[..], b"world");
    }
}
