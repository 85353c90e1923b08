//! A vbucket's index rows move between two nodes as `view.sst` (docs/format/rebalance.md,
//! section 1, "Index rows"), exported with the vbucket's document files from one snapshot and
//! ingested whole: after the ingest the target's groups hold exactly the source's rows of the
//! vbucket's documents — of a JavaScript view emitting several rows per document, of a Mango
//! JSON index, in two collections — under the target's bucket and group ids, without the
//! target mapping anything (its groups never indexed, and a document changed after the
//! source's index keeps the rows the source's index had). A document that emitted nothing and
//! the other vbuckets' documents contribute nothing; a group the target lacks is skipped and
//! reported; runs merged from chunk files make the same file as runs sorted in memory; in a
//! partitioned bucket, partitioned and global groups move alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};
use settee_engine::export::{ExportedFile, MoveManifest, SkipReason, VbucketExport, MANIFEST_FILE};
use settee_engine::{
    Bucket, DocUpdate, Engine, EngineOptions, Keyspace, RevId, UpdateOutcome, VbRole,
};
use settee_mango::index::{add_to_ddoc, indexes_in_ddoc, AddOutcome};
use settee_mango::NewIndex;
use settee_storage::{Cf, Store, StoreOptions};
use settee_views::{IndexGroup, KeyRange, ViewRowsExporter, Views, ViewsConfig};
use tempfile::TempDir;

const VBUCKETS: u16 = 8;

/// One node: an engine with the bucket "db" (and a scope "s" with collection "c").
struct Node {
    _dir: TempDir,
    bucket: Arc<Bucket>,
    views: Arc<Views>,
    default: Keyspace,
    other: Keyspace,
}

/// With `another_bucket_first`, a bucket made before "db" gives "db" another id than the
/// source's.
async fn node(another_bucket_first: bool, partitioned: bool) -> Node {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("engine"));
    if another_bucket_first {
        engine.create_bucket("first", 4).await.expect("bucket");
    }
    engine
        .create_bucket_with("db", VBUCKETS, partitioned)
        .await
        .expect("bucket");
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("s").await.expect("scope");
    bucket
        .create_collection("s", "c", None)
        .await
        .expect("collection");
    let cid = bucket.manifest().find("s", "c").expect("live").id;
    let views = Views::new(engine.clone(), ViewsConfig::default()).expect("views");
    Node {
        _dir: dir,
        default: Keyspace::default_of(bucket.clone()),
        other: Keyspace::new(bucket.clone(), cid),
        bucket,
        views,
    }
}

