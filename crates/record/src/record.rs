//! The document record codec; byte layout in `docs/format/document.md`.

use bytes::Bytes;
use settee_revtree::{RevId, RevTree};

use crate::Corrupt;

/// Records without extended attributes or a structural index (most documents).
const VERSION_PLAIN: u8 = 1;
/// Records with extended attributes and/or a structural index: 8 more header bytes.
const VERSION_EXTENDED: u8 = 2;
const FLAG_DELETED: u8 = 1;
const FLAG_JSON: u8 = 2;
const FLAG_CONFLICTS: u8 = 4;
/// Other leaves' rev texts have a u16 length and attachments a u64 `revpos` (document.md).
const FLAG_WIDE: u8 = 8;
/// Every attachment entry carries its encoding (document.md, "Encoded (gzip) attachments").
const FLAG_ENCODED_ATTS: u8 = 16;
/// Every flag bit a record may have; a record with any other bit set is refused.
const FLAGS_KNOWN: u8 = FLAG_DELETED | FLAG_JSON | FLAG_CONFLICTS | FLAG_WIDE | FLAG_ENCODED_ATTS;
const ENCODING_IDENTITY: u8 = 0;
const ENCODING_GZIP: u8 = 1;
/// Longest rev text a narrow record's one-byte length holds.
const NARROW_REV_BYTES_MAX: usize = u8::MAX as usize;
const HEADER_LEN_PLAIN: usize = 30;
const HEADER_LEN_EXTENDED: usize = 38;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachmentMeta {
    pub name: String,
    pub content_type: String,
    /// Bytes of the stored body (compressed when `encoding` is gzip).
    pub length: u64,
    /// Digest of the stored body.
    pub md5: [u8; 16],
    /// Generation of the revision that added this body.
    pub revpos: u64,
    pub encoding: AttEncoding,
}

/// How an attachment's body is stored (document.md, "Encoded (gzip) attachments").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AttEncoding {
    #[default]
    Identity,
    /// Gzipped; the body is `identity_length` bytes once decompressed.
    Gzip { identity_length: u64 },
}

impl AttachmentMeta {
    /// The body's length as its readers see it decompressed (CouchDB's `length`).
    pub fn identity_length(&self) -> u64 {
        match self.encoding {
            AttEncoding::Identity => self.length,
            AttEncoding::Gzip { identity_length } => identity_length,
        }
    }

    pub fn is_gzip(&self) -> bool {
        matches!(self.encoding, AttEncoding::Gzip { .. })
    }
}

/// One leaf revision with its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub rev: RevId,
    pub deleted: bool,
    /// The value is JSON (an object for CouchDB documents); otherwise opaque bytes.
    pub json: bool,
    pub body: Bytes,
    pub attachments: Vec<AttachmentMeta>,
}

/// Everything stored about one document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRecord {
    pub cas: u64,
    pub seqno: u64,
    /// Absolute Unix seconds, 0 = never.
    pub expiry: u32,
    pub item_flags: u32,
    pub tree: RevTree,
    /// Every leaf of `tree`, winner first (CouchDB winner order).
    pub leaves: Vec<Leaf>,
    /// Extended attributes (Couchbase xattrs): a JSON object, empty when there are none.
    /// They belong to the document, not to a revision.
    pub xattrs: Bytes,
    /// Structural index of the winner's JSON body (settee-subdoc), empty when the body is
    /// small; rebuilt whenever the winner's body changes.
    pub index: Bytes,
}

impl DocRecord {
    pub fn winner(&self) -> Option<&Leaf> {
        self.leaves.first()
    }

    pub fn is_deleted(&self) -> bool {
        self.winner().is_none_or(|leaf| leaf.deleted)
    }

    pub fn leaf(&self, rev: &RevId) -> Option<&Leaf> {
        self.leaves.iter().find(|leaf| &leaf.rev == rev)
    }

    /// Puts the leaves back in winner order after the tree changed, dropping bodies of revisions
    /// that are no longer leaves.
    pub fn normalise_leaves(&mut self) {
        let order = self.tree.leaves();
        let mut leaves = std::mem::take(&mut self.leaves);
        self.leaves = order
            .iter()
            .filter_map(|tree_leaf| {
                let index = leaves.iter().position(|leaf| leaf.rev == tree_leaf.rev)?;
                Some(leaves.swap_remove(index))
            })
            .collect();
    }

