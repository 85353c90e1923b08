//! `settee bench subdoc`: seed 000's experiment (the article's `cb-perf-tester`) against a KV
//! door. A document `{"key": ..., "data": {"subkey-000000": "value-000000", ...}}` with
//! `--keys` sub-keys is stored once; then `--parallel` requesters each issue `--repeat`
//! blocking requests — a new one only when the previous one was answered — over
//! `--connections` shared connections (gocb's default is one), either sub-document lookups of
//! `--search-keys` paths (`SUBDOC_MULTI_LOOKUP`) chosen by `--difficulty`, or plain GETs of the
//! whole document (`regular`). `--mode both` runs `regular` on a small baseline document
//! (`--baseline-keys`, ~200 bytes) and then `subdoc`, and prints the subdoc/regular rps ratio.
//! Connections negotiate HELLO UnorderedExecution as gocb does (`--ordered` turns it off).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{bail, Context};
use settee_kv_codec::subdoc::{op, put_lookup_spec};
use settee_kv_codec::{datatype, decode, encode_request, opcode, status, Decoded, Magic};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::kv::client::{Client, Handshake, READ_CHUNK_BYTES, REPLY_BODY_MAX};
use crate::kv::keys::vbucket_of;
use crate::kv::SaslMechanism;
use crate::report::{format_json_lines, format_table, PhaseReport, Tally};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sub-document lookups of `--search-keys` paths.
    Subdoc,
    /// Plain GETs of the whole document.
    Regular,
    /// `regular` on the baseline document, then `subdoc`, and their ratio.
    Both,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Difficulty {
    /// Paths at the start of `data`.
    Easy,
    /// Paths in the middle.
    Medium,
    /// Paths at the end.
    Hard,
    /// Paths that do not exist.
    Impossible,
}

/// Flags of `settee bench subdoc`.
#[derive(clap::Args, Debug, Clone)]
pub struct SubdocArgs {
    #[arg(value_enum, default_value = "subdoc")]
    pub mode: Mode,
    #[arg(long, default_value = "127.0.0.1:11210")]
    pub addr: String,
    /// Sub-keys in the document.
    #[arg(long, default_value_t = 5)]
    pub keys: usize,
    /// Paths per lookup (at most 16).
    #[arg(long, default_value_t = 1)]
    pub search_keys: usize,
    #[arg(long, value_enum, default_value = "easy")]
    pub difficulty: Difficulty,
    /// Concurrent requesters.
    #[arg(long, default_value_t = 200)]
    pub parallel: usize,
    /// Blocking requests per requester.
    #[arg(long, default_value_t = 1000)]
    pub repeat: usize,
    /// Connections the requesters share.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Sub-keys of the regular-mode document in `--mode both` (5 gives ~200 bytes).
    #[arg(long, default_value_t = 5)]
    pub baseline_keys: usize,
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub password: Option<String>,
    #[arg(long, value_enum, default_value = "SCRAM-SHA512")]
    pub sasl_mechanism: SaslMechanism,
    #[arg(long, default_value = "default")]
    pub bucket: String,
    /// Do not ask for HELLO UnorderedExecution. gocb — the SDK of the seed's tool — always asks
    /// for it, so by default this bench does too.
    #[arg(long)]
    pub ordered: bool,
    /// Do not store the documents first.
    #[arg(long)]
    pub no_load: bool,
    #[arg(long)]
    pub json: bool,
}

