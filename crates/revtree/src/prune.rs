//! How a tree shrinks: stemming old history (`_revs_limit`) and purging leaves (`_purge`).

use std::collections::{BTreeMap, BTreeSet};

use crate::rev_id::RevId;
use crate::tree::RevTree;

impl RevTree {
    /// Keeps at most `limit` revisions on every root-to-leaf path, counted from the leaf
    /// (CouchDB's `_revs_limit`). A revision shared by several paths survives if any of them
    /// keeps it; a kept revision whose parent is dropped becomes a root. Returns the removed
    /// revisions in `(pos, hash)` order.
    ///
    /// A `limit` of 0 is treated as 1: stemming never removes a leaf, since that would lose the
    /// document's current state.
    pub fn stem(&mut self, limit: usize) -> Vec<RevId> {
        let limit = limit.max(1);
        let removed: Vec<RevId> = self
            .distances_to_leaf()
            .into_iter()
            .filter(|(_, distance)| *distance >= limit)
            .map(|(rev, _)| rev.clone())
            .collect();
        if removed.is_empty() {
            return removed;
        }
        for rev in &removed {
            self.nodes.remove(rev);
        }
        let removed_set: BTreeSet<&RevId> = removed.iter().collect();
        for node in self.nodes.values_mut() {
            if node
                .parent
                .as_ref()
                .is_some_and(|parent| removed_set.contains(parent))
            {
                node.parent = None;
            }
        }
        removed
    }

    /// Removes leaves (`_purge`), together with every ancestor that no longer leads to a
    /// remaining leaf. Only revisions that are leaves when the call starts are purged; inner
    /// and unknown revisions are ignored. Returns the purged leaves in the order given, each
    /// once. Purging every leaf empties the tree.
    pub fn purge(&mut self, revs: &[RevId]) -> Vec<RevId> {
        let mut purged: Vec<RevId> = Vec::new();
        for rev in revs {
            if self.is_leaf(rev) && !purged.contains(rev) {
                purged.push(rev.clone());
            }
        }
        for rev in &purged {
            let mut next = self.nodes.remove(rev).and_then(|node| node.parent);
            while let Some(ancestor) = next {
                if self.has_children(&ancestor) {
                    break;
                }
                next = self.nodes.remove(&ancestor).and_then(|node| node.parent);
            }
        }
        purged
    }

    /// For every revision, the number of edges down to its nearest leaf (0 for a leaf).
    fn distances_to_leaf(&self) -> BTreeMap<&RevId, usize> {
        let mut distances: BTreeMap<&RevId, usize> = BTreeMap::new();
        // Children sort after their parents, so walking backwards settles every child's
        // distance before its parent is visited; a node nobody has named as parent yet is a
        // leaf.
        for (rev, node) in self.nodes.iter().rev() {
            let distance = *distances.entry(rev).or_insert(0);
            if let Some(parent) = &node.parent {
                let via_this_child = distance.saturating_add(1);
                distances
                    .entry(parent)
                    .and_modify(|best| *best = (*best).min(via_this_child))
                    .or_insert(via_this_child);
            }
        }
        distances
    }
}
