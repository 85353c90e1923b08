//! The value of an old revision entry: a revision that stopped being a leaf keeps its body and
//! attachment list until compaction (docs/format/document.md, "Old revision bodies"). The
//! revision's id is in the key (docs/format/keys.md), so the value holds the rest of a leaf.

use bytes::Bytes;
use settee_revtree::RevId;

use crate::record::{put_attachments, put_bytes32, AttachmentMeta, Layout, Leaf, Reader};
use crate::Corrupt;

const VERSION: u8 = 1;
const FLAG_DELETED: u8 = 1;
const FLAG_JSON: u8 = 2;
const FLAG_WIDE: u8 = 8;
/// Attachment entries carry their encoding, as in a record (document.md, bit4).
const FLAG_ENCODED_ATTS: u8 = 16;
const FLAGS_KNOWN: u8 = FLAG_DELETED | FLAG_JSON | FLAG_WIDE | FLAG_ENCODED_ATTS;

/// Encodes `leaf` (without its rev id) as an old revision entry's value.
pub fn encode_old_revision(leaf: &Leaf) -> Vec<u8> {
    let wide = leaf
        .attachments
        .iter()
        .any(|attachment| attachment.revpos > u64::from(u32::MAX));
    let mut flags = 0;
    if leaf.deleted {
        flags |= FLAG_DELETED;
    }
    if leaf.json {
        flags |= FLAG_JSON;
    }
    if wide {
        flags |= FLAG_WIDE;
    }
    let encoded = leaf.attachments.iter().any(AttachmentMeta::is_gzip);
    if encoded {
        flags |= FLAG_ENCODED_ATTS;
    }
    let mut out = Vec::with_capacity(2 + 4 + leaf.body.len() + 64);
    out.push(VERSION);
    out.push(flags);
    put_bytes32(&mut out, &leaf.body);
    put_attachments(&mut out, &leaf.attachments, Layout { wide, encoded });
    out
}

/// Decodes an old revision entry's value as the leaf `rev` had.
pub fn decode_old_revision(rev: RevId, raw: &[u8]) -> Result<Leaf, Corrupt> {
    let mut reader = Reader { raw, at: 0 };
    let version = reader.u8()?;
    if version != VERSION {
        return Err(Corrupt(format!("old revision version {version}")));
    }
    let flags = reader.u8()?;
    if flags & !FLAGS_KNOWN != 0 {
        return Err(Corrupt(format!("old revision flags {flags:#x}")));
    }
    let body = Bytes::copy_from_slice(reader.bytes32()?);
    let attachments = reader.attachments(Layout {
        wide: flags & FLAG_WIDE != 0,
        encoded: flags & FLAG_ENCODED_ATTS != 0,
    })?;
    if reader.at != raw.len() {
        return Err(Corrupt("trailing bytes in old revision".into()));
    }
    Ok(Leaf {
        rev,
        deleted: flags & FLAG_DELETED != 0,
        json: flags & FLAG_JSON != 0,
        body,
        attachments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::AttEncoding;

    #[test]
    fn round_trips_narrow_and_wide() {
        for (revpos, encoding) in [
            (3, AttEncoding::Identity),
            (u64::from(u32::MAX) + 1, AttEncoding::Identity),
            (4, AttEncoding::Gzip { identity_length: 9 }),
        ] {
            let leaf = Leaf {
                rev: RevId::new(2, "abc"),
                deleted: true,
                json: true,
                body: Bytes::from_static(b"{\"a\":1}"),
                attachments: vec![AttachmentMeta {
                    name: "f.txt".into(),
                    content_type: "text/plain".into(),
                    length: 5,
                    md5: [7; 16],
                    revpos,
                    encoding,
                }],
            };
            let raw = encode_old_revision(&leaf);
            assert_eq!(decode_old_revision(leaf.rev.clone(), &raw), Ok(leaf));
            assert!(decode_old_revision(RevId::new(2, "abc"), &raw[..raw.len() - 1]).is_err());
        }
    }
}
