//! A storage directory written by settee 30733d8 (0.1.0, format version 1;
//! `scripts/make-testdata-30733d8.sh`, `testdata/datadir-30733d8/`) opened by today's engine:
//! every document, attachment, `_local` document, the `_all_docs` order and the change feed read
//! as 30733d8 answered them (`expected/*.json`), the bucket has the default manifest, and —
//! compared byte for byte, column family by column family — neither opening it nor creating,
//! writing, dropping and purging a collection rewrites any key that was there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use settee_engine::clock::ManualClock;
use settee_engine::{
    Bucket, DocKey, Engine, EngineOptions, KvMutation, Manifest, ScanRange, SeqVector, StoreMode,
    VbRole,
};
use settee_storage::{Cf, Store, StoreOptions};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/datadir-30733d8");
const VBUCKETS: u16 = 4;
/// 2100-01-01, the expiry `expiring` was written with.
const EXPIRY: u32 = 4_102_444_800;

type Dump = BTreeMap<&'static str, BTreeMap<Vec<u8>, Vec<u8>>>;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A fresh copy of the old storage directory.
fn copy_of_old_data(dir: &Path) -> PathBuf {
    let db = dir.join("db");
    copy_dir(&Path::new(TESTDATA).join("db"), &db);
    db
}

fn expected(name: &str) -> Value {
    let path = Path::new(TESTDATA).join("expected").join(name);
    serde_json::from_slice(&std::fs::read(&path).expect("expected file")).expect("json")
}

fn dump_store(store: &Store) -> Dump {
    Cf::ALL
        .iter()
        .map(|cf| {
            let rows = store
                .scan(*cf, b"", &[0xff; 16], false)
                .map(|item| {
                    let (key, value) = item.expect("scan");
                    (key.to_vec(), value.to_vec())
                })
                .collect();
            (cf.name(), rows)
        })
        .collect()
}

/// What the directory holds, read by the storage layer alone (no engine on top).
fn dump_raw(db: &Path) -> Dump {
    let store = Store::open(db, &StoreOptions::default()).expect("open store");
    dump_store(&store)
}

fn open(db: &Path) -> Engine {
    Engine::open(db, EngineOptions::default()).expect("open engine")
}

/// The JSON object a stored body holds, and a recorded document without its `_` members.
fn body_json(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("body json")
}

fn without_underscores(doc: &Value) -> Value {
    let object = doc.as_object().expect("object");
    Value::Object(
        object
            .iter()
            .filter(|(name, _)| !name.starts_with('_'))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
    )
}

