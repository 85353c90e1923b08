//! Model-based test: random CouchDB and key-value operations, with restarts, against a simple
//! in-memory oracle of each document's leaf revisions. After every step the engine's winner,
//! leaves, body, counts and change stream must agree with the oracle.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{
    DocUpdate, Engine, EngineOptions, KvMutation, KvOutcome, RevId, SeqVector, StoreMode,
    UpdateOutcome,
};

/// A small deterministic generator, so a failure prints a seed that reproduces it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Debug, PartialEq)]
struct OracleLeaf {
    rev: RevId,
    deleted: bool,
    body: String,
}

type Oracle = BTreeMap<String, Vec<OracleLeaf>>;

fn winner(leaves: &[OracleLeaf]) -> Option<&OracleLeaf> {
    leaves.iter().max_by(|a, b| {
        (!a.deleted, a.rev.pos, &a.rev.hash).cmp(&(!b.deleted, b.rev.pos, &b.rev.hash))
    })
}

fn update(key: &str, parent: Option<RevId>, body: &str, deleted: bool) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent,
        history: Vec::new(),
        deleted,
        body: Bytes::copy_from_slice(body.as_bytes()),
        attachments: Vec::new(),
    }
}

fn open(dir: &std::path::Path) -> Arc<Engine> {
    Arc::new(Engine::open(dir, EngineOptions::default()).expect("open engine"))
}

async fn check(engine: &Engine, oracle: &Oracle, seed: u64, step: usize) {
    let bucket = engine.bucket("db").expect("bucket");
    let context = format!("seed {seed} step {step}");
    let mut live = 0;
    let mut deleted = 0;
    for (key, leaves) in oracle {
        let record = bucket
            .read_record(key.as_bytes())
            .expect("read")
            .unwrap_or_else(|| panic!("{context}: {key} missing"));
        let expected = winner(leaves).expect("oracle winner");
        let got = record.winner().expect("winner");
        assert_eq!(got.rev, expected.rev, "{context}: winner of {key}");
        assert_eq!(got.deleted, expected.deleted, "{context}: deleted of {key}");
        if !expected.deleted {
            assert_eq!(
                &got.body[..],
                expected.body.as_bytes(),
                "{context}: body of {key}"
            );
        }
        let mut got_leaves: Vec<String> = record
            .leaves
            .iter()
            .map(|leaf| leaf.rev.to_string())
            .collect();
        let mut want_leaves: Vec<String> = leaves.iter().map(|leaf| leaf.rev.to_string()).collect();
        got_leaves.sort();
        want_leaves.sort();
        assert_eq!(got_leaves, want_leaves, "{context}: leaves of {key}");
        if expected.deleted {
            deleted += 1;
        } else {
            live += 1;
        }
    }
    assert_eq!(bucket.doc_counts(), (live, deleted), "{context}: counts");
    // The change stream holds every document exactly once, at its winning revision.
    let mut seen = BTreeMap::new();
    for entry in bucket.changes(SeqVector::zero(bucket.vbuckets())) {
        let entry = entry.expect("change");
        let key = String::from_utf8(entry.key.clone()).expect("utf8");
        assert!(
            seen.insert(key.clone(), entry.rev.clone()).is_none(),
            "{context}: {key} twice in changes"
        );
    }
    assert_eq!(seen.len(), oracle.len(), "{context}: change stream size");
    for (key, rev) in seen {
        assert_eq!(
            Some(&rev),
            winner(&oracle[&key]).map(|leaf| &leaf.rev),
            "{context}: change rev of {key}"
        );
    }
}

