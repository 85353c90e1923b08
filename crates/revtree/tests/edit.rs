//! Interactive edits (`new_edits=true`): conflicts, generations and re-creation.

use settee_revtree::{EditError, Leaf, RevId, RevTree};

fn rev(text: &str) -> RevId {
    RevId::parse(text).expect("valid rev")
}

fn chain(texts: &[&str]) -> RevTree {
    let mut tree = RevTree::new();
    let mut parent: Option<RevId> = None;
    for text in texts {
        tree.edit(parent.as_ref(), rev(text), false).expect("edit");
        parent = Some(rev(text));
    }
    tree
}

#[test]
fn first_edit_creates_a_root_of_generation_one() {
    let mut tree = RevTree::new();
    assert!(tree.is_empty());
    tree.edit(None, rev("1-a"), false).expect("create");
    assert_eq!(tree.len(), 1);
    assert!(tree.is_leaf(&rev("1-a")));
    assert_eq!(
        tree.winner(),
        Some(Leaf {
            rev: rev("1-a"),
            deleted: false
        })
    );
}

#[test]
fn first_edit_must_be_generation_one() {
    let mut tree = RevTree::new();
    let error = tree.edit(None, rev("2-a"), false).expect_err("pos");
    assert_eq!(
        error,
        EditError::WrongGeneration {
            expected: 1,
            actual: 2
        }
    );
    assert!(!error.is_conflict());
    assert!(tree.is_empty());
}

#[test]
fn edit_extends_a_leaf() {
    let tree = chain(&["1-a", "2-b", "3-c"]);
    assert_eq!(tree.len(), 3);
    assert!(!tree.is_leaf(&rev("2-b")));
    assert_eq!(tree.winner().map(|leaf| leaf.rev), Some(rev("3-c")));
    assert!(tree.conflicts().is_empty());
}

#[test]
fn edit_of_a_non_leaf_parent_is_a_conflict() {
    let mut tree = chain(&["1-a", "2-b"]);
    let before = tree.clone();
    let error = tree
        .edit(Some(&rev("1-a")), rev("2-c"), false)
        .expect_err("stale");
    assert_eq!(error, EditError::ParentNotLeaf(rev("1-a")));
    assert!(error.is_conflict());
    assert_eq!(tree, before);
}

#[test]
fn edit_of_an_unknown_parent_is_a_conflict() {
    let mut tree = chain(&["1-a"]);
    let error = tree
        .edit(Some(&rev("1-x")), rev("2-c"), false)
        .expect_err("unknown");
    assert_eq!(error, EditError::ParentMissing(rev("1-x")));
    assert!(error.is_conflict());
}

#[test]
fn adding_an_existing_revision_is_a_conflict() {
    let mut tree = chain(&["1-a", "2-b"]);
    let error = tree
        .edit(Some(&rev("2-b")), rev("2-b"), false)
        .expect_err("dup");
    assert_eq!(error, EditError::RevisionExists(rev("2-b")));
    let error = tree
        .edit(Some(&rev("2-b")), rev("1-a"), false)
        .expect_err("dup");
    assert_eq!(error, EditError::RevisionExists(rev("1-a")));
}

#[test]
fn child_generation_must_be_parent_plus_one() {
    let mut tree = chain(&["1-a", "2-b"]);
    let error = tree
        .edit(Some(&rev("2-b")), rev("4-c"), false)
        .expect_err("pos");
    assert_eq!(
        error,
        EditError::WrongGeneration {
            expected: 3,
            actual: 4
        }
    );
    assert_eq!(tree.len(), 2);
}

#[test]
fn creating_over_a_live_document_is_a_conflict() {
    let mut tree = chain(&["1-a"]);
    let error = tree.edit(None, rev("2-b"), false).expect_err("exists");
    assert_eq!(error, EditError::DocumentExists(rev("1-a")));
    assert!(error.is_conflict());
}

#[test]
fn recreate_after_delete_extends_the_deleted_leaf() {
    let mut tree = chain(&["1-a"]);
    tree.edit(Some(&rev("1-a")), rev("2-b"), true)
        .expect("delete");
    assert_eq!(tree.winner().map(|leaf| leaf.deleted), Some(true));
    tree.edit(None, rev("3-c"), false).expect("re-create");
    assert!(!tree.is_leaf(&rev("2-b")));
    assert_eq!(tree.is_deleted(&rev("2-b")), Some(true));
    assert_eq!(
        tree.winner(),
        Some(Leaf {
            rev: rev("3-c"),
            deleted: false
        })
    );
    assert_eq!(
        tree.path(&rev("3-c")),
        Some(vec![rev("3-c"), rev("2-b"), rev("1-a")])
    );
}

#[test]
fn recreate_needs_the_deleted_winners_next_generation() {
    let mut tree = chain(&["1-a"]);
    tree.edit(Some(&rev("1-a")), rev("2-b"), true)
        .expect("delete");
    let error = tree.edit(None, rev("1-z"), false).expect_err("pos");
    assert_eq!(
        error,
        EditError::WrongGeneration {
            expected: 3,
            actual: 1
        }
    );
}

#[test]
fn recreate_picks_the_winning_deleted_leaf() {
    let mut tree = RevTree::new();
    assert!(tree.merge_path(&[rev("2-b"), rev("1-a")], true));
    assert!(tree.merge_path(&[rev("3-d"), rev("2-c"), rev("1-a")], true));
    assert!(tree.merge_path(&[rev("3-e"), rev("2-c"), rev("1-a")], true));
    // Every leaf is deleted: 3-e wins (highest pos, greatest hash) and gets the new child.
    tree.edit(None, rev("4-f"), false).expect("re-create");
    assert_eq!(
        tree.path(&rev("4-f")).map(|path| path[1].clone()),
        Some(rev("3-e"))
    );
    assert_eq!(tree.deleted_conflicts(), vec![rev("3-d"), rev("2-b")]);
}

#[test]
fn a_deleted_conflict_leaf_can_be_edited_by_name() {
    let mut tree = chain(&["1-a", "2-b"]);
    tree.merge_path(&[rev("2-c"), rev("1-a")], true);
    tree.edit(Some(&rev("2-c")), rev("3-d"), false)
        .expect("edit deleted leaf");
    assert_eq!(tree.winner().map(|leaf| leaf.rev), Some(rev("3-d")));
    assert_eq!(tree.conflicts(), vec![rev("2-b")]);
}

#[test]
fn invalid_ids_are_refused() {
    let mut tree = RevTree::new();
    let error = tree
        .edit(None, RevId::new(1, ""), false)
        .expect_err("empty hash");
    assert_eq!(error, EditError::InvalidRevision(RevId::new(1, "")));
    assert!(!error.is_conflict());
    let long = RevId::new(1, "h".repeat(256));
    assert!(tree.edit(None, long, false).is_err());
    assert!(tree.is_empty());
}

#[test]
fn a_revision_at_the_largest_generation_cannot_be_edited() {
    let mut tree = RevTree::new();
    let last = RevId::new(u64::MAX, "z");
    tree.merge_path(std::slice::from_ref(&last), false);
    let error = tree
        .edit(Some(&last), RevId::new(1, "wrapped"), false)
        .expect_err("no generation after u64::MAX");
    assert_eq!(error, EditError::GenerationOverflow(last.clone()));
    assert!(!error.is_conflict());
    assert_eq!(tree.len(), 1);
}
