//! Documents in collections: the same key in two collections is two documents, in every read
//! and write API; counts, change feeds and scans are per collection; a dropped collection is
//! gone for readers and writers at once, and a collection created again under its name is new
//! and empty; max TTLs cap expiries.

use std::sync::Arc;

use bytes::Bytes;
use settee_engine::clock::ManualClock;
use settee_engine::subdoc::{CreateMode, LookupOp, LookupSpec, MutateIn};
use settee_engine::{
    Bucket, DocKey, DocUpdate, Engine, EngineError, EngineOptions, KvMutation, KvOutcome,
    LocalOutcome, ScanRange, SeqVector, StoreMode, StreamEntry, UpdateOutcome,
};

const VBUCKETS: u16 = 4;
const NOW: u32 = 1_700_000_000;

fn set(value: &str, expiry: u32) -> KvMutation {
    KvMutation::Store {
        mode: StoreMode::Set,
        value: Bytes::copy_from_slice(value.as_bytes()),
        json: true,
        item_flags: 0,
        expiry,
        cas: 0,
    }
}

fn create(key: &str, body: &str) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::copy_from_slice(body.as_bytes()),
        attachments: Vec::new(),
    }
}

/// [`setup`] and a collection `_default.c`; returns its id.
async fn setup_with_collection(dir: &std::path::Path) -> (Engine, u32) {
    let (engine, _) = setup(dir).await;
    let bucket = engine.bucket("db").expect("bucket");
    let c = bucket
        .create_collection("_default", "c", None)
        .await
        .expect("c")
        .collection_id("_default.c")
        .expect("id");
    (engine, c)
}

async fn setup(dir: &std::path::Path) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(NOW));
    let options = EngineOptions {
        clock: clock.clone(),
        ..EngineOptions::default()
    };
    let engine = Engine::open(dir, options).expect("open");
    if engine.bucket("db").is_none() {
        engine.create_bucket("db", VBUCKETS).await.expect("create");
    }
    (engine, clock)
}

fn body(bucket: &Bucket, key: DocKey<'_>) -> Option<String> {
    bucket
        .kv_get(key)
        .expect("get")
        .map(|value| String::from_utf8(value.body.to_vec()).expect("utf8"))
}

fn keys_of(bucket: &Bucket, collection: u32) -> Vec<String> {
    bucket
        .scan_docs(ScanRange {
            collection,
            ..ScanRange::default()
        })
        .map(|item| String::from_utf8(item.expect("scan").0).expect("utf8"))
        .collect()
}

