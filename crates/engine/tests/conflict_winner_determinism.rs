//! Conflict winner determinism: the same set of replicated histories (`new_edits=false`),
//! applied in any order, leaves the same leaves with the same histories, the same winner and
//! the same leaf bodies and deleted flags — what lets every replica of a document agree on its
//! winner without talking to the others.

use bytes::Bytes;
use proptest::prelude::*;
use settee_engine::{DocUpdate, Engine, EngineOptions, RevId};

/// A random revision forest: node i has an optional parent among the earlier nodes.
fn forest() -> impl Strategy<Value = Vec<(Option<usize>, String)>> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<bool>(), "[0-9a-f]{4}"),
        1..12,
    )
    .prop_map(|nodes| {
        nodes
            .into_iter()
            .enumerate()
            .map(|(index, (pick, root, hash))| {
                let parent = (index > 0 && !root).then(|| pick.index(index));
                (parent, format!("{hash}{index:02}"))
            })
            .collect()
    })
}

/// The root-to-node history of every node, newest first (what `_revisions` carries).
fn histories(nodes: &[(Option<usize>, String)]) -> Vec<(Vec<RevId>, bool)> {
    let pos_of = |mut index: usize| {
        let mut pos = 1;
        while let Some(parent) = nodes[index].0 {
            pos += 1;
            index = parent;
        }
        pos
    };
    (0..nodes.len())
        .map(|start| {
            let mut path = Vec::new();
            let mut current = Some(start);
            while let Some(index) = current {
                path.push(RevId::new(pos_of(index), nodes[index].1.clone()));
                current = nodes[index].0;
            }
            // A deletion flag that depends on the revision only, as content hashes do.
            let deleted = nodes[start].1.starts_with(['0', '1', '2', '3']);
            (path, deleted)
        })
        .collect()
}

fn update(key: &str, history: &[RevId], deleted: bool) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: history.to_vec(),
        deleted,
        body: Bytes::from(format!("{{\"rev\":\"{}\"}}", history[0])),
        attachments: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_arrival_order_picks_the_same_winner(
        nodes in forest(),
        order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
        one_batch in any::<bool>(),
    ) {
        let histories = histories(&nodes);
        let mut shuffled = histories.clone();
        // A Fisher-Yates shuffle driven by the case's seed.
        let mut seed = order;
        for index in (1..shuffled.len()).rev() {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(index, (seed >> 33) as usize % (index + 1));
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("dir");
            let engine = Engine::open(dir.path(), EngineOptions::default()).expect("open");
            engine.create_bucket("db", 4).await.expect("create");
            let bucket = engine.bucket("db").expect("bucket");
            for (key, list) in [("in-order", &histories), ("shuffled", &shuffled)] {
                let updates: Vec<DocUpdate> =
                    list.iter().map(|(path, deleted)| update(key, path, *deleted)).collect();
                if one_batch {
                    bucket.update_docs(updates, false).await.expect("write");
                } else {
                    for one in updates {
                        bucket.update_doc(one, false).await.expect("write");
                    }
                }
            }
            let a = bucket.read_record(b"in-order").expect("read").expect("doc");
            let b = bucket.read_record(b"shuffled").expect("read").expect("doc");
            // The same leaves with the same histories (an inner revision's stored deleted flag
            // is whatever it arrived with and decides nothing, so it is not compared).
            prop_assert_eq!(a.tree.leaves(), b.tree.leaves());
            for leaf in a.tree.leaves() {
                prop_assert_eq!(a.tree.path(&leaf.rev), b.tree.path(&leaf.rev));
            }
            prop_assert_eq!(&a.leaves, &b.leaves);
            prop_assert_eq!(a.winner().map(|leaf| &leaf.rev), b.winner().map(|leaf| &leaf.rev));
            Ok(())
        })?;
    }
}