async fn put(keyspace: &Keyspace, id: &str, parent: Option<RevId>, body: Value) -> RevId {
    let outcome = keyspace
        .update_docs(
            vec![DocUpdate {
                key: id.as_bytes().to_vec(),
                parent,
                history: Vec::new(),
                deleted: false,
                body: Bytes::from(body.to_string()),
                attachments: Vec::new(),
            }],
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("update");
    match &outcome[0] {
        UpdateOutcome::Saved { rev, .. } => rev.clone(),
        other => panic!("{other:?}"),
    }
}

/// A JavaScript design document: `by_tag` emits a row per tag (a repeated tag twice, under
/// one key), `by_n` one row; both reduce.
fn app_design() -> Value {
    json!({"views": {
        "by_tag": {"map": "function (doc) { (doc.tags || []).forEach(function (tag, i) { emit([tag, doc.n], i); }); }", "reduce": "_count"},
        "by_n": {"map": "function (doc) { if (typeof doc.n === 'number') { emit(doc.n, doc.n * 2); } }", "reduce": "_sum"}
    }})
}

/// A Mango JSON index: its design document id and body, and the index.
fn mango_index(body: Value, partitioned: bool) -> (String, Value, settee_mango::Index) {
    let new = NewIndex::parse(&body).expect("index");
    let AddOutcome::Updated(ddoc) = add_to_ddoc(None, &new).expect("adds") else {
        panic!("a new design document");
    };
    let index = indexes_in_ddoc(&new.ddoc, &ddoc, partitioned).remove(0);
    (new.ddoc, ddoc, index)
}

async fn js_group(node: &Node, keyspace: &Keyspace, ddoc: &str) -> Arc<IndexGroup> {
    node.views
        .design_views(keyspace, ddoc, None)
        .await
        .expect("design")
        .expect("views")
        .group
}

async fn mango_group(node: &Node, index: &settee_mango::Index) -> Arc<IndexGroup> {
    settee_mango::open_index(&node.views, &node.default, index)
        .await
        .expect("open")
        .expect("a JSON index")
}

/// Indexes everything written so far in batches on this thread, as the builder would, but
/// without starting the builder: nothing indexes the group after this.
async fn index_now(group: &Arc<IndexGroup>) {
    let group = group.clone();
    tokio::task::spawn_blocking(move || while group.index_batch().expect("index") > 0 {})
        .await
        .expect("indexer");
}

/// The rows of view `view` (of one partition's, when given) as the index holds them now, not
/// brought up to date (`update=false`), of the documents `keep` keeps.
fn rows(
    group: &IndexGroup,
    view: usize,
    partition: Option<&str>,
    keep: impl Fn(&str) -> bool,
) -> Vec<(Value, String, Value)> {
    let range = KeyRange {
        partition: partition.map(str::to_string),
        ..KeyRange::default()
    };
    group
        .scan(view, &range)
        .map(|row| row.expect("row"))
        .filter(|row| keep(&row.id_str()))
        .map(|row| (row.key(), row.id_str().into_owned(), row.value()))
        .collect()
}

/// A vbucket holding none of `ids` (the design documents: a target already has its own).
fn vbucket_without(bucket: &Bucket, ids: &[&str]) -> u16 {
    (0..VBUCKETS)
        .find(|vbucket| {
            ids.iter()
                .all(|id| bucket.vbucket_of(id.as_bytes()) != *vbucket)
        })
        .expect("a vbucket without design documents")
}

/// The `view` family's entries of an exported file, read back through a scratch store (the
/// ingest moves the file, so a copy is ingested).
fn entries_of(file: &ExportedFile) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scratch = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&scratch.path().join("db"), &StoreOptions::default()).expect("store");
    let copy = scratch.path().join("copy.sst");
    std::fs::copy(&file.file.path, &copy).expect("copy");
    let mut moved = file.file.clone();
    moved.path = copy;
    store.ingest(Cf::View, &[moved]).expect("ingest");
    store
        .scan(Cf::View, &[], &[0xff; 9], false)
        .map(|entry| {
            let (key, value) = entry.expect("scan");
            (key.into_vec(), value.into_vec())
        })
        .collect()
}

fn view_file(export: &VbucketExport) -> &ExportedFile {
    let file = export.files.last().expect("files");
    assert_eq!(file.cf, Cf::View);
    assert!(file.file.path.ends_with("view.sst"));
    file
}

