//! `settee bench views`: seed 001's experiment. CHT-shaped documents (contacts in a place
//! hierarchy and the reports their users submit, ~2,200 documents per user) are loaded into a
//! fresh bucket, then the two design documents CHT replicates with (`medic`, `medic-client`
//! lookalikes, several views each, reduces included) are built from scratch while the process's
//! CPU time is measured; then key, range and reduce queries are timed. The whole run repeats for
//! each vbucket count, in-process against the engine and the indexer (no HTTP), so the numbers
//! are the indexer's and the index's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use settee_engine::{Bucket, DocUpdate, Engine, EngineOptions, Keyspace};
use settee_views::{
    DesignViews, GroupedReduce, Grouping, KeyBound, KeyRange, Reducer, Views, ViewsConfig,
};

#[derive(clap::Args, Debug, Clone)]
pub struct ViewsArgs {
    /// Documents loaded before the build.
    #[arg(long, default_value_t = 200_000)]
    pub docs: usize,
    /// Seed 001's size: 800,000 documents.
    #[arg(long)]
    pub full: bool,
    /// Vbucket counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
    pub vbuckets: Vec<u16>,
    /// Queries timed per kind.
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
    /// Where the data directories are made (removed afterwards).
    #[arg(long, default_value = "/tmp")]
    pub work_dir: PathBuf,
    /// Print one JSON object per vbucket count.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ViewsReport {
    pub vbuckets: u16,
    pub docs: usize,
    pub cores: usize,
    pub load_secs: f64,
    pub build_secs: f64,
    pub docs_per_sec: f64,
    pub docs_per_sec_per_core: f64,
    /// Process CPU time during the build over (wall time x cores), in percent.
    pub cpu_percent: f64,
    /// Documents indexed per CPU-second the process used: throughput per core that does not
    /// depend on how busy the (shared) machine was.
    pub docs_per_cpu_sec: f64,
    /// The machine's 1-minute load average when the build ended.
    pub load_average: f64,
    pub key_rows: f64,
    pub range_rows: f64,
    pub reduce_rows: f64,
    pub key_p50_us: u64,
    pub key_p99_us: u64,
    pub range_p50_us: u64,
    pub range_p99_us: u64,
    pub reduce_p50_us: u64,
    pub reduce_p99_us: u64,
}

const DOCS_PER_USER: usize = 2200;
const FORMS: [&str; 6] = [
    "pregnancy",
    "delivery",
    "immunization",
    "assessment",
    "pnc",
    "death",
];
const DAY_MS: u64 = 86_400_000;
const START_MS: u64 = 1_640_995_200_000;

