//! Revision ids (`"pos-hash"`) and leaves, with CouchDB's winner order.

use std::cmp::Ordering;
use std::fmt;

/// Largest generation a revision may have. CouchDB's positions are unbounded integers and
/// replicators may send any of them (`_revisions.start`), so the tree takes the whole `u64`
/// range; a child of a revision at this generation cannot exist ([`RevId::child_pos`] says so,
/// and every edit checks it rather than wrapping).
pub const REV_POS_MAX: u64 = u64::MAX;

/// Digits of the largest `pos` ([`REV_POS_MAX`] has 20): a longer `pos` text is refused before
/// it is parsed.
const REV_POS_DIGITS_MAX: usize = 20;

/// Longest hash a revision may have, in bytes. CouchDB writes 32 hex characters; the bound is
/// what the byte format's one-byte length field can hold (docs/format/revtree.md).
pub const REV_HASH_BYTES_MAX: usize = 255;

/// A revision id `pos-hash`.
///
/// `pos` is the generation: 1 for a document's first revision, the parent's `pos` + 1 after
/// that. `hash` is opaque; replicators may send any non-empty string, including one with `-` in
/// it, which is why [`RevId::parse`] splits at the first `-`.
///
/// The derived order (`pos`, then `hash` bytewise) is the tree's storage order, not the winner
/// order; see [`Leaf::winner_order`] for that.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RevId {
    /// Generation, `1..=REV_POS_MAX` for a valid id.
    pub pos: u64,
    /// Opaque hash, 1 to [`REV_HASH_BYTES_MAX`] bytes for a valid id.
    pub hash: String,
}

impl RevId {
    /// Builds a revision id without checking it; see [`RevId::is_valid`].
    pub fn new(pos: u64, hash: impl Into<String>) -> RevId {
        RevId {
            pos,
            hash: hash.into(),
        }
    }

    /// Parses `"pos-hash"`, splitting at the first `-`.
    ///
    /// Only the canonical spelling is accepted, so `parse(s).to_string() == s` always holds:
    /// `pos` is decimal digits without sign or leading zero, in `1..=REV_POS_MAX`; `hash` is
    /// non-empty and at most [`REV_HASH_BYTES_MAX`] bytes. Anything else returns `None`.
    pub fn parse(text: &str) -> Option<RevId> {
        let (pos_text, hash) = text.split_once('-')?;
        let digits_only = pos_text.bytes().all(|byte| byte.is_ascii_digit());
        // More digits than REV_POS_MAX has is above it anyway; refusing them first keeps a
        // hostile string short, and the parse itself fails on overflow instead of wrapping.
        if pos_text.is_empty()
            || pos_text.len() > REV_POS_DIGITS_MAX
            || !digits_only
            || pos_text.starts_with('0')
        {
            return None;
        }
        let rev = RevId {
            pos: pos_text.parse::<u64>().ok()?,
            hash: hash.to_owned(),
        };
        rev.is_valid().then_some(rev)
    }

    /// The generation of a child of this revision, or `None` when it would pass
    /// [`REV_POS_MAX`]: such an edit is refused, never wrapped to 0.
    pub fn child_pos(&self) -> Option<u64> {
        self.pos.checked_add(1)
    }

    /// The generation of a new revision whose parent is `parent` (1 for a new document);
    /// `None` when the parent is already at [`REV_POS_MAX`].
    pub fn next_pos(parent: Option<&RevId>) -> Option<u64> {
        parent.map_or(Some(1), RevId::child_pos)
    }

    /// Whether the id obeys the bounds the tree and its byte format rely on: `pos` in
    /// `1..=REV_POS_MAX`, hash of 1 to [`REV_HASH_BYTES_MAX`] bytes. Fields are public, so ids
    /// built by hand may be invalid; the tree refuses them.
    pub fn is_valid(&self) -> bool {
        (1..=REV_POS_MAX).contains(&self.pos)
            && !self.hash.is_empty()
            && self.hash.len() <= REV_HASH_BYTES_MAX
    }
}

impl fmt::Display for RevId {
    /// Every document read formats its revision (in `_rev` and the ETag), so the digits are
    /// written by hand: `write!` with `{}` goes through the padding machinery for each part.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        let mut pos = self.pos;
        loop {
            start -= 1;
            digits[start] = b'0' + (pos % 10) as u8;
            pos /= 10;
            if pos == 0 {
                break;
            }
        }
        // Only ASCII digits were written.
        formatter.write_str(std::str::from_utf8(&digits[start..]).map_err(|_| fmt::Error)?)?;
        formatter.write_str("-")?;
        formatter.write_str(&self.hash)
    }
}

/// A leaf of the tree: a revision no other revision names as its parent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leaf {
    /// The leaf's revision id.
    pub rev: RevId,
    /// Whether the leaf is a deletion (tombstone).
    pub deleted: bool,
}

impl Leaf {
    /// CouchDB's winner order: `Less` means `self` wins over `other`.
    ///
    /// A live leaf beats a deleted one; then the higher `pos` wins; then the greater hash
    /// (bytewise). The order is total on distinct revision ids, so the winner does not depend
    /// on the order revisions arrived in, which is what lets replicas agree without talking.
    pub fn winner_order(&self, other: &Leaf) -> Ordering {
        self.deleted
            .cmp(&other.deleted)
            .then_with(|| other.rev.pos.cmp(&self.rev.pos))
            .then_with(|| other.rev.hash.cmp(&self.rev.hash))
    }
}
