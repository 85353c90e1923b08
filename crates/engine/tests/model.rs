//! Model-based test: random CouchDB and key-value operations, with compactions and restarts,
//! against a simple in-memory oracle of each document's leaf revisions, in several collections
//! created and dropped as the test goes (the same ids in each). After every step the engine's
//! winner, leaves, body, counts, change stream and id-ordered scans (`_all_docs`) of every live
//! collection must agree with the oracle, for ranges bounded anywhere (cut, extended and exact
//! ids; either direction); dropped collections are unknown to every reader, and a name created
//! again is a new, empty collection.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{
    DocKey, DocUpdate, Engine, EngineError, EngineOptions, KvMutation, KvOutcome, RevId, ScanRange,
    SeqVector, StoreMode, UpdateOutcome,
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

/// Collections the test creates and drops, all in the `_default` scope.
const COLLECTION_NAMES: [&str; 3] = ["c1", "c2", "c3"];

/// What the bucket should hold: each live collection's documents (collection 0 always), the
/// names of the live collections other than 0, and the ids of dropped ones.
#[derive(Default)]
struct Model {
    collections: BTreeMap<u32, Oracle>,
    names: BTreeMap<String, u32>,
    dropped: Vec<u32>,
    /// Documents written into collections other than 0 (the run must exercise them).
    written_elsewhere: usize,
}

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

/// Ids that share prefixes (uuid-like, cut, extended, mixed case), so bounds fall between them.
fn model_keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..6).map(|index| format!("k{index}")).collect();
    keys.extend([
        "0123456789abcdef0123456789abcdef".to_string(),
        "0123456789abcdef0123456789abcdee".to_string(),
        "0123456789abcdef0123456789abcdef0".to_string(),
        "0123456789abcdef0123456789abcde".to_string(),
        "0123456789ABCDEF0123456789ABCDEF".to_string(),
        "0123456789abcdef:123456789abcdef".to_string(),
        "ffffffffffffffffffffffffffffffff".to_string(),
        "a0000000000000000000000000000000".to_string(),
        "a".to_string(),
        "9zz".to_string(),
    ]);
    keys
}

/// A random scan bound: an id of the key set, or one of them cut or extended.
fn bound(rng: &mut Rng, keys: &[String]) -> Option<String> {
    let key = &keys[rng.below(keys.len() as u64) as usize];
    match rng.below(5) {
        0 => None,
        1 => Some(key[..rng.below(key.len() as u64 + 1) as usize].to_string()),
        2 => Some(format!("{key}\u{0}")),
        3 => Some(format!("{key}g")),
        _ => Some(key.clone()),
    }
}

/// Every id-ordered scan, full or bounded, either direction, yields exactly the oracle's ids
/// in the range, in order.
fn check_scans(
    engine: &Engine,
    collection: u32,
    oracle: &Oracle,
    rng: &mut Rng,
    keys: &[String],
    context: &str,
) {
    let bucket = engine.bucket("db").expect("bucket");
    for _ in 0..4 {
        let range = ScanRange {
            collection,
            start: bound(rng, keys).map(String::into_bytes),
            end: bound(rng, keys).map(String::into_bytes),
            inclusive_end: rng.below(2) == 0,
            descending: rng.below(2) == 0,
        };
        let got: Vec<Vec<u8>> = bucket
            .scan_docs(range.clone())
            .map(|item| item.expect("scan").0)
            .collect();
        let (low, high) = if range.descending {
            (&range.end, &range.start)
        } else {
            (&range.start, &range.end)
        };
        let (low_inclusive, high_inclusive) = if range.descending {
            (range.inclusive_end, true)
        } else {
            (true, range.inclusive_end)
        };
        let mut want: Vec<Vec<u8>> = oracle
            .keys()
            .map(|key| key.as_bytes().to_vec())
            .filter(|key| match low {
                Some(low) if low_inclusive => key >= low,
                Some(low) => key > low,
                None => true,
            })
            .filter(|key| match high {
                Some(high) if high_inclusive => key <= high,
                Some(high) => key < high,
                None => true,
            })
            .collect();
        if range.descending {
            want.reverse();
        }
        assert_eq!(
            got, want,
            "{context}: collection {collection} scan {range:?}"
        );
    }
}

