//! JSON text straight to the encoding of its EJSON term (what jiffy decodes it to), with no
//! tree in between: a revision id hashes every document body written through the CouchDB
//! door, and building a `serde_json::Value` and then a `Term` cost ~400,000 instructions for
//! a 1.4 KB body of 20 small objects, nearly all of it allocation (callgrind); this writes
//! the bytes in one pass over the text.
//!
//! Objects are `{[{Key, Value}, ...]}` with their members in the order written (duplicates
//! kept, as jiffy keeps them), strings binaries, arrays lists (a list of integers 0..=255 is
//! a STRING_EXT, as `term_to_binary` writes it), `true`/`false`/`null` atoms, numbers without
//! a fraction or exponent integers, the others floats.

use crate::encode_integer;

/// Deeper than this, [`json_to_ejson`] gives up (the caller falls back): JSON that deep is
/// refused by the doors' limits before any write.
const DEPTH_MAX: usize = 512;

/// Appends the encoding (no version byte) of the EJSON term of `json`; `None`, with `out` in
/// an unspecified state, when the text is not JSON this encoder can follow (invalid, deeper
/// than [`DEPTH_MAX`], an integer wider than 127 bits, a lone surrogate escape).
pub fn json_to_ejson(json: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut parser = Parser {
        bytes: json,
        at: 0,
        out,
    };
    parser.skip_whitespace();
    parser.value(0)?;
    parser.skip_whitespace();
    (parser.at == json.len()).then_some(())
}

struct Parser<'a, 'o> {
    bytes: &'a [u8],
    at: usize,
    out: &'o mut Vec<u8>,
}

