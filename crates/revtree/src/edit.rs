//! How a tree grows: interactive edits (`new_edits=true`) and replicated histories
//! (`new_edits=false`).

use crate::rev_id::RevId;
use crate::tree::{Node, RevTree};

/// Why [`RevTree::edit`] refused an edit. The tree is unchanged whenever one is returned.
///
/// Every variant except [`EditError::InvalidRevision`], [`EditError::WrongGeneration`] and
/// [`EditError::GenerationOverflow`] is
/// CouchDB's ordinary `409 conflict`: the writer's view of the document is stale, an expected
/// outcome ([`EditError::is_conflict`]). The other three mean the caller built a bad revision
/// id, or asked for one that cannot exist.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The new revision is already in the tree.
    #[error("conflict: revision {0} already exists")]
    RevisionExists(RevId),
    /// The named parent is not in the tree.
    #[error("conflict: parent revision {0} does not exist")]
    ParentMissing(RevId),
    /// The named parent already has a child: someone else edited it first.
    #[error("conflict: parent revision {0} is not a leaf")]
    ParentNotLeaf(RevId),
    /// No parent was named, but the document has a live leaf (the winner shown here).
    #[error("conflict: document exists with live revision {0}")]
    DocumentExists(RevId),
    /// The new revision's `pos` is not its parent's `pos` + 1 (or 1 for a new document).
    #[error("new revision has generation {actual}, expected {expected}")]
    WrongGeneration {
        /// The generation the new revision must have.
        expected: u64,
        /// The generation it has.
        actual: u64,
    },
    /// The new revision id is out of bounds ([`RevId::is_valid`]).
    #[error("invalid revision id {0}")]
    InvalidRevision(RevId),
    /// The parent is at the largest generation ([`crate::REV_POS_MAX`]): no child can follow.
    #[error("revision {0} is at the largest generation; it cannot be edited")]
    GenerationOverflow(RevId),
}

impl EditError {
    /// Whether this is a document update conflict (HTTP 409) rather than a malformed request.
    pub fn is_conflict(&self) -> bool {
        !matches!(
            self,
            EditError::WrongGeneration { .. }
                | EditError::InvalidRevision(_)
                | EditError::GenerationOverflow(_)
        )
    }
}

impl RevTree {
    /// Applies a `new_edits=true` edit: `new` becomes a child of `parent`.
    ///
    /// `parent` must be a leaf. `None` is allowed when the tree is empty (`new.pos` must be 1)
    /// or when every leaf is deleted: CouchDB then re-creates the document by extending the
    /// winning deleted leaf, so `new.pos` must be that leaf's `pos` + 1. The caller computes
    /// `new.pos` and this method checks it.
    ///
    /// # Errors
    /// An [`EditError`] says why the edit was refused; the tree is then unchanged.
    pub fn edit(
        &mut self,
        parent: Option<&RevId>,
        new: RevId,
        deleted: bool,
    ) -> Result<(), EditError> {
        if !new.is_valid() {
            return Err(EditError::InvalidRevision(new));
        }
        if self.contains(&new) {
            return Err(EditError::RevisionExists(new));
        }
        let parent = match parent {
            Some(parent) if !self.contains(parent) => {
                return Err(EditError::ParentMissing(parent.clone()))
            }
            Some(parent) if self.has_children(parent) => {
                return Err(EditError::ParentNotLeaf(parent.clone()))
            }
            Some(parent) => Some(parent.clone()),
            None => match self.winner() {
                None => None,
                Some(winner) if winner.deleted => Some(winner.rev),
                Some(winner) => return Err(EditError::DocumentExists(winner.rev)),
            },
        };
        let expected = match &parent {
            None => 1,
            Some(parent) => parent
                .child_pos()
                .ok_or_else(|| EditError::GenerationOverflow(parent.clone()))?,
        };
        if new.pos != expected {
            return Err(EditError::WrongGeneration {
                expected,
                actual: new.pos,
            });
        }
        self.nodes.insert(new, Node { parent, deleted });
        Ok(())
    }

    /// Merges a replicated history (`new_edits=false`), the way CouchDB's
    /// `couch_key_tree:merge` does.
    ///
    /// `path` is the history newest first with consecutive decreasing `pos` (`_revisions`:
    /// `start`, `ids`); `deleted` is the flag of `path[0]`. The new revisions are attached below
    /// the newest revision of `path` the tree already holds; when the tree holds none of them
    /// the path becomes a new root (histories that do not share an ancestor, or stemmed ones
    /// that do not overlap). Older entries of `path` also extend a root upward when the tree had
    /// lost (stemmed) that root's ancestors, which can join two roots into one tree; the caller
    /// stems again afterwards.
    ///
    /// Returns whether `path[0]` was new. When it was already present (leaf or inner node) no
    /// revision is added below it and its flag is kept; only missing ancestry may be filled in
    /// (rarely, that turns the leaf of a separate stemmed root into an inner node, so compare
    /// the tree, not this flag, to learn whether anything changed).
    /// Always merging the whole history is what makes the result independent of the order
    /// histories arrive in. An empty path, one with an invalid id or non-consecutive
    /// generations is ignored and returns `false`; callers validate `_revisions` first.
    ///
    /// If `path` contradicts the tree (a revision whose stored parent differs from the one in
    /// `path`, which CouchDB's content hashes make impossible), the stored parent is kept and
    /// the older part of `path` is dropped.
    pub fn merge_path(&mut self, path: &[RevId], deleted: bool) -> bool {
        if !is_well_formed(path) {
            return false;
        }
        let head_is_new = !self.contains(&path[0]);
        let anchor = match path.iter().position(|rev| self.contains(rev)) {
            Some(index) => index,
            None => {
                let oldest = path.len() - 1;
                let flag = oldest == 0 && deleted;
                self.insert_root(&path[oldest], flag);
                oldest
            }
        };
        // path[..anchor] is new: insert it oldest first, each below the next older entry.
        for index in (0..anchor).rev() {
            let node = Node {
                parent: Some(path[index + 1].clone()),
                deleted: index == 0 && deleted,
            };
            self.nodes.insert(path[index].clone(), node);
        }
        self.extend_ancestry(&path[anchor..]);
        head_is_new
    }

    /// Walks `chain` (newest first, `chain[0]` in the tree) upward, linking any root the tree
    /// has on the way to the next older entry of `chain`.
    fn extend_ancestry(&mut self, chain: &[RevId]) {
        for pair in chain.windows(2) {
            let (child, older) = (&pair[0], &pair[1]);
            match self.nodes.get(child).map(|node| node.parent.clone()) {
                // Already linked as the history says: keep walking up.
                Some(Some(parent)) if &parent == older => {}
                // Contradicting history (or a broken invariant): keep what is stored.
                Some(Some(_)) | None => return,
                Some(None) => {
                    self.insert_root(older, false);
                    if let Some(node) = self.nodes.get_mut(child) {
                        node.parent = Some(older.clone());
                    }
                }
            }
        }
    }

    /// Adds `rev` as a root unless the tree already holds it.
    fn insert_root(&mut self, rev: &RevId, deleted: bool) {
        if !self.contains(rev) {
            let node = Node {
                parent: None,
                deleted,
            };
            self.nodes.insert(rev.clone(), node);
        }
    }
}

/// Whether `path` is non-empty, holds only valid ids and has consecutive decreasing `pos`.
fn is_well_formed(path: &[RevId]) -> bool {
    !path.is_empty()
        && path.iter().all(RevId::is_valid)
        && path
            .windows(2)
            .all(|pair| pair[1].pos.checked_add(1) == Some(pair[0].pos))
}
