//! `settee bench ids`: seed 003's experiment. Inserts N documents of ~120 bytes through the
//! document engine twice — once with random (UUIDv4) ids and once with CouchDB-style
//! sequential ids — each into a fresh data directory, then compacts and reports insert time and
//! bytes on disk for both, and their ratios (CouchDB's append-only B+tree: ~4x and ~7x).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use rand::{Rng, RngCore};
use settee_engine::{DocUpdate, Engine, EngineOptions, UpdateOutcome};

#[derive(clap::Args, Debug, Clone)]
pub struct IdsArgs {
    /// Documents inserted per id scheme.
    #[arg(long, default_value_t = 2_000_000)]
    pub docs: usize,
    /// Documents per `_bulk_docs`-style engine call.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Batches in flight at once (they share fsyncs through group commit).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    #[arg(long, default_value_t = 64)]
    pub vbuckets: u16,
    /// Where the two data directories are made (removed afterwards).
    #[arg(long, default_value = "/tmp")]
    pub work_dir: PathBuf,
    /// Store document values in RocksDB blob files (key-value separation).
    #[arg(long)]
    pub blob_files: bool,
    /// Document bodies: `measurement` (a sensor reading with varied values, like seed 003's
    /// data-acquisition documents) or `compressible` (a run of one letter: the worst case for
    /// the ratio, because then the random id's entropy is most of what is stored).
    #[arg(long, value_enum, default_value = "measurement")]
    pub body: BodyKind,
    /// Rounds; the schemes alternate and the report shows each round and the medians.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Run one scheme only (for profiling it); no ratios then.
    #[arg(long, value_enum)]
    pub only: Option<Scheme>,
    /// Print one JSON object per scheme and one for the ratios.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    Measurement,
    Compressible,
}

/// The `n`th document body (~120 bytes); the same sequence for both id schemes.
fn body(kind: BodyKind, n: usize) -> String {
    match kind {
        BodyKind::Compressible => format!("{{\"value\":\"{}\",\"n\":{n}}}", "x".repeat(90)),
        BodyKind::Measurement => {
            // A cheap deterministic mix so values vary like real readings.
            let mix = (n as u64)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(17);
            format!(
                "{{\"device\":\"sensor-{:04}\",\"ts\":{},\"type\":\"temperature\",\"value\":{}.{:02},\"unit\":\"C\",\"quality\":\"{}\"}}",
                mix % 1000,
                1_700_000_000_000u64 + n as u64 * 250 + (mix >> 40) % 250,
                (mix >> 10) % 40,
                (mix >> 20) % 100,
                if mix.is_multiple_of(17) { "suspect" } else { "good" },
            )
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Sequential,
    Random,
}

#[derive(Debug, Clone)]
pub struct IdsReport {
    pub scheme: Scheme,
    pub docs: usize,
    pub insert_seconds: f64,
    /// `Bucket::compact` (flush excluded), for the disk columns' "after".
    pub compact_seconds: f64,
    /// Reading the whole change stream before and after compaction.
    pub changes_seconds_before: f64,
    pub changes_seconds_after: f64,
    pub docs_per_sec: f64,
    pub disk_bytes_before_compaction: u64,
    pub disk_bytes_after_compaction: u64,
}

/// CouchDB's `sequential` uuid algorithm: a random 26-hex prefix, and a 6-hex suffix that grows
/// by a random step; a new prefix when the suffix would overflow.
struct SequentialIds {
    prefix: String,
    suffix: u64,
}

impl SequentialIds {
    fn new() -> SequentialIds {
        SequentialIds {
            prefix: random_hex(13),
            suffix: rand::rng().random_range(1..0xfff),
        }
    }
    fn next(&mut self) -> String {
        self.suffix += rand::rng().random_range(1..0xffe);
        if self.suffix >= 0xfff000 {
            *self = SequentialIds::new();
        }
        format!("{}{:06x}", self.prefix, self.suffix)
    }
}

fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buffer);
    settee_engine::hex(&buffer)
}

fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    settee_engine::hex(&bytes)
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_size(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Data files only: SSTs and blob files (the WAL and logs are the same for both schemes and
/// shrink on their own once memtables are flushed).
fn data_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".sst") || name.ends_with(".blob")
        })
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

async fn run_scheme(args: &IdsArgs, scheme: Scheme) -> anyhow::Result<IdsReport> {
    let dir = tempfile::Builder::new()
        .prefix("settee-bench-ids-")
        .tempdir_in(&args.work_dir)
        .context("making a work directory")?;
    let mut options = EngineOptions::default();
    options.store.doc_blob_files = args.blob_files;
    let engine = Arc::new(Engine::open(dir.path(), options)?);
    engine.create_bucket("ids", args.vbuckets).await?;
    let bucket = engine.bucket("ids").context("bucket")?;
    // Ids are generated up front so the timed part is the database's work only.
    let mut sequential = SequentialIds::new();
    let ids: Vec<String> = (0..args.docs)
        .map(|_| match scheme {
            Scheme::Sequential => sequential.next(),
            Scheme::Random => uuid_v4(),
        })
        .collect();
    let started = Instant::now();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let mut tasks = Vec::new();
    for (chunk_index, chunk) in ids.chunks(args.batch.max(1)).enumerate() {
        let first = chunk_index * args.batch.max(1);
        let permit = semaphore.clone().acquire_owned().await?;
        let bucket = bucket.clone();
        let updates: Vec<DocUpdate> = chunk
            .iter()
            .enumerate()
            .map(|(index, id)| DocUpdate {
                key: id.as_bytes().to_vec(),
                parent: None,
                history: Vec::new(),
                deleted: false,
                body: Bytes::from(body(args.body, first + index)),
                attachments: Vec::new(),
            })
            .collect();
        tasks.push(tokio::spawn(async move {
            let outcomes = bucket.update_docs(updates, true).await;
            drop(permit);
            outcomes
        }));
    }
    for task in tasks {
        for outcome in task.await?? {
            anyhow::ensure!(
                matches!(outcome, UpdateOutcome::Saved { .. }),
                "insert failed: {outcome:?}"
            );
        }
    }
    let insert_seconds = started.elapsed().as_secs_f64();
    engine.store().flush()?;
    let before = data_size(dir.path());
    let changes_seconds_before = read_changes(&bucket, args.docs)?;
    let compact_started = Instant::now();
    bucket.compact().await?;
    let compact_seconds = compact_started.elapsed().as_secs_f64();
    let after = data_size(dir.path());
    let changes_seconds_after = read_changes(&bucket, args.docs)?;
    if std::env::var_os("SETTEE_BENCH_IDS_BY_KIND").is_some() {
        eprintln!(
            "{scheme:?} by column family: {:?}",
            engine.disk_bytes_by_kind()
        );
    }
    let _ = dir_size(dir.path());
    drop(bucket);
    drop(engine);
    Ok(IdsReport {
        scheme,
        docs: args.docs,
        insert_seconds,
        compact_seconds,
        changes_seconds_before,
        changes_seconds_after,
        docs_per_sec: args.docs as f64 / insert_seconds,
        disk_bytes_before_compaction: before,
        disk_bytes_after_compaction: after,
    })
}

/// Reads the bucket's whole change stream; checks it holds every document once; returns seconds.
fn read_changes(bucket: &settee_engine::Bucket, docs: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut entries = 0;
    for entry in bucket.changes(settee_engine::SeqVector::zero(bucket.vbuckets())) {
        entry?;
        entries += 1;
    }
    anyhow::ensure!(
        entries == docs,
        "change stream holds {entries} of {docs} documents"
    );
    Ok(started.elapsed().as_secs_f64())
}