impl Parser<'_, '_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > DEPTH_MAX {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if !self.bytes.get(self.at..)?.starts_with(word) {
            return None;
        }
        self.at += word.len();
        self.out.push(100);
        self.out
            .extend_from_slice(&(word.len() as u16).to_be_bytes());
        self.out.extend_from_slice(word);
        Some(())
    }

    /// A LIST_EXT header whose count is patched by [`Parser::close_list`].
    fn open_list(&mut self) -> usize {
        self.out.push(108);
        let count_at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        count_at
    }

    fn close_list(&mut self, count_at: usize, count: u32) {
        self.out[count_at..count_at + 4].copy_from_slice(&count.to_be_bytes());
        self.out.push(106);
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.out.extend_from_slice(&[104, 1]);
        self.skip_whitespace();
        if self.peek()? == b'}' {
            self.at += 1;
            self.out.push(106);
            return Some(());
        }
        let count_at = self.open_list();
        let mut count = 0u32;
        loop {
            self.skip_whitespace();
            if self.peek()? != b'"' {
                return None;
            }
            self.out.extend_from_slice(&[104, 2]);
            self.string()?;
            self.skip_whitespace();
            if self.next()? != b':' {
                return None;
            }
            self.skip_whitespace();
            self.value(depth + 1)?;
            count = count.checked_add(1)?;
            self.skip_whitespace();
            match self.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
        self.close_list(count_at, count);
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.skip_whitespace();
        if self.peek()? == b']' {
            self.at += 1;
            self.out.push(106);
            return Some(());
        }
        let start = self.out.len();
        let count_at = self.open_list();
        let mut count = 0u32;
        // Whether every item so far is a SMALL_INTEGER_EXT (97, byte).
        let mut bytes_only = true;
        loop {
            self.skip_whitespace();
            let item_at = self.out.len();
            self.value(depth + 1)?;
            bytes_only &= self.out.len() == item_at + 2 && self.out[item_at] == 97;
            count = count.checked_add(1)?;
            self.skip_whitespace();
            match self.next()? {
                b',' => continue,
                b']' => break,
                _ => return None,
            }
        }
        if bytes_only && count < 65_536 {
            // Erlang writes a list of bytes as a string: 107, u16 length, the bytes.
            let items: Vec<u8> = self.out[count_at + 4..]
                .chunks_exact(2)
                .map(|item| item[1])
                .collect();
            self.out.truncate(start);
            self.out.push(107);
            self.out.extend_from_slice(&(count as u16).to_be_bytes());
            self.out.extend_from_slice(&items);
        } else {
            self.close_list(count_at, count);
        }
        Some(())
    }

    /// A JSON string (at its opening quote) as a BINARY_EXT of its UTF-8 bytes.
    fn string(&mut self) -> Option<()> {
        self.at += 1;
        self.out.push(109);
        let length_at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        let begin = self.out.len();
        loop {
            // The plain run up to the next quote, escape or control byte, copied at once.
            let run = self.bytes[self.at..]
                .iter()
                .position(|byte| matches!(byte, b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(self.bytes.len() - self.at);
            self.out
                .extend_from_slice(&self.bytes[self.at..self.at + run]);
            self.at += run;
            match self.next()? {
                b'"' => break,
                b'\\' => {
                    let unescaped = match self.next()? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    let mut buffer = [0; 4];
                    self.out
                        .extend_from_slice(unescaped.encode_utf8(&mut buffer).as_bytes());
                }
                0..=0x1f => return None,
                byte => self.out.push(byte),
            }
        }
        let length = u32::try_from(self.out.len() - begin).ok()?;
        self.out[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
        Some(())
    }

    /// The character of `\uXXXX` (after the `u`), a surrogate pair taking two escapes.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            if self.next()? != b'\\' || self.next()? != b'u' {
                return None;
            }
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        } else {
            char::from_u32(first)
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }

    fn number(&mut self) -> Option<()> {
        let begin = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.bytes[begin..self.at]).ok()?;
        if text.contains(['.', 'e', 'E']) {
            let value = text.parse::<f64>().ok().filter(|value| value.is_finite())?;
            self.out.push(70);
            self.out.extend_from_slice(&value.to_bits().to_be_bytes());
        } else {
            encode_integer(text.parse::<i128>().ok()?, self.out);
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Term;

    fn direct(json: &str) -> Option<Vec<u8>> {
        let mut out = vec![131];
        json_to_ejson(json.as_bytes(), &mut out)?;
        Some(out)
    }

    #[test]
    fn writes_what_the_term_tree_writes() {
        for json in [
            r#"{}"#,
            r#"{"a":1}"#,
            r#" { "a" : [ 1 , 2 , 3 ] , "b" : { "c" : "é\n\"\u00e9\ud83d\ude00" } } "#,
            r#"{"x":[300,-1,"s",null,true,false],"y":[],"z":[[1,2],{"q":[]}]}"#,
            r#"{"big":12345678901,"neg":-5}"#,
            r#"{"f":1e21,"g":0.1,"h":-2.5E-3,"i":1.0}"#,
            r#"[255,0,1]"#,
            r#"[256]"#,
            r#""just a string""#,
        ] {
            let value: serde_json::Value = serde_json::from_str(json).expect(json);
            assert_eq!(
                direct(json),
                Some(Term::from_json(&value).to_binary()),
                "{json}"
            );
        }
    }

    #[test]
    fn integers_past_64_bits_stay_integers_as_jiffy_decodes_them() {
        let huge = "-170141183460469231731687303715884105727";
        let expected = Term::Integer(huge.parse().expect("i128")).to_binary();
        assert_eq!(direct(huge), Some(expected));
    }

    #[test]
    fn minus_zero_is_the_integer_zero_as_couchdb_reads_it() {
        assert_eq!(direct("-0"), Some(vec![131, 97, 0]));
        assert_eq!(direct("-0.0"), Some(Term::Float(-0.0).to_binary()));
    }

    #[test]
    fn keeps_duplicate_members_as_jiffy_does() {
        let encoded = direct(r#"{"a":1,"a":2}"#).expect("json");
        let tree = Term::Tuple(vec![Term::List(vec![
            Term::Tuple(vec![Term::binary("a"), Term::Integer(1)]),
            Term::Tuple(vec![Term::binary("a"), Term::Integer(2)]),
        ])]);
        assert_eq!(encoded, tree.to_binary());
    }

    #[test]
    fn refuses_what_it_cannot_follow() {
        for bad in [
            "",
            "{",
            r#"{"a"}"#,
            r#"{"a":1,}"#,
            "[1,]",
            r#""\ud800""#,
            r#""\q""#,
            "nul",
            "1e999",
            "{} x",
            "340282366920938463463374607431768211456",
        ] {
            assert_eq!(direct(bad), None, "{bad}");
        }
        let deep = "[".repeat(DEPTH_MAX + 2) + &"]".repeat(DEPTH_MAX + 2);
        assert_eq!(direct(&deep), None);
    }
}