fn changed_keys(bucket: &Bucket, collection: u32) -> Vec<String> {
    let mut keys: Vec<String> = bucket
        .changes_in(collection, SeqVector::zero(VBUCKETS))
        .expect("cursor")
        .map(|entry| {
            let entry = entry.expect("entry");
            assert_eq!(entry.collection, collection);
            String::from_utf8(entry.key).expect("utf8")
        })
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_in_two_collections_is_two_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    let manifest = bucket
        .create_collection("_default", "c1", None)
        .await
        .expect("c1");
    let c1 = manifest.collection_id("_default.c1").expect("id");
    assert_eq!(c1, 8);
    bucket
        .kv_mutate(b"k", set("\"zero\"", 0), &settee_engine::Writer::system())
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(c1, b"k"),
            set("\"one\"", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .update_doc_in(
            c1,
            create("only-in-c1", "{\"a\":1}"),
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("update");
    assert_eq!(
        body(&bucket, DocKey::new(0, b"k")).as_deref(),
        Some("\"zero\"")
    );
    assert_eq!(
        body(&bucket, DocKey::new(c1, b"k")).as_deref(),
        Some("\"one\"")
    );
    assert_eq!(bucket.read_record(b"only-in-c1").expect("read"), None);
    assert!(bucket
        .read_record(DocKey::new(c1, b"only-in-c1"))
        .expect("read")
        .is_some());
    let read = bucket
        .kv_read(DocKey::new(c1, b"k"), |value| value.body.to_vec())
        .expect("read");
    assert_eq!(read.as_deref(), Some(b"\"one\"".as_slice()));
    // Sub-document lookups and mutations address the collection too.
    let specs = [LookupSpec {
        op: LookupOp::Get,
        xattr: false,
        path: b"a",
    }];
    let mut found = Vec::new();
    bucket
        .lookup_in(
            DocKey::new(c1, b"only-in-c1"),
            &specs,
            false,
            |_, _, value| found.push(value.to_vec()),
        )
        .expect("lookup")
        .expect("document");
    assert_eq!(found, vec![b"1".to_vec()]);
    let mutation = MutateIn {
        specs: vec![settee_engine::subdoc::MutateSpec {
            op: settee_engine::subdoc::MutateOp::DictUpsert,
            xattr: false,
            mkdir_p: false,
            expand_macros: false,
            path: Bytes::from_static(b"b"),
            value: Bytes::from_static(b"2"),
        }],
        cas: 0,
        expiry: None,
        create: CreateMode::Upsert,
        access_deleted: false,
    };
    bucket
        .mutate_in(
            DocKey::new(c1, b"made-by-subdoc"),
            mutation,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("mutate");
    assert!(bucket
        .read_record(b"made-by-subdoc")
        .expect("read")
        .is_none());
    // Counts, scans and feeds are per collection; the bucket's counts hold both.
    assert_eq!(bucket.doc_counts_in(0).expect("counts"), (1, 0));
    assert_eq!(bucket.doc_counts_in(c1).expect("counts"), (3, 0));
    assert_eq!(bucket.doc_counts(), (4, 0));
    assert_eq!(keys_of(&bucket, 0), vec!["k"]);
    assert_eq!(
        keys_of(&bucket, c1),
        vec!["k", "made-by-subdoc", "only-in-c1"]
    );
    assert_eq!(changed_keys(&bucket, 0), vec!["k"]);
    assert_eq!(
        changed_keys(&bucket, c1),
        vec!["k", "made-by-subdoc", "only-in-c1"]
    );
    let plain: Vec<Vec<u8>> = bucket
        .changes(SeqVector::zero(VBUCKETS))
        .map(|entry| entry.expect("entry").key)
        .collect();
    assert_eq!(plain, vec![b"k".to_vec()]);
    let descending: Vec<Vec<u8>> = bucket
        .changes_descending_in(c1, SeqVector::zero(VBUCKETS))
        .expect("cursor")
        .map(|entry| entry.expect("entry").key)
        .collect();
    assert_eq!(descending.len(), 3);
    // The vbucket-wide stream has every collection's entries and the event.
    let mut documents = 0;
    let mut events = 0;
    for vbucket in 0..VBUCKETS {
        for entry in bucket.vbucket_stream(vbucket, 0, 1000).expect("stream") {
            match entry {
                StreamEntry::Change(_) => documents += 1,
                StreamEntry::Event(_) => events += 1,
                StreamEntry::Purge(marker) => panic!("nothing was purged: {marker:?}"),
            }
        }
    }
    assert_eq!((documents, events), (4, VBUCKETS as usize));
    // A collection's update_seq is, per vbucket, its highest entry or event.
    let highs = bucket.high_seqnos_in(c1).expect("high");
    for vbucket in 0..VBUCKETS {
        let highest = bucket
            .vbucket_stream(vbucket, 0, 1000)
            .expect("stream")
            .iter()
            .filter(|entry| match entry {
                StreamEntry::Change(change) => change.collection == c1,
                StreamEntry::Event(event) => event.collection_id == c1,
                StreamEntry::Purge(marker) => marker.collection == c1,
            })
            .map(StreamEntry::seqno)
            .max();
        assert_eq!(Some(highs.get(vbucket)), highest, "vbucket {vbucket}");
    }
    // Counters survive a restart (collection stats are persisted once collections exist; the
    // vbucket's own ride in the last-written collection record of each vbucket).
    let vbucket_states: Vec<_> = (0..VBUCKETS).map(|vb| bucket.vb_state(vb)).collect();
    drop(bucket);
    drop(engine);
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.doc_counts_in(0).expect("counts"), (1, 0));
    assert_eq!(bucket.doc_counts_in(c1).expect("counts"), (3, 0));
    assert_eq!(bucket.doc_counts(), (4, 0));
    let reopened: Vec<_> = (0..VBUCKETS).map(|vb| bucket.vb_state(vb)).collect();
    assert_eq!(reopened, vbucket_states);
    assert_eq!(
        body(&bucket, DocKey::new(c1, b"k")).as_deref(),
        Some("\"one\"")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_documents_attachments_and_purges_belong_to_a_collection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    let c1 = bucket
        .create_collection("_default", "c1", None)
        .await
        .expect("c1")
        .collection_id("_default.c1")
        .expect("id");
    let saved = bucket
        .put_local(
            DocKey::new(c1, b"checkpoint"),
            None,
            Some(Bytes::from_static(b"{}")),
        )
        .await
        .expect("local");
    assert_eq!(saved, LocalOutcome::Saved { generation: 1 });
    assert_eq!(bucket.get_local(b"checkpoint").expect("local"), None);
    assert!(bucket
        .get_local(DocKey::new(c1, b"checkpoint"))
        .expect("local")
        .is_some());
    let mut with_attachment = create("a", "{}");
    with_attachment.attachments = vec![settee_engine::AttachmentInput::Data {
        name: "f".into(),
        content_type: "text/plain".into(),
        data: Bytes::from_static(b"hello"),
        encoding: Default::default(),
        revpos: None,
    }];
    let UpdateOutcome::Saved { rev, .. } = bucket
        .update_doc_in(c1, with_attachment, true, &settee_engine::Writer::system())
        .await
        .expect("save")
    else {
        panic!("not saved");
    };
    let md5 = settee_engine::md5_of(b"hello");
    assert_eq!(bucket.get_attachment(b"a", &md5).expect("att"), None);
    assert_eq!(
        bucket
            .get_attachment(DocKey::new(c1, b"a"), &md5)
            .expect("att")
            .as_deref(),
        Some(b"hello".as_slice())
    );
    // Compaction keeps referenced bodies of every live collection.
    bucket.compact().await.expect("compact");
    assert!(bucket
        .get_attachment(DocKey::new(c1, b"a"), &md5)
        .expect("att")
        .is_some());
    let purged = bucket
        .purge(DocKey::new(c1, b"a"), std::slice::from_ref(&rev))
        .await
        .expect("purge");
    assert_eq!(purged, vec![rev]);
    assert_eq!(bucket.purge_seq_in(c1).expect("purge seq"), 1);
    assert_eq!(bucket.purge_seq(), 0);
    assert_eq!(
        bucket.read_record(DocKey::new(c1, b"a")).expect("read"),
        None
    );
    assert_eq!(
        bucket
            .get_attachment(DocKey::new(c1, b"a"), &md5)
            .expect("att"),
        None
    );
    drop(bucket);
    drop(engine);
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.purge_seq_in(c1).expect("purge seq"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_collection_is_gone_at_once_and_its_name_comes_back_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    bucket.create_scope("s").await.expect("scope");
    let c = bucket
        .create_collection("s", "c", None)
        .await
        .expect("c")
        .collection_id("s.c")
        .expect("id");
    for index in 0..10 {
        bucket
            .kv_mutate(
                DocKey::new(c, format!("k{index}").as_bytes()),
                set("1", 0),
                &settee_engine::Writer::system(),
            )
            .await
            .expect("set");
    }
    bucket
        .kv_mutate(b"k0", set("0", 0), &settee_engine::Writer::system())
        .await
        .expect("set");
    assert_eq!(bucket.doc_counts(), (11, 0));
    let manifest = bucket.drop_collection("s", "c").await.expect("drop");
    let uid = manifest.uid();
    // Counts are right at once; every door of the collection answers UnknownCollection.
    assert_eq!(bucket.doc_counts(), (1, 0));
    let unknown = |result: Result<(), EngineError>| {
        assert!(
            matches!(result, Err(EngineError::UnknownCollection { manifest_uid }) if manifest_uid == uid),
            "{result:?}"
        )
    };
    let key = DocKey::new(c, b"k1");
    unknown(bucket.read_record(key).map(drop));
    unknown(bucket.kv_get(key).map(drop));
    unknown(bucket.kv_read(key, |_| ()).map(drop));
    unknown(
        bucket
            .kv_mutate(key, set("2", 0), &settee_engine::Writer::system())
            .await
            .map(drop),
    );
    unknown(
        bucket
            .update_doc_in(
                c,
                create("k1", "{}"),
                true,
                &settee_engine::Writer::system(),
            )
            .await
            .map(drop),
    );
    unknown(
        bucket
            .put_local(key, None, Some(Bytes::from_static(b"{}")))
            .await
            .map(drop),
    );
    unknown(bucket.get_local(key).map(drop));
    unknown(bucket.doc_counts_in(c).map(drop));
    unknown(bucket.changes_in(c, SeqVector::zero(VBUCKETS)).map(drop));
    unknown(
        bucket
            .scan_docs(ScanRange {
                collection: c,
                ..ScanRange::default()
            })
            .next()
            .expect("one item")
            .map(drop),
    );
    // A collection id that never existed is unknown too.
    unknown(bucket.read_record(DocKey::new(77, b"k")).map(drop));
    // The vbucket-wide stream passes over the dropped collection's entries.
    let documents: usize = (0..VBUCKETS)
        .map(|vbucket| {
            bucket
                .vbucket_stream(vbucket, 0, 1000)
                .expect("stream")
                .iter()
                .filter(|entry| matches!(entry, StreamEntry::Change(_)))
                .count()
        })
        .sum();
    assert_eq!(documents, 1);
    // Created again under its name: a new id, and empty.
    let again = bucket
        .create_collection("s", "c", None)
        .await
        .expect("again")
        .collection_id("s.c")
        .expect("id");
    assert_ne!(again, c);
    assert_eq!(bucket.doc_counts_in(again).expect("counts"), (0, 0));
    assert_eq!(body(&bucket, DocKey::new(again, b"k1")), None);
    assert!(keys_of(&bucket, again).is_empty());
    assert!(changed_keys(&bucket, again).is_empty());
    // Compaction passes over the dropped collection's leftovers.
    bucket.compact().await.expect("compact");
    assert_eq!(bucket.doc_counts(), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_ttls_cap_expiries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, clock) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    let now = NOW;
    let capped = bucket
        .create_collection("_default", "capped", Some(100))
        .await
        .expect("capped")
        .collection_id("_default.capped")
        .expect("id");
    let unlimited = bucket
        .create_collection("_default", "unlimited", Some(0))
        .await
        .expect("unlimited")
        .collection_id("_default.unlimited")
        .expect("id");
    let inherit = bucket
        .create_collection("_default", "inherit", None)
        .await
        .expect("inherit")
        .collection_id("_default.inherit")
        .expect("id");
    let expiry = |cid: u32, key: &[u8]| {
        bucket
            .kv_meta(DocKey::new(cid, key))
            .expect("meta")
            .expect("present")
            .expiry
    };
    bucket
        .kv_mutate(
            DocKey::new(capped, b"none"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(capped, b"later"),
            set("1", now + 1000),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(capped, b"sooner"),
            set("1", now + 10),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .update_doc_in(
            capped,
            create("couch", "{}"),
            true,
            &settee_engine::Writer::system(),
        )
        .await
        .expect("update");
    assert_eq!(expiry(capped, b"none"), now + 100);
    assert_eq!(expiry(capped, b"later"), now + 100);
    assert_eq!(expiry(capped, b"sooner"), now + 10);
    assert_eq!(expiry(capped, b"couch"), now + 100);
    // The bucket's max TTL applies to collection 0 and to collections without their own.
    bucket.set_max_ttl(50).await.expect("bucket max ttl");
    assert_eq!(bucket.max_ttl(), 50);
    bucket
        .kv_mutate(b"zero", set("1", 0), &settee_engine::Writer::system())
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(inherit, b"k"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(unlimited, b"k"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    bucket
        .kv_mutate(
            DocKey::new(capped, b"k"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    assert_eq!(expiry(0, b"zero"), now + 50);
    assert_eq!(expiry(inherit, b"k"), now + 50);
    assert_eq!(expiry(unlimited, b"k"), 0);
    assert_eq!(expiry(capped, b"k"), now + 100);
    // A changed max TTL applies from the change on, and survives a restart.
    bucket
        .set_collection_max_ttl("_default", "unlimited", Some(5))
        .await
        .expect("modify");
    bucket
        .kv_mutate(
            DocKey::new(unlimited, b"k2"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    assert_eq!(expiry(unlimited, b"k2"), now + 5);
    // Expired documents of a collection are purged like collection 0's.
    clock.advance_secs(60);
    let expired = bucket.purge_expired().await.expect("purge");
    // zero, inherit/k, unlimited/k2 and capped/sooner.
    assert_eq!(expired, 4);
    drop(bucket);
    drop(engine);
    let (engine, _) = setup(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    assert_eq!(bucket.max_ttl(), 50);
    assert_eq!(
        bucket
            .manifest()
            .collection(unlimited)
            .map(|(_, collection)| collection.max_ttl),
        Some(Some(5))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_in_collections_are_held_to_246_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, c) = setup_with_collection(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    let long = vec![b'x'; 247];
    assert!(matches!(
        bucket
            .kv_mutate(
                DocKey::new(c, &long),
                set("1", 0),
                &settee_engine::Writer::system()
            )
            .await,
        Err(EngineError::Invalid(_))
    ));
    let fits = vec![b'x'; 246];
    assert!(matches!(
        bucket
            .kv_mutate(
                DocKey::new(c, &fits),
                set("1", 0),
                &settee_engine::Writer::system()
            )
            .await,
        Ok(KvOutcome::Stored { .. })
    ));
    let default_long = vec![b'x'; 250];
    assert!(matches!(
        bucket
            .kv_mutate(
                default_long.as_slice(),
                set("1", 0),
                &settee_engine::Writer::system()
            )
            .await,
        Ok(KvOutcome::Stored { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_abbreviates_entries_of_collections_and_feeds_still_name_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, c) = setup_with_collection(dir.path()).await;
    let bucket = engine.bucket("db").expect("bucket");
    // The same ids in both collections: each collection's prefixes are planned in its own
    // sub-range and resolved there.
    let mut state = 0x853c_49e6_748f_ea9bu64;
    let ids: Vec<String> = (0..300)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            format!("{state:016x}{:016x}", state.rotate_left(29))
        })
        .collect();
    for collection in [0, c] {
        let updates = ids.iter().map(|id| create(id, "{}")).collect();
        bucket
            .update_docs_in(collection, updates, true, &settee_engine::Writer::system())
            .await
            .expect("save");
    }
    bucket
        .kv_mutate(
            DocKey::new(c, b"extra"),
            set("1", 0),
            &settee_engine::Writer::system(),
        )
        .await
        .expect("set");
    let report = bucket.compact().await.expect("compact");
    assert!(report.change_entries_abbreviated >= 600, "{report:?}");
    let mut want = ids.clone();
    want.sort();
    assert_eq!(changed_keys(&bucket, 0), want);
    want.push("extra".into());
    want.sort();
    assert_eq!(changed_keys(&bucket, c), want);
    let descending: Vec<_> = bucket
        .changes_descending_in(c, SeqVector::zero(VBUCKETS))
        .expect("cursor")
        .map(|entry| entry.expect("entry").key)
        .collect();
    assert_eq!(descending.len(), 301);
    assert!(descending.iter().all(|key| key.len() >= 5), "ids resolved");
    let streamed: usize = (0..VBUCKETS)
        .map(|vbucket| {
            bucket
                .vbucket_stream(vbucket, 0, 10_000)
                .expect("stream")
                .iter()
                .filter(
                    |entry| matches!(entry, StreamEntry::Change(change) if change.key.len() >= 5),
                )
                .count()
        })
        .sum();
    assert_eq!(streamed, 601);
}