/// Every document, deleted and `_local` ones included, reads as 30733d8 answered it.
fn check_documents(bucket: &Bucket) {
    let documents = expected("documents.json");
    for (id, doc) in documents.as_object().expect("documents") {
        if let Some(local) = id.strip_prefix("_local/") {
            let (generation, body) = bucket
                .get_local(local.as_bytes())
                .expect("local")
                .unwrap_or_else(|| panic!("{id} missing"));
            assert_eq!(
                format!("0-{generation}"),
                doc["_rev"].as_str().expect("rev")
            );
            assert_eq!(body_json(&body), without_underscores(doc), "{id}");
            continue;
        }
        let record = bucket
            .read_record(id.as_bytes())
            .expect("read")
            .unwrap_or_else(|| panic!("{id} missing"));
        let winner = record.winner().expect("winner");
        assert_eq!(
            winner.rev.to_string(),
            doc["_rev"].as_str().expect("rev"),
            "{id}"
        );
        assert_eq!(winner.deleted, doc["_deleted"] == json!(true), "{id}");
        if !winner.deleted {
            assert_eq!(body_json(&winner.body), without_underscores(doc), "{id}");
        }
        let history: Vec<String> = record
            .tree
            .path(&winner.rev)
            .expect("path")
            .iter()
            .map(|rev| rev.hash.clone())
            .collect();
        assert_eq!(json!(history), doc["_revisions"]["ids"], "{id}");
        let mut conflicts: Vec<String> = record
            .leaves
            .iter()
            .filter(|leaf| leaf.rev != winner.rev && !leaf.deleted)
            .map(|leaf| leaf.rev.to_string())
            .collect();
        conflicts.sort();
        let recorded = doc.get("_conflicts").cloned().unwrap_or_else(|| json!([]));
        assert_eq!(json!(conflicts), recorded, "{id}");
        let attachments = doc.get("_attachments").and_then(Value::as_object);
        assert_eq!(
            winner.attachments.len(),
            attachments.map_or(0, |attachments| attachments.len()),
            "{id}"
        );
        for meta in &winner.attachments {
            let recorded = &attachments.expect("attachments")[&meta.name];
            let digest = base64::engine::general_purpose::STANDARD.encode(meta.md5);
            assert_eq!(recorded["digest"], json!(format!("md5-{digest}")));
            assert_eq!(recorded["content_type"], json!(meta.content_type));
            assert_eq!(recorded["revpos"], json!(meta.revpos));
            let data = base64::engine::general_purpose::STANDARD
                .decode(recorded["data"].as_str().expect("data"))
                .expect("base64");
            let stored = bucket
                .get_attachment(id.as_bytes(), &meta.md5)
                .expect("attachment")
                .expect("body");
            assert_eq!(stored.as_ref(), data.as_slice(), "{id}/{}", meta.name);
        }
    }
    let value = bucket.kv_get(b"expiring").expect("kv").expect("live");
    assert_eq!(value.expiry, EXPIRY);
    assert_eq!(value.item_flags, 0x0200_0000);
    assert_eq!(value.body.as_ref(), br#"{"n":500}"#);
}

/// `_all_docs` (live documents in id order) and the change feed (order, revisions, deletions,
/// the resume point after every row) read as 30733d8 answered them.
fn check_feeds(bucket: &Bucket) {
    let live: Vec<(String, String)> = bucket
        .scan_docs(ScanRange::default())
        .map(|item| item.expect("scan"))
        .filter(|(_, record)| !record.is_deleted())
        .map(|(key, record)| {
            let rev = record.winner().expect("winner").rev.to_string();
            (String::from_utf8(key).expect("utf8"), rev)
        })
        .collect();
    let all_docs: Vec<(String, String)> = expected("all_docs.json")["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            (
                row["id"].as_str().expect("id").to_string(),
                row["value"]["rev"].as_str().expect("rev").to_string(),
            )
        })
        .collect();
    assert_eq!(live, all_docs);
    let recorded = expected("changes.json");
    let mut cursor = bucket.changes(SeqVector::zero(VBUCKETS));
    let mut rows = Vec::new();
    while let Some(entry) = cursor.next() {
        let entry = entry.expect("change");
        rows.push(json!({
            "id": String::from_utf8(entry.key).expect("utf8"),
            "rev": entry.rev.to_string(),
            "deleted": entry.deleted,
            "seq": cursor.position().encode(),
        }));
    }
    let want: Vec<Value> = recorded["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|row| {
            json!({
                "id": row["id"],
                "rev": row["changes"][0]["rev"],
                "deleted": row.get("deleted") == Some(&json!(true)),
                "seq": row["seq"],
            })
        })
        .collect();
    assert_eq!(rows, want);
    assert_eq!(json!(cursor.end_position().encode()), recorded["last_seq"]);
    let info = expected("db_info.json");
    // Collection 0's update_seq (the bucket's, until the first manifest change).
    assert_eq!(
        json!(bucket.high_seqnos_in(0).expect("high").encode()),
        info["update_seq"]
    );
    assert_eq!(
        bucket.doc_counts_in(0).expect("counts"),
        (
            info["doc_count"].as_u64().expect("count"),
            info["doc_del_count"].as_u64().expect("deleted")
        )
    );
    assert_eq!(json!(bucket.purge_seq().to_string()), info["purge_seq"]);
}

