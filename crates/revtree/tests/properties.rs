//! Property tests: merge order independence, codec round trips, and a decoder that never
//! panics.
//!
//! Replicated histories are drawn from a random "true" forest (every revision has one real
//! parent, as CouchDB's content hashes guarantee), possibly stemmed to any length, so merging
//! them is consistent and must converge whatever order they arrive in.

use proptest::prelude::*;
use proptest::sample::Index;
use settee_revtree::{Leaf, RevId, RevTree};

/// One revision of the true forest: id, parent index, deleted flag.
type TrueNode = (RevId, Option<usize>, bool);

fn true_forest() -> impl Strategy<Value = Vec<TrueNode>> {
    let node = (any::<Index>(), 0u8..5, 1u64..4, "[a-f]{1,3}", any::<bool>());
    prop::collection::vec(node, 1..24).prop_map(|specs| {
        let mut nodes: Vec<TrueNode> = Vec::with_capacity(specs.len());
        for (index, (parent_pick, root_roll, root_pos, prefix, deleted)) in
            specs.into_iter().enumerate()
        {
            // Mostly children, sometimes extra roots (unrelated or stemmed histories).
            let parent = (index > 0 && root_roll > 0).then(|| parent_pick.index(index));
            let pos = parent.map_or(root_pos, |parent| nodes[parent].0.pos + 1);
            // Letters then the index: unique, with a random order among siblings.
            nodes.push((RevId::new(pos, format!("{prefix}{index}")), parent, deleted));
        }
        nodes
    })
}

/// The history of true node `head`, newest first, cut to at most `len` revisions.
fn history(forest: &[TrueNode], head: usize, len: usize) -> (Vec<RevId>, bool) {
    let mut path = Vec::new();
    let mut current = Some(head);
    while let Some(index) = current {
        if path.len() == len.max(1) {
            break;
        }
        path.push(forest[index].0.clone());
        current = forest[index].1;
    }
    (path, forest[head].2)
}

/// A forest and a list of (possibly stemmed) histories from it.
fn forest_and_histories() -> impl Strategy<Value = (Vec<TrueNode>, Vec<(Vec<RevId>, bool)>)> {
    true_forest().prop_flat_map(|forest| {
        let picks = prop::collection::vec((any::<Index>(), 1usize..8), 1..16);
        (Just(forest), picks).prop_map(|(forest, picks)| {
            let histories = picks
                .into_iter()
                .map(|(head, len)| history(&forest, head.index(forest.len()), len))
                .collect();
            (forest, histories)
        })
    })
}

fn merge_all(histories: &[(Vec<RevId>, bool)]) -> RevTree {
    let mut tree = RevTree::new();
    for (path, deleted) in histories {
        tree.merge_path(path, *deleted);
    }
    tree
}

/// What must not depend on arrival order: the leaves (with flags, in winner order) and the
/// ancestry of each leaf, which together fix the forest's shape.
fn shape(tree: &RevTree) -> (Vec<Leaf>, Vec<Option<Vec<RevId>>>, usize) {
    let leaves = tree.leaves();
    let paths = leaves.iter().map(|leaf| tree.path(&leaf.rev)).collect();
    (leaves, paths, tree.len())
}

#[derive(Clone, Debug)]
enum Op {
    Merge { head: Index, len: usize },
    Edit { leaf: Index, deleted: bool },
    Recreate { deleted: bool },
    Stem { limit: usize },
    Purge { leaf: Index },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<Index>(), 1usize..8).prop_map(|(head, len)| Op::Merge { head, len }),
        3 => (any::<Index>(), any::<bool>()).prop_map(|(leaf, deleted)| Op::Edit { leaf, deleted }),
        1 => any::<bool>().prop_map(|deleted| Op::Recreate { deleted }),
        1 => (0usize..6).prop_map(|limit| Op::Stem { limit }),
        1 => any::<Index>().prop_map(|leaf| Op::Purge { leaf }),
    ]
}

