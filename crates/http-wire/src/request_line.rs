//! Raw `"`, `<`, `>` and `` ` `` in a request's target, percent-encoded before hyper parses it.
//!
//! CouchDB accepts `curl 'http://host/db/_all_docs?key="a"'`, and its documentation writes
//! queries that way. hyper's URI parser (the `http` crate) refuses those bytes in a query and
//! answers 400 with an empty body before the door sees the request. This rewriter sits in the
//! connection's reader and, only in the request line of a request that starts when the
//! connection is idle, replaces each such byte of the target with its `%XX` form, which the
//! door's percent-decoding turns back into the same character: the request means what it said.
//!
//! It never touches anything else: it stops at the first space, CR or LF after the target
//! starts, and it does not start unless the bytes begin like a request line (an upper-case
//! method of at most [`METHOD_BYTES_MAX`] letters and a space). Requests pipelined behind
//! another one are left as they are (hyper answers them as before).

/// Longest method token recognised (`PROPPATCH` is 9; CouchDB's longest is 7).
pub const METHOD_BYTES_MAX: usize = 16;

/// Where the rewriter is in the bytes of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum State {
    /// Not in a request line: bytes pass as they are.
    #[default]
    Outside,
    /// In the method token, this many letters read.
    Method(usize),
    /// In the request target.
    Target,
}

/// The rewriter of one connection.
#[derive(Debug, Default)]
pub struct RequestLineQuoter {
    state: State,
}

/// Whether a byte of a request target is percent-encoded here.
fn needs_encoding(byte: u8) -> bool {
    matches!(byte, b'"' | b'<' | b'>' | b'`')
}

/// The bytes that end the fast scan of a target: its end (space, CR, LF) or a byte to encode.
const TARGET_STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        stops[byte] = matches!(byte as u8, b' ' | b'\r' | b'\n' | b'"' | b'<' | b'>' | b'`');
        byte += 1;
    }
    stops
};

impl RequestLineQuoter {
    /// Whether the rewriter is inside a request line (it must see the next bytes).
    pub fn active(&self) -> bool {
        self.state != State::Outside
    }

    /// Feeds bytes just read. `starts_request`: the connection was idle, so these bytes begin
    /// a request. Returns the bytes to hand to hyper instead of `input` when any was encoded.
    ///
    /// Every request passes through here, so the common case (a target with nothing to encode)
    /// is one table-driven scan to the end of the target, without copying.
    pub fn feed(&mut self, input: &[u8], starts_request: bool) -> Option<Vec<u8>> {
        if starts_request && self.state == State::Outside {
            self.state = State::Method(0);
        }
        let mut index = 0;
        while index < input.len() {
            match self.state {
                State::Outside => return None,
                State::Method(_) => {
                    self.step(input[index]);
                    index += 1;
                }
                State::Target => {
                    let offset = input[index..]
                        .iter()
                        .position(|&byte| TARGET_STOPS[usize::from(byte)])?;
                    index += offset;
                    if needs_encoding(input[index]) {
                        return Some(self.rewrite_from(input, index));
                    }
                    // A space, CR or LF: the target is over and nothing needed encoding.
                    self.state = State::Outside;
                    return None;
                }
            }
        }
        None
    }

    /// The slow path: `input` with every byte from `index` on that needs it encoded.
    fn rewrite_from(&mut self, input: &[u8], index: usize) -> Vec<u8> {
        let mut rewritten = Vec::with_capacity(input.len() + 16);
        rewritten.extend_from_slice(&input[..index]);
        for (offset, &byte) in input[index..].iter().enumerate() {
            if self.state == State::Outside {
                rewritten.extend_from_slice(&input[index + offset..]);
                break;
            }
            if self.step(byte) {
                push_encoded(&mut rewritten, byte);
            } else {
                rewritten.push(byte);
            }
        }
        rewritten
    }

    /// Advances over one byte; true when it must be encoded.
    fn step(&mut self, byte: u8) -> bool {
        match self.state {
            State::Outside => false,
            State::Method(letters) => {
                self.state = match byte {
                    b'A'..=b'Z' if letters < METHOD_BYTES_MAX => State::Method(letters + 1),
                    b' ' if letters > 0 => State::Target,
                    _ => State::Outside,
                };
                false
            }
            State::Target => {
                if matches!(byte, b' ' | b'\r' | b'\n') {
                    self.state = State::Outside;
                    return false;
                }
                needs_encoding(byte)
            }
        }
    }
}

fn push_encoded(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'%');
    out.push(HEX[usize::from(byte >> 4)]);
    out.push(HEX[usize::from(byte & 0x0f)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(chunks: &[&[u8]]) -> Vec<u8> {
        let mut quoter = RequestLineQuoter::default();
        let mut out = Vec::new();
        for (index, chunk) in chunks.iter().enumerate() {
            match quoter.feed(chunk, index == 0) {
                Some(rewritten) => out.extend_from_slice(&rewritten),
                None => out.extend_from_slice(chunk),
            }
        }
        out
    }

    #[test]
    fn quotes_in_a_target_are_encoded_and_nothing_else() {
        let request = b"GET /db/_all_docs?key=\"a\"&x=<b> HTTP/1.1\r\nX: \"keep\"\r\n\r\n";
        assert_eq!(
            rewrite(&[request]),
            b"GET /db/_all_docs?key=%22a%22&x=%3Cb%3E HTTP/1.1\r\nX: \"keep\"\r\n\r\n"
        );
        // Split anywhere, the same bytes come out.
        for split in 0..request.len() {
            let (first, second) = request.split_at(split);
            assert_eq!(
                rewrite(&[first, second]),
                rewrite(&[request]),
                "split at {split}"
            );
        }
        // Targets without such bytes, and bytes that are not a request line, pass as sent.
        let plain = b"PUT /db/doc?batch=ok HTTP/1.1\r\n\r\n{\"a\":\"<\"}";
        assert_eq!(rewrite(&[plain]), plain);
        let mut quoter = RequestLineQuoter::default();
        assert!(quoter.feed(b"{\"a\":\"<\"}", true).is_none());
        assert!(quoter.feed(b"get /\"", true).is_none());
        // Not at a request's start (a body, a pipelined request): untouched.
        let mut quoter = RequestLineQuoter::default();
        assert!(quoter.feed(b"GET /?k=\"a\" HTTP/1.1\r\n", false).is_none());
    }
}