/// The `n`th document: every user owns a health centre area with households and people
/// (contacts, ~1 in 11) and the reports submitted about them.
fn document(n: usize) -> (String, Value) {
    let user = n / DOCS_PER_USER;
    let within = n % DOCS_PER_USER;
    let district = format!("district-{}", user / 10);
    let health_center = format!("hc-{user}");
    let mix = (n as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(23);
    if within.is_multiple_of(11) {
        let household = format!("household-{user}-{}", within / 44);
        let id = format!("person-{user}-{within}");
        let body = json!({
            "type": "person",
            "contact_type": "person",
            "name": format!("Person {} {}", mix % 5000, within),
            "sex": if mix.is_multiple_of(2) { "female" } else { "male" },
            "date_of_birth": format!("{}-{:02}-{:02}", 1950 + mix % 70, 1 + mix % 12, 1 + mix % 28),
            "phone": format!("+2547{:08}", n),
            "reported_date": START_MS + (mix % 365) * DAY_MS,
            "parent": {"_id": household, "parent": {"_id": health_center, "parent": {"_id": district}}},
            "patient_id": format!("{:05}", n / 11),
        });
        (id, body)
    } else {
        let form = FORMS[(mix % FORMS.len() as u64) as usize];
        let patient = n / 11;
        let id = format!("report-{user}-{within}");
        let reported = START_MS + mix % (365 * DAY_MS);
        let body = json!({
            "type": "data_record",
            "form": form,
            "content_type": "xml",
            "reported_date": reported,
            "contact": {"_id": format!("chw-{user}"), "parent": {"_id": health_center, "parent": {"_id": district}}},
            "fields": {
                "patient_id": format!("{patient:05}"),
                "patient_name": format!("Person {}", mix % 5000),
                "lmp_date": format!("2021-{:02}-{:02}", 1 + mix % 12, 1 + mix % 28),
                "visit": {"weight": 40 + mix % 60, "danger_signs": mix.is_multiple_of(7), "notes": "routine visit, nothing to report"},
                "inputs": {"source": "task", "contact": {"_id": format!("person-{user}-{}", within - within % 11)}},
            },
            "errors": [],
            "sms_message": {"message": "", "from": format!("+2547{:08}", user)},
        });
        (id, body)
    }
}

/// Two design documents in the manner of CHT's `medic` and `medic-client`.
fn design_documents() -> Vec<(String, Value)> {
    vec![
        (
            "_design/medic".into(),
            json!({"views": {
                "docs_by_replication_key": {"map": "function (doc) { if (doc.type === 'data_record') { var subject = doc.fields && doc.fields.patient_id; emit(subject || (doc.contact && doc.contact._id), {type: doc.type}); } else if (doc.type === 'person') { emit(doc._id, {type: doc.type}); if (doc.patient_id) { emit(doc.patient_id, {type: doc.type}); } } }"},
                "reports_by_form_and_date": {"map": "function (doc) { if (doc.type === 'data_record' && doc.form) { emit([doc.form, doc.reported_date], 1); } }", "reduce": "_sum"},
                "contacts_by_phone": {"map": "function (doc) { if (doc.phone) { emit(doc.phone, doc._id); } }"},
                "reports_by_subject": {"map": "function (doc) { if (doc.type === 'data_record' && doc.fields) { emit(doc.fields.patient_id, doc.reported_date); } }"}
            }}),
        ),
        (
            "_design/medic-client".into(),
            json!({"views": {
                "contacts_by_parent": {"map": "function (doc) { if (doc.type === 'person' && doc.parent) { emit([doc.parent._id, doc.contact_type], doc.name); } }"},
                "reports_by_date": {"map": "function (doc) { if (doc.type === 'data_record') { emit(doc.reported_date, doc.form); } }"},
                "data_records_by_type": {"map": "function (doc) { if (doc.type === 'data_record') { emit(doc.form, 1); } }", "reduce": "_count"},
                "contacts_by_name": {"map": "function (doc) { if (doc.name) { emit(doc.name.toLowerCase(), null); } }"}
            }}),
        ),
    ]
}

async fn load(bucket: &Arc<Bucket>, docs: usize) -> anyhow::Result<()> {
    const BATCH: usize = 1000;
    let semaphore = Arc::new(tokio::sync::Semaphore::new(4));
    let mut tasks = Vec::new();
    for start in (0..docs).step_by(BATCH) {
        let permit = semaphore.clone().acquire_owned().await?;
        let bucket = bucket.clone();
        tasks.push(tokio::spawn(async move {
            let updates = (start..(start + BATCH).min(docs))
                .map(|n| {
                    let (id, body) = document(n);
                    DocUpdate {
                        key: id.into_bytes(),
                        parent: None,
                        history: Vec::new(),
                        deleted: false,
                        body: Bytes::from(body.to_string()),
                        attachments: Vec::new(),
                    }
                })
                .collect();
            let result = bucket.update_docs(updates, true).await;
            drop(permit);
            result.map(|_| ())
        }));
    }
    for task in tasks {
        task.await??;
    }
    for (id, body) in design_documents() {
        bucket
            .update_docs(
                vec![DocUpdate {
                    key: id.into_bytes(),
                    parent: None,
                    history: Vec::new(),
                    deleted: false,
                    body: Bytes::from(body.to_string()),
                    attachments: Vec::new(),
                }],
                true,
            )
            .await?;
    }
    Ok(())
}

fn micros(histogram: &Histogram<u64>, quantile: f64) -> u64 {
    histogram.value_at_quantile(quantile)
}

/// Times `queries` runs of `query` (blocking reads, as the HTTP layer runs them).
/// Times `queries` runs of `query` (blocking reads, as the HTTP layer runs them); returns the
/// latencies and the mean rows read per query.
fn time_queries(
    queries: usize,
    mut query: impl FnMut(usize) -> anyhow::Result<usize>,
) -> anyhow::Result<(Histogram<u64>, f64)> {
    let mut histogram = Histogram::<u64>::new(3)?;
    let mut rows = 0usize;
    for i in 0..queries {
        let start = Instant::now();
        rows += query(i)?;
        histogram.record(start.elapsed().as_micros().max(1) as u64)?;
    }
    Ok((histogram, rows as f64 / queries.max(1) as f64))
}

/// The 1-minute load average: on a shared machine, how much else wanted the cores.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

async fn run_one(args: &ViewsArgs, docs: usize, vbuckets: u16) -> anyhow::Result<ViewsReport> {
    let dir = tempfile::Builder::new()
        .prefix("settee-bench-views-")
        .tempdir_in(&args.work_dir)
        .context("creating a data directory")?;
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default())?);
    engine.create_bucket("medic", vbuckets).await?;
    let bucket = engine.bucket("medic").context("bucket")?;
    let load_start = Instant::now();
    load(&bucket, docs).await?;
    let load_secs = load_start.elapsed().as_secs_f64();
    // Seed 001 indexes documents already at rest: flush and compact the loaded data so the
    // build does not share the cores with the load's own compactions, whose amount depends on
    // the vbucket count (the by-seqno index has one key range per vbucket).
    engine.store().settle()?;
    let views = Views::new(engine.clone(), ViewsConfig::default())
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let cores = views.js().size();

    let cpu_before = crate::cpu::process_cpu_seconds();
    let build_start = Instant::now();
    let target = bucket.high_seqnos();
    let mut groups: Vec<DesignViews> = Vec::new();
    for (id, _) in design_documents() {
        groups.push(
            views
                .design_views(&Keyspace::default_of(bucket.clone()), &id, None)
                .await
                .map_err(|error| anyhow::anyhow!("{error}"))?
                .context("design document")?,
        );
    }
    // Both design documents build at once, as two CouchDB view groups would.
    for found in &groups {
        found.group.ensure_builder();
    }
    for found in &groups {
        found
            .group
            .wait_for(&target)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    let build_secs = build_start.elapsed().as_secs_f64();
    let cpu_secs = crate::cpu::process_cpu_seconds() - cpu_before;
    let load_average = load_average();
    // Queries run against the settled store (flushed and compacted, no background compaction
    // left), so every vbucket count is measured on the same LSM shape rather than on whatever
    // the build order left in the memtables and level 0.
    engine.store().settle()?;

    let medic = groups.remove(0);
    let view = |found: &DesignViews, name: &str| found.design.view_index(name).context("view");
    let phone_view = view(&medic, "contacts_by_phone")?;
    let form_view = view(&medic, "reports_by_form_and_date")?;
    let client = groups.remove(0);
    let date_view = view(&client, "reports_by_date")?;
    let queries = args.queries;
    let contacts = docs.div_ceil(11).max(1);
    let ((key_histogram, key_rows), (range_histogram, range_rows), (reduce_histogram, reduce_rows)) =
        tokio::task::spawn_blocking({
            let (medic_group, client_group) = (medic.group.clone(), client.group.clone());
            move || -> anyhow::Result<_> {
                let mut random = rand::rngs::StdRng::seed_from_u64(1);
                // Key: one contact by phone number (one row).
                let key = time_queries(queries, |_| {
                    let n = random.random_range(0..contacts) * 11;
                    let range = KeyRange::key(json!(format!("+2547{n:08}")));
                    Ok(medic_group.scan(phone_view, &range).count())
                })?;
                // Range: 100 reports from a random date on (limit=100).
                let range = time_queries(queries, |_| {
                    let from = START_MS + random.random_range(0..360) * DAY_MS;
                    let range = KeyRange {
                        start: Some(KeyBound {
                            key: json!(from),
                            doc_id: None,
                        }),
                        ..KeyRange::default()
                    };
                    Ok(client_group.scan(date_view, &range).take(100).count())
                })?;
                // Reduce: _sum of one form's reports over one week (group=false).
                let reducer = Reducer::Builtin(settee_views::ReduceKind::Sum);
                let reduce = time_queries(queries, |i| {
                    let form = FORMS[i % FORMS.len()];
                    let from = START_MS + random.random_range(0..358) * DAY_MS;
                    let range = KeyRange {
                        start: Some(KeyBound {
                            key: json!([form, from]),
                            doc_id: None,
                        }),
                        end: Some(KeyBound {
                            key: json!([form, from + 7 * DAY_MS]),
                            doc_id: None,
                        }),
                        ..KeyRange::default()
                    };
                    let mut grouped = GroupedReduce::new(&reducer, Grouping::All);
                    let mut rows = 0;
                    for row in medic_group.scan(form_view, &range) {
                        let row = row.map_err(|error| anyhow::anyhow!("{error}"))?;
                        grouped
                            .push(&row)
                            .map_err(|error| anyhow::anyhow!("{error}"))?;
                        rows += 1;
                    }
                    grouped
                        .finish()
                        .map_err(|error| anyhow::anyhow!("{error}"))?;
                    Ok(rows)
                })?;
                Ok((key, range, reduce))
            }
        })
        .await??;
    drop(groups);
    drop(views);
    let docs_per_sec = docs as f64 / build_secs;
    Ok(ViewsReport {
        vbuckets,
        docs,
        cores,
        load_secs,
        build_secs,
        docs_per_sec,
        docs_per_sec_per_core: docs_per_sec / cores as f64,
        cpu_percent: 100.0 * cpu_secs / (build_secs * cores as f64),
        docs_per_cpu_sec: docs as f64 / cpu_secs.max(1e-9),
        load_average,
        key_rows,
        range_rows,
        reduce_rows,
        key_p50_us: micros(&key_histogram, 0.5),
        key_p99_us: micros(&key_histogram, 0.99),
        range_p50_us: micros(&range_histogram, 0.5),
        range_p99_us: micros(&range_histogram, 0.99),
        reduce_p50_us: micros(&reduce_histogram, 0.5),
        reduce_p99_us: micros(&reduce_histogram, 0.99),
    })
}

