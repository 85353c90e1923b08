//! `binary_to_term` for the tags [`Term`] encodes, plus the UTF-8 atom tags Erlang 26+ writes
//! by default: enough to read back a CouchDB update sequence. Bytes come from the network
//! (a `since` a client sends), so decoding is bounded: nesting depth, and every length is
//! checked against the bytes left before anything is allocated. Anything else is `None`.

use crate::Term;

/// Deepest nesting accepted.
const DEPTH_MAX: usize = 32;

impl Term {
    /// Decodes `term_to_binary` output (version byte 131, uncompressed) that is exactly one term.
    pub fn from_binary(bytes: &[u8]) -> Option<Term> {
        let (&version, rest) = bytes.split_first()?;
        if version != 131 {
            return None;
        }
        let mut reader = Reader { bytes: rest, at: 0 };
        let term = reader.term(0)?;
        (reader.at == rest.len()).then_some(term)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(count)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<usize> {
        let bytes = self.take(2)?;
        Some(usize::from(u16::from_be_bytes([bytes[0], bytes[1]])))
    }

    fn u32(&mut self) -> Option<usize> {
        let bytes = self.take(4)?;
        usize::try_from(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])).ok()
    }

    /// A count of items, each at least one byte: never more than the bytes left.
    fn count(&mut self, count: usize) -> Option<usize> {
        (count <= self.bytes.len() - self.at).then_some(count)
    }

    fn items(&mut self, count: usize, depth: usize) -> Option<Vec<Term>> {
        let count = self.count(count)?;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(self.term(depth + 1)?);
        }
        Some(items)
    }

    fn atom(&mut self, length: usize) -> Option<Term> {
        let name = std::str::from_utf8(self.take(length)?).ok()?;
        Some(Term::Atom(name.to_string()))
    }

    fn term(&mut self, depth: usize) -> Option<Term> {
        if depth > DEPTH_MAX {
            return None;
        }
        match self.u8()? {
            97 => Some(Term::Integer(i128::from(self.u8()?))),
            98 => {
                let bytes = self.take(4)?;
                let value = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                Some(Term::Integer(i128::from(value)))
            }
            110 => {
                let length = usize::from(self.u8()?);
                let sign = self.u8()?;
                let digits = self.take(length)?;
                // Integers wider than i128 are not needed here.
                if length > 15 || sign > 1 {
                    return None;
                }
                let magnitude = digits
                    .iter()
                    .rev()
                    .fold(0i128, |value, digit| (value << 8) | i128::from(*digit));
                Some(Term::Integer(if sign == 1 {
                    -magnitude
                } else {
                    magnitude
                }))
            }
            70 => {
                let bytes = self.take(8)?;
                let bits = u64::from_be_bytes(bytes.try_into().ok()?);
                Some(Term::Float(f64::from_bits(bits)))
            }
            // ATOM_EXT and ATOM_UTF8_EXT; SMALL_ATOM_EXT and SMALL_ATOM_UTF8_EXT.
            100 | 118 => {
                let length = self.u16()?;
                self.atom(length)
            }
            115 | 119 => {
                let length = usize::from(self.u8()?);
                self.atom(length)
            }
            104 => {
                let arity = usize::from(self.u8()?);
                Some(Term::Tuple(self.items(arity, depth)?))
            }
            105 => {
                let arity = self.u32()?;
                Some(Term::Tuple(self.items(arity, depth)?))
            }
            106 => Some(Term::List(Vec::new())),
            107 => {
                let length = self.u16()?;
                Some(Term::Chars(self.take(length)?.to_vec()))
            }
            108 => {
                let length = self.u32()?;
                let items = self.items(length, depth)?;
                // Proper lists only.
                (self.u8()? == 106).then_some(Term::List(items))
            }
            109 => {
                let length = self.u32()?;
                Some(Term::Binary(self.take(length)?.to_vec()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_encoded_decodes_back() {
        let term = Term::List(vec![Term::Tuple(vec![
            Term::atom("node1@127.0.0.1"),
            Term::List(vec![Term::Integer(0), Term::Integer(4_294_967_295)]),
            Term::Tuple(vec![
                Term::Integer(-70_000),
                Term::binary(b"abc"),
                Term::Float(1.5),
            ]),
        ])]);
        assert_eq!(Term::from_binary(&term.to_binary()), Some(term));
        // A list of bytes is written as a string and read back as one.
        let bytes = Term::List(vec![Term::Integer(1), Term::Integer(2)]);
        assert_eq!(
            Term::from_binary(&bytes.to_binary()),
            Some(Term::chars([1, 2]))
        );
    }

    #[test]
    fn bad_input_is_refused_without_panicking() {
        for bytes in [
            &[][..],
            &[131],
            &[130, 97, 1],
            &[131, 97],
            &[131, 97, 1, 0],
            &[131, 108, 255, 255, 255, 255],
            &[131, 108, 0, 0, 0, 1, 97, 1, 97],
            &[131, 109, 0, 0, 0, 9, 1],
            &[131, 110, 200, 0],
            &[131, 119, 2, 0xff, 0xfe],
            &[131, 42],
        ] {
            assert_eq!(Term::from_binary(bytes), None, "{bytes:?}");
        }
        let mut deep = vec![131];
        deep.extend(std::iter::repeat_n([104, 1], 100).flatten());
        deep.extend([97, 0]);
        assert_eq!(Term::from_binary(&deep), None);
    }
}
