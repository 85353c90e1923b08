//! The forest representation and its read-only queries.

use std::collections::{BTreeMap, BTreeSet};

use crate::rev_id::{Leaf, RevId};

/// What the tree knows about one revision besides its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// `None` for a root: the first revision, or the oldest one left after stemming.
    pub(crate) parent: Option<RevId>,
    /// The revision is a deletion. Only leaves' flags decide anything (winner, conflicts); an
    /// inner node keeps whatever flag it was stored with.
    pub(crate) deleted: bool,
}

/// The revision forest of one document.
///
/// Revisions are kept in a map ordered by `(pos, hash)`. Invariants, upheld by every method
/// and checked by [`RevTree::decode`]:
/// - every id is valid ([`RevId::is_valid`]) and appears once, even across roots;
/// - a node's parent is in the map and has `pos` one less than the node's.
///
/// Parents therefore sort before their children, which makes the byte encoding canonical and
/// the derived `PartialEq` a true forest equality. A node is a leaf iff no node names it as its
/// parent. Documents rarely have more than a few hundred revisions, so queries that scan the
/// whole map are fine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevTree {
    pub(crate) nodes: BTreeMap<RevId, Node>,
}

impl RevTree {
    /// An empty tree: the document was never written (or every leaf was purged).
    pub fn new() -> Self {
        RevTree::default()
    }

    /// Whether the tree has no revision at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of revisions (nodes) in the forest.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Every revision of the forest (leaves and inner nodes), in `(pos, hash)` order.
    pub fn revs(&self) -> impl Iterator<Item = &RevId> {
        self.nodes.keys()
    }

    /// Whether `rev` is in the tree (as a leaf or an inner node).
    pub fn contains(&self, rev: &RevId) -> bool {
        self.nodes.contains_key(rev)
    }

    /// Whether `rev` is in the tree and has no child.
    pub fn is_leaf(&self, rev: &RevId) -> bool {
        self.contains(rev) && !self.has_children(rev)
    }

    /// The stored deleted flag of `rev`, or `None` when the tree does not hold it.
    pub fn is_deleted(&self, rev: &RevId) -> Option<bool> {
        self.nodes.get(rev).map(|node| node.deleted)
    }

    /// Every leaf, in winner order (the winner first).
    pub fn leaves(&self) -> Vec<Leaf> {
        let parents: BTreeSet<&RevId> = self
            .nodes
            .values()
            .filter_map(|node| node.parent.as_ref())
            .collect();
        let mut leaves: Vec<Leaf> = self
            .nodes
            .iter()
            .filter(|(rev, _)| !parents.contains(rev))
            .map(|(rev, node)| Leaf {
                rev: rev.clone(),
                deleted: node.deleted,
            })
            .collect();
        leaves.sort_by(Leaf::winner_order);
        leaves
    }

    /// The winning leaf (see [`Leaf::winner_order`]), or `None` for an empty tree.
    pub fn winner(&self) -> Option<Leaf> {
        self.leaves().into_iter().next()
    }

    /// Live leaves other than the winner, in winner order (`_conflicts`).
    pub fn conflicts(&self) -> Vec<RevId> {
        self.leaves()
            .into_iter()
            .skip(1)
            .filter(|leaf| !leaf.deleted)
            .map(|leaf| leaf.rev)
            .collect()
    }

    /// Deleted leaves other than the winner, in winner order (`_deleted_conflicts`).
    pub fn deleted_conflicts(&self) -> Vec<RevId> {
        self.leaves()
            .into_iter()
            .skip(1)
            .filter(|leaf| leaf.deleted)
            .map(|leaf| leaf.rev)
            .collect()
    }

    /// The ancestry of `rev`, newest first and starting with `rev` itself, as far back as the
    /// tree still holds it (what `_revisions` shows). `None` when `rev` is not in the tree.
    pub fn path(&self, rev: &RevId) -> Option<Vec<RevId>> {
        let mut node = self.nodes.get(rev)?;
        let mut path = vec![rev.clone()];
        while let Some(parent) = &node.parent {
            path.push(parent.clone());
            match self.nodes.get(parent) {
                Some(next) => node = next,
                // Unreachable while the invariants hold; stop rather than loop or panic.
                None => break,
            }
        }
        Some(path)
    }

    /// Leaves that descend from `rev` or are `rev`, in winner order (what `latest=true`
    /// resolves a revision to). Empty when `rev` is not in the tree.
    pub fn leaves_under(&self, rev: &RevId) -> Vec<Leaf> {
        if !self.contains(rev) {
            return Vec::new();
        }
        self.leaves()
            .into_iter()
            .filter(|leaf| self.descends_from(&leaf.rev, rev))
            .collect()
    }

    /// `_revs_diff` for one document: the revisions of `revs` the tree does not hold (in the
    /// order given), and the "possible ancestors": leaves whose `pos` is below the `pos` of at
    /// least one missing revision, in winner order. Both empty when nothing is missing.
    ///
    /// Revisions stemmed away count as missing, as in CouchDB.
    pub fn revs_diff(&self, revs: &[RevId]) -> (Vec<RevId>, Vec<RevId>) {
        let missing: Vec<RevId> = revs
            .iter()
            .filter(|rev| !self.contains(rev))
            .cloned()
            .collect();
        let Some(highest) = missing.iter().map(|rev| rev.pos).max() else {
            return (missing, Vec::new());
        };
        let ancestors = self
            .leaves()
            .into_iter()
            .filter(|leaf| leaf.rev.pos < highest)
            .map(|leaf| leaf.rev)
            .collect();
        (missing, ancestors)
    }

    /// The nodes of generation `pos`, via a range scan of the ordered map.
    pub(crate) fn generation(&self, pos: u64) -> impl Iterator<Item = (&RevId, &Node)> {
        let start = RevId::new(pos, String::new());
        let end = pos
            .checked_add(1)
            .map(|next| RevId::new(next, String::new()));
        match end {
            Some(end) => self.nodes.range(start..end),
            None => self.nodes.range(start..),
        }
    }

    /// Whether any node names `rev` as its parent.
    pub(crate) fn has_children(&self, rev: &RevId) -> bool {
        match rev.pos.checked_add(1) {
            Some(child_pos) => self
                .generation(child_pos)
                .any(|(_, node)| node.parent.as_ref() == Some(rev)),
            None => false,
        }
    }

    /// Whether `ancestor` is `rev` or one of its ancestors.
    fn descends_from(&self, rev: &RevId, ancestor: &RevId) -> bool {
        let mut current = rev;
        while current.pos > ancestor.pos {
            match self
                .nodes
                .get(current)
                .and_then(|node| node.parent.as_ref())
            {
                Some(parent) => current = parent,
                None => return false,
            }
        }
        current == ancestor
    }
}
