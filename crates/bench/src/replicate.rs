//! `settee bench replicate`: issue 6's acceptance run. Loads `--docs` documents into a source
//! database (every `--attachment-every`th with an attachment, some updated, deleted or in
//! conflict), asks one node to replicate (`POST /_replicate` on the source node to push, on the
//! target node to pull), times it, then compares the two databases: the same documents, the
//! same leaf revisions with the same deleted flags, the same winners, bodies and conflicts.
//! Speaks only the CouchDB HTTP API, so either side may be any CouchDB-compatible server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::Engine as _;
use hyper::Method;
use serde_json::{json, Value};
use settee_replicator::client::{new_client, Peer};
use settee_replicator::endpoint::RemoteDb;

#[derive(clap::Args, Debug, Clone)]
pub struct ReplicateArgs {
    /// Source database URL, credentials included (`http://admin:pw@127.0.0.1:5984/src`).
    #[arg(long)]
    pub source: String,
    /// Target database URL.
    #[arg(long)]
    pub target: String,
    /// `push`: the source node runs the replication; `pull`: the target node does.
    #[arg(long, default_value = "push")]
    pub mode: String,
    #[arg(long, default_value_t = 100_000)]
    pub docs: usize,
    /// Every Nth document carries a 1 KiB attachment (0: none).
    #[arg(long, default_value_t = 100)]
    pub attachment_every: usize,
    #[arg(long, default_value_t = 500)]
    pub worker_batch_size: usize,
    #[arg(long, default_value_t = 4)]
    pub worker_processes: usize,
    /// Skip loading (the source already holds the documents).
    #[arg(long)]
    pub no_load: bool,
}

/// Documents per `_bulk_docs` while loading.
const LOAD_BATCH: usize = 1000;
/// Rows per page while comparing.
const COMPARE_PAGE: usize = 5000;

fn peer(url: &str) -> anyhow::Result<Peer> {
    let remote = RemoteDb::parse(url, &[], None).map_err(|error| anyhow::anyhow!("{error}"))?;
    Peer::new(
        new_client(),
        &remote,
        None,
        Duration::from_secs(3600),
        3,
        16,
    )
    .map_err(|error| anyhow::anyhow!("{error}"))
}

/// The node's root URL (`http://user:pw@host:port`) of a database URL.
fn node_url(db_url: &str) -> anyhow::Result<String> {
    let trimmed = db_url.trim_end_matches('/');
    let (node, _) = trimmed
        .rsplit_once('/')
        .context("database URL without a path")?;
    Ok(node.to_string())
}

async fn recreate(db: &Peer) -> anyhow::Result<()> {
    let _ = db
        .send(Method::DELETE, "", None, "application/json", None)
        .await;
    db.create_db(&serde_json::Map::new())
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))
}

