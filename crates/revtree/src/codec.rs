//! The byte format of a tree (docs/format/revtree.md): canonical, so equal trees encode to
//! equal bytes, and a decoder that rejects everything the encoder would not write.

use std::collections::BTreeMap;

use crate::rev_id::RevId;
use crate::tree::{Node, RevTree};

/// The format version byte this crate writes and reads.
pub const FORMAT_VERSION: u8 = 1;

const FLAG_DELETED: u8 = 0b0000_0001;

/// The smallest node: parent varint, flags, hash length, one hash byte.
const NODE_BYTES_MIN: usize = 4;

/// A LEB128 varint of a `u64` takes at most this many bytes.
const VARINT_BYTES_MAX: usize = 10;

/// Why stored bytes are not a valid tree. Every variant means corruption (or a newer format);
/// the tree is never guessed at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("revision tree truncated")]
    Truncated,
    /// The version byte is not [`FORMAT_VERSION`].
    #[error("unknown revision tree format version {0}")]
    UnknownVersion(u8),
    /// A varint is longer than needed or does not fit in a `u64`.
    #[error("malformed varint at byte {offset}")]
    BadVarint {
        /// Offset of the varint's first byte.
        offset: usize,
    },
    /// The node count is larger than the remaining bytes could hold.
    #[error("node count {0} exceeds the input")]
    BadNodeCount(u64),
    /// A node's parent index is not the index of an earlier node.
    #[error("node {index}: parent is not an earlier node")]
    BadParent {
        /// Index of the offending node.
        index: usize,
    },
    /// A node's flags byte has reserved bits set.
    #[error("node {index}: reserved flag bits set")]
    BadFlags {
        /// Index of the offending node.
        index: usize,
    },
    /// A node's generation is 0 or above the maximum.
    #[error("node {index}: generation out of range")]
    BadPosition {
        /// Index of the offending node.
        index: usize,
    },
    /// A node's hash is empty or not UTF-8.
    #[error("node {index}: hash is empty or not UTF-8")]
    BadHash {
        /// Index of the offending node.
        index: usize,
    },
    /// A node does not sort strictly after the one before it (also catches duplicates).
    #[error("node {index}: out of (pos, hash) order")]
    NotSorted {
        /// Index of the offending node.
        index: usize,
    },
    /// Bytes follow the last node.
    #[error("{0} trailing bytes after the revision tree")]
    TrailingBytes(usize),
}

impl RevTree {
    /// Appends the tree's encoding (docs/format/revtree.md) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(FORMAT_VERSION);
        put_varint(out, self.nodes.len() as u64);
        let mut indexes: BTreeMap<&RevId, u64> = BTreeMap::new();
        for (index, (rev, node)) in self.nodes.iter().enumerate() {
            let flags = if node.deleted { FLAG_DELETED } else { 0 };
            let parent_index = node.parent.as_ref().and_then(|parent| indexes.get(parent));
            match parent_index {
                Some(parent_index) => {
                    put_varint(out, parent_index + 1);
                    out.push(flags);
                }
                // A missing parent cannot happen while the invariants hold; writing the node
                // as a root keeps the output decodable if it ever did.
                None => {
                    put_varint(out, 0);
                    out.push(flags);
                    put_varint(out, rev.pos);
                }
            }
            // Valid ids have 1..=255 hash bytes; the clamp only guards a broken invariant.
            let hash = rev.hash.as_bytes();
            let hash_len = u8::try_from(hash.len()).unwrap_or(u8::MAX);
            out.push(hash_len);
            out.extend_from_slice(&hash[..usize::from(hash_len)]);
            indexes.insert(rev, index as u64);
        }
    }

    /// Decodes bytes written by [`RevTree::encode`]. Never panics, whatever the input.
    ///
    /// # Errors
    /// A [`DecodeError`] for every input that breaks an invariant of the format
    /// (docs/format/revtree.md), including trailing bytes, parents that do not precede their
    /// children, and duplicate or unsorted revisions.
    pub fn decode(bytes: &[u8]) -> Result<RevTree, DecodeError> {
        let mut reader = Reader { bytes, offset: 0 };
        let version = reader.byte()?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let count = reader.varint()?;
        let count_max = reader.remaining() / NODE_BYTES_MIN;
        let count = usize::try_from(count)
            .ok()
            .filter(|count| *count <= count_max)
            .ok_or(DecodeError::BadNodeCount(count))?;
        let mut revs: Vec<RevId> = Vec::with_capacity(count);
        let mut nodes = BTreeMap::new();
        for index in 0..count {
            let (rev, node) = decode_node(&mut reader, index, &revs)?;
            if revs.last().is_some_and(|previous| previous >= &rev) {
                return Err(DecodeError::NotSorted { index });
            }
            nodes.insert(rev.clone(), node);
            revs.push(rev);
        }
        match reader.remaining() {
            0 => Ok(RevTree { nodes }),
            trailing => Err(DecodeError::TrailingBytes(trailing)),
        }
    }
}

