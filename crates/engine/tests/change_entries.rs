//! Compaction abbreviates change entries to id prefixes (docs/format/keys.md, version 2): the
//! change stream must read exactly as before, also after ids arrive that share the prefixes,
//! after the abbreviated documents are written again, and across a restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use settee_engine::{DocUpdate, Engine, EngineOptions, RevId, SeqVector, UpdateOutcome};

fn update(key: &str, parent: Option<RevId>, deleted: bool) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent,
        history: Vec::new(),
        deleted,
        body: Bytes::from_static(b"{\"v\":1}"),
        attachments: Vec::new(),
    }
}

async fn save(engine: &Engine, key: &str, parent: Option<RevId>, deleted: bool) -> RevId {
    let bucket = engine.bucket("db").expect("bucket");
    match bucket
        .update_doc(update(key, parent, deleted), true)
        .await
        .expect("save")
    {
        UpdateOutcome::Saved { rev, .. } => rev,
        other => panic!("{key}: {other:?}"),
    }
}

/// The whole stream as (vbucket, seqno) -> (id, rev, deleted), checking each id appears once.
fn stream(engine: &Engine) -> BTreeMap<(u16, u64), (String, String, bool)> {
    let bucket = engine.bucket("db").expect("bucket");
    let mut out = BTreeMap::new();
    let mut ids = std::collections::HashSet::new();
    for entry in bucket.changes(SeqVector::zero(bucket.vbuckets())) {
        let entry = entry.expect("change");
        let id = String::from_utf8(entry.key).expect("utf8");
        assert!(ids.insert(id.clone()), "{id} twice in the stream");
        out.insert(
            (entry.vbucket, entry.seqno),
            (id, entry.rev.to_string(), entry.deleted),
        );
    }
    out
}

/// uuid-like ids (random), CouchDB-sequential-like ids (a long shared prefix), and ids that are
/// prefixes of one another.
fn ids() -> Vec<String> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ids: Vec<String> = (0..300)
        .map(|_| format!("{:016x}{:016x}", next(), next()))
        .collect();
    ids.extend((0..300).map(|index| format!("4e17a2c09b5d3f8e61a0c7b2d{:07x}", 1000 + index * 37)));
    ids.extend(["a", "ab", "abc", "abcd", "abd", "b"].map(String::from));
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abbreviated_change_entries_read_like_whole_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("open"));
    engine.create_bucket("db", 4).await.expect("create");
    let mut revs = BTreeMap::new();
    for (index, id) in ids().into_iter().enumerate() {
        let rev = save(&engine, &id, None, false).await;
        // Every seventh document is deleted: tombstones have entries too.
        let rev = if index % 7 == 0 {
            save(&engine, &id, Some(rev), true).await
        } else {
            rev
        };
        revs.insert(id, rev);
    }
    let before = stream(&engine);
    assert_eq!(before.len(), revs.len());

    let bucket = engine.bucket("db").expect("bucket");
    let report = bucket.compact().await.expect("compact");
    // All random ids and all but a few of the others get shorter entries.
    assert!(report.change_entries_abbreviated >= 590, "{report:?}");
    assert_eq!(stream(&engine), before, "stream after compaction");
    let again = bucket.compact().await.expect("compact again");
    assert_eq!(
        again.change_entries_abbreviated, 0,
        "a second compaction rewrites nothing"
    );

    // Reading a vbucket in small pieces resumes correctly and fills each piece.
    let mut pieces = Vec::new();
    let mut since = 0;
    loop {
        let piece = bucket
            .vbucket_changes(1, since, 3)
            .expect("vbucket changes");
        pieces.extend(piece.iter().map(|entry| (entry.seqno, entry.key.clone())));
        match piece.last() {
            Some(last) if piece.len() == 3 => since = last.seqno,
            _ => break,
        }
    }
    let whole: Vec<(u64, Vec<u8>)> = before
        .iter()
        .filter(|((vbucket, _), _)| *vbucket == 1)
        .map(|((_, seqno), (id, _, _))| (*seqno, id.clone().into_bytes()))
        .collect();
    assert_eq!(pieces, whole);

    // New ids that share every abbreviated prefix (each old id extended or cut), and new
    // revisions of some old documents: the old entries stay resolvable, rewritten ones move.
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    for (index, (id, rev)) in revs.iter().enumerate() {
        // One sorting after the old id, one (the old id cut by a byte) before it.
        for new_id in [format!("{id}0"), id[..id.len() - 1].to_string()] {
            if !new_id.is_empty() && !revs.contains_key(&new_id) && !expected.contains_key(&new_id)
            {
                let new_rev = save(&engine, &new_id, None, false).await;
                expected.insert(new_id, new_rev.to_string());
            }
        }
        let rev = if index % 5 == 0 && index % 7 != 0 {
            save(&engine, id, Some(rev.clone()), false).await
        } else {
            rev.clone()
        };
        expected.insert(id.clone(), rev.to_string());
    }
    let check = |engine: &Engine, context: &str| {
        let got: BTreeMap<String, String> = stream(engine)
            .into_values()
            .map(|(id, rev, _)| (id, rev))
            .collect();
        assert_eq!(got, expected, "{context}");
    };
    check(&engine, "after new ids and edits");
    let report = bucket.compact().await.expect("compact");
    assert!(report.change_entries_abbreviated > 0, "{report:?}");
    check(&engine, "after the second compaction");

    drop(bucket);
    drop(engine);
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("reopen"));
    check(&engine, "after a restart");
}

