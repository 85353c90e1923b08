//! Request bodies sent with a `Content-Encoding`, as CouchDB's `chttpd` reads them: `gzip` is
//! decoded (IBM's `ibmcloudant` SDKs gzip every request body by default), `identity` is the body
//! as sent, and any other encoding is refused with 415.
//!
//! The decoded body obeys the same size limit as a plain one: decoding stops one byte past the
//! limit and answers 413, so a small gzip bomb never makes the node hold more than the limit.

use std::io::Read;

use bytes::Bytes;
use flate2::read::MultiGzDecoder;

/// Why a request body could not be decoded; the door answers each with CouchDB's status.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// An encoding other than `gzip` or `identity` (CouchDB: 415 `bad_content_type`).
    #[error("{0} is not a supported content encoding.")]
    Unsupported(String),
    /// Not a gzip stream, or a damaged one (CouchDB: 400 `bad_request`).
    #[error("Request body is not properly gzipped.")]
    NotGzip,
    /// Decoded, the body is past the size limit (413).
    #[error("the decoded request body is larger than the limit")]
    TooLarge,
}

/// How a request body was encoded by its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEncoding {
    Identity,
    Gzip,
}

/// The encoding a `Content-Encoding` header names; no header is `identity`. CouchDB accepts
/// exactly `gzip` and `identity` and refuses anything else (`deflate`, `br`, a list) with
/// 415 `bad_content_type`.
pub fn body_encoding(header: Option<&str>) -> Result<BodyEncoding, DecodeError> {
    match header.map(str::trim) {
        None | Some("identity") => Ok(BodyEncoding::Identity),
        Some("gzip") => Ok(BodyEncoding::Gzip),
        Some(other) => Err(DecodeError::Unsupported(other.to_string())),
    }
}

/// The body as its sender meant it: `body` decoded per `encoding`, at most `limit` bytes.
pub fn decode_body(
    encoding: BodyEncoding,
    body: Bytes,
    limit: usize,
) -> Result<Bytes, DecodeError> {
    match encoding {
        BodyEncoding::Identity => Ok(body),
        // An empty body stays empty (a client that gzips nothing sends nothing).
        BodyEncoding::Gzip if body.is_empty() => Ok(body),
        BodyEncoding::Gzip => gunzip(&body, limit),
    }
}

pub fn gunzip(compressed: &[u8], limit: usize) -> Result<Bytes, DecodeError> {
    let mut decoded = Vec::with_capacity(compressed.len().saturating_mul(4).min(limit));
    // One byte past the limit tells "exactly the limit" from "more".
    let allowed = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    MultiGzDecoder::new(compressed)
        .take(allowed)
        .read_to_end(&mut decoded)
        .map_err(|_| DecodeError::NotGzip)?;
    if decoded.len() > limit {
        return Err(DecodeError::TooLarge);
    }
    Ok(Bytes::from(decoded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Bytes {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).expect("write");
        Bytes::from(encoder.finish().expect("finish"))
    }

    #[test]
    fn encodings_are_read_as_couchdb_reads_them() {
        assert_eq!(body_encoding(None).ok(), Some(BodyEncoding::Identity));
        assert_eq!(
            body_encoding(Some("identity")).ok(),
            Some(BodyEncoding::Identity)
        );
        assert_eq!(body_encoding(Some("gzip")).ok(), Some(BodyEncoding::Gzip));
        for refused in ["deflate", "br", "gzip, identity", "x-gzip", ""] {
            let error = body_encoding(Some(refused)).expect_err(refused);
            assert_eq!(error, DecodeError::Unsupported(refused.to_string()));
        }
    }

    #[test]
    fn gzip_bodies_decode_within_the_limit() {
        let doc = br#"{"hello":"world"}"#;
        let decoded = decode_body(BodyEncoding::Gzip, gzip(doc), 1024).expect("decodes");
        assert_eq!(&decoded[..], doc);
        // Exactly the limit is fine; one byte more is 413.
        assert!(decode_body(BodyEncoding::Gzip, gzip(doc), doc.len()).is_ok());
        let error = decode_body(BodyEncoding::Gzip, gzip(doc), doc.len() - 1).expect_err("big");
        assert_eq!(error, DecodeError::TooLarge);
        // Two gzip members one after the other are one body, as gunzip(1) reads them.
        let mut two = gzip(b"[1,").to_vec();
        two.extend_from_slice(&gzip(b"2]"));
        let decoded = decode_body(BodyEncoding::Gzip, Bytes::from(two), 64).expect("two");
        assert_eq!(&decoded[..], b"[1,2]");
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        // 64 MiB of zeros compress to about 64 KiB; decoding must stop at the limit.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 1 << 20);
        let error = decode_body(BodyEncoding::Gzip, bomb, 1 << 20).expect_err("bomb");
        assert_eq!(error, DecodeError::TooLarge);
    }

    #[test]
    fn damaged_gzip_is_a_bad_request() {
        let mut damaged = gzip(br#"{"a":1}"#).to_vec();
        damaged.truncate(damaged.len() - 6);
        for body in [
            Bytes::from(damaged),
            Bytes::from_static(b"{\"not\":\"gzip\"}"),
        ] {
            let error = decode_body(BodyEncoding::Gzip, body, 1024).expect_err("damaged");
            assert_eq!(error, DecodeError::NotGzip);
        }
    }
}