async fn run(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut engine = open(dir.path());
    engine.create_bucket("db", 8).await.expect("create");
    let mut oracle: Oracle = BTreeMap::new();
    let mut rng = Rng(seed);
    let keys: Vec<String> = (0..12).map(|index| format!("k{index}")).collect();
    for step in 0..steps {
        let bucket = engine.bucket("db").expect("bucket");
        let key = keys[rng.below(keys.len() as u64) as usize].clone();
        let body = format!("{{\"step\":{step}}}");
        let leaves = oracle.get(&key).cloned().unwrap_or_default();
        let current = winner(&leaves).cloned();
        match rng.below(7) {
            0 => {
                // Create without a revision.
                let outcome = bucket
                    .update_doc(update(&key, None, &body, false), true)
                    .await
                    .expect("create");
                match (&current, outcome) {
                    (Some(winner), UpdateOutcome::Conflict) if !winner.deleted => {}
                    (current, UpdateOutcome::Saved { rev, .. }) => {
                        assert!(
                            current.as_ref().is_none_or(|winner| winner.deleted),
                            "seed {seed} step {step}: create over live doc"
                        );
                        let entry = oracle.entry(key.clone()).or_default();
                        if let Some(parent) = current {
                            entry.retain(|leaf| leaf.rev != parent.rev);
                        }
                        entry.push(OracleLeaf {
                            rev,
                            deleted: false,
                            body,
                        });
                    }
                    (current, outcome) => {
                        panic!("seed {seed} step {step}: create {current:?} -> {outcome:?}")
                    }
                }
            }
            1 | 2 => {
                // Edit or delete the winner, sometimes with a stale revision.
                let Some(winner) = current else { continue };
                let stale = rng.below(4) == 0;
                let parent = if stale {
                    RevId {
                        pos: winner.rev.pos,
                        hash: "0000".into(),
                    }
                } else {
                    winner.rev.clone()
                };
                let delete = rng.below(3) == 0;
                let outcome = bucket
                    .update_doc(update(&key, Some(parent.clone()), &body, delete), true)
                    .await
                    .expect("edit");
                match outcome {
                    UpdateOutcome::Conflict => {
                        assert!(stale, "seed {seed} step {step}: unexpected conflict")
                    }
                    UpdateOutcome::Saved { rev, .. } => {
                        assert!(!stale);
                        let entry = oracle.get_mut(&key).expect("entry");
                        entry.retain(|leaf| leaf.rev != parent);
                        entry.push(OracleLeaf {
                            rev,
                            deleted: delete,
                            body: if delete { "{}".into() } else { body },
                        });
                    }
                    other => panic!("seed {seed} step {step}: edit -> {other:?}"),
                }
            }
            3 => {
                // A replicated branch: a new root revision, which makes a conflict.
                let rev = RevId {
                    pos: 1 + rng.below(3),
                    hash: format!("{:032x}", rng.next()),
                };
                let mut replicated = update(&key, None, &body, false);
                let mut history = vec![rev.clone()];
                for pos in (1..rev.pos).rev() {
                    history.push(RevId {
                        pos,
                        hash: format!("r{pos}x{}", rng.below(1000)),
                    });
                }
                replicated.history = history;
                let outcome = bucket
                    .update_doc(replicated, false)
                    .await
                    .expect("replicate");
                assert!(
                    matches!(outcome, UpdateOutcome::Saved { .. }),
                    "seed {seed} step {step}: {outcome:?}"
                );
                oracle.entry(key.clone()).or_default().push(OracleLeaf {
                    rev,
                    deleted: false,
                    body,
                });
            }
            4 => {
                // Key-value overwrite: a new revision on top of the winner.
                let outcome = bucket
                    .kv_mutate(
                        key.as_bytes(),
                        KvMutation::Store {
                            mode: StoreMode::Set,
                            value: Bytes::copy_from_slice(body.as_bytes()),
                            json: true,
                            item_flags: 0,
                            expiry: 0,
                            cas: 0,
                        },
                    )
                    .await
                    .expect("kv set");
                let KvOutcome::Stored { rev, .. } = outcome else {
                    panic!("seed {seed} step {step}: {outcome:?}")
                };
                let entry = oracle.entry(key.clone()).or_default();
                if let Some(parent) = current {
                    entry.retain(|leaf| leaf.rev != parent.rev);
                }
                entry.push(OracleLeaf {
                    rev,
                    deleted: false,
                    body,
                });
            }
            5 => {
                // CAS mismatch is a value, and changes nothing.
                let outcome = bucket
                    .kv_mutate(key.as_bytes(), KvMutation::Remove { cas: 1 })
                    .await
                    .expect("kv remove");
                let live = current.as_ref().is_some_and(|winner| !winner.deleted);
                let expected = if live {
                    KvOutcome::CasMismatch
                } else {
                    KvOutcome::NotFound
                };
                assert_eq!(outcome, expected, "seed {seed} step {step}");
            }
            _ => {
                drop(bucket);
                drop(engine);
                engine = open(dir.path());
            }
        }
        check(&engine, &oracle, seed, step).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_matches_oracle_across_restarts() {
    for seed in [1u64, 7, 42, 1234, 99991] {
        run(seed, 150).await;
    }
}