async fn check(engine: &Engine, model: &Model, seed: u64, step: usize) {
    let bucket = engine.bucket("db").expect("bucket");
    let context = format!("seed {seed} step {step}");
    let manifest = bucket.manifest();
    for (name, cid) in &model.names {
        assert_eq!(
            manifest.collection_id(&format!("_default.{name}")).ok(),
            Some(*cid),
            "{context}: manifest"
        );
    }
    assert_eq!(
        manifest.collection_ids().len(),
        model.collections.len(),
        "{context}: live collections"
    );
    let (mut total_live, mut total_deleted) = (0, 0);
    for (cid, oracle) in &model.collections {
        let (live, deleted) = check_collection(&bucket, *cid, oracle, &context);
        total_live += live;
        total_deleted += deleted;
    }
    assert_eq!(
        bucket.doc_counts(),
        (total_live, total_deleted),
        "{context}: bucket counts"
    );
    for cid in &model.dropped {
        let read = bucket.read_record(DocKey::new(*cid, b"k0"));
        assert!(
            matches!(read, Err(EngineError::UnknownCollection { .. })),
            "{context}: dropped collection {cid} read {read:?}"
        );
        assert!(bucket
            .changes_in(*cid, SeqVector::zero(bucket.vbuckets()))
            .is_err());
    }
}