/// The seed's document with `keys` sub-keys, byte for byte.
pub fn document(keys: usize) -> String {
    let mut out = String::with_capacity(32 + keys * 31);
    out.push_str(r#"{"key":"test-subdoc","data":{"#);
    for i in 0..keys {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(r#""subkey-{i:06}":"value-{i:06}""#));
    }
    out.push_str("}}");
    out
}

/// The paths one lookup asks for.
pub fn paths(keys: usize, search_keys: usize, difficulty: Difficulty) -> Vec<String> {
    let first = match difficulty {
        Difficulty::Easy => 0,
        Difficulty::Medium => keys.saturating_sub(search_keys) / 2,
        Difficulty::Hard => keys.saturating_sub(search_keys),
        Difficulty::Impossible => keys + 1,
    };
    (first..first + search_keys)
        .map(|i| format!("data.subkey-{i:06}"))
        .collect()
}

struct Job {
    name: &'static str,
    key: String,
    /// The encoded request minus the opaque (patched per send).
    opcode: u8,
    value: Vec<u8>,
}

pub async fn run(args: SubdocArgs) -> anyhow::Result<Vec<PhaseReport>> {
    if args.search_keys == 0 || args.search_keys > 16 {
        bail!("--search-keys must be 1..=16");
    }
    if args.parallel == 0 || args.connections == 0 || args.parallel < args.connections {
        bail!("--parallel must be at least --connections, which must be at least 1");
    }
    let handshake = Handshake {
        address: args.addr.clone(),
        credentials: match (&args.user, &args.password) {
            (Some(user), Some(password)) => Some((user.clone(), password.clone())),
            _ => bail!("--user and --password are required (the Couchbase handshake)"),
        },
        mechanism: args.sasl_mechanism,
        bucket: Some(args.bucket.clone()),
        unordered: !args.ordered,
        collection: None,
    };
    let (mut setup, negotiated) = Client::connect(&handshake).await?;
    let vbuckets = negotiated.vbuckets.unwrap_or(1024);
    let subdoc_key = "test-subdoc".to_string();
    let regular_key = "test-regular".to_string();
    if !args.no_load {
        store(&mut setup, &subdoc_key, &document(args.keys), vbuckets).await?;
        let regular_keys = if args.mode == Mode::Both {
            args.baseline_keys
        } else {
            args.keys
        };
        store(&mut setup, &regular_key, &document(regular_keys), vbuckets).await?;
    }
    let mut lookup = Vec::new();
    for path in paths(args.keys, args.search_keys, args.difficulty) {
        put_lookup_spec(&mut lookup, op::GET, 0, path.as_bytes());
    }
    let subdoc = Job {
        name: "subdoc",
        key: subdoc_key,
        opcode: opcode::SUBDOC_MULTI_LOOKUP,
        value: lookup,
    };
    let regular = Job {
        name: "regular",
        key: regular_key,
        opcode: opcode::GET,
        value: Vec::new(),
    };
    let jobs: Vec<&Job> = match args.mode {
        Mode::Subdoc => vec![&subdoc],
        Mode::Regular => vec![&regular],
        Mode::Both => vec![&regular, &subdoc],
    };
    eprintln!(
        "bench subdoc: document {} bytes ({} sub-keys), {} path(s) {:?}, {} requesters x {} requests over {} {} connection(s)",
        document(args.keys).len(),
        args.keys,
        args.search_keys,
        args.difficulty,
        args.parallel,
        args.repeat,
        args.connections,
        if args.ordered { "ordered" } else { "unordered" }
    );
    let mut reports = Vec::new();
    for job in jobs {
        reports.push(measure(&args, &handshake, vbuckets, job).await?);
    }
    if args.json {
        print!("{}", format_json_lines(&reports));
    } else {
        print!("{}", format_table(&reports));
    }
    if reports.len() == 2 && reports[0].ops_per_sec > 0.0 {
        println!(
            "subdoc/regular rps: {:.3}x ({:.0} / {:.0})",
            reports[1].ops_per_sec / reports[0].ops_per_sec,
            reports[1].ops_per_sec,
            reports[0].ops_per_sec
        );
    }
    Ok(reports)
}

async fn store(client: &mut Client, key: &str, body: &str, vbuckets: u16) -> anyhow::Result<()> {
    let mut out = Vec::new();
    let mut extras = [0u8; 8];
    extras[..4].copy_from_slice(&0x0200_0000u32.to_be_bytes());
    encode_request(
        &mut out,
        opcode::SET,
        vbucket_of(key.as_bytes(), vbuckets),
        1,
        0,
        datatype::JSON,
        &[],
        &extras,
        key.as_bytes(),
        body.as_bytes(),
    );
    client.stream.write_all(&out).await?;
    let reply = read_one(client).await?;
    if reply != status::SUCCESS {
        bail!("storing {key}: status 0x{reply:04x}");
    }
    Ok(())
}

async fn read_one(client: &mut Client) -> anyhow::Result<u16> {
    loop {
        if let Decoded::Frame(frame, used) = decode(&client.input, REPLY_BODY_MAX)? {
            let code = frame.status();
            client.input.drain(..used);
            return Ok(code);
        }
        client.input.reserve(READ_CHUNK_BYTES);
        if client.stream.read_buf(&mut client.input).await? == 0 {
            bail!("the server closed the connection");
        }
    }
}

async fn measure(
    args: &SubdocArgs,
    handshake: &Handshake,
    vbuckets: u16,
    job: &Job,
) -> anyhow::Result<PhaseReport> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for connection in 0..args.connections {
        // Requesters are spread over the connections as evenly as possible.
        let requesters = args.parallel / args.connections
            + usize::from(connection < args.parallel % args.connections);
        let (client, _) = Client::connect(handshake).await?;
        let mut request = Vec::new();
        encode_request(
            &mut request,
            job.opcode,
            vbucket_of(job.key.as_bytes(), vbuckets),
            0,
            0,
            datatype::RAW,
            &[],
            &[],
            job.key.as_bytes(),
            &job.value,
        );
        let repeat = args.repeat;
        tasks.push(tokio::spawn(async move {
            drive(client, request, requesters, repeat).await
        }));
    }
    let mut tally = Tally::new();
    for task in tasks {
        let part = task.await.context("requester task")??;
        tally.merge(&part);
    }
    Ok(tally.into_report(job.name, started.elapsed().as_secs_f64()))
}

/// One connection: `requesters` closed loops, each sending its next request when the previous
/// one is answered, until each has been answered `repeat` times.
async fn drive(
    mut client: Client,
    request: Vec<u8>,
    requesters: usize,
    repeat: usize,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::new();
    // opaque -> (requester, sent at)
    let mut in_flight: HashMap<u32, (usize, Instant)> = HashMap::with_capacity(requesters);
    let mut done = vec![0usize; requesters];
    let mut next_opaque: u32 = 1;
    let mut out = Vec::with_capacity(request.len() * requesters);
    let mut send =
        |out: &mut Vec<u8>, in_flight: &mut HashMap<u32, (usize, Instant)>, who: usize| {
            let opaque = next_opaque;
            next_opaque = next_opaque.wrapping_add(1).max(1);
            let at = out.len();
            out.extend_from_slice(&request);
            out[at + 12..at + 16].copy_from_slice(&opaque.to_be_bytes());
            in_flight.insert(opaque, (who, Instant::now()));
        };
    for who in 0..requesters {
        if repeat > 0 {
            send(&mut out, &mut in_flight, who);
        }
    }
    while !in_flight.is_empty() {
        if !out.is_empty() {
            client.stream.write_all(&out).await?;
            out.clear();
        }
        client.input.reserve(READ_CHUNK_BYTES);
        if client.stream.read_buf(&mut client.input).await? == 0 {
            bail!("the server closed the connection");
        }
        let mut consumed = 0;
        while let Decoded::Frame(frame, used) = decode(&client.input[consumed..], REPLY_BODY_MAX)? {
            consumed += used;
            if !matches!(frame.magic, Magic::Response | Magic::AltResponse) {
                continue;
            }
            let Some((who, sent)) = in_flight.remove(&frame.opaque) else {
                continue;
            };
            tally.record_latency(sent.elapsed().as_micros() as u64);
            // A lookup of absent paths answers MULTI_PATH_FAILURE: a served request, as in
            // the seed's tool.
            if matches!(
                frame.status(),
                status::SUCCESS | status::SUBDOC_MULTI_PATH_FAILURE
            ) {
                tally.ops += 1;
            } else {
                tally.errors += 1;
            }
            done[who] += 1;
            if done[who] < repeat {
                send(&mut out, &mut in_flight, who);
            }
        }
        client.input.drain(..consumed);
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_document_and_its_paths() {
        assert_eq!(
            document(2),
            r#"{"key":"test-subdoc","data":{"subkey-000000":"value-000000","subkey-000001":"value-000001"}}"#
        );
        assert!(serde_json::from_str::<serde_json::Value>(&document(100)).is_ok());
        assert_eq!(document(5).len(), 185);
        assert_eq!(
            paths(100, 2, Difficulty::Easy),
            ["data.subkey-000000", "data.subkey-000001"]
        );
        assert_eq!(
            paths(100, 2, Difficulty::Medium),
            ["data.subkey-000049", "data.subkey-000050"]
        );
        assert_eq!(
            paths(100, 2, Difficulty::Hard),
            ["data.subkey-000098", "data.subkey-000099"]
        );
        assert_eq!(
            paths(100, 1, Difficulty::Impossible),
            ["data.subkey-000101"]
        );
    }
}
