//! A vbucket's document data moves between two engines as sorted files
//! (docs/format/rebalance.md, section 1): exported from one snapshot of the source with the
//! target's bucket id in every key and ingested whole, the target reads every document of the
//! vbucket (winner, body, deleted or not) and its change entries exactly as the source had them
//! at the export; writes after the export are not carried; other vbuckets are not touched; a
//! file of another vbucket is refused before anything is ingested. The index rows' file is the
//! indexer's exporter's (here a stand-in: settee-mango's `vbucket_index_rows_move` test has the
//! real one), written from the same snapshot and ingested into the `view` family; one of
//! another bucket is refused.

use std::path::Path;

use bytes::Bytes;
use settee_engine::export::{ExportedGroup, IndexExport, IndexExporter, VbucketSnapshot};
use settee_engine::{DocUpdate, Engine, EngineError, EngineOptions};
use settee_storage::{write_sst, Cf};

const VBUCKETS: u16 = 8;
const MOVED: u16 = 3;

/// Group 7 of the stand-in's rows.
const GROUP: [u8; 4] = [0, 0, 0, 7];

/// An indexer's exporter stand-in: one entry per document of the vbucket's collection 0,
/// `bucket | group 7 | 0x02 | id` (a back-index key's shape).
struct OneEntryPerDoc;

impl IndexExporter for OneEntryPerDoc {
    fn export(
        &self,
        source: &VbucketSnapshot<'_>,
        path: &Path,
        target_bucket_id: u32,
    ) -> Result<IndexExport, EngineError> {
        let ids: Vec<Vec<u8>> = source.doc_ids(0).collect::<Result<_, _>>()?;
        let file = write_sst(
            path,
            ids.iter().map(|id| {
                let mut key = target_bucket_id.to_be_bytes().to_vec();
                key.extend_from_slice(&GROUP);
                key.push(0x02);
                key.extend_from_slice(id);
                Ok((key, Vec::new()))
            }),
        )?;
        Ok(IndexExport {
            file,
            groups: vec![ExportedGroup {
                collection: 0,
                signature: [1; 16],
                name: "_design/stand-in".into(),
                views: vec!["ids".into()],
                source_group: 3,
                target_group: 7,
                indexed_seqno: 0,
                rows: vec![ids.len() as u64],
            }],
            skipped: Vec::new(),
        })
    }
}