/// Decodes node `index`; `earlier` holds the ids of the nodes before it.
fn decode_node(
    reader: &mut Reader<'_>,
    index: usize,
    earlier: &[RevId],
) -> Result<(RevId, Node), DecodeError> {
    let parent_field = reader.varint()?;
    let flags = reader.byte()?;
    if flags & !FLAG_DELETED != 0 {
        return Err(DecodeError::BadFlags { index });
    }
    let (parent, pos) = match parent_field.checked_sub(1) {
        None => (None, reader.varint()?),
        Some(parent_index) => {
            // Only earlier nodes are in `earlier`, so a parent index at or past `index`
            // (a forward reference or a cycle) finds nothing.
            let parent = usize::try_from(parent_index)
                .ok()
                .and_then(|parent_index| earlier.get(parent_index))
                .ok_or(DecodeError::BadParent { index })?;
            // A child of a node at REV_POS_MAX cannot exist: refused, never wrapped.
            let pos = parent
                .child_pos()
                .ok_or(DecodeError::BadPosition { index })?;
            (Some(parent.clone()), pos)
        }
    };
    let hash_len = usize::from(reader.byte()?);
    let hash =
        std::str::from_utf8(reader.take(hash_len)?).map_err(|_| DecodeError::BadHash { index })?;
    let rev = RevId::new(pos, hash);
    if !rev.is_valid() {
        return Err(if rev.hash.is_empty() {
            DecodeError::BadHash { index }
        } else {
            DecodeError::BadPosition { index }
        });
    }
    let node = Node {
        parent,
        deleted: flags & FLAG_DELETED != 0,
    };
    Ok((rev, node))
}

/// Appends `value` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A cursor over the input that fails with `Truncated` instead of panicking.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.offset)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let byte = *self.bytes.get(self.offset).ok_or(DecodeError::Truncated)?;
        self.offset += 1;
        Ok(byte)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.offset.checked_add(len).ok_or(DecodeError::Truncated)?;
        let slice = self
            .bytes
            .get(self.offset..end)
            .ok_or(DecodeError::Truncated)?;
        self.offset = end;
        Ok(slice)
    }

    /// Reads a minimal LEB128 varint that fits in a `u64`.
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.offset;
        let bad = DecodeError::BadVarint { offset: start };
        let mut value: u64 = 0;
        for group in 0..VARINT_BYTES_MAX {
            let byte = self.byte()?;
            // The tenth byte carries bit 63 only.
            if group == VARINT_BYTES_MAX - 1 && byte > 1 {
                return Err(bad);
            }
            value |= u64::from(byte & 0x7f) << (7 * group);
            if byte & 0x80 == 0 {
                // A last byte of zero after other bytes adds nothing: not minimal.
                if byte == 0 && group > 0 {
                    return Err(bad);
                }
                return Ok(value);
            }
        }
        Err(bad)
    }
}