/// Every key of `before` is in `after` with the same bytes, except the `meta` keys `changed`
/// says may change.
fn assert_kept(before: &Dump, after: &Dump, changed: impl Fn(&[u8]) -> bool, context: &str) {
    for (cf, rows) in before {
        for (key, value) in rows {
            if *cf == "meta" && changed(key) {
                continue;
            }
            assert_eq!(
                after[cf].get(key),
                Some(value),
                "{context}: {cf} key {key:?} was rewritten or removed"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_data_directory_reads_as_written_and_is_never_rewritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = copy_of_old_data(dir.path());
    let original = dump_raw(&db);
    assert!(!original["doc"].is_empty() && !original["view"].is_empty());
    assert!(
        original["doc"].keys().all(|key| key[4] & 0x80 == 0),
        "format version 1 has only short keys"
    );

    // Opening changes nothing on disk.
    let engine = open(&db);
    assert_eq!(
        dump_store(engine.store()),
        original,
        "opening rewrote something"
    );
    let bucket = engine.bucket("db").expect("bucket");
    // Written before vbucket roles existed: every vbucket is active (replica.md).
    for vbucket in 0..VBUCKETS {
        assert_eq!(bucket.vbucket_role(vbucket), VbRole::Active);
    }
    assert_eq!(*bucket.manifest(), Manifest::default());
    assert_eq!(
        bucket.manifest().to_kv_json(),
        r#"{"uid":"0","scopes":[{"name":"_default","uid":"0","collections":[{"name":"_default","uid":"0"}]}]}"#
    );
    check_documents(&bucket);
    check_feeds(&bucket);
    assert_eq!(
        dump_store(engine.store()),
        original,
        "reading rewrote something"
    );

    // A collection created, written (the old ids again, a _local document), dropped, purged.
    let manifest = bucket.create_scope("inventory").await.expect("scope");
    assert_eq!(manifest.uid(), 1);
    let cid = bucket
        .create_collection("inventory", "items", None)
        .await
        .expect("collection")
        .collection_id("inventory.items")
        .expect("id");
    for id in ["plain00", "withatt", "conflicted", "new"] {
        bucket
            .kv_mutate(
                DocKey::new(cid, id.as_bytes()),
                KvMutation::Store {
                    mode: StoreMode::Set,
                    value: Bytes::from_static(b"{\"in\":\"items\"}"),
                    json: true,
                    item_flags: 0,
                    expiry: EXPIRY,
                    cas: 0,
                },
                &settee_engine::Writer::system(),
            )
            .await
            .expect("write in the collection");
    }
    bucket
        .put_local(
            DocKey::new(cid, b"ckpt"),
            None,
            Some(Bytes::from_static(b"{}")),
        )
        .await
        .expect("local");
    assert_eq!(bucket.doc_counts_in(cid).expect("counts"), (4, 0));
    check_documents(&bucket);
    check_feeds(&bucket);
    let with_collection = dump_store(engine.store());
    // Only meta's vbucket counters change (their high seqnos move past the events).
    let vbstats = |key: &[u8]| key.starts_with(b"bucket/vbstats/");
    assert_kept(
        &original,
        &with_collection,
        vbstats,
        "after writing a collection",
    );
    bucket
        .drop_collection("inventory", "items")
        .await
        .expect("drop");
    bucket.purge_dropped_collections().await.expect("purge");
    let purged = dump_store(engine.store());
    assert_kept(&original, &purged, vbstats, "after dropping and purging it");
    for cf in ["doc", "local", "att", "exp"] {
        assert_eq!(
            purged[cf].keys().collect::<Vec<_>>(),
            original[cf].keys().collect::<Vec<_>>(),
            "{cf}: only the old keys are left"
        );
    }
    // The vbucket counters still count exactly the old documents.
    for (key, value) in &original["meta"] {
        if vbstats(key) {
            assert_eq!(purged["meta"][key][8..], value[8..], "counts in {key:?}");
        }
    }
    check_documents(&bucket);
    check_feeds(&bucket);
    drop(bucket);
    drop(engine);

    // Reopened: the same, and the manifest remembers the scope.
    let engine = open(&db);
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.manifest().uid(), 3);
    check_documents(&bucket);
    check_feeds(&bucket);
    // Compaction rewrites old entries as abbreviated ones: they still read the same.
    bucket.compact().await.expect("compact");
    check_documents(&bucket);
    check_feeds(&bucket);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_expiry_entries_are_found_by_the_expiry_purger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = copy_of_old_data(dir.path());
    let clock = Arc::new(ManualClock::new(EXPIRY + 1));
    let options = EngineOptions {
        clock,
        ..EngineOptions::default()
    };
    let engine = Engine::open(&db, options).expect("open");
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.kv_get(b"expiring").expect("kv"), None, "expired");
    assert_eq!(bucket.purge_expired().await.expect("purge"), 1);
    let record = bucket
        .read_record(b"expiring")
        .expect("read")
        .expect("tombstone");
    assert!(record.is_deleted());
}
