//! The one set of document limits both doors obey (issue 18): a document's size and the
//! nesting depth of its JSON, checked by the engine's mutation entry points
//! (`Bucket::update_docs`, `Bucket::kv_mutate`, `Bucket::mutate_in`) whatever door the write
//! came through, and used by the readers that walk many documents (view and Mango indexers,
//! feeds, replication reads) to leave alone a document an older version stored past them.
//! Key length is the third limit, settee-engine's `KEY_BYTES_MAX`, checked on every write. A JSON body
//! must also be JSON every reader can parse: no number a double cannot represent (`1e999`), no
//! lone UTF-16 surrogate escape (`"\ud800"`). Both pass serde_json's skipping and raw-value
//! parsers, so they were stored as JSON, but not a full parse: one such document failed every
//! reader that parses documents, a replication among them.
//!
//! Split out of settee-engine (which re-exports it as `settee_engine::limits`): the HTTP door
//! checks a request's documents with the same functions before the engine does.
#![deny(clippy::unwrap_used)]

/// CouchDB's `max_document_size` default (8 MB). Couchbase allows 20 MiB items; one setting
/// serves both doors, so a document one door stores the other can always serve.
pub const DOC_BYTES_MAX_DEFAULT: usize = 8_000_000;

/// Deepest JSON nesting a document may have by default. A deeper value would be refused by
/// the HTTP door's request check, breaks the JavaScript map of every view that sees it, and
/// cannot be parsed by serde_json (recursion limit 128), so no reader could use it.
pub const JSON_DEPTH_MAX_DEFAULT: usize = 100;

/// Limits every stored document obeys (configured once, from `--max-document-size` and
/// `--max-json-depth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocLimits {
    /// Largest document: its body plus its extended attributes, in bytes.
    pub doc_bytes_max: usize,
    /// Deepest nesting of objects and arrays in a JSON body (1 for `{}`).
    pub json_depth_max: usize,
}

impl Default for DocLimits {
    fn default() -> Self {
        DocLimits {
            doc_bytes_max: DOC_BYTES_MAX_DEFAULT,
            json_depth_max: JSON_DEPTH_MAX_DEFAULT,
        }
    }
}

/// Which limit a document passes. An expected outcome of a write (the client sent too much),
/// mapped by each door: HTTP 413 / 400, KV `E2BIG` / `EINVAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("document of {size} bytes is larger than the limit of {max} bytes")]
    TooLarge { size: usize, max: usize },
    #[error("JSON nested deeper than {max} levels")]
    TooDeep { max: usize },
    /// JSON no reader could parse (the reason says why).
    #[error("{0}")]
    InvalidJson(&'static str),
}

/// [`LimitError::InvalidJson`]'s reasons.
const NUMBER_OUT_OF_RANGE: &str = "JSON number out of range";
const LONE_SURROGATE: &str = "JSON string with a lone UTF-16 surrogate escape";
const RESERVED_NAME: &str = "the JSON member name \"$serde_json::private::RawValue\" is reserved";
/// serde_json reads an object with this member name as its private raw-value marker: a reader
/// of such a document (views, feeds, replication) fails on it, however it is spelled.
const RAW_VALUE_TOKEN: &[u8] = b"$serde_json::private::RawValue";
/// The longest spelling of the token in JSON: every byte a six-byte `\u` escape.
const RAW_VALUE_TOKEN_ESCAPED_MAX: usize = RAW_VALUE_TOKEN.len() * 6;

impl DocLimits {
    /// Checks a document: `body` (JSON when `json`) and `xattrs_len` bytes of extended
    /// attributes. Linear in the body; never parses it.
    pub fn check(&self, body: &[u8], json: bool, xattrs_len: usize) -> Result<(), LimitError> {
        let size = body.len().saturating_add(xattrs_len);
        if size > self.doc_bytes_max {
            return Err(LimitError::TooLarge {
                size,
                max: self.doc_bytes_max,
            });
        }
        if json {
            check_json(body, self.json_depth_max)?;
        }
        Ok(())
    }
}

/// A number token is parsed only when it could be out of a double's range: it has an exponent
/// or more digits than any finite double needs (309 before the point).
const NUMBER_DIGITS_FINITE_MAX: usize = 300;

#[derive(Debug, PartialEq, Eq)]
enum JsonScan {
    Fine,
    TooDeep,
    NumberOutOfRange,
    LoneSurrogate,
    ReservedName,
}

/// Whether `bytes` (JSON, or anything: it is not validated) nests objects and arrays deeper
/// than `max`. Brackets inside strings do not count. Stops at the first level past `max`, so
/// a hostile 100,000-deep value costs no more than `max` levels of scanning plus the prefix.
pub fn json_deeper_than(bytes: &[u8], max: usize) -> bool {
    scan_json(bytes, max, true) == JsonScan::TooDeep
}