/// Applies `op`; `counter` makes edit hashes unique ("z" never starts a forest hash).
fn apply(tree: &mut RevTree, forest: &[TrueNode], op: &Op, counter: &mut u64) {
    *counter += 1;
    match op {
        Op::Merge { head, len } => {
            let (path, deleted) = history(forest, head.index(forest.len()), *len);
            tree.merge_path(&path, deleted);
        }
        Op::Edit { leaf, deleted } => {
            let leaves = tree.leaves();
            if !leaves.is_empty() {
                let parent = &leaves[leaf.index(leaves.len())].rev;
                let new = RevId::new(parent.pos + 1, format!("z{counter}"));
                tree.edit(Some(parent), new, *deleted)
                    .expect("edit of a leaf");
            }
        }
        Op::Recreate { deleted } => {
            let pos = tree.winner().map_or(1, |winner| winner.rev.pos + 1);
            let _ = tree.edit(None, RevId::new(pos, format!("z{counter}")), *deleted);
        }
        Op::Stem { limit } => {
            tree.stem(*limit);
        }
        Op::Purge { leaf } => {
            let leaves = tree.leaves();
            if !leaves.is_empty() {
                let rev = leaves[leaf.index(leaves.len())].rev.clone();
                assert_eq!(tree.purge(std::slice::from_ref(&rev)), vec![rev]);
            }
        }
    }
}

fn check_invariants(tree: &RevTree) {
    let leaves = tree.leaves();
    assert_eq!(tree.winner(), leaves.first().cloned());
    for leaf in &leaves {
        assert!(tree.is_leaf(&leaf.rev));
        assert_eq!(tree.is_deleted(&leaf.rev), Some(leaf.deleted));
        let path = tree.path(&leaf.rev).expect("leaf has a path");
        for pair in path.windows(2) {
            assert_eq!(pair[0].pos, pair[1].pos + 1);
            assert!(tree.contains(&pair[1]));
        }
    }
    assert_eq!(tree.is_empty(), leaves.is_empty());
}

fn encode(tree: &RevTree) -> Vec<u8> {
    let mut out = Vec::new();
    tree.encode(&mut out);
    out
}

proptest! {
    #[test]
    fn merge_order_does_not_change_the_outcome(
        (_forest, histories) in forest_and_histories(),
        seed in any::<u64>(),
    ) {
        let forward = merge_all(&histories);
        let mut reversed = histories.clone();
        reversed.reverse();
        let mut rotated = histories.clone();
        rotated.rotate_left((seed as usize) % histories.len());
        let mut shuffled = histories.clone();
        // A cheap deterministic shuffle driven by the seed.
        let mut state = seed | 1;
        for index in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(index, (state as usize) % (index + 1));
        }
        for other in [&reversed, &rotated, &shuffled] {
            let tree = merge_all(other);
            prop_assert_eq!(tree.winner(), forward.winner());
            prop_assert_eq!(shape(&tree), shape(&forward));
        }
        check_invariants(&forward);
    }

    #[test]
    fn random_operations_keep_invariants_and_round_trip(
        forest in true_forest(),
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let mut tree = RevTree::new();
        let mut counter = 0;
        for op in &ops {
            apply(&mut tree, &forest, op, &mut counter);
            check_invariants(&tree);
            let bytes = encode(&tree);
            prop_assert_eq!(RevTree::decode(&bytes), Ok(tree.clone()));
        }
    }

    #[test]
    fn decode_of_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        if let Ok(tree) = RevTree::decode(&bytes) {
            prop_assert_eq!(encode(&tree), bytes);
        }
    }

    #[test]
    fn decode_of_damaged_encodings_never_panics(
        (_forest, histories) in forest_and_histories(),
        damage in prop::collection::vec((any::<Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut bytes = encode(&merge_all(&histories));
        for (at, value, kind) in damage {
            let index = at.index(bytes.len());
            match kind {
                0 => bytes[index] = value,
                1 => bytes.insert(index, value),
                _ => {
                    bytes.remove(index);
                    if bytes.is_empty() {
                        break;
                    }
                }
            }
        }
        if let Ok(tree) = RevTree::decode(&bytes) {
            prop_assert_eq!(encode(&tree), bytes);
        }
    }
}