fn update(key: &str, parent: Option<settee_engine::RevId>, deleted: bool, n: usize) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent,
        history: Vec::new(),
        deleted,
        body: Bytes::from(format!("{{\"n\":{n}}}")),
        attachments: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vbucket_moves_as_files_between_engines() {
    let dirs = [(); 3].map(|_| tempfile::tempdir().expect("tempdir"));
    let source_engine = Engine::open(dirs[0].path(), EngineOptions::default()).expect("open");
    source_engine
        .create_bucket("db", VBUCKETS)
        .await
        .expect("create");
    let source = source_engine.bucket("db").expect("bucket");
    let target_engine = Engine::open(dirs[1].path(), EngineOptions::default()).expect("open");
    // Another bucket first: the target's id of "db" differs from the source's.
    target_engine
        .create_bucket("first", 4)
        .await
        .expect("create");
    target_engine
        .create_bucket("db", VBUCKETS)
        .await
        .expect("create");
    let target = target_engine.bucket("db").expect("bucket");
    assert_ne!(source.id(), target.id());

    let keys: Vec<String> = (0..400).map(|index| format!("doc-{index:04}")).collect();
    for (index, key) in keys.iter().enumerate() {
        let outcome = source
            .update_doc(update(key, None, false, index), true)
            .await
            .expect("save");
        if index % 5 == 0 {
            if let settee_engine::UpdateOutcome::Saved { rev, .. } = outcome {
                source
                    .update_doc(update(key, Some(rev), index % 10 == 0, index), true)
                    .await
                    .expect("update or delete");
            }
        }
    }
    let moved: Vec<&String> = keys
        .iter()
        .filter(|key| source.vbucket_of(key.as_bytes()) == MOVED)
        .collect();
    assert!(moved.len() > 20, "{} documents in the vbucket", moved.len());
    // A `_local` document of the vbucket (a replication checkpoint, say).
    let local = (0..)
        .map(|index| format!("checkpoint-{index}"))
        .find(|key| source.vbucket_of(key.as_bytes()) == MOVED)
        .expect("a key of the vbucket");
    source
        .put_local(
            local.as_bytes(),
            None,
            Some(Bytes::from_static(b"{\"seq\":7}")),
        )
        .await
        .expect("local");
    let before: Vec<_> = moved
        .iter()
        .map(|key| source.read_winner(key.as_bytes()).expect("read"))
        .collect();
    let changes_before = source.vbucket_changes(MOVED, 0, 10_000).expect("changes");

    let export = source
        .export_vbucket_files(MOVED, dirs[2].path(), target.id(), Some(&OneEntryPerDoc))
        .expect("export");
    assert_eq!(export.snapshot_seqno, source.high_seqnos().get(MOVED));
    assert_eq!(export.groups.len(), 1);
    assert_eq!(export.groups[0].rows, [moved.len() as u64]);
    let names: Vec<&str> = export
        .files
        .iter()
        .map(|file| {
            file.file
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
        })
        .collect();
    // `att` holds the old revision bodies of the updated documents; `exp` is empty and makes
    // no file.
    assert_eq!(
        names,
        ["doc.sst", "seq.sst", "local.sst", "att.sst", "view.sst"]
    );
    let view_file = export.files.last().expect("view.sst");
    assert_eq!(view_file.cf, Cf::View);
    // The same snapshot as the document files: the same documents.
    assert_eq!(view_file.file.keys, export.files[0].file.keys);
    // Written after the export: not carried.
    let later = (0..)
        .map(|index| format!("later-{index}"))
        .find(|key| source.vbucket_of(key.as_bytes()) == MOVED)
        .expect("a key of the vbucket");
    source
        .update_doc(update(&later, None, false, 9_999), true)
        .await
        .expect("a write after the export");

    // A file of another vbucket is refused, and nothing is ingested.
    let other = source
        .export_vbucket_files(MOVED + 1, &dirs[2].path().join("other"), target.id(), None)
        .err();
    assert!(
        other.is_some(),
        "the directory does not exist: an error, no panic"
    );
    std::fs::create_dir(dirs[2].path().join("other")).expect("dir");
    let other = source
        .export_vbucket_files(MOVED + 1, &dirs[2].path().join("other"), target.id(), None)
        .expect("export");
    assert!(target.ingest_vbucket_files(MOVED, &other.files).is_err());
    assert_eq!(target.read_winner(moved[0].as_bytes()).expect("read"), None);
    // Index rows made for another bucket are refused too.
    std::fs::create_dir(dirs[2].path().join("wrong")).expect("dir");
    let wrong = source
        .export_vbucket_files(
            MOVED,
            &dirs[2].path().join("wrong"),
            target.id() + 1,
            Some(&OneEntryPerDoc),
        )
        .expect("export");
    let wrong_view = wrong.files.last().expect("view.sst").clone();
    assert_eq!(wrong_view.cf, Cf::View);
    assert!(target.ingest_vbucket_files(MOVED, &[wrong_view]).is_err());
    let view_keys = |engine: &Engine, bucket: u32| -> Vec<Vec<u8>> {
        let lower = bucket.to_be_bytes();
        let upper = (bucket + 1).to_be_bytes();
        engine
            .store()
            .scan(Cf::View, &lower, &upper, false)
            .map(|entry| entry.expect("scan").0.into_vec())
            .collect()
    };
    assert!(view_keys(&target_engine, target.id()).is_empty());
    assert!(view_keys(&target_engine, target.id() + 1).is_empty());

    target
        .ingest_vbucket_files(MOVED, &export.files)
        .expect("ingest");
    for (key, expected) in moved.iter().zip(&before) {
        assert_eq!(
            &target.read_winner(key.as_bytes()).expect("read"),
            expected,
            "{key}"
        );
    }
    assert_eq!(
        target.vbucket_changes(MOVED, 0, 10_000).expect("changes"),
        changes_before
    );
    assert_eq!(target.read_winner(later.as_bytes()).expect("read"), None);
    // The stand-in's entries are in the target's `view` family, under the target's bucket id.
    let mut expected_view_keys: Vec<Vec<u8>> = moved
        .iter()
        .map(|key| {
            let mut view_key = target.id().to_be_bytes().to_vec();
            view_key.extend_from_slice(&GROUP);
            view_key.push(0x02);
            view_key.extend_from_slice(key.as_bytes());
            view_key
        })
        .collect();
    expected_view_keys.sort();
    assert_eq!(view_keys(&target_engine, target.id()), expected_view_keys);
    assert_eq!(
        target.get_local(local.as_bytes()).expect("local"),
        source.get_local(local.as_bytes()).expect("local")
    );
    for key in keys
        .iter()
        .filter(|key| target.vbucket_of(key.as_bytes()) != MOVED)
    {
        assert_eq!(
            target.read_winner(key.as_bytes()).expect("read"),
            None,
            "{key}"
        );
    }
}
