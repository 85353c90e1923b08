//! `settee backup` and `settee restore` against real processes (`docs/format/backup.md`): a
//! backup taken while writers write holds every document acknowledged before it began, with its
//! revision, and a node started on the restored directory serves them (with collections,
//! `_local` documents and design documents); a second backup shares the unchanged files and
//! stands alone; a backup killed part-way leaves nothing restore accepts.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::{binary, Client, Server};

fn call(http: &mut Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|body| body.to_string().into_bytes());
    let response = http.request(method, path, body.as_deref()).unwrap();
    let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, value)
}

fn backup(server: &Server, to: &Path) -> Output {
    Command::new(binary())
        .args(["backup", "--no-progress", "--node"])
        .arg(format!("http://admin:secret@{}", server.addr))
        .arg("--to")
        .arg(to)
        .output()
        .expect("settee backup")
}

fn restore(from: &Path, data_dir: &Path) -> Output {
    Command::new(binary())
        .args(["restore", "--from"])
        .arg(from)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("settee restore")
}

fn backups(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn manifest(backup: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(backup.join("backup.json")).unwrap()).unwrap()
}

#[test]
fn a_backup_under_writes_restores_every_acknowledged_document() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("node"));
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(call(&mut http, "PUT", "/db", None).0, 201);
    assert_eq!(call(&mut http, "PUT", "/db$s$c", None).0, 201);
    assert_eq!(
        call(
            &mut http,
            "PUT",
            "/db$s$c/in-collection",
            Some(json!({"c": 1}))
        )
        .0,
        201
    );
    assert_eq!(
        call(
            &mut http,
            "PUT",
            "/db/_local/checkpoint",
            Some(json!({"at": 7}))
        )
        .0,
        201
    );
    let ddoc = json!({"views": {"all": {"map": "function (doc) { emit(doc._id, null); }"}}});
    assert_eq!(call(&mut http, "PUT", "/db/_design/v", Some(ddoc)).0, 201);

    // Writers keep writing through the backup; every acknowledged (id, rev) is recorded.
    let acknowledged: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            let (acknowledged, stop, addr) =
                (acknowledged.clone(), stop.clone(), server.addr.clone());
            std::thread::spawn(move || {
                let mut http = Client::connect(&addr).unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("w{writer}-{n:06}");
                    let (status, body) = call(
                        &mut http,
                        "PUT",
                        &format!("/db/{id}"),
                        Some(json!({"n": n})),
                    );
                    assert_eq!(status, 201, "{body}");
                    let rev = body["rev"].as_str().unwrap().to_string();
                    acknowledged.lock().unwrap().push((id, rev));
                    n += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before: Vec<(String, String)> = acknowledged.lock().unwrap().clone();
    assert!(!before.is_empty());
    let backups_dir = dir.path().join("backups");
    let first = backup(&server, &backups_dir);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    // The node released its checkpoint.
    let checkpoints = dir.path().join("node/backup-checkpoints");
    assert_eq!(std::fs::read_dir(&checkpoints).unwrap().count(), 0);

    // A second backup shares the first one's unchanged SST files, and stands alone.
    std::thread::sleep(Duration::from_millis(1100));
    let second = backup(&server, &backups_dir);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let names = backups(&backups_dir);
    assert_eq!(names.len(), 2, "{names:?}");
    let second_manifest = manifest(&backups_dir.join(&names[1]));
    assert_eq!(second_manifest["base"], json!(names[0]));
    assert!(
        second_manifest["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|file| file["shared"] == true),
        "{second_manifest}"
    );
    let all_acknowledged = acknowledged.lock().unwrap().clone();
    server.stop();

    // The first backup restored: everything acknowledged before it began is there.
    let restored = dir.path().join("restored-first");
    let out = restore(&backups_dir.join(&names[0]), &restored);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = Server::start(&restored);
    let mut http = Client::connect(&node.addr).unwrap();
    for (id, rev) in &before {
        let (status, doc) = call(&mut http, "GET", &format!("/db/{id}"), None);
        assert_eq!(
            (status, doc["_rev"].as_str()),
            (200, Some(rev.as_str())),
            "{id}"
        );
    }
    assert_eq!(
        call(&mut http, "GET", "/db$s$c/in-collection", None).1["c"],
        1
    );
    assert_eq!(
        call(&mut http, "GET", "/db/_local/checkpoint", None).1["at"],
        7
    );
    let view = call(&mut http, "GET", "/db/_design/v/_view/all?limit=1", None);
    assert_eq!(view.0, 200, "{}", view.1);
    node.stop();

    // The second restored after the first is deleted: it needs nothing of it.
    std::fs::remove_dir_all(backups_dir.join(&names[0])).unwrap();
    let restored = dir.path().join("restored-second");
    let out = restore(&backups_dir.join(&names[1]), &restored);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = Server::start(&restored);
    let mut http = Client::connect(&node.addr).unwrap();
    let info = call(&mut http, "GET", "/db", None).1;
    // Every write acknowledged before the second backup, and the design document.
    assert_eq!(
        info["doc_count"].as_u64(),
        Some(all_acknowledged.len() as u64 + 1)
    );
    node.stop();

    // Restore refuses a directory that is not empty.
    let out = restore(&backups_dir.join(&names[1]), &restored);
    assert!(!out.status.success());
}

#[test]
fn a_killed_backup_leaves_nothing_restore_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("node"));
    let mut http = Client::connect(&server.addr).unwrap();
    support::put_big_documents(&mut http, 40);
    let backups_dir = dir.path().join("backups");
    for delay_ms in [5u64, 40, 150] {
        let mut child = Command::new(binary())
            .args(["backup", "--no-progress", "--node"])
            .arg(format!("http://admin:secret@{}", server.addr))
            .arg("--to")
            .arg(&backups_dir)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(1100));
        if !backups_dir.exists() {
            continue;
        }
        // Every backup is either complete and restorable, or refused by restore.
        for name in backups(&backups_dir) {
            let path = backups_dir.join(&name);
            let target = dir.path().join(format!("restore-{delay_ms}-{name}"));
            let out = restore(&path, &target);
            if path.join("backup.json").is_file() {
                assert!(!name.ends_with(".partial"));
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                assert!(
                    !out.status.success(),
                    "restore accepted an unfinished backup {name}"
                );
                assert!(!target.join("db").exists(), "a refused restore wrote files");
            }
        }
    }
    // A later backup clears what a killed one left and completes.
    let out = backup(&server, &backups_dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(backups(&backups_dir)
        .iter()
        .all(|name| !name.ends_with(".partial")));
    server.stop();
}

#[test]
fn restore_checks_every_file_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("node"));
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(call(&mut http, "PUT", "/db", None).0, 201);
    let backups_dir = dir.path().join("backups");
    assert!(backup(&server, &backups_dir).status.success());
    server.stop();
    let name = backups(&backups_dir).pop().unwrap();
    let db = backups_dir.join(&name).join("db");
    let victim = std::fs::read_dir(&db)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "sst"))
        .expect("an SST file");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&victim, bytes).unwrap();
    let target = dir.path().join("restored");
    let out = restore(&backups_dir.join(&name), &target);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("crc32c"));
    assert!(!target.exists());
}