async fn load(source: &Peer, args: &ReplicateArgs) -> anyhow::Result<()> {
    let attachment = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; 1024]);
    for start in (0..args.docs).step_by(LOAD_BATCH) {
        let docs: Vec<Value> = (start..(start + LOAD_BATCH).min(args.docs))
            .map(|n| {
                let mut doc = json!({"_id": format!("doc{n:08}"), "n": n, "text": "replicate me"});
                if args.attachment_every > 0 && n % args.attachment_every == 0 {
                    doc["_attachments"] = json!({"a.bin": {"content_type": "application/octet-stream", "data": attachment}});
                }
                doc
            })
            .collect();
        source
            .json(Method::POST, "_bulk_docs", Some(&json!({ "docs": docs })))
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    // Some history beyond creates: an update, a deletion and a conflict per thousand.
    let mut edits = Vec::new();
    for n in (0..args.docs).step_by(1000) {
        edits.push(json!({"_id": format!("doc{n:08}"), "_rev": "2-bench", "_revisions": {"start": 2, "ids": ["bench", "root"]}, "conflict": true}));
    }
    if !edits.is_empty() {
        source
            .json(
                Method::POST,
                "_bulk_docs",
                Some(&json!({"docs": edits, "new_edits": false})),
            )
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    for n in (1..args.docs).step_by(1000) {
        let id = format!("doc{n:08}");
        let doc = source
            .get_doc(&id)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        if let Some(rev) = doc.as_ref().and_then(|doc| doc["_rev"].as_str()) {
            let path = format!("{id}?rev={rev}");
            source
                .json(Method::DELETE, &path, None)
                .await
                .map_err(|error| anyhow::anyhow!("{error}"))?;
        }
    }
    Ok(())
}

/// id -> (sorted leaf revisions with deleted flags, winner with `_conflicts`).
async fn snapshot(db: &Peer) -> anyhow::Result<BTreeMap<String, (Vec<(String, bool)>, Value)>> {
    let mut out: BTreeMap<String, (Vec<(String, bool)>, Value)> = BTreeMap::new();
    let mut since = json!(0);
    loop {
        let path = format!(
            "_changes?style=all_docs&limit={COMPARE_PAGE}&since={}",
            Peer::encode_query(&settee_replicator::changes::seq_param(&since))
        );
        let page = db
            .json(Method::GET, &path, None)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        let results = page["results"].as_array().cloned().unwrap_or_default();
        for row in &results {
            let id = row["id"].as_str().unwrap_or("").to_string();
            let deleted = row["deleted"].as_bool().unwrap_or(false);
            let mut revs: Vec<(String, bool)> = row["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|change| change["rev"].as_str().map(|rev| (rev.to_string(), false)))
                .collect();
            revs.sort();
            if deleted && revs.len() == 1 {
                revs[0].1 = true;
            }
            out.insert(id, (revs, Value::Null));
        }
        since = page["last_seq"].clone();
        if results.len() < COMPARE_PAGE {
            break;
        }
    }
    let mut start: Option<String> = None;
    loop {
        let mut path = format!("_all_docs?include_docs=true&conflicts=true&limit={COMPARE_PAGE}");
        if let Some(key) = &start {
            path.push_str(&format!(
                "&skip=1&startkey={}",
                Peer::encode_query(&json!(key).to_string())
            ));
        }
        let page = db
            .json(Method::GET, &path, None)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        let rows = page["rows"].as_array().cloned().unwrap_or_default();
        for row in &rows {
            let id = row["id"].as_str().unwrap_or("").to_string();
            if let Some(entry) = out.get_mut(&id) {
                entry.1 = row["doc"].clone();
            } else {
                bail!("{id} is in _all_docs but not in _changes");
            }
            start = Some(id);
        }
        if rows.len() < COMPARE_PAGE {
            break;
        }
    }
    Ok(out)
}

pub async fn run(args: ReplicateArgs) -> anyhow::Result<Value> {
    let source = peer(&args.source)?;
    let target = peer(&args.target)?;
    if !args.no_load {
        recreate(&source).await?;
        let started = Instant::now();
        load(&source, &args).await?;
        eprintln!(
            "loaded {} documents in {:.1}s",
            args.docs,
            started.elapsed().as_secs_f64()
        );
    }
    let _ = target
        .send(Method::DELETE, "", None, "application/json", None)
        .await;
    let runner = match args.mode.as_str() {
        "push" => node_url(&args.source)?,
        "pull" => node_url(&args.target)?,
        other => bail!("--mode must be push or pull, not {other}"),
    };
    let node = peer(&format!("{runner}/_replicate"))?;
    let request = json!({
        "source": args.source, "target": args.target, "create_target": true,
        "worker_batch_size": args.worker_batch_size, "worker_processes": args.worker_processes,
    });
    let started = Instant::now();
    // The peer's base is ".../_replicate/": post to it with an empty relative path.
    let answer = node
        .send(
            Method::POST,
            "",
            Some(bytes::Bytes::from(request.to_string())),
            "application/json",
            None,
        )
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let answer = node
        .expect_ok(answer, "")
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let written = answer["history"][0]["docs_written"].as_u64().unwrap_or(0);
    let compare_started = Instant::now();
    let (left, right) = (snapshot(&source).await?, snapshot(&target).await?);
    let mut differences = 0usize;
    for (id, entry) in &left {
        if right.get(id) != Some(entry) {
            if differences < 5 {
                eprintln!("differs: {id}: {entry:?} vs {:?}", right.get(id));
            }
            differences += 1;
        }
    }
    differences += right.keys().filter(|id| !left.contains_key(*id)).count();
    let report = json!({
        "mode": args.mode, "documents": left.len(), "revisions_written": written,
        "seconds": (seconds * 100.0).round() / 100.0,
        "docs_per_second": (left.len() as f64 / seconds).round(),
        "equal": differences == 0, "differences": differences,
        "compare_seconds": (compare_started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    println!("{report}");
    if differences > 0 {
        bail!("the databases differ in {differences} documents");
    }
    Ok(report)
}