pub async fn run(args: IdsArgs) -> anyhow::Result<(IdsReport, IdsReport)> {
    let mut sequential_runs = Vec::new();
    let mut random_runs = Vec::new();
    for round in 0..args.rounds.max(1) {
        // Alternate which scheme goes first so drift in the machine's state hits both.
        let order = if round % 2 == 0 {
            [Scheme::Sequential, Scheme::Random]
        } else {
            [Scheme::Random, Scheme::Sequential]
        };
        for scheme in order {
            if args.only.is_some_and(|only| only != scheme) {
                continue;
            }
            let report = run_scheme(&args, scheme).await?;
            print_report(&args, round, &report);
            match scheme {
                Scheme::Sequential => sequential_runs.push(report),
                Scheme::Random => random_runs.push(report),
            }
        }
    }
    if args.only.is_some() {
        let runs = if sequential_runs.is_empty() {
            &random_runs
        } else {
            &sequential_runs
        };
        return Ok((median(runs), median(runs)));
    }
    let sequential = median(&sequential_runs);
    let random = median(&random_runs);
    let time_ratio = random.insert_seconds / sequential.insert_seconds;
    let disk_ratio = random.disk_bytes_after_compaction as f64
        / sequential.disk_bytes_after_compaction.max(1) as f64;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"rounds": args.rounds.max(1), "body": format!("{:?}", args.body).to_lowercase(), "median_time_ratio_random_over_sequential": time_ratio, "median_disk_ratio_random_over_sequential": disk_ratio})
        );
    } else {
        println!("medians over {} round(s), {:?} bodies: sequential {:.2}s {:.1} MB, random {:.2}s {:.1} MB", args.rounds.max(1), args.body, sequential.insert_seconds, sequential.disk_bytes_after_compaction as f64 / 1e6, random.insert_seconds, random.disk_bytes_after_compaction as f64 / 1e6);
        println!(
            "random/sequential: time {time_ratio:.2}x, disk after compaction {disk_ratio:.2}x"
        );
    }
    Ok((sequential, random))
}

/// The run with the median insert time (disk sizes are deterministic up to compaction timing).
fn median(runs: &[IdsReport]) -> IdsReport {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.insert_seconds.total_cmp(&b.insert_seconds));
    sorted[sorted.len() / 2].clone()
}

fn print_report(args: &IdsArgs, round: usize, report: &IdsReport) {
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "round": round,
                "scheme": format!("{:?}", report.scheme).to_lowercase(),
                "docs": report.docs,
                "insert_seconds": report.insert_seconds,
                "compact_seconds": report.compact_seconds,
                "changes_seconds_before_compaction": report.changes_seconds_before,
                "changes_seconds_after_compaction": report.changes_seconds_after,
                "docs_per_sec": report.docs_per_sec,
                "disk_bytes_before_compaction": report.disk_bytes_before_compaction,
                "disk_bytes_after_compaction": report.disk_bytes_after_compaction,
            })
        );
    } else {
        // Above the first row printed (with --only, that may be a random-id one).
        let first_row = round == 0
            && args
                .only
                .map_or(report.scheme == Scheme::Sequential, |_| true);
        if first_row {
            println!(
                "{:<6} {:<11} {:>10} {:>10} {:>12} {:>16} {:>16} {:>10} {:>18}",
                "round",
                "ids",
                "docs",
                "seconds",
                "docs/s",
                "disk before MB",
                "disk after MB",
                "compact s",
                "changes s bef/aft"
            );
        }
        println!(
            "{:<6} {:<11} {:>10} {:>10.2} {:>12.0} {:>16.1} {:>16.1} {:>10.2} {:>18}",
            round,
            format!("{:?}", report.scheme).to_lowercase(),
            report.docs,
            report.insert_seconds,
            report.docs_per_sec,
            report.disk_bytes_before_compaction as f64 / 1e6,
            report.disk_bytes_after_compaction as f64 / 1e6,
            report.compact_seconds,
            format!(
                "{:.2} / {:.2}",
                report.changes_seconds_before, report.changes_seconds_after
            )
        );
    }
}