    /// Whether the record can be stored and read back: a non-empty tree, the tree's winner
    /// first among the record's leaves (its body is the one stored inline), and every other
    /// leaf with a body a leaf of the tree. The engine checks it before every write (defence in
    /// depth behind the doors' checks: a record failing it would not decode, or would decode
    /// as something else).
    pub fn check_storable(&self) -> Result<(), String> {
        let tree_leaves = self.tree.leaves();
        let Some(tree_winner) = tree_leaves.first() else {
            return Err("the revision tree is empty".into());
        };
        match self.leaves.first() {
            Some(leaf) if leaf.rev == tree_winner.rev => {}
            Some(leaf) => {
                return Err(format!(
                    "first leaf {} is not the tree's winner {}",
                    leaf.rev, tree_winner.rev
                ))
            }
            None => return Err("no leaf has a body".into()),
        }
        for leaf in &self.leaves[1..] {
            if !tree_leaves
                .iter()
                .any(|tree_leaf| tree_leaf.rev == leaf.rev)
            {
                return Err(format!("leaf {} is not a leaf of the tree", leaf.rev));
            }
        }
        Ok(())
    }

    /// Whether the record needs the wide layout (document.md, flags bit3).
    fn is_wide(&self) -> bool {
        self.leaves.iter().enumerate().any(|(index, leaf)| {
            (index > 0 && leaf.rev.to_string().len() > NARROW_REV_BYTES_MAX)
                || leaf
                    .attachments
                    .iter()
                    .any(|attachment| attachment.revpos > u64::from(u32::MAX))
        })
    }

    /// Length of [`DocRecord::encode`]'s output, computed by encoding (records are small).
    pub fn encoded_len(&self) -> usize {
        self.encode().len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let winner = self.winner();
        let body = winner.map(|leaf| leaf.body.as_ref()).unwrap_or(&[]);
        let extended = !self.xattrs.is_empty() || !self.index.is_empty();
        let mut out = Vec::with_capacity(
            HEADER_LEN_EXTENDED + body.len() + self.xattrs.len() + self.index.len() + 64,
        );
        let mut flags = 0;
        if winner.is_none_or(|leaf| leaf.deleted) {
            flags |= FLAG_DELETED;
        }
        if winner.is_some_and(|leaf| leaf.json) {
            flags |= FLAG_JSON;
        }
        if self.leaves.iter().skip(1).any(|leaf| !leaf.deleted) {
            flags |= FLAG_CONFLICTS;
        }
        let wide = self.is_wide();
        if wide {
            flags |= FLAG_WIDE;
        }
        let encoded = self
            .leaves
            .iter()
            .any(|leaf| leaf.attachments.iter().any(AttachmentMeta::is_gzip));
        if encoded {
            flags |= FLAG_ENCODED_ATTS;
        }
        let layout = Layout { wide, encoded };
        out.push(if extended {
            VERSION_EXTENDED
        } else {
            VERSION_PLAIN
        });
        out.push(flags);
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(&self.seqno.to_be_bytes());
        out.extend_from_slice(&self.expiry.to_be_bytes());
        out.extend_from_slice(&self.item_flags.to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        if extended {
            out.extend_from_slice(&(self.xattrs.len() as u32).to_be_bytes());
            out.extend_from_slice(&(self.index.len() as u32).to_be_bytes());
        }
        out.extend_from_slice(body);
        if extended {
            out.extend_from_slice(&self.xattrs);
            out.extend_from_slice(&self.index);
        }
        put_attachments(
            &mut out,
            winner
                .map(|leaf| leaf.attachments.as_slice())
                .unwrap_or(&[]),
            layout,
        );
        let mut tree = Vec::new();
        self.tree.encode(&mut tree);
        put_bytes32(&mut out, &tree);
        let others = self.leaves.get(1..).unwrap_or(&[]);
        out.extend_from_slice(&(others.len() as u16).to_be_bytes());
        for leaf in others {
            let rev = leaf.rev.to_string();
            if wide {
                put_bytes16(&mut out, rev.as_bytes());
            } else {
                // Not wide: every other leaf's rev text is at most 255 bytes.
                out.push(rev.len() as u8);
                out.extend_from_slice(rev.as_bytes());
            }
            let mut leaf_flags = 0;
            if leaf.deleted {
                leaf_flags |= FLAG_DELETED;
            }
            if leaf.json {
                leaf_flags |= FLAG_JSON;
            }
            out.push(leaf_flags);
            put_bytes32(&mut out, &leaf.body);
            put_attachments(&mut out, &leaf.attachments, layout);
        }
        out
    }

    pub fn decode(raw: &[u8]) -> Result<DocRecord, Corrupt> {
        let header = Header::decode(raw)?;
        let body = Bytes::copy_from_slice(header.body(raw)?);
        let xattrs = Bytes::copy_from_slice(header.xattrs(raw)?);
        let index = Bytes::copy_from_slice(header.index(raw)?);
        let mut reader = Reader {
            raw,
            at: header.sections_end(),
        };
        let layout = Layout {
            wide: header.wide,
            encoded: header.encoded_atts,
        };
        let attachments = reader.attachments(layout)?;
        let tree = RevTree::decode(reader.bytes32()?)
            .map_err(|error| Corrupt(format!("revision tree: {error}")))?;
        let winner_rev = tree
            .winner()
            .ok_or_else(|| Corrupt("document record with empty tree".into()))?
            .rev;
        let mut leaves = vec![Leaf {
            rev: winner_rev,
            deleted: header.deleted,
            json: header.json,
            body,
            attachments,
        }];
        let others = reader.u16()?;
        for _ in 0..others {
            let rev_len = if header.wide {
                reader.u16()? as usize
            } else {
                reader.u8()? as usize
            };
            let rev_text = std::str::from_utf8(reader.take(rev_len)?)
                .map_err(|_| Corrupt("revision id is not UTF-8".into()))?;
            let rev = RevId::parse(rev_text)
                .ok_or_else(|| Corrupt(format!("bad revision id {rev_text}")))?;
            let flags = reader.u8()?;
            let body = Bytes::copy_from_slice(reader.bytes32()?);
            let attachments = reader.attachments(layout)?;
            leaves.push(Leaf {
                rev,
                deleted: flags & FLAG_DELETED != 0,
                json: flags & FLAG_JSON != 0,
                body,
                attachments,
            });
        }
        if reader.at != raw.len() {
            return Err(Corrupt("trailing bytes in document record".into()));
        }
        Ok(DocRecord {
            cas: header.cas,
            seqno: header.seqno,
            expiry: header.expiry,
            item_flags: header.item_flags,
            tree,
            leaves,
            xattrs,
            index,
        })
    }
}

/// The fixed-size front of a record, enough to slice out the winner's body, the extended
/// attributes and the structural index without decoding the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub deleted: bool,
    pub json: bool,
    pub conflicts: bool,
    /// Wide layout of the other leaves and attachments (document.md, flags bit3).
    pub wide: bool,
    /// Attachment entries carry their encoding (flags bit4).
    pub encoded_atts: bool,
    pub cas: u64,
    pub seqno: u64,
    pub expiry: u32,
    pub item_flags: u32,
    pub body_len: u32,
    pub xattrs_len: u32,
    pub index_len: u32,
    /// Where the body starts: the header's length (30 or 38 bytes by version).
    pub body_at: u32,
}

