//! `kv::run` end to end against a tiny in-process memcached-protocol listener: a map behind a
//! mutex that answers GET/SET and, when asked, the Couchbase handshake (HELLO, SCRAM through
//! settee-auth's server half, SELECT_BUCKET, a cluster config with 64 vbuckets). It exists to
//! test the bench's own loop (pipelining, opaques, out-of-order replies, counting), not a server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use clap::Parser;
use settee_auth::scram::{Mechanism, ScramSecret, ScramServer};
use settee_bench::kv::{run, KvArgs, KvReport};
use settee_kv_codec::{decode, encode_response, feature, opcode, status, Decoded, Frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const VBUCKETS: usize = 64;
const USER: &str = "bench";
const PASSWORD: &str = "secret";

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    kv: KvArgs,
}

#[derive(Default)]
struct Fake {
    store: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    hellos: AtomicU64,
    /// GET/SET requests whose vbucket field is not crc32(key) as the SDKs compute it.
    wrong_vbuckets: AtomicU64,
}

struct Session {
    /// The client said HELLO, so it read the cluster config and addresses 64 vbuckets.
    hello: bool,
    unordered: bool,
    scram: Option<ScramServer>,
}

fn reply(out: &mut Vec<u8>, frame: &Frame<'_>, code: u16, extras: &[u8], value: &[u8]) {
    encode_response(
        out,
        frame.opcode,
        code,
        frame.opaque,
        0,
        0,
        extras,
        b"",
        &[value],
    );
}

fn handle(fake: &Fake, session: &mut Session, frame: &Frame<'_>, out: &mut Vec<u8>) {
    match frame.opcode {
        opcode::HELLO => {
            fake.hellos.fetch_add(1, Ordering::Relaxed);
            session.hello = true;
            session.unordered = frame
                .value
                .chunks_exact(2)
                .any(|pair| u16::from_be_bytes([pair[0], pair[1]]) == feature::UNORDERED_EXECUTION);
            reply(out, frame, status::SUCCESS, &[], frame.value);
        }
        opcode::SASL_AUTH => {
            let secret = ScramSecret::derive(Mechanism::Sha512, PASSWORD, b"fake salt", 64);
            let started = ScramServer::start(
                Mechanism::Sha512,
                frame.value,
                |user| (user == USER).then_some(secret),
                64,
            );
            match (frame.key, started) {
                (b"SCRAM-SHA512", Ok((server, server_first))) => {
                    session.scram = Some(server);
                    reply(
                        out,
                        frame,
                        status::AUTH_CONTINUE,
                        &[],
                        server_first.as_bytes(),
                    );
                }
                _ => reply(out, frame, status::AUTH_ERROR, &[], b""),
            }
        }
        opcode::SASL_STEP => match session
            .scram
            .take()
            .map(|server| server.finish(frame.value))
        {
            Some(Ok(server_final)) => {
                reply(out, frame, status::SUCCESS, &[], server_final.as_bytes())
            }
            _ => reply(out, frame, status::AUTH_ERROR, &[], b""),
        },
        opcode::SELECT_BUCKET if frame.key == b"default" => reply(out, frame, 0, &[], b""),
        opcode::SELECT_BUCKET => reply(out, frame, status::EACCESS, &[], b""),
        opcode::GET_CLUSTER_CONFIG => {
            let config = serde_json::json!({
                "rev": 1,
                "vBucketServerMap": {"hashAlgorithm": "CRC", "vBucketMap": vec![[0]; VBUCKETS]},
            });
            reply(out, frame, 0, &[], config.to_string().as_bytes());
        }
        opcode::GET | opcode::SET => {
            let expected = ((crc32fast::hash(frame.key) >> 16) & 0x7fff) as usize % VBUCKETS;
            if session.hello && usize::from(frame.vbucket()) != expected {
                fake.wrong_vbuckets.fetch_add(1, Ordering::Relaxed);
            }
            let mut store = fake.store.lock().expect("store lock");
            if frame.opcode == opcode::SET {
                store.insert(frame.key.to_vec(), frame.value.to_vec());
                reply(out, frame, 0, &[], b"");
            } else {
                match store.get(frame.key) {
                    Some(value) => reply(out, frame, 0, &[0x02, 0, 0, 0], value),
                    None => reply(out, frame, status::KEY_ENOENT, &[], b""),
                }
            }
        }
        _ => reply(out, frame, status::UNKNOWN_COMMAND, &[], b""),
    }
}