pub async fn run(args: ViewsArgs) -> anyhow::Result<Vec<ViewsReport>> {
    let docs = if args.full { 800_000 } else { args.docs };
    let mut reports = Vec::new();
    if !args.json {
        println!(
            "{:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>5} {:>14} {:>16} {:>16}",
            "vbuckets",
            "docs",
            "load_s",
            "build_s",
            "docs/s",
            "docs/cpus",
            "cpu%",
            "load",
            "key p50/p99us",
            "range p50/p99us",
            "reduce p50/p99us"
        );
    }
    for &vbuckets in &args.vbuckets {
        let report = run_one(&args, docs, vbuckets).await?;
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!(
                "{:>8} {:>8} {:>8.2} {:>8.2} {:>8.0} {:>9.0} {:>6.1} {:>5.1} {:>14} {:>16} {:>16}",
                report.vbuckets,
                report.docs,
                report.load_secs,
                report.build_secs,
                report.docs_per_sec,
                report.docs_per_cpu_sec,
                report.cpu_percent,
                report.load_average,
                format!("{}/{}", report.key_p50_us, report.key_p99_us),
                format!("{}/{}", report.range_p50_us, report.range_p99_us),
                format!("{}/{}", report.reduce_p50_us, report.reduce_p99_us),
            );
        }
        reports.push(report);
        // Let RocksDB's background threads of the previous run finish before the next.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(reports)
}
