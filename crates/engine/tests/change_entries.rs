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
