//! Winner choice, conflicts, ancestry and `_revs_diff`.

use settee_revtree::{Leaf, RevId, RevTree};

fn rev(text: &str) -> RevId {
    RevId::parse(text).expect("valid rev")
}

fn path(texts: &[&str]) -> Vec<RevId> {
    texts.iter().map(|text| rev(text)).collect()
}

fn leaf(text: &str, deleted: bool) -> Leaf {
    Leaf {
        rev: rev(text),
        deleted,
    }
}

/// 1-a -> 2-b -> 3-c (live), 1-a -> 2-d (live), 1-a -> 2-e -> 3-f -> 4-g (deleted)
fn branched() -> RevTree {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["3-c", "2-b", "1-a"]), false);
    tree.merge_path(&path(&["2-d", "1-a"]), false);
    tree.merge_path(&path(&["4-g", "3-f", "2-e", "1-a"]), true);
    tree
}

#[test]
fn live_leaf_beats_a_longer_deleted_branch() {
    let tree = branched();
    assert_eq!(tree.winner(), Some(leaf("3-c", false)));
    assert_eq!(
        tree.leaves(),
        vec![leaf("3-c", false), leaf("2-d", false), leaf("4-g", true)]
    );
    assert_eq!(tree.conflicts(), vec![rev("2-d")]);
    assert_eq!(tree.deleted_conflicts(), vec![rev("4-g")]);
}

#[test]
fn higher_generation_beats_greater_hash() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-z", "1-a"]), false);
    tree.merge_path(&path(&["3-a", "2-b", "1-a"]), false);
    assert_eq!(tree.winner(), Some(leaf("3-a", false)));
    assert_eq!(tree.conflicts(), vec![rev("2-z")]);
}

#[test]
fn winner_does_not_depend_on_insertion_order() {
    let histories = [
        (path(&["2-b", "1-a"]), false),
        (path(&["2-c", "1-a"]), false),
        (path(&["3-e", "2-d", "1-a"]), true),
    ];
    let mut forward = RevTree::new();
    for (history, deleted) in &histories {
        forward.merge_path(history, *deleted);
    }
    let mut backward = RevTree::new();
    for (history, deleted) in histories.iter().rev() {
        backward.merge_path(history, *deleted);
    }
    assert_eq!(forward, backward);
    assert_eq!(forward.winner(), Some(leaf("2-c", false)));
}

#[test]
fn all_deleted_leaves_pick_a_deleted_winner() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["2-b", "1-a"]), true);
    tree.merge_path(&path(&["2-c", "1-a"]), true);
    assert_eq!(tree.winner(), Some(leaf("2-c", true)));
    assert!(tree.conflicts().is_empty());
    assert_eq!(tree.deleted_conflicts(), vec![rev("2-b")]);
}

#[test]
fn empty_tree_answers_empty() {
    let tree = RevTree::new();
    assert_eq!(tree.winner(), None);
    assert!(tree.leaves().is_empty());
    assert!(tree.conflicts().is_empty());
    assert_eq!(tree.len(), 0);
    assert_eq!(tree.path(&rev("1-a")), None);
    assert_eq!(tree.is_deleted(&rev("1-a")), None);
    assert!(!tree.is_leaf(&rev("1-a")));
}

#[test]
fn membership_and_flags() {
    let tree = branched();
    assert_eq!(tree.len(), 7);
    assert!(tree.contains(&rev("2-e")));
    assert!(!tree.contains(&rev("2-x")));
    assert!(tree.is_leaf(&rev("2-d")));
    assert!(!tree.is_leaf(&rev("1-a")));
    assert!(!tree.is_leaf(&rev("9-zz")));
    assert_eq!(tree.is_deleted(&rev("4-g")), Some(true));
    assert_eq!(tree.is_deleted(&rev("3-f")), Some(false));
}

#[test]
fn path_lists_ancestry_newest_first() {
    let tree = branched();
    assert_eq!(
        tree.path(&rev("4-g")),
        Some(path(&["4-g", "3-f", "2-e", "1-a"]))
    );
    assert_eq!(tree.path(&rev("2-b")), Some(path(&["2-b", "1-a"])));
    assert_eq!(tree.path(&rev("1-a")), Some(path(&["1-a"])));
}

#[test]
fn leaves_under_follows_descendants() {
    let tree = branched();
    assert_eq!(
        tree.leaves_under(&rev("1-a")),
        vec![leaf("3-c", false), leaf("2-d", false), leaf("4-g", true)]
    );
    assert_eq!(tree.leaves_under(&rev("2-e")), vec![leaf("4-g", true)]);
    assert_eq!(tree.leaves_under(&rev("2-d")), vec![leaf("2-d", false)]);
    assert!(tree.leaves_under(&rev("2-x")).is_empty());
    assert!(tree.leaves_under(&RevId::new(u64::MAX, "x")).is_empty());
}

#[test]
fn revs_diff_reports_missing_and_possible_ancestors() {
    let tree = branched();
    let asked = path(&["3-c", "3-x", "5-y", "1-a"]);
    let (missing, ancestors) = tree.revs_diff(&asked);
    assert_eq!(missing, path(&["3-x", "5-y"]));
    // Leaves below generation 5 (the highest missing one), in winner order.
    assert_eq!(ancestors, path(&["3-c", "2-d", "4-g"]));

    let (missing, ancestors) = tree.revs_diff(&path(&["3-x"]));
    assert_eq!(missing, path(&["3-x"]));
    assert_eq!(ancestors, path(&["2-d"]));

    let (missing, ancestors) = tree.revs_diff(&path(&["3-c", "1-a"]));
    assert!(missing.is_empty() && ancestors.is_empty());
}

#[test]
fn revs_diff_counts_stemmed_revisions_as_missing() {
    let mut tree = RevTree::new();
    tree.merge_path(&path(&["3-c", "2-b", "1-a"]), false);
    tree.stem(1);
    let (missing, ancestors) = tree.revs_diff(&path(&["1-a", "3-c"]));
    assert_eq!(missing, path(&["1-a"]));
    assert!(ancestors.is_empty());
}