/// One collection's documents, counts and change stream against its oracle; returns the
/// oracle's (live, deleted) counts.
fn check_collection(
    bucket: &settee_engine::Bucket,
    cid: u32,
    oracle: &Oracle,
    context: &str,
) -> (u64, u64) {
    let mut live = 0;
    let mut deleted = 0;
    for (key, leaves) in oracle {
        let record = bucket
            .read_record(DocKey::new(cid, key.as_bytes()))
            .expect("read")
            .unwrap_or_else(|| panic!("{context}: {cid}/{key} missing"));
        let expected = winner(leaves).expect("oracle winner");
        let got = record.winner().expect("winner");
        assert_eq!(got.rev, expected.rev, "{context}: winner of {cid}/{key}");
        assert_eq!(
            got.deleted, expected.deleted,
            "{context}: deleted of {cid}/{key}"
        );
        if !expected.deleted {
            assert_eq!(
                &got.body[..],
                expected.body.as_bytes(),
                "{context}: body of {cid}/{key}"
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
        assert_eq!(got_leaves, want_leaves, "{context}: leaves of {cid}/{key}");
        if expected.deleted {
            deleted += 1;
        } else {
            live += 1;
        }
    }
    assert_eq!(
        bucket.doc_counts_in(cid).expect("counts"),
        (live, deleted),
        "{context}: counts of {cid}"
    );
    // The change stream holds every document exactly once, at its winning revision.
    let mut seen = BTreeMap::new();
    for entry in bucket
        .changes_in(cid, SeqVector::zero(bucket.vbuckets()))
        .expect("cursor")
    {
        let entry = entry.expect("change");
        assert_eq!(entry.collection, cid, "{context}: collection of a change");
        let key = String::from_utf8(entry.key.clone()).expect("utf8");
        assert!(
            seen.insert(key.clone(), entry.rev.clone()).is_none(),
            "{context}: {cid}/{key} twice in changes"
        );
    }
    assert_eq!(
        seen.len(),
        oracle.len(),
        "{context}: change stream size of {cid}"
    );
    for (key, rev) in seen {
        assert_eq!(
            Some(&rev),
            winner(&oracle[&key]).map(|leaf| &leaf.rev),
            "{context}: change rev of {cid}/{key}"
        );
    }
    (live, deleted)
}

/// Creates or drops a collection of the model's names, or runs part of the drop purger.
async fn collection_step(
    engine: &Engine,
    model: &mut Model,
    rng: &mut Rng,
    seed: u64,
    step: usize,
) {
    let bucket = engine.bucket("db").expect("bucket");
    let name = COLLECTION_NAMES[rng.below(COLLECTION_NAMES.len() as u64) as usize];
    let context = format!("seed {seed} step {step}");
    match rng.below(3) {
        0 => {
            let created = bucket.create_collection("_default", name, None).await;
            match (model.names.get(name), created) {
                (Some(_), Err(EngineError::CollectionExists(_))) => {}
                (None, Ok(manifest)) => {
                    let cid = manifest
                        .collection_id(&format!("_default.{name}"))
                        .expect("created");
                    assert!(
                        !model.dropped.contains(&cid) && !model.collections.contains_key(&cid),
                        "{context}: id {cid} reused"
                    );
                    model.names.insert(name.to_string(), cid);
                    model.collections.insert(cid, Oracle::new());
                }
                (held, outcome) => panic!("{context}: create {name} ({held:?}) -> {outcome:?}"),
            }
        }
        1 => {
            let dropped = bucket.drop_collection("_default", name).await;
            match (model.names.get(name).copied(), dropped) {
                (None, Err(EngineError::UnknownCollection { .. })) => {}
                (Some(cid), Ok(_)) => {
                    model.names.remove(name);
                    model.collections.remove(&cid);
                    model.dropped.push(cid);
                }
                (held, outcome) => panic!("{context}: drop {name} ({held:?}) -> {outcome:?}"),
            }
        }
        _ => {
            // Part of the purge, or all of it; readers must not care either way.
            let vbuckets = 1 + rng.below(8) as u16;
            bucket
                .purge_dropped_round(vbuckets)
                .await
                .expect("purge round");
        }
    }
}

async fn run(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut engine = open(dir.path());
    engine.create_bucket("db", 8).await.expect("create");
    let mut model = Model::default();
    model.collections.insert(0, Oracle::new());
    let mut rng = Rng(seed);
    let keys = model_keys();
    for step in 0..steps {
        let bucket = engine.bucket("db").expect("bucket");
        let live: Vec<u32> = model.collections.keys().copied().collect();
        let cid = live[rng.below(live.len() as u64) as usize];
        let key = keys[rng.below(keys.len() as u64) as usize].clone();
        let doc_key = DocKey::new(cid, key.as_bytes());
        let body = format!("{{\"step\":{step}}}");
        if cid != 0 {
            model.written_elsewhere += 1;
        }
        let oracle = model.collections.get_mut(&cid).expect("live collection");
        let leaves = oracle.get(&key).cloned().unwrap_or_default();
        let current = winner(&leaves).cloned();
        match rng.below(10) {
            0 => {
                // Create without a revision.
                let outcome = bucket
                    .update_doc_in(
                        cid,
                        update(&key, None, &body, false),
                        true,
                        &settee_engine::Writer::system(),
                    )
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
                    .update_doc_in(
                        cid,
                        update(&key, Some(parent.clone()), &body, delete),
                        true,
                        &settee_engine::Writer::system(),
                    )
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
                    .update_doc_in(cid, replicated, false, &settee_engine::Writer::system())
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
                        doc_key,
                        KvMutation::Store {
                            mode: StoreMode::Set,
                            value: Bytes::copy_from_slice(body.as_bytes()),
                            json: true,
                            item_flags: 0,
                            expiry: 0,
                            cas: 0,
                        },
                        &settee_engine::Writer::system(),
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
                    .kv_mutate(
                        doc_key,
                        KvMutation::Remove { cas: 1 },
                        &settee_engine::Writer::system(),
                    )
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
            6 => {
                // Compaction rewrites what is on disk; nothing a reader sees may change.
                bucket.compact().await.expect("compact");
            }
            7 | 8 => collection_step(&engine, &mut model, &mut rng, seed, step).await,
            _ => {
                drop(bucket);
                drop(engine);
                engine = open(dir.path());
            }
        }
        check(&engine, &model, seed, step).await;
        let context = format!("seed {seed} step {step}");
        for (cid, oracle) in &model.collections {
            check_scans(&engine, *cid, oracle, &mut rng, &keys, &context);
        }
    }
    assert!(
        !model.dropped.is_empty() && model.written_elsewhere > 10,
        "seed {seed}: the run must create, write and drop collections"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_matches_oracle_across_restarts() {
    for seed in [1u64, 7, 42, 1234, 99991] {
        run(seed, 150).await;
    }
}
