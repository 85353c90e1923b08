//! A vbucket's export with its manifest (docs/format/rebalance.md, sections 1 and 3): the
//! manifest names each file (size, crc32c, first and last key) and carries the vbucket's
//! counters, its collections' shares and its failover log as the snapshot had them; the target
//! refuses a manifest not made for it, a damaged file and a vbucket that is not empty, ingesting
//! nothing; accepted, the vbucket holds the source's documents and counters, its failover log,
//! and is `pending` at the snapshot's seqno (the replica stream resumes there).

use bytes::Bytes;
use settee_engine::export::{MoveManifest, MANIFEST_FILE};
use settee_engine::{DocUpdate, Engine, EngineOptions, VbRole};

const VBUCKETS: u16 = 4;
const MOVED: u16 = 1;

fn update(key: &str, n: usize) -> DocUpdate {
    DocUpdate {
        key: key.as_bytes().to_vec(),
        parent: None,
        history: Vec::new(),
        deleted: false,
        body: Bytes::from(format!("{{\"n\":{n}}}")),
        attachments: Vec::new(),
    }
}

/// `Bucket::ingest_export` blocks: off the runtime's own threads.
fn ingest(
    bucket: &settee_engine::Bucket,
    dir: &std::path::Path,
    manifest: &MoveManifest,
) -> Result<(), settee_engine::EngineError> {
    tokio::task::block_in_place(|| bucket.ingest_export(dir, manifest))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifest_carries_the_vbucket_and_the_target_checks_it() {
    let dirs = [(); 3].map(|_| tempfile::tempdir().expect("tempdir"));
    let source_engine = Engine::open(dirs[0].path(), EngineOptions::default()).expect("open");
    source_engine
        .create_bucket("db", VBUCKETS)
        .await
        .expect("create");
    let source = source_engine.bucket("db").expect("bucket");
    let target_engine = Engine::open(dirs[1].path(), EngineOptions::default()).expect("open");
    target_engine
        .create_bucket("other", 2)
        .await
        .expect("create");
    target_engine
        .create_bucket("db", VBUCKETS)
        .await
        .expect("create");
    let target = target_engine.bucket("db").expect("bucket");

    let keys: Vec<String> = (0..200).map(|index| format!("doc-{index:03}")).collect();
    for (index, key) in keys.iter().enumerate() {
        source
            .update_doc(update(key, index), true)
            .await
            .expect("save");
    }
    // A history with two branches: the failover log the target must take over.
    source.new_failover_entry(MOVED).await.expect("branch");
    source
        .update_doc(update("late-doc", 1), true)
        .await
        .expect("save");
    let moved: Vec<&String> = keys
        .iter()
        .filter(|key| source.vbucket_of(key.as_bytes()) == MOVED)
        .collect();

    let export = source
        .export_vbucket_files(MOVED, dirs[2].path(), target.id(), None)
        .expect("export");
    let manifest = export.manifest(17, 2).expect("manifest");
    manifest.write(dirs[2].path()).expect("write");
    let read =
        MoveManifest::parse(&std::fs::read(dirs[2].path().join(MANIFEST_FILE)).expect("read"))
            .expect("parse");
    assert_eq!(read, manifest);
    assert_eq!((read.move_id, read.attempt), (17, 2));
    assert_eq!(read.snapshot_seqno, source.high_seqnos().get(MOVED));
    assert_eq!(read.vbstats.high_seqno, read.snapshot_seqno);
    let log = source.failover_log(MOVED).expect("log").expect("vbucket");
    assert_eq!(log.len(), 2);
    assert_eq!(
        read.failover_log,
        log.iter().map(|e| (e.uuid, e.seqno)).collect::<Vec<_>>()
    );
    assert_eq!(read.vbstats.live, source.vb_state(MOVED).live);
    let names: Vec<&str> = read.files.iter().map(|file| file.name.as_str()).collect();
    assert!(
        names.contains(&"doc.sst") && names.contains(&"seq.sst"),
        "{names:?}"
    );

    // Not for this bucket: another bucket id, another vbucket count, another format.
    let other = target_engine.bucket("other").expect("bucket");
    let mut elsewhere = read.clone();
    elsewhere.target_bucket_id = other.id();
    assert!(ingest(&target, dirs[2].path(), &elsewhere).is_err());
    let mut json: serde_json::Value = serde_json::to_value(&read).expect("json");
    json["format"] = 2.into();
    assert!(MoveManifest::parse(json.to_string().as_bytes()).is_err());
    assert!(MoveManifest::parse(b"{\"format\":1}").is_err());
    // An active vbucket takes no export.
    let active = ingest(&target, dirs[2].path(), &read);
    assert!(format!("{active:?}").contains("active"), "{active:?}");
    target
        .set_vbucket_role(MOVED, VbRole::Dead)
        .await
        .expect("role");
    // A damaged file (one byte changed, the size the same) is refused whole.
    let doc_file = dirs[2].path().join("doc.sst");
    let good = std::fs::read(&doc_file).expect("read");
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x55;
    std::fs::write(&doc_file, &bad).expect("write");
    let refused = ingest(&target, dirs[2].path(), &read);
    assert!(format!("{refused:?}").contains("crc32c"), "{refused:?}");
    std::fs::write(&doc_file, &good).expect("write");
    for key in &moved {
        assert_eq!(target.read_winner(key.as_bytes()).expect("read"), None);
    }

    ingest(&target, dirs[2].path(), &read).expect("ingest");
    assert_eq!(target.vbucket_role(MOVED), VbRole::Pending);
    assert_eq!(
        target.replica_snapshot(MOVED).expect("snapshot"),
        (read.snapshot_seqno, read.snapshot_seqno)
    );
    assert_eq!(target.high_seqnos().get(MOVED), read.snapshot_seqno);
    assert_eq!(target.vb_state(MOVED), source.vb_state(MOVED));
    assert_eq!(target.failover_log(MOVED).expect("log"), Some(log));
    for key in &moved {
        assert_eq!(
            target.read_winner(key.as_bytes()).expect("read"),
            source.read_winner(key.as_bytes()).expect("read"),
        );
    }
    // Once it holds the vbucket, a second ingest is refused (not empty).
    target
        .set_vbucket_role(MOVED, VbRole::Dead)
        .await
        .expect("role");
    let again = ingest(&target, dirs[2].path(), &read);
    assert!(format!("{again:?}").contains("not empty"), "{again:?}");
    // After a reopen the target still holds it all.
    drop((target, other));
    drop(target_engine);
    let reopened = Engine::open(dirs[1].path(), EngineOptions::default()).expect("reopen");
    let target = reopened.bucket("db").expect("bucket");
    assert_eq!(target.vb_state(MOVED), source.vb_state(MOVED));
    assert_eq!(target.high_seqnos().get(MOVED), read.snapshot_seqno);
}
