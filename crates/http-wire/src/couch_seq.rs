//! Update sequences in CouchDB's form: `{sum}-{base64url(term_to_binary(Shards, [compressed]))}`
//! with one `{Node, [Begin, End], {Seqno, Uuid, Epoch}}` per vbucket with a seqno, a vbucket
//! named as the shard of a CouchDB database with q = vbuckets would be
//! (docs/format/update-seq.md). Written where an answer gives one sequence; read back
//! wherever a sequence is accepted.

use std::io::{Read, Write};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use settee_etf::Term;

/// Largest inflated term read back (a sequence of 1,024 vbuckets is about 80 KB).
const TERM_BYTES_MAX: usize = 1 << 20;
/// The hash ring CouchDB cuts into shard ranges.
const RING: u64 = 1 << 32;

/// The first hash of `vbucket`'s range, and its last.
fn range(vbucket: u64, vbuckets: u64) -> (u64, u64) {
    (
        vbucket * RING / vbuckets,
        (vbucket + 1) * RING / vbuckets - 1,
    )
}

/// `seqnos[vb]` for every vbucket, `uuids[vb]` its uuid; `node` this node's name.
pub fn encode(seqnos: &[u64], uuids: &[u64], node: &str) -> String {
    let sum: u64 = seqnos.iter().sum();
    if sum == 0 {
        return "0".to_string();
    }
    let vbuckets = seqnos.len() as u64;
    let shards = seqnos
        .iter()
        .enumerate()
        .filter(|(_, seqno)| **seqno > 0)
        .map(|(vbucket, seqno)| {
            let (begin, end) = range(vbucket as u64, vbuckets);
            let uuid = format!("{:016x}", uuids.get(vbucket).copied().unwrap_or(0));
            Term::Tuple(vec![
                Term::atom(node),
                Term::List(vec![
                    Term::Integer(i128::from(begin)),
                    Term::Integer(i128::from(end)),
                ]),
                Term::Tuple(vec![
                    Term::Integer(i128::from(*seqno)),
                    Term::binary(uuid),
                    Term::atom(node),
                ]),
            ])
        })
        .collect();
    let mut term = Vec::new();
    Term::List(shards).encode(&mut term);
    let mut out = vec![131, 80];
    out.extend_from_slice(&(term.len() as u32).to_be_bytes());
    let mut encoder = ZlibEncoder::new(out, Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(&term);
    let packed = encoder.finish().unwrap_or_default();
    format!("{sum}-{}", URL_SAFE_NO_PAD.encode(packed))
}

/// The seqnos of a sequence in CouchDB's form for a bucket of `vbuckets`; `None` for anything
/// else (not this form, or not this bucket's ranges).
pub fn decode(text: &str, vbuckets: u16) -> Option<Vec<u64>> {
    let (_, payload) = text.trim().split_once('-')?;
    let packed = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let term = match packed.get(..2)? {
        [131, 80] => {
            let length = u32::from_be_bytes(packed.get(2..6)?.try_into().ok()?) as usize;
            if length > TERM_BYTES_MAX {
                return None;
            }
            let mut term = vec![131];
            ZlibDecoder::new(packed.get(6..)?)
                .take(length as u64 + 1)
                .read_to_end(&mut term)
                .ok()?;
            (term.len() == length + 1).then_some(term)?
        }
        [131, _] => packed,
        _ => return None,
    };
    let Term::List(shards) = Term::from_binary(&term)? else {
        return None;
    };
    let count = u64::from(vbuckets);
    let mut seqnos = vec![0; usize::from(vbuckets)];
    for shard in shards {
        let Term::Tuple(fields) = shard else {
            return None;
        };
        let [_, Term::List(bounds), Term::Tuple(position)] = fields.as_slice() else {
            return None;
        };
        let (Some(Term::Integer(begin)), Some(Term::Integer(seqno))) =
            (bounds.first(), position.first())
        else {
            return None;
        };
        let begin = u64::try_from(*begin).ok().filter(|begin| *begin < RING)?;
        let vbucket = begin * count / RING;
        if range(vbucket, count).0 != begin {
            return None;
        }
        seqnos[vbucket as usize] = u64::try_from(*seqno).ok()?;
    }
    Some(seqnos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_names_couchdb_ranges() {
        let mut seqnos = vec![0u64; 64];
        seqnos[0] = 3;
        seqnos[63] = 70_000;
        let uuids: Vec<u64> = (0..64).map(|vb| vb * 11).collect();
        let text = encode(&seqnos, &uuids, "node1@127.0.0.1");
        assert!(text.starts_with("70003-g1"), "{text}");
        assert_eq!(decode(&text, 64), Some(seqnos.clone()));
        // The payload is Erlang's compressed external format of CouchDB's shape.
        let (_, payload) = text.split_once('-').expect("a sum");
        let packed = URL_SAFE_NO_PAD.decode(payload).expect("base64url");
        let mut term = vec![131];
        ZlibDecoder::new(&packed[6..])
            .read_to_end(&mut term)
            .expect("zlib");
        let Some(Term::List(shards)) = Term::from_binary(&term) else {
            panic!("not a list");
        };
        assert_eq!(
            shards[1],
            Term::Tuple(vec![
                Term::atom("node1@127.0.0.1"),
                Term::List(vec![
                    Term::Integer(4_227_858_432),
                    Term::Integer(4_294_967_295)
                ]),
                Term::Tuple(vec![
                    Term::Integer(70_000),
                    Term::binary(format!("{:016x}", 63 * 11)),
                    Term::atom("node1@127.0.0.1"),
                ]),
            ])
        );
        assert_eq!(encode(&[0; 8], &[], "n"), "0");
    }

    #[test]
    fn other_buckets_and_bad_bytes_are_refused() {
        let text = encode(&[1, 2, 3, 4], &[], "n@h");
        assert_eq!(decode(&text, 4), Some(vec![1, 2, 3, 4]));
        // Ranges of a bucket with another vbucket count do not start where these do.
        assert_eq!(decode(&text, 3), None);
        for bad in ["", "5", "5-", "5-AAAA", "5-g1AAAA", "5-!!", "5-gw"] {
            assert_eq!(decode(bad, 4), None, "{bad}");
        }
    }
}
