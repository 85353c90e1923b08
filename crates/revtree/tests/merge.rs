//! Replicated histories (`new_edits=false`) merged the way `couch_key_tree:merge` does.

use settee_revtree::{RevId, RevTree};

fn rev(text: &str) -> RevId {
    RevId::parse(text).expect("valid rev")
}

fn path(texts: &[&str]) -> Vec<RevId> {
    texts.iter().map(|text| rev(text)).collect()
}

#[test]
fn merge_into_an_empty_tree_builds_the_history() {
    let mut tree = RevTree::new();
    assert!(tree.merge_path(&path(&["3-c", "2-b", "1-a"]), false));
    assert_eq!(tree.len(), 3);
    assert_eq!(tree.path(&rev("3-c")), Some(path(&["3-c", "2-b", "1-a"])));
    assert_eq!(tree.is_deleted(&rev("2-b")), Some(false));
}

#[test]
fn replicated_branch_makes_a_conflict() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    assert!(tree.merge_path(&path(&["2-c", "1-a"]), false));
    assert_eq!(tree.len(), 3);
    // Same generation: the greater hash wins.
    assert_eq!(tree.winner().map(|leaf| leaf.rev), Some(rev("2-c")));
    assert_eq!(tree.conflicts(), vec![rev("2-b")]);
}

#[test]
fn replicated_continuation_extends_a_leaf() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    assert!(tree.merge_path(&path(&["4-d", "3-c", "2-b", "1-a"]), true));
    assert_eq!(tree.leaves().len(), 1);
    assert_eq!(tree.is_deleted(&rev("4-d")), Some(true));
    assert_eq!(tree.is_deleted(&rev("3-c")), Some(false));
}

#[test]
fn merging_an_existing_leaf_changes_nothing() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    let before = tree.clone();
    assert!(!tree.merge_path(&path(&["2-b", "1-a"]), true));
    assert_eq!(tree, before);
    assert_eq!(tree.is_deleted(&rev("2-b")), Some(false));
}

#[test]
fn merging_an_inner_node_changes_nothing() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["3-c", "2-b", "1-a"]), false);
    let before = tree.clone();
    assert!(!tree.merge_path(&path(&["2-b", "1-a"]), false));
    assert!(!tree.merge_path(&path(&["2-b"]), true));
    assert_eq!(tree, before);
}

#[test]
fn unrelated_history_becomes_a_new_root() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    assert!(tree.merge_path(&path(&["2-y", "1-x"]), false));
    let leaves: Vec<RevId> = tree.leaves().into_iter().map(|leaf| leaf.rev).collect();
    assert_eq!(leaves, path(&["2-y", "2-b"]));
    assert_eq!(tree.path(&rev("2-y")), Some(path(&["2-y", "1-x"])));
}

#[test]
fn stemmed_history_attaches_below_the_newest_match() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["3-c", "2-b", "1-a"]), false);
    // A replicator that kept only the last three revisions.
    assert!(tree.merge_path(&path(&["5-e", "4-d", "3-c"]), false));
    assert_eq!(
        tree.path(&rev("5-e")),
        Some(path(&["5-e", "4-d", "3-c", "2-b", "1-a"]))
    );
    assert_eq!(tree.leaves().len(), 1);
}

#[test]
fn stemmed_history_without_overlap_becomes_a_new_root() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    assert!(tree.merge_path(&path(&["5-e", "4-d"]), false));
    assert_eq!(tree.leaves().len(), 2);
    assert_eq!(tree.winner().map(|leaf| leaf.rev), Some(rev("5-e")));
    assert_eq!(tree.path(&rev("5-e")), Some(path(&["5-e", "4-d"])));
}

#[test]
fn older_history_extends_a_stemmed_root_upward() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["4-d", "3-c", "2-b", "1-a"]), false);
    tree.stem(2);
    assert_eq!(tree.path(&rev("4-d")), Some(path(&["4-d", "3-c"])));
    // The head is already known, but the full history fills the stemmed ancestry back in,
    // as couch_key_tree:merge does; the caller stems again afterwards.
    assert!(!tree.merge_path(&path(&["4-d", "3-c", "2-b", "1-a"]), false));
    assert_eq!(
        tree.path(&rev("4-d")),
        Some(path(&["4-d", "3-c", "2-b", "1-a"]))
    );
}

#[test]
fn a_history_can_join_two_roots() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    tree.merge_path(&path(&["4-d", "3-c"]), false);
    assert_eq!(tree.leaves().len(), 2);
    assert!(tree.merge_path(&path(&["5-e", "4-d", "3-c", "2-b"]), false));
    assert_eq!(
        tree.path(&rev("5-e")),
        Some(path(&["5-e", "4-d", "3-c", "2-b", "1-a"]))
    );
    assert_eq!(tree.leaves().len(), 1);
}

#[test]
fn contradicting_history_keeps_the_stored_parent() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), false);
    assert!(tree.merge_path(&path(&["3-c", "2-b", "1-z"]), false));
    assert!(!tree.contains(&rev("1-z")));
    assert_eq!(tree.path(&rev("3-c")), Some(path(&["3-c", "2-b", "1-a"])));
}

#[test]
fn malformed_paths_are_ignored() {
    let mut tree = RevTree::new();
    assert!(!tree.merge_path(&[], false));
    assert!(!tree.merge_path(&path(&["3-c", "1-a"]), false));
    assert!(!tree.merge_path(&path(&["1-a", "2-b"]), false));
    assert!(!tree.merge_path(&[RevId::new(2, "b"), RevId::new(1, "")], false));
    assert!(!tree.merge_path(&[RevId::new(1, "b"), RevId::new(0, "a")], false));
    assert!(tree.is_empty());
}

#[test]
fn deleted_applies_to_the_head_only() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["3-c", "2-b", "1-a"]), true);
    assert_eq!(tree.is_deleted(&rev("3-c")), Some(true));
    assert_eq!(tree.is_deleted(&rev("2-b")), Some(false));
    assert_eq!(tree.is_deleted(&rev("1-a")), Some(false));
    assert!(tree.conflicts().is_empty());
    assert_eq!(tree.winner().map(|leaf| leaf.deleted), Some(true));
}