impl Header {
    pub fn decode(raw: &[u8]) -> Result<Header, Corrupt> {
        let header_len = match raw.first() {
            Some(&VERSION_PLAIN) => HEADER_LEN_PLAIN,
            Some(&VERSION_EXTENDED) => HEADER_LEN_EXTENDED,
            Some(version) => return Err(Corrupt(format!("document record version {version}"))),
            None => return Err(Corrupt("empty document record".into())),
        };
        if raw.len() < header_len {
            return Err(Corrupt("document record too short".into()));
        }
        let flags = raw[1];
        if flags & !FLAGS_KNOWN != 0 {
            return Err(Corrupt(format!("document record flags {flags:#04x}")));
        }
        let u64_at = |at: usize| u64::from_be_bytes(array(&raw[at..at + 8]));
        let u32_at = |at: usize| u32::from_be_bytes(array(&raw[at..at + 4]));
        let extended = header_len == HEADER_LEN_EXTENDED;
        Ok(Header {
            deleted: flags & FLAG_DELETED != 0,
            json: flags & FLAG_JSON != 0,
            conflicts: flags & FLAG_CONFLICTS != 0,
            wide: flags & FLAG_WIDE != 0,
            encoded_atts: flags & FLAG_ENCODED_ATTS != 0,
            cas: u64_at(2),
            seqno: u64_at(10),
            expiry: u32_at(18),
            item_flags: u32_at(22),
            body_len: u32_at(26),
            xattrs_len: if extended { u32_at(30) } else { 0 },
            index_len: if extended { u32_at(34) } else { 0 },
            body_at: header_len as u32,
        })
    }