fn file_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vbucket_s_index_rows_move_without_being_mapped_again() {
    let source = node(false, false).await;
    let target = node(true, false).await;
    assert_ne!(source.bucket.id(), target.bucket.id());
    let (mango_ddoc, mango_body, by_kind) = mango_index(
        json!({"index": {"fields": ["kind", "n"]}, "ddoc": "mango", "name": "by-kind"}),
        false,
    );
    let (lone_ddoc, lone_body, lone) = mango_index(
        json!({"index": {"fields": ["n"]}, "ddoc": "only-here", "name": "by-n"}),
        false,
    );
    let (first_ddoc, first_body, first) = mango_index(
        json!({"index": {"fields": ["note"]}, "ddoc": "target-only", "name": "by-note"}),
        false,
    );
    let moved = vbucket_without(
        &source.bucket,
        &[
            "_design/app",
            mango_ddoc.as_str(),
            lone_ddoc.as_str(),
            first_ddoc.as_str(),
        ],
    );
    let in_moved = |id: &str| source.bucket.vbucket_of(id.as_bytes()) == moved;

    // The source: the design in both collections, two JSON indexes, documents in both.
    put(&source.default, "_design/app", None, app_design()).await;
    put(&source.other, "_design/app", None, app_design()).await;
    put(&source.default, &mango_ddoc, None, mango_body.clone()).await;
    put(&source.default, &lone_ddoc, None, lone_body).await;
    let mut revs = BTreeMap::new();
    for i in 0..300 {
        let id = format!("d{i:03}");
        let body = match i % 3 {
            0 => json!({"note": "emits nothing"}),
            1 => json!({"n": i, "tags": ["a", "b", "a"], "kind": "one"}),
            _ => json!({"n": i, "tags": ["c"], "kind": "two"}),
        };
        revs.insert(id.clone(), put(&source.default, &id, None, body).await);
    }
    for i in 0..100 {
        let id = format!("c{i:03}");
        put(
            &source.other,
            &id,
            None,
            json!({"n": i, "tags": ["x", "y"]}),
        )
        .await;
    }
    let groups = [
        js_group(&source, &source.default, "_design/app").await,
        js_group(&source, &source.other, "_design/app").await,
        mango_group(&source, &by_kind).await,
        mango_group(&source, &lone).await,
    ];
    for group in &groups {
        index_now(group).await;
    }
    // After the index: a changed document and a new one, which the index has not seen.
    let (changed, changed_rev) = revs
        .iter()
        .find(|(id, _)| in_moved(id) && id[1..].parse::<u32>().expect("n") % 3 == 1)
        .expect("a document with tags in the vbucket");
    put(
        &source.default,
        changed,
        Some(changed_rev.clone()),
        json!({"n": 7777, "tags": ["late"], "kind": "late"}),
    )
    .await;
    let late = (0..)
        .map(|i| format!("late-{i}"))
        .find(|id| in_moved(id))
        .expect("an id of the vbucket");
    put(
        &source.default,
        &late,
        None,
        json!({"n": 1, "tags": ["late"]}),
    )
    .await;
    let nothing = revs
        .keys()
        .find(|id| in_moved(id) && id[1..].parse::<u32>().expect("n") % 3 == 0)
        .expect("a document emitting nothing in the vbucket");

    // The target: the same groups, made after another, so with other ids; not built.
    put(&target.default, &first_ddoc, None, first_body).await;
    mango_group(&target, &first).await;
    put(&target.default, "_design/app", None, app_design()).await;
    put(&target.other, "_design/app", None, app_design()).await;
    put(&target.default, &mango_ddoc, None, mango_body).await;
    let target_groups = [
        js_group(&target, &target.default, "_design/app").await,
        js_group(&target, &target.other, "_design/app").await,
        mango_group(&target, &by_kind).await,
    ];
    let collections = [0, source.other.collection(), 0];
    let mut targets = BTreeMap::new();
    for ((group, target_group), collection) in groups.iter().zip(&target_groups).zip(collections) {
        assert_eq!(group.signature(), target_group.signature());
        assert_ne!(group.id(), target_group.id(), "the group id is rewritten");
        targets.insert((collection, group.signature()), target_group.id());
    }
    assert_eq!(
        groups[0].signature(),
        groups[1].signature(),
        "one signature, two collections: two groups"
    );

    // What the vbucket's documents have in each source group's views.
    let expected: Vec<Vec<Vec<(Value, String, Value)>>> = groups[..3]
        .iter()
        .map(|group| {
            (0..group.view_names().len())
                .map(|view| rows(group, view, None, in_moved))
                .collect()
        })
        .collect();
    for (group, views) in expected.iter().enumerate() {
        for (view, rows) in views.iter().enumerate() {
            assert!(rows.len() > 10, "group {group} view {view}: {}", rows.len());
            assert!(rows.iter().all(|(_, id, _)| id != nothing && id != &late));
        }
    }
    // The changed document's rows are still those the index saw.
    let by_tag = groups[0]
        .view_names()
        .iter()
        .position(|name| name == "by_tag")
        .expect("by_tag");
    let changed_n = changed[1..].parse::<u32>().expect("n");
    assert!(expected[0][by_tag]
        .iter()
        .any(|(key, id, _)| id == changed && key == &json!(["a", changed_n])));

    let exports = tempfile::tempdir().expect("tempdir");
    let (in_memory, merged) = (exports.path().join("memory"), exports.path().join("merged"));
    std::fs::create_dir(&in_memory).expect("dir");
    std::fs::create_dir(&merged).expect("dir");
    let export = source
        .bucket
        .export_vbucket_files(
            moved,
            &in_memory,
            target.bucket.id(),
            Some(&ViewRowsExporter::new(targets.clone())),
        )
        .expect("export");
    let export_merged = source
        .bucket
        .export_vbucket_files(
            moved,
            &merged,
            target.bucket.id(),
            Some(&ViewRowsExporter::new(targets.clone()).with_chunk_bytes_max(256)),
        )
        .expect("export");

    // A bucket with collections keeps its counters in `cstats`: the snapshot's high seqno is
    // read from them too.
    assert_eq!(
        export.snapshot_seqno,
        source.bucket.high_seqnos().get(moved)
    );

    // The report: the groups in target order, each as the source's index stood.
    let mut order: Vec<usize> = (0..3).collect();
    order.sort_by_key(|&group| target_groups[group].id());
    assert_eq!(export.groups.len(), 3);
    for (exported, &group) in export.groups.iter().zip(&order) {
        assert_eq!(exported.collection, collections[group]);
        assert_eq!(exported.signature, groups[group].signature());
        assert_eq!(exported.source_group, groups[group].id());
        assert_eq!(exported.target_group, target_groups[group].id());
        assert_eq!(exported.views, groups[group].view_names());
        assert_eq!(
            exported.indexed_seqno,
            groups[group].update_seq().get(moved)
        );
        let counts: Vec<u64> = expected[group]
            .iter()
            .map(|rows| rows.len() as u64)
            .collect();
        assert_eq!(exported.rows, counts, "group {group}");
    }
    // The index stood below the snapshot: the late writes are the target's to index.
    let indexed: Vec<u64> = export
        .groups
        .iter()
        .map(|group| group.indexed_seqno)
        .collect();
    assert!(
        indexed
            .iter()
            .all(|seqno| *seqno > 0 && *seqno < export.snapshot_seqno),
        "{indexed:?} {}",
        export.snapshot_seqno
    );
    assert_eq!(export.skipped_groups.len(), 1);
    let skipped = &export.skipped_groups[0];
    assert_eq!(
        (skipped.signature, &skipped.name, &skipped.reason),
        (
            groups[3].signature(),
            &lone_ddoc,
            &SkipReason::NoTargetGroup
        )
    );
    assert_eq!(export_merged.groups, export.groups);
    assert_eq!(export_merged.skipped_groups, export.skipped_groups);

    // The file: under the target's ids, each group's back-index entries exactly the
    // vbucket's documents with rows, and as many rows as reported.
    let entries = entries_of(view_file(&export));
    assert_eq!(entries, entries_of(view_file(&export_merged)));
    assert!(file_names(&merged)
        .iter()
        .all(|name| name.ends_with(".sst")));
    for (exported, &group) in export.groups.iter().zip(&order) {
        let mut prefix = target.bucket.id().to_be_bytes().to_vec();
        prefix.extend_from_slice(&exported.target_group.to_be_bytes());
        let of_group: Vec<&(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .collect();
        let back_ids: BTreeSet<String> = of_group
            .iter()
            .filter(|(key, _)| key[8] == 0x02)
            .map(|(key, _)| String::from_utf8(key[9..].to_vec()).expect("id"))
            .collect();
        let with_rows: BTreeSet<String> = expected[group]
            .iter()
            .flatten()
            .map(|(_, id, _)| id.clone())
            .collect();
        assert_eq!(back_ids, with_rows, "group {group}");
        let row_count = of_group.iter().filter(|(key, _)| key[8] == 0x01).count();
        assert_eq!(row_count as u64, exported.rows.iter().sum::<u64>());
    }
    let groups_in_file: usize = export.groups.len();
    assert!(entries
        .iter()
        .all(|(key, _)| key.starts_with(&target.bucket.id().to_be_bytes())));
    assert_eq!(
        entries
            .iter()
            .map(|(key, _)| key[..8].to_vec())
            .collect::<BTreeSet<_>>()
            .len(),
        groups_in_file
    );

    // The target ingests the merged export: its groups hold the rows without indexing.
    target
        .bucket
        .ingest_vbucket_files(moved, &export_merged.files)
        .expect("ingest");
    for (group, target_group) in target_groups.iter().enumerate() {
        for (view, expected_rows) in expected[group].iter().enumerate() {
            assert_eq!(
                &rows(target_group, view, None, |_| true),
                expected_rows,
                "group {group} view {view}"
            );
        }
        assert!(target_group
            .update_seq()
            .seqnos()
            .iter()
            .all(|seqno| *seqno == 0));
        assert!(!target_group.is_updater_running());
    }
    // The documents came too; the changed one's rows are the old ones, the late one has none.
    assert!(target
        .default
        .read_winner(late.as_bytes())
        .expect("read")
        .is_some());
    let tags = rows(&target_groups[0], by_tag, None, |id| id == changed);
    assert!(!tags.is_empty() && tags.iter().all(|(key, _, _)| key[0] != "late"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_and_global_groups_of_a_partitioned_bucket_move_alike() {
    let source = node(false, true).await;
    let target = node(true, true).await;
    let design = |partitioned: bool| {
        json!({"options": {"partitioned": partitioned}, "views": {
            "by_n": {"map": "function (doc) { emit(doc.n, null); emit([doc.n], 1); }"}
        }})
    };
    let moved = vbucket_without(&source.bucket, &["_design/part", "_design/global"]);
    let in_moved = |id: &str| source.bucket.vbucket_of(id.as_bytes()) == moved;
    for node in [&source, &target] {
        put(&node.default, "_design/part", None, design(true)).await;
        put(&node.default, "_design/global", None, design(false)).await;
    }
    for i in 0..120 {
        put(
            &source.default,
            &format!("p{}:d{i:03}", i % 3),
            None,
            json!({"n": i}),
        )
        .await;
    }
    let groups = [
        js_group(&source, &source.default, "_design/part").await,
        js_group(&source, &source.default, "_design/global").await,
    ];
    assert!(groups[0].is_partitioned() && !groups[1].is_partitioned());
    for group in &groups {
        index_now(group).await;
    }
    let target_groups = [
        js_group(&target, &target.default, "_design/part").await,
        js_group(&target, &target.default, "_design/global").await,
    ];
    let targets = groups
        .iter()
        .zip(&target_groups)
        .map(|(group, target_group)| ((0, group.signature()), target_group.id()))
        .collect();
    let partitions = [Some("p0"), Some("p1"), Some("p2")];
    let expected = |group: &IndexGroup, partitions: &[Option<&str>]| {
        partitions
            .iter()
            .map(|partition| rows(group, 0, *partition, in_moved))
            .collect::<Vec<_>>()
    };
    let expected_part = expected(&groups[0], &partitions);
    let expected_global = expected(&groups[1], &[None]);
    let lengths: Vec<usize> = expected_part.iter().map(Vec::len).collect();
    assert!(lengths.iter().all(|rows| *rows > 0), "{lengths:?}");
    assert!(expected_global[0].len() > 12);

    let dir = tempfile::tempdir().expect("tempdir");
    let export = source
        .bucket
        .export_vbucket_files(
            moved,
            dir.path(),
            target.bucket.id(),
            Some(&ViewRowsExporter::new(targets)),
        )
        .expect("export");
    assert!(
        export.skipped_groups.is_empty(),
        "{:?}",
        export.skipped_groups
    );
    assert_eq!(export.groups.len(), 2);
    target
        .bucket
        .ingest_vbucket_files(moved, &export.files)
        .expect("ingest");
    assert_eq!(expected(&target_groups[0], &partitions), expected_part);
    assert_eq!(expected(&target_groups[1], &[None]), expected_global);
}

/// rebalance.md, section 3: the target checks and ingests the export its manifest describes,
/// writes the vbucket's metadata, then its groups adopt the vbucket (position and row counts);
/// its indexer then maps only what came after the source's index position, and ends with the
/// source's rows and counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_vbucket_counts_its_rows_and_is_indexed_only_past_them() {
    let source = node(false, false).await;
    let target = node(true, false).await;
    let moved = vbucket_without(&source.bucket, &["_design/app"]);
    let in_moved = |id: &str| source.bucket.vbucket_of(id.as_bytes()) == moved;
    put(&source.default, "_design/app", None, app_design()).await;
    let mut revs = BTreeMap::new();
    for i in 0..200 {
        let id = format!("d{i:03}");
        let body = json!({"n": i, "tags": ["a", "b"]});
        revs.insert(id.clone(), put(&source.default, &id, None, body).await);
    }
    let group = js_group(&source, &source.default, "_design/app").await;
    index_now(&group).await;
    // Past the index: one change and one new document of the vbucket.
    let (changed, rev) = revs.iter().find(|(id, _)| in_moved(id)).expect("a doc");
    let late_body = json!({"n": 9999, "tags": ["late"]});
    put(&source.default, changed, Some(rev.clone()), late_body).await;
    let late = (0..)
        .map(|i| format!("late-{i}"))
        .find(|id| in_moved(id))
        .expect("an id of the vbucket");
    put(&source.default, &late, None, json!({"n": 1, "tags": ["z"]})).await;

    put(&target.default, "_design/app", None, app_design()).await;
    let target_group = js_group(&target, &target.default, "_design/app").await;
    let targets = BTreeMap::from([((0, group.signature()), target_group.id())]);
    let dir = tempfile::tempdir().expect("tempdir");
    let export = source
        .bucket
        .export_vbucket_files(
            moved,
            dir.path(),
            target.bucket.id(),
            Some(&ViewRowsExporter::new(targets)),
        )
        .expect("export");
    export
        .manifest(5, 1)
        .expect("manifest")
        .write(dir.path())
        .expect("write");
    let manifest =
        MoveManifest::parse(&std::fs::read(dir.path().join(MANIFEST_FILE)).expect("read"))
            .expect("parse");
    let shipped = manifest.groups[0].clone();
    assert!(shipped.indexed_seqno < manifest.snapshot_seqno);

    target
        .bucket
        .set_vbucket_role(moved, VbRole::Dead)
        .await
        .expect("role");
    // MoveOpen empties the vbucket first: here it holds the collection's creation events.
    target.bucket.reset_replica(moved).await.expect("emptied");
    tokio::task::block_in_place(|| {
        target.bucket.ingest_export(dir.path(), &manifest)?;
        settee_views::export::adopt_vbucket(std::slice::from_ref(&target_group), &manifest)
            .map_err(|error| settee_engine::EngineError::Invalid(error.to_string()))
    })
    .map(|missing| assert!(missing.is_empty(), "{missing:?}"))
    .expect("ingest and adopt");
    assert_eq!(target_group.update_seq().get(moved), shipped.indexed_seqno);
    for (view, count) in shipped.rows.iter().enumerate() {
        assert_eq!(target_group.total_rows(view), *count, "view {view}");
        assert_eq!(
            rows(&target_group, view, None, |_| true).len() as u64,
            *count
        );
    }

    // Both indexes catch up: the target maps only the two late writes, and ends where the
    // source does.
    index_now(&group).await;
    index_now(&target_group).await;
    assert_eq!(
        target_group.update_seq().get(moved),
        manifest.snapshot_seqno
    );
    for view in 0..group.view_names().len() {
        let expected = rows(&group, view, None, in_moved);
        assert_eq!(rows(&target_group, view, None, |_| true), expected);
        assert_eq!(target_group.total_rows(view), expected.len() as u64);
    }
    assert!(
        rows(&target_group, 0, None, |id| id == late).len() == 1
            || rows(&target_group, 1, None, |id| id == late).len() == 1
    );
}
