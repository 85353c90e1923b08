//! Shrinking a tree: `_revs_limit` stemming and `_purge`.

use settee_revtree::{RevId, RevTree};

fn rev(text: &str) -> RevId {
    RevId::parse(text).expect("valid rev")
}

fn path(texts: &[&str]) -> Vec<RevId> {
    texts.iter().map(|text| rev(text)).collect()
}

fn tree_of(histories: &[&[&str]]) -> RevTree {
    let mut tree = RevTree::new();
    for history in histories {
        tree.merge_path(&path(history), false);
    }
    tree
}

fn leaf_revs(tree: &RevTree) -> Vec<RevId> {
    tree.leaves().into_iter().map(|leaf| leaf.rev).collect()
}

#[test]
fn stem_keeps_the_newest_revisions_of_a_linear_history() {
    let mut tree = tree_of(&[&["5-e", "4-d", "3-c", "2-b", "1-a"]]);
    assert_eq!(tree.stem(3), path(&["1-a", "2-b"]));
    assert_eq!(tree.len(), 3);
    assert_eq!(tree.path(&rev("5-e")), Some(path(&["5-e", "4-d", "3-c"])));
    assert!(tree.stem(3).is_empty());
}

#[test]
fn stem_within_the_limit_removes_nothing() {
    let mut tree = tree_of(&[&["3-c", "2-b", "1-a"]]);
    let before = tree.clone();
    assert!(tree.stem(3).is_empty());
    assert!(tree.stem(1000).is_empty());
    assert_eq!(tree, before);
}

#[test]
fn stem_with_branches_keeps_shared_ancestors_a_short_branch_needs() {
    // 1-a -> 2-b -> 3-c -> 4-d -> 5-e   and   2-b -> 3-x
    let mut tree = tree_of(&[&["5-e", "4-d", "3-c", "2-b", "1-a"], &["3-x", "2-b", "1-a"]]);
    let removed = tree.stem(2);
    // 2-b is within two revisions of leaf 3-x, so it survives; 3-c is not within two of 5-e
    // and is removed, which cuts 4-d -> 5-e off as a new root.
    assert_eq!(removed, path(&["1-a", "3-c"]));
    assert_eq!(tree.path(&rev("5-e")), Some(path(&["5-e", "4-d"])));
    assert_eq!(tree.path(&rev("3-x")), Some(path(&["3-x", "2-b"])));
    assert_eq!(leaf_revs(&tree), path(&["5-e", "3-x"]));
}

#[test]
fn stem_never_removes_leaves() {
    let mut tree = tree_of(&[&["3-c", "2-b", "1-a"], &["2-z", "1-a"]]);
    assert_eq!(tree.stem(0), path(&["1-a", "2-b"]));
    assert_eq!(leaf_revs(&tree), path(&["3-c", "2-z"]));
    assert_eq!(tree.path(&rev("3-c")), Some(path(&["3-c"])));
}

#[test]
fn path_after_stemming_starts_at_the_new_root() {
    let mut tree = tree_of(&[&["4-d", "3-c", "2-b", "1-a"]]);
    tree.stem(2);
    assert_eq!(tree.path(&rev("4-d")), Some(path(&["4-d", "3-c"])));
    assert_eq!(tree.path(&rev("2-b")), None);
    // Editing after stemming keeps working from the leaf.
    tree.edit(Some(&rev("4-d")), rev("5-e"), false)
        .expect("edit");
    tree.stem(2);
    assert_eq!(tree.path(&rev("5-e")), Some(path(&["5-e", "4-d"])));
}

#[test]
fn purge_of_one_conflicting_leaf_keeps_the_shared_ancestor() {
    let mut tree = tree_of(&[&["2-b", "1-a"], &["2-c", "1-a"]]);
    assert_eq!(tree.winner().map(|leaf| leaf.rev), Some(rev("2-c")));
    assert_eq!(tree.purge(&path(&["2-c"])), path(&["2-c"]));
    assert_eq!(tree.len(), 2);
    assert_eq!(leaf_revs(&tree), path(&["2-b"]));
    assert!(tree.conflicts().is_empty());
}

#[test]
fn purge_removes_the_branch_up_to_the_fork() {
    let mut tree = tree_of(&[&["4-d", "3-c", "2-b", "1-a"], &["4-z", "3-y", "2-b", "1-a"]]);
    assert_eq!(tree.purge(&path(&["4-z"])), path(&["4-z"]));
    assert!(!tree.contains(&rev("3-y")));
    assert!(tree.contains(&rev("2-b")));
    assert_eq!(tree.len(), 4);
}

#[test]
fn purge_of_the_only_leaf_empties_the_tree() {
    let mut tree = tree_of(&[&["3-c", "2-b", "1-a"]]);
    assert_eq!(tree.purge(&path(&["3-c"])), path(&["3-c"]));
    assert!(tree.is_empty());
    assert_eq!(tree.winner(), None);
}

#[test]
fn purge_ignores_inner_unknown_and_repeated_revisions() {
    let mut tree = tree_of(&[&["2-b", "1-a"], &["2-c", "1-a"]]);
    let purged = tree.purge(&path(&["1-a", "9-x", "2-b", "2-b"]));
    assert_eq!(purged, path(&["2-b"]));
    assert_eq!(tree.len(), 2);
    assert!(tree.is_leaf(&rev("2-c")));
}

#[test]
fn purge_of_every_leaf_of_a_fork_removes_the_fork() {
    let mut tree = tree_of(&[&["2-b", "1-a"], &["2-c", "1-a"], &["2-y", "1-x"]]);
    assert_eq!(tree.purge(&path(&["2-c", "2-b"])), path(&["2-c", "2-b"]));
    assert_eq!(tree.len(), 2);
    assert_eq!(tree.path(&rev("2-y")), Some(path(&["2-y", "1-x"])));
}