    fn section<'a>(&self, raw: &'a [u8], at: usize, len: u32) -> Result<&'a [u8], Corrupt> {
        at.checked_add(len as usize)
            .and_then(|end| raw.get(at..end))
            .ok_or_else(|| Corrupt("document record truncated".into()))
    }

    /// The winner's body inside `raw`, without copying.
    pub fn body<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], Corrupt> {
        self.section(raw, self.body_at as usize, self.body_len)
    }

    /// The extended attributes (a JSON object, or empty) inside `raw`, without copying.
    pub fn xattrs<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], Corrupt> {
        let at = self.body_at as usize + self.body_len as usize;
        self.section(raw, at, self.xattrs_len)
    }

    /// The structural index of the body (or empty) inside `raw`, without copying.
    pub fn index<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], Corrupt> {
        let at = self.body_at as usize + self.body_len as usize + self.xattrs_len as usize;
        self.section(raw, at, self.index_len)
    }

    /// Whether the winner has attachments and whether the record keeps leaves besides the
    /// winner (conflicts, live or deleted), read from the section lengths and counts alone.
    pub fn extras(&self, raw: &[u8]) -> Result<(bool, bool), Corrupt> {
        let truncated = || Corrupt("document record truncated".into());
        let u32_at = |at: usize| -> Result<usize, Corrupt> {
            raw.get(at..at + 4)
                .map(|bytes| u32::from_be_bytes(array(bytes)) as usize)
                .ok_or_else(truncated)
        };
        let u16_at = |at: usize| -> Result<u16, Corrupt> {
            raw.get(at..at + 2)
                .map(|bytes| u16::from_be_bytes(array(bytes)))
                .ok_or_else(truncated)
        };
        let atts_at = self.sections_end();
        let atts_len = u32_at(atts_at)?;
        let has_attachments = atts_len >= 2 && u16_at(atts_at + 4)? > 0;
        let tree_at = atts_at + 4 + atts_len;
        let tree_len = u32_at(tree_at)?;
        let other_leaves = u16_at(tree_at + 4 + tree_len)?;
        Ok((has_attachments, other_leaves > 0))
    }

    /// Where the attachment list starts.
    fn sections_end(&self) -> usize {
        self.body_at as usize
            + self.body_len as usize
            + self.xattrs_len as usize
            + self.index_len as usize
    }
}

fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    out
}

pub(crate) fn put_bytes32(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_bytes16(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// How attachment entries are laid out in one record (or old revision entry).
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) wide: bool,
    pub(crate) encoded: bool,
}

pub(crate) fn put_attachments(out: &mut Vec<u8>, attachments: &[AttachmentMeta], layout: Layout) {
    let Layout {
        wide,
        encoded: with_encoding,
    } = layout;
    let mut encoded = Vec::new();
    encoded.extend_from_slice(&(attachments.len() as u16).to_be_bytes());
    for attachment in attachments {
        put_bytes16(&mut encoded, attachment.name.as_bytes());
        put_bytes16(&mut encoded, attachment.content_type.as_bytes());
        encoded.extend_from_slice(&attachment.length.to_be_bytes());
        encoded.extend_from_slice(&attachment.md5);
        if wide {
            encoded.extend_from_slice(&attachment.revpos.to_be_bytes());
        } else {
            // Not wide: every revpos fits in a u32.
            encoded.extend_from_slice(&(attachment.revpos as u32).to_be_bytes());
        }
        if with_encoding {
            match attachment.encoding {
                AttEncoding::Identity => encoded.push(ENCODING_IDENTITY),
                AttEncoding::Gzip { identity_length } => {
                    encoded.push(ENCODING_GZIP);
                    encoded.extend_from_slice(&identity_length.to_be_bytes());
                }
            }
        }
    }
    put_bytes32(out, &encoded);
}