/// The JSON checks of [`DocLimits::check`] alone, for any JSON from the network (a door checks
/// a request body with them before parsing it): nesting past `max`, a number no double can
/// hold, a lone surrogate escape. Syntax is not validated.
pub fn check_json(bytes: &[u8], max: usize) -> Result<(), LimitError> {
    check_json_scan(bytes, max, true)
}

/// [`check_json`] without the string checks (lone surrogates, the reserved member name): for an
/// envelope whose members are checked one by one (a `_bulk_docs` body: such a string is one
/// document's error, a number no double holds makes the whole body invalid JSON, as for
/// CouchDB).
pub fn check_json_numbers(bytes: &[u8]) -> Result<(), LimitError> {
    check_json_scan(bytes, usize::MAX, false)
}

fn check_json_scan(bytes: &[u8], max: usize, strings: bool) -> Result<(), LimitError> {
    match scan_json(bytes, max, strings) {
        JsonScan::Fine => Ok(()),
        JsonScan::TooDeep => Err(LimitError::TooDeep { max }),
        JsonScan::NumberOutOfRange => Err(LimitError::InvalidJson(NUMBER_OUT_OF_RANGE)),
        JsonScan::LoneSurrogate => Err(LimitError::InvalidJson(LONE_SURROGATE)),
        JsonScan::ReservedName => Err(LimitError::InvalidJson(RESERVED_NAME)),
    }
}

/// The UTF-16 code unit of four hex digits, if they are.
fn hex_unit(digits: Option<&[u8]>) -> Option<u16> {
    u16::from_str_radix(std::str::from_utf8(digits?).ok()?, 16).ok()
}