async fn serve_connection(fake: Arc<Fake>, mut stream: TcpStream) {
    let mut session = Session {
        hello: false,
        unordered: false,
        scram: None,
    };
    let mut input = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => input.extend_from_slice(&chunk[..read]),
        }
        let mut replies: Vec<Vec<u8>> = Vec::new();
        let mut consumed = 0;
        while let Ok(Decoded::Frame(frame, used)) = decode(&input[consumed..], 1 << 20) {
            consumed += used;
            let mut out = Vec::new();
            handle(&fake, &mut session, &frame, &mut out);
            replies.push(out);
        }
        input.drain(..consumed);
        if session.unordered {
            // As out of order as it gets: every batch answered backwards.
            replies.reverse();
        }
        if stream.write_all(&replies.concat()).await.is_err() {
            return;
        }
    }
}

async fn start_fake() -> (Arc<Fake>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("local address").to_string();
    let fake = Arc::new(Fake::default());
    let accepting = Arc::clone(&fake);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(Arc::clone(&accepting), stream));
        }
    });
    (fake, address)
}

async fn bench(address: &str, flags: &[&str]) -> anyhow::Result<KvReport> {
    let mut argv = vec![
        "bench",
        "--addr",
        address,
        "--warmup",
        "0",
        "--duration",
        "1",
    ];
    argv.extend_from_slice(flags);
    run(Cli::try_parse_from(argv).expect("flags parse").kv).await
}

fn phase<'a>(report: &'a KvReport, name: &str) -> &'a settee_bench::kv::PhaseReport {
    report
        .phases
        .iter()
        .find(|phase| phase.name == name)
        .unwrap_or_else(|| panic!("no {name} phase in {report:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_memcached_dialect_loads_every_key_then_mixes_gets_and_sets() {
    let (fake, address) = start_fake().await;
    let report = bench(
        &address,
        &[
            "--keys",
            "500",
            "--connections",
            "3",
            "--threads",
            "2",
            "--pipeline",
            "8",
            "--get-ratio",
            "0.5",
            "--value-size",
            "100",
            "--json",
        ],
    )
    .await
    .expect("bench runs");

    assert_eq!(
        fake.hellos.load(Ordering::Relaxed),
        0,
        "memcached gets no HELLO"
    );
    let store = fake.store.lock().expect("store lock");
    assert_eq!(store.len(), 500);
    assert!(store.values().all(|value| value.len() == 100));
    drop(store);
    let load = phase(&report, "load");
    assert_eq!((load.ops, load.errors), (500, 0));
    for name in ["get", "set"] {
        let measured = phase(&report, name);
        assert!(measured.ops > 0, "{measured:?}");
        assert_eq!(measured.errors, 0, "{measured:?}");
    }
    assert_eq!(report.failed_connections, 0);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn couchbase_handshake_scram_cluster_map_and_unordered_replies() {
    let (fake, address) = start_fake().await;
    let report = bench(
        &address,
        &[
            "--keys",
            "300",
            "--connections",
            "2",
            "--pipeline",
            "16",
            "--user",
            USER,
            "--password",
            PASSWORD,
            "--bucket",
            "default",
            "--unordered",
            "--vbuckets",
            "1024",
        ],
    )
    .await
    .expect("bench runs");

    assert_eq!(
        report.vbuckets, VBUCKETS as u16,
        "the cluster map wins over --vbuckets"
    );
    assert!(report.features.contains(&feature::UNORDERED_EXECUTION));
    // The probe connection and the two load connections.
    assert_eq!(fake.hellos.load(Ordering::Relaxed), 3);
    assert_eq!(fake.wrong_vbuckets.load(Ordering::Relaxed), 0);
    let get = phase(&report, "get");
    assert!(get.ops > 0 && get.errors == 0, "{get:?}");
    assert!(report.phases.iter().all(|phase| phase.name != "set"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misses_count_as_errors_by_status() {
    let (_fake, address) = start_fake().await;
    let report = bench(
        &address,
        &["--keys", "10", "--connections", "1", "--no-load"],
    )
    .await
    .expect("bench runs");
    let get = phase(&report, "get");
    assert_eq!(get.ops, 0);
    assert!(get.errors > 0);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].0, "GET");
    assert_eq!(report.failures[0].1, status::KEY_ENOENT);
    assert_eq!(report.failures[0].2, get.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_stop_the_run() {
    let (_fake, address) = start_fake().await;
    let refused = bench(&address, &["--user", USER, "--password", "wrong"]).await;
    let message = format!(
        "{:#}",
        refused.expect_err("a wrong password must fail the run")
    );
    assert!(message.contains("SASL_STEP"), "{message}");
    let refused = bench(
        &address,
        &["--user", USER, "--password", PASSWORD, "--bucket", "nope"],
    )
    .await;
    assert!(refused.is_err());
}