/// `count` uuid-like ids.
fn random_ids(count: usize, mut state: u64) -> Vec<String> {
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| format!("{:016x}{:016x}", next(), next()))
        .collect()
}

async fn save_all(
    bucket: &settee_engine::Bucket,
    ids: &[String],
    revs: &mut BTreeMap<String, RevId>,
) {
    for chunk in ids.chunks(500) {
        let updates = chunk
            .iter()
            .map(|id| update(id, revs.get(id).cloned(), false))
            .collect();
        let outcomes = bucket.update_docs(updates, true).await.expect("save");
        for (id, outcome) in chunk.iter().zip(outcomes) {
            match outcome {
                UpdateOutcome::Saved { rev, .. } => revs.insert(id.clone(), rev),
                other => panic!("{id}: {other:?}"),
            };
        }
    }
}

/// Reads with `cursor` until it ends, or `stop` entries; returns (id -> rev in the order seen).
fn drain(
    cursor: &mut settee_engine::ChangeCursor<'_>,
    stop: usize,
    seen: &mut Vec<(u16, u64, String, String)>,
) {
    for entry in cursor.by_ref().take(stop) {
        let entry = entry.expect("change");
        let id = String::from_utf8(entry.key).expect("utf8");
        seen.push((entry.vbucket, entry.seqno, id, entry.rev.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_of_compacted_entries_resolves_ids_with_one_pass_per_vbucket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("open"));
    engine.create_bucket("db", 4).await.expect("create");
    let bucket = engine.bucket("db").expect("bucket");
    let ids = random_ids(6000, 0x9e37_79b9_7f4a_7c15);
    let mut revs = BTreeMap::new();
    save_all(&bucket, &ids, &mut revs).await;
    let report = bucket.compact().await.expect("compact");
    assert!(report.change_entries_abbreviated >= 5900, "{report:?}");
    let zero = || SeqVector::zero(bucket.vbuckets());
    let expected: BTreeMap<String, String> = revs
        .iter()
        .map(|(id, rev)| (id.clone(), rev.to_string()))
        .collect();

    // A whole read: one pass per vbucket, each vbucket yielded whole and in seqno order.
    for (cap, least_passes) in [(usize::MAX, 4), (100, 56)] {
        let mut cursor = bucket.changes(zero()).with_pass_ids_max(cap);
        let mut seen = Vec::new();
        drain(&mut cursor, usize::MAX, &mut seen);
        assert!(
            cursor.id_passes() >= least_passes,
            "cap {cap}: {} passes",
            cursor.id_passes()
        );
        if cap == usize::MAX {
            assert_eq!(cursor.id_passes(), 4, "one pass per vbucket");
        }
        assert_eq!(
            cursor.pass_misses(),
            0,
            "cap {cap}: the passes resolve every entry"
        );
        let order: Vec<(u16, u64)> = seen.iter().map(|(vb, seqno, _, _)| (*vb, *seqno)).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(
            order, sorted,
            "cap {cap}: vbuckets one at a time, seqnos ascending"
        );
        let got: BTreeMap<String, String> =
            seen.into_iter().map(|(_, _, id, rev)| (id, rev)).collect();
        assert_eq!(got.len(), 6000, "cap {cap}: each document once");
        assert_eq!(got, expected, "cap {cap}");
    }

    // Stop half way, write (edits of documents on both sides of the stop, and new ones), and
    // resume from the position: every document's last sighting is its current revision.
    let mut cursor = bucket.changes(zero());
    let mut seen = Vec::new();
    drain(&mut cursor, 3000, &mut seen);
    let position = cursor.position().clone();
    drop(cursor);
    let edited: Vec<String> = ids.iter().step_by(13).cloned().collect();
    save_all(&bucket, &edited, &mut revs).await;
    let fresh = random_ids(300, 0x1234_5678_9abc_def1);
    save_all(&bucket, &fresh, &mut revs).await;
    let mut cursor = bucket.changes(position);
    // Writes while a vbucket drains, too.
    drain(&mut cursor, 500, &mut seen);
    let late: Vec<String> = ids.iter().skip(5).step_by(17).cloned().collect();
    save_all(&bucket, &late, &mut revs).await;
    drain(&mut cursor, usize::MAX, &mut seen);
    let position = cursor.end_position();
    drop(cursor);
    let mut cursor = bucket.changes(position);
    drain(&mut cursor, usize::MAX, &mut seen);
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    for (_, _, id, rev) in seen {
        last.insert(id, rev);
    }
    let expected: BTreeMap<String, String> = revs
        .iter()
        .map(|(id, rev)| (id.clone(), rev.to_string()))
        .collect();
    assert_eq!(
        last, expected,
        "resumed reads end at every document's current revision"
    );

    // A short read (the last few entries of each vbucket, compacted) seeks instead of passing.
    bucket.compact().await.expect("compact");
    let high = bucket.high_seqnos();
    let near_end = SeqVector::from_seqnos(high.seqnos().iter().map(|seqno| seqno - 40).collect());
    let mut cursor = bucket.changes(near_end);
    let mut tail = Vec::new();
    drain(&mut cursor, usize::MAX, &mut tail);
    assert_eq!(
        cursor.id_passes(),
        0,
        "40 entries per vbucket are read with seeks"
    );
    for (_, _, id, rev) in &tail {
        assert_eq!(Some(rev), expected.get(id), "{id}");
    }
    assert!(tail.len() >= 100, "{} entries near the end", tail.len());
}