pub(crate) struct Reader<'a> {
    pub(crate) raw: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], Corrupt> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.raw.len())
            .ok_or_else(|| Corrupt("document record truncated".into()))?;
        let slice = &self.raw[self.at..end];
        self.at = end;
        Ok(slice)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, Corrupt> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, Corrupt> {
        Ok(u16::from_be_bytes(array(self.take(2)?)))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Corrupt> {
        Ok(u32::from_be_bytes(array(self.take(4)?)))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, Corrupt> {
        Ok(u64::from_be_bytes(array(self.take(8)?)))
    }
    pub(crate) fn bytes32(&mut self) -> Result<&'a [u8], Corrupt> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    fn string16(&mut self) -> Result<String, Corrupt> {
        let len = self.u16()? as usize;
        String::from_utf8(self.take(len)?.to_vec())
            .map_err(|_| Corrupt("attachment text is not UTF-8".into()))
    }
    pub(crate) fn attachments(&mut self, layout: Layout) -> Result<Vec<AttachmentMeta>, Corrupt> {
        let wide = layout.wide;
        let encoded = self.bytes32()?;
        let mut inner = Reader {
            raw: encoded,
            at: 0,
        };
        let count = inner.u16()?;
        let mut out = Vec::with_capacity(count as usize);
        for _ in 0..count {
            out.push(AttachmentMeta {
                name: inner.string16()?,
                content_type: inner.string16()?,
                length: inner.u64()?,
                md5: array(inner.take(16)?),
                revpos: if wide {
                    inner.u64()?
                } else {
                    u64::from(inner.u32()?)
                },
                encoding: if layout.encoded {
                    match inner.u8()? {
                        ENCODING_IDENTITY => AttEncoding::Identity,
                        ENCODING_GZIP => AttEncoding::Gzip {
                            identity_length: inner.u64()?,
                        },
                        other => return Err(Corrupt(format!("attachment encoding {other}"))),
                    }
                } else {
                    AttEncoding::Identity
                },
            });
        }
        if inner.at != encoded.len() {
            return Err(Corrupt("trailing bytes in attachments".into()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(text: &str) -> RevId {
        RevId::parse(text).expect("rev")
    }

    #[test]
    fn record_round_trips_with_conflicts_and_attachments() {
        let mut tree = RevTree::new();
        tree.edit(None, rev("1-a"), false).expect("edit");
        tree.merge_path(&[rev("1-b")], false);
        let mut record = DocRecord {
            cas: 42,
            seqno: 7,
            expiry: 99,
            item_flags: 3,
            tree,
            leaves: vec![
                Leaf {
                    rev: rev("1-a"),
                    deleted: false,
                    json: true,
                    body: Bytes::from_static(b"{\"x\":1}"),
                    attachments: vec![AttachmentMeta {
                        name: "a.txt".into(),
                        content_type: "text/plain".into(),
                        length: 5,
                        md5: [1; 16],
                        revpos: 1,
                        encoding: AttEncoding::Identity,
                    }],
                },
                Leaf {
                    rev: rev("1-b"),
                    deleted: false,
                    json: true,
                    body: Bytes::from_static(b"{\"x\":2}"),
                    attachments: vec![],
                },
            ],
            xattrs: Bytes::new(),
            index: Bytes::new(),
        };
        record.normalise_leaves();
        assert_eq!(
            record.winner().map(|leaf| leaf.rev.clone()),
            Some(rev("1-b"))
        );
        let raw = record.encode();
        assert_eq!(DocRecord::decode(&raw).expect("decode"), record);
        let header = Header::decode(&raw).expect("header");
        assert!(header.conflicts && header.json && !header.deleted);
        assert_eq!(header.body(&raw).expect("body"), b"{\"x\":2}");
        // The winner 1-b has no attachments; 1-a is another leaf.
        assert_eq!(header.extras(&raw).expect("extras"), (false, true));
        let mut alone = record.clone();
        alone.leaves.swap(0, 1);
        alone.leaves.truncate(1);
        alone.tree = RevTree::new();
        alone.tree.edit(None, rev("1-a"), false).expect("edit");
        let raw_alone = alone.encode();
        let header_alone = Header::decode(&raw_alone).expect("header");
        assert_eq!(
            header_alone.extras(&raw_alone).expect("extras"),
            (true, false)
        );
        assert!(!header_alone.encoded_atts);
        // A gzip-stored attachment sets bit4 and round-trips its identity length.
        alone.leaves[0].attachments[0].encoding = AttEncoding::Gzip {
            identity_length: 99,
        };
        let raw_gzip = alone.encode();
        assert_eq!(raw_gzip[1] & FLAG_ENCODED_ATTS, FLAG_ENCODED_ATTS);
        assert_eq!(DocRecord::decode(&raw_gzip).expect("decode"), alone);
        assert_eq!(alone.leaves[0].attachments[0].identity_length(), 99);
        for cut in 0..raw_gzip.len() {
            assert!(DocRecord::decode(&raw_gzip[..cut]).is_err());
        }
        for cut in 0..raw.len() {
            assert!(DocRecord::decode(&raw[..cut]).is_err());
        }
        assert_eq!(raw[0], VERSION_PLAIN);

        // With extended attributes and an index the record is version 2; the body, xattrs
        // and index are sliced out in place, and every truncation is still refused.
        record.xattrs = Bytes::from_static(br#"{"_sync":{"rev":"1-b"}}"#);
        record.index = Bytes::from_static(&[9, 8, 7]);
        let raw = record.encode();
        assert_eq!(raw[0], VERSION_EXTENDED);
        assert_eq!(DocRecord::decode(&raw).expect("decode"), record);
        let header = Header::decode(&raw).expect("header");
        assert_eq!(header.body(&raw).expect("body"), b"{\"x\":2}");
        assert_eq!(header.xattrs(&raw).expect("xattrs"), &record.xattrs[..]);
        assert_eq!(header.index(&raw).expect("index"), &[9, 8, 7]);
        for cut in 0..raw.len() {
            assert!(DocRecord::decode(&raw[..cut]).is_err());
        }
        let mut trailing = raw.clone();
        trailing.push(0);
        assert!(DocRecord::decode(&trailing).is_err());
        // Ordinary records keep the narrow layout 0.1.0 wrote.
        assert_eq!(raw[1] & FLAG_WIDE, 0);
        let mut unknown_flag = raw.clone();
        unknown_flag[1] |= 0x10;
        assert!(DocRecord::decode(&unknown_flag).is_err());
    }

    fn leaf(rev: &RevId, attachments: Vec<AttachmentMeta>) -> Leaf {
        Leaf {
            rev: rev.clone(),
            deleted: false,
            json: true,
            body: Bytes::from_static(b"{}"),
            attachments,
        }
    }

    #[test]
    fn generations_past_u32_use_the_wide_layout_and_round_trip() {
        let winner = RevId::new(u64::MAX, "zz");
        // 20 digits + '-' + 255 bytes: 276 bytes of rev text, past a u8 length.
        let other = RevId::new(u64::MAX - 1, "h".repeat(255));
        let mut tree = RevTree::new();
        tree.merge_path(std::slice::from_ref(&winner), false);
        tree.merge_path(std::slice::from_ref(&other), false);
        let attachment = AttachmentMeta {
            name: "a".into(),
            content_type: "text/plain".into(),
            length: 1,
            md5: [2; 16],
            revpos: u64::MAX,
            encoding: AttEncoding::Identity,
        };
        let mut record = DocRecord {
            cas: 1,
            seqno: 2,
            expiry: 0,
            item_flags: 0,
            tree,
            leaves: vec![
                leaf(&other, vec![attachment.clone()]),
                leaf(&winner, vec![attachment]),
            ],
            xattrs: Bytes::new(),
            index: Bytes::new(),
        };
        record.normalise_leaves();
        assert_eq!(record.check_storable(), Ok(()));
        let raw = record.encode();
        assert_ne!(raw[1] & FLAG_WIDE, 0);
        assert_eq!(DocRecord::decode(&raw).expect("decode"), record);
        for cut in 0..raw.len() {
            assert!(DocRecord::decode(&raw[..cut]).is_err());
        }
    }

    #[test]
    fn an_empty_or_mismatched_tree_is_not_storable() {
        let mut record = DocRecord {
            cas: 0,
            seqno: 0,
            expiry: 0,
            item_flags: 0,
            tree: RevTree::new(),
            leaves: Vec::new(),
            xattrs: Bytes::new(),
            index: Bytes::new(),
        };
        assert!(record.check_storable().is_err());
        // What 30733d8 stored for `_revisions.start` 2^32: no tree, no leaves. It does not
        // decode, so every reader can tell it apart.
        assert!(DocRecord::decode(&record.encode()).is_err());
        let rev = RevId::new(1, "a");
        record.tree.merge_path(std::slice::from_ref(&rev), false);
        assert!(record.check_storable().is_err());
        record.leaves.push(leaf(&RevId::new(1, "b"), Vec::new()));
        assert!(record.check_storable().is_err());
        record.leaves = vec![
            leaf(&rev, Vec::new()),
            leaf(&RevId::new(1, "b"), Vec::new()),
        ];
        assert!(record.check_storable().is_err());
        record.leaves.pop();
        assert_eq!(record.check_storable(), Ok(()));
    }
}
