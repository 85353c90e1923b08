//! Update sequences: a bucket's position in its change streams is one seqno per vbucket.
//!
//! HTTP clients see it as an opaque string `"{sum}-{payload}"`, the way CouchDB 2+ shows its
//! per-shard vectors: `sum` (the total of all seqnos) keeps a familiar numeric prefix, and
//! `payload` is base64url (no padding) of LEB128 varint pairs `(vbucket delta, seqno)` for every
//! vbucket with a non-zero seqno, in vbucket order. `"0"` and `""` mean "from the start".

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqVector {
    seqnos: Vec<u64>,
}

impl SeqVector {
    pub fn zero(vbuckets: u16) -> SeqVector {
        SeqVector {
            seqnos: vec![0; vbuckets as usize],
        }
    }

    pub fn from_seqnos(seqnos: Vec<u64>) -> SeqVector {
        SeqVector { seqnos }
    }

    pub fn get(&self, vbucket: u16) -> u64 {
        self.seqnos.get(vbucket as usize).copied().unwrap_or(0)
    }

    pub fn set(&mut self, vbucket: u16, seqno: u64) {
        if let Some(slot) = self.seqnos.get_mut(vbucket as usize) {
            *slot = seqno;
        }
    }

    pub fn seqnos(&self) -> &[u64] {
        &self.seqnos
    }

    pub fn sum(&self) -> u64 {
        self.seqnos.iter().sum()
    }

    /// Raises every entry to at least `other`'s.
    pub fn max_with(&mut self, other: &SeqVector) {
        for (mine, theirs) in self.seqnos.iter_mut().zip(&other.seqnos) {
            *mine = (*mine).max(*theirs);
        }
    }

    pub fn encode(&self) -> String {
        let sum = self.sum();
        if sum == 0 {
            return "0".to_string();
        }
        let mut payload = Vec::with_capacity(self.seqnos.len() * 3);
        let mut previous = 0u64;
        for (vbucket, seqno) in self.seqnos.iter().enumerate() {
            if *seqno == 0 {
                continue;
            }
            put_varint(&mut payload, vbucket as u64 - previous);
            put_varint(&mut payload, *seqno);
            previous = vbucket as u64;
        }
        format!("{sum}-{}", URL_SAFE_NO_PAD.encode(payload))
    }

    /// Parses a sequence this bucket handed out. `None` for anything else.
    pub fn decode(text: &str, vbuckets: u16) -> Option<SeqVector> {
        let text = text.trim();
        if text.is_empty() || text == "0" {
            return Some(SeqVector::zero(vbuckets));
        }
        let (sum_text, payload_text) = text.split_once('-')?;
        let sum: u64 = sum_text.parse().ok()?;
        let payload = URL_SAFE_NO_PAD.decode(payload_text).ok()?;
        let mut vector = SeqVector::zero(vbuckets);
        let mut at = 0usize;
        let mut vbucket = 0u64;
        let mut first = true;
        while at < payload.len() {
            let delta = get_varint(&payload, &mut at)?;
            if !first && delta == 0 {
                return None;
            }
            first = false;
            vbucket = vbucket.checked_add(delta)?;
            let seqno = get_varint(&payload, &mut at)?;
            if vbucket >= u64::from(vbuckets) || seqno == 0 {
                return None;
            }
            vector.seqnos[vbucket as usize] = seqno;
        }
        (vector.sum() == sum).then_some(vector)
    }
}

/// LEB128: seven bits per byte, low first, the high bit set on all but the last.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a [`put_varint`] value at `*at`, moving `*at` past it; `None` when cut or too wide.
pub fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let mut vector = SeqVector::zero(64);
        vector.set(0, 5);
        vector.set(3, 300);
        vector.set(63, 1);
        let text = vector.encode();
        assert!(text.starts_with("306-"), "{text}");
        assert_eq!(SeqVector::decode(&text, 64), Some(vector.clone()));
        assert_eq!(SeqVector::decode(&text, 16), None);
        assert_eq!(SeqVector::decode("0", 8), Some(SeqVector::zero(8)));
        assert_eq!(SeqVector::decode("307-abc", 64), None);
        assert_eq!(SeqVector::decode("12", 64), None);
        assert_eq!(SeqVector::decode("x-%%%", 64), None);
    }
}