/// Whether a string token followed by `after` is a member name (a `:` follows it).
fn is_member_name(after: &[u8]) -> bool {
    after
        .iter()
        .find(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        == Some(&b':')
}

/// Whether the string token `quoted` (with its quotes) is serde_json's raw-value marker.
fn is_raw_value_token(quoted: &[u8], escaped: bool) -> bool {
    let inner = &quoted[1..quoted.len() - 1];
    if !escaped {
        return inner == RAW_VALUE_TOKEN;
    }
    quoted.len() <= RAW_VALUE_TOKEN_ESCAPED_MAX + 2
        && serde_json::from_slice::<String>(quoted)
            .is_ok_and(|text| text.as_bytes() == RAW_VALUE_TOKEN)
}

/// One pass over `bytes`: nesting past `max` (stops there), a number token no double can hold,
/// a `\u` escape of a lone surrogate, or a member name that is serde_json's raw-value marker.
/// Nothing else is validated.
fn scan_json(bytes: &[u8], max: usize, strings: bool) -> JsonScan {
    let mut depth = 0usize;
    let mut in_string = false;
    let (mut string_start, mut escaped) = (0, false);
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        at += 1;
        if in_string {
            match byte {
                b'"' => {
                    in_string = false;
                    let length = at - string_start;
                    if strings
                        && (RAW_VALUE_TOKEN.len() + 2..=RAW_VALUE_TOKEN_ESCAPED_MAX + 2)
                            .contains(&length)
                        && is_member_name(&bytes[at..])
                        && is_raw_value_token(&bytes[string_start..at], escaped)
                    {
                        return JsonScan::ReservedName;
                    }
                }
                b'\\' => {
                    escaped = true;
                    let escape = bytes.get(at).copied();
                    at += 1;
                    if escape == Some(b'u') && strings {
                        let unit = hex_unit(bytes.get(at..at + 4));
                        at += 4;
                        match unit {
                            // A high surrogate must be followed by an escaped low one.
                            Some(0xD800..=0xDBFF) => {
                                let low = (bytes.get(at..at + 2) == Some(b"\\u"))
                                    .then(|| hex_unit(bytes.get(at + 2..at + 6)))
                                    .flatten();
                                if !matches!(low, Some(0xDC00..=0xDFFF)) {
                                    return JsonScan::LoneSurrogate;
                                }
                                at += 6;
                            }
                            Some(0xDC00..=0xDFFF) => return JsonScan::LoneSurrogate,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                (string_start, escaped) = (at - 1, false);
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return JsonScan::TooDeep;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = at - 1;
                let mut exponent = false;
                while let Some(&next) = bytes.get(at) {
                    match next {
                        b'0'..=b'9' | b'.' | b'+' | b'-' => {}
                        b'e' | b'E' => exponent = true,
                        _ => break,
                    }
                    at += 1;
                }
                if exponent || at - start > NUMBER_DIGITS_FINITE_MAX {
                    let finite = std::str::from_utf8(&bytes[start..at])
                        .ok()
                        .and_then(|token| token.parse::<f64>().ok())
                        .is_none_or(f64::is_finite);
                    if !finite {
                        return JsonScan::NumberOutOfRange;
                    }
                }
            }
            _ => {}
        }
    }
    JsonScan::Fine
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_containers_not_brackets_in_strings() {
        assert!(!json_deeper_than(br#"{"a":[1]}"#, 2));
        assert!(json_deeper_than(br#"{"a":[[1]]}"#, 2));
        assert!(!json_deeper_than(br#"{"a":"[[[[[[[[[["}"#, 1));
        assert!(!json_deeper_than(br#"{"a":"\"[[[["}"#, 1));
        assert!(!json_deeper_than(b"17", 0));
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(json_deeper_than(deep.as_bytes(), 100));
        assert!(!json_deeper_than(deep.as_bytes(), 100_000));
    }

    #[test]
    fn size_counts_the_body_and_the_xattrs() {
        let limits = DocLimits {
            doc_bytes_max: 10,
            json_depth_max: 2,
        };
        assert_eq!(limits.check(b"0123456789", false, 0), Ok(()));
        assert_eq!(
            limits.check(b"0123456789", false, 1),
            Err(LimitError::TooLarge { size: 11, max: 10 })
        );
        assert_eq!(
            limits.check(b"[[[1]]]", true, 0),
            Err(LimitError::TooDeep { max: 2 })
        );
        // A binary value is never parsed as JSON, so its brackets mean nothing.
        assert_eq!(limits.check(b"[[[1]]]", false, 0), Ok(()));
    }

    #[test]
    fn numbers_a_double_cannot_hold_are_refused() {
        let limits = DocLimits::default();
        for bad in [&br#"{"a":1e999}"#[..], br#"[-1E+400]"#, b"2e308"] {
            assert_eq!(
                limits.check(bad, true, 0),
                Err(LimitError::InvalidJson(NUMBER_OUT_OF_RANGE)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = "9".repeat(400);
        assert_eq!(
            limits.check(long.as_bytes(), true, 0),
            Err(LimitError::InvalidJson(NUMBER_OUT_OF_RANGE))
        );
        for fine in [
            &br#"{"a":1e308,"b":-0.5e-400,"c":"1e999"}"#[..],
            br#"{"a":123456789012345678901234567890}"#,
            b"-0",
        ] {
            assert_eq!(limits.check(fine, true, 0), Ok(()));
            assert!(serde_json::from_slice::<serde_json::Value>(fine).is_ok());
        }
        assert_eq!(limits.check(br#"1e999"#, false, 0), Ok(()));
    }

    #[test]
    fn serde_json_raw_value_marker_is_refused_however_spelled() {
        let limits = DocLimits::default();
        for bad in [
            &br#"{"$serde_json::private::RawValue":2}"#[..],
            br#"{"a":{"$serde_json::private::RawValue" :"x"}}"#,
            br#"{"\u0024serde_json::private::RawValue":2}"#,
            br#"{"$serde_json::private::Raw\u0056alue":2}"#,
        ] {
            assert_eq!(
                limits.check(bad, true, 0),
                Err(LimitError::InvalidJson(RESERVED_NAME)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Found by the kv_values fuzz target: the marker parses as a raw value, not a map.
        let found = br#"{"$serde_json::private::RawValue" 		  :2   }"#;
        assert!(serde_json::from_slice::<serde_json::Value>(found).is_err());
        assert!(limits.check(found, true, 0).is_err());
        for fine in [
            &br#"{"$serde_json::private::RawValu":2}"#[..],
            br#"{"x$serde_json::private::RawValue":2}"#,
            br#"{"a\u0062":"$serde_json::private::RawValueX"}"#,
            br#"["$serde_json::private::RawValue"]"#,
            br#"{"a":"$serde_json::private::RawValue"}"#,
            br#""$serde_json::private::RawValue""#,
        ] {
            assert!(serde_json::from_slice::<serde_json::Value>(fine).is_ok());
            assert_eq!(limits.check(fine, true, 0), Ok(()));
        }
    }

    #[test]
    fn lone_surrogate_escapes_are_refused() {
        let limits = DocLimits::default();
        for bad in [
            &br#""\ud800""#[..],
            br#"{"a":"x\udc00"}"#,
            br#""\ud800\u0041""#,
            br#""\ud800\"#,
            br#""\uDBFF\uDBFF""#,
        ] {
            assert_eq!(
                limits.check(bad, true, 0),
                Err(LimitError::InvalidJson(LONE_SURROGATE)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        for fine in [
            &br#""\ud83d\ude00""#[..],
            br#""\\ud800""#,
            br#"{"\u0041":"\u00e9\"x"}"#,
        ] {
            assert_eq!(
                limits.check(fine, true, 0),
                Ok(()),
                "{}",
                String::from_utf8_lossy(fine)
            );
            assert!(serde_json::from_slice::<serde_json::Value>(fine).is_ok());
        }
    }
}
