//! Attachments stored gzipped, as CouchDB stores them (docs/format/document.md, "Encoded (gzip)
//! attachments"): which content types are compressible (`[attachments] compressible_types`)
//! and the compression itself, zlib's deflate with a gzip wrapper at `[attachments]
//! compression_level`, whose bytes equal what CouchDB's Erlang zlib writes for the same body.

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};

/// zlib's largest window, as CouchDB opens its deflate stream (`16 + 15` for gzip framing).
const WINDOW_BITS: u8 = 15;

/// Whether `content_type` matches one of `types` (comma-separated; `*` matches anything), as
/// CouchDB's `compressible_att_type`: case-insensitive, parameters after `;` ignored.
pub fn is_compressible(content_type: &str, types: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    types
        .split(',')
        .map(|pattern| pattern.trim().to_ascii_lowercase())
        .filter(|pattern| !pattern.is_empty())
        .any(|pattern| wildcard_match(&pattern, &media))
}

/// `pattern` with `*` matching any run of characters, against the whole of `text`.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// `data` gzipped at `level` (1-9) as CouchDB's zlib stream writes it.
pub fn gzip(data: &[u8], level: u32) -> Bytes {
    let mut compress = Compress::new_gzip(Compression::new(level.clamp(1, 9)), WINDOW_BITS);
    // A deflate stream is at most a little larger than its input (stored blocks).
    let mut out = Vec::with_capacity(data.len() + data.len() / 1000 + 64);
    loop {
        let consumed = compress.total_in() as usize;
        let status = compress.compress_vec(&data[consumed..], &mut out, FlushCompress::Finish);
        match status {
            Ok(Status::StreamEnd) => break,
            Ok(_) => out.reserve(out.capacity().max(64)),
            // zlib fails only on a misuse of the stream, which this loop never makes.
            Err(_) => break,
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_types_as_couchdb_matches_them() {
        let types = settee_node_config::COMPRESSIBLE_TYPES_DEFAULT;
        assert!(is_compressible("text/plain", types));
        assert!(is_compressible("Text/HTML; charset=utf-8", types));
        assert!(is_compressible("application/json", types));
        assert!(!is_compressible("application/json-patch", types));
        assert!(!is_compressible("image/png", types));
        assert!(!is_compressible("application/octet-stream", types));
        assert!(is_compressible("image/svg+xml", "image/*+xml"));
        assert!(!is_compressible("text/plain", ""));
    }

    #[test]
    fn gzip_bytes_are_couchdbs() {
        // CouchDB 3.5.0 stored this body (text/plain, level 8) as these bytes; its digest
        // md5-CzDfAHx884e72GgEVUS6Ug== is their md5.
        let stored = gzip(b"hello world hello world hello world", 8);
        let expected: &[u8] = &[
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9,
            0xc9, 0x57, 0x28, 0xcf, 0x2f, 0xca, 0x49, 0x51, 0xc8, 0xc0, 0xce, 0x06, 0x00, 0xbb,
            0xfe, 0x42, 0x0f, 0x23, 0x00, 0x00, 0x00,
        ];
        assert_eq!(&stored[..], expected);
        let big: Vec<u8> = (0..200_000u32)
            .flat_map(|n| (n % 251).to_be_bytes())
            .collect();
        let round = crate::encoding::gunzip(&gzip(&big, 8), usize::MAX).expect("gunzip");
        assert_eq!(&round[..], &big[..]);
        assert_eq!(
            &crate::encoding::gunzip(&gzip(b"", 8), 10).expect("gunzip")[..],
            b""
        );
    }
}
