//! `GET|POST /{db}/_changes`: the bucket's change streams as CouchDB feeds — `normal`,
//! `longpoll`, `continuous` and `eventsource` — with `since` (opaque per-vbucket sequence
//! vectors, `0` or `now`), `limit`, `descending`, `include_docs`, `style=all_docs`,
//! `heartbeat`, `timeout` and the filters `_doc_ids`, `_selector`, `_design`, `_view` and
//! JavaScript `ddoc/name` functions (`js_filter.rs`).
//!
//! Rows are produced in batches by a task that owns the bucket handle and writes into the
//! response body's channel; a client that goes away closes the channel and ends the task.
//! The status line waits for the feed's first bytes (CouchDB's delayed responses): a failure
//! before them, such as a JavaScript filter that throws or runs out of time on the first
//! batch, is answered with its own status; a failure after them ends the body with an
//! `{"error", "reason"}` line, as CouchDB does.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde_json::Value;
use settee_engine::{ChangeEntry, Keyspace, SeqVector};
use tokio::sync::{mpsc, oneshot};

use crate::auth::Operation;
use crate::couch_doc::{render_doc, RenderOptions};
use crate::db_api::open;
use crate::doc_api::attachment_fetcher;
use crate::error::{ApiError, ApiResult};
use crate::js_filter::FilterBudget;
use crate::request::Req;
use crate::response::{channel_body, json_string, HttpResponse, STREAM_CHUNK_BYTES_MAX};
use crate::router::not_allowed;
use crate::HttpState;
use settee_mango::Selector;

/// Rows rendered per batch before the task yields to send them.
const ROWS_PER_BATCH: usize = 500;
/// CouchDB's `changes_timeout` default (ms).
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// `heartbeat=true` means this many ms, as in CouchDB.
const DEFAULT_HEARTBEAT_MS: u64 = 60_000;
/// Entries scanned per batch when a filter rejects most of them.
const SCANNED_PER_BATCH: usize = 5_000;

/// A feed's type (`feed=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    Normal,
    Longpoll,
    Continuous,
    EventSource,
}

#[derive(Clone, Debug)]
enum Filter {
    None,
    DocIds(HashSet<String>),
    Selector(Selector),
    Design,
    /// `filter=ddoc/name` or `filter=_view` (JavaScript, on the node's pool).
    Js(crate::js_filter::JsFilter),
}

#[derive(Clone, Debug)]
struct FeedOptions {
    feed: Feed,
    /// This node's name, in `last_seq` (CouchDB's form names the node).
    node_name: String,
    limit: Option<usize>,
    descending: bool,
    include_docs: bool,
    all_docs_style: bool,
    heartbeat_ms: Option<u64>,
    timeout_ms: u64,
    filter: Filter,
    /// What the JavaScript filter calls of one request (or batch) may take together.
    filter_budget: Duration,
    render: RenderOptions,
    /// The vbuckets read when another node scattered the request here (`None`: all).
    only: Option<Arc<[bool]>>,
}

impl FeedOptions {
    /// A cursor after `since` over the vbuckets this feed reads.
    fn cursor<'a>(
        &self,
        keyspace: &'a Keyspace,
        since: SeqVector,
    ) -> Result<settee_engine::ChangeCursor<'a>, settee_engine::EngineError> {
        let cursor = keyspace.changes(since)?;
        Ok(match &self.only {
            Some(only) => cursor.only(only),
            None => cursor,
        })
    }
}

pub async fn changes(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let body = match req.method {
        Method::GET | Method::HEAD => Value::Null,
        Method::POST => {
            req.require_json_content_type()?;
            let bytes = req.body_bytes(state.config.max_request_size_bytes).await?;
            if bytes.iter().all(|byte| byte.is_ascii_whitespace()) {
                Value::Null
            } else {
                match crate::request::parse_json(&bytes, state.config.max_json_depth)? {
                    body @ Value::Object(_) => body,
                    _ => {
                        return Err(ApiError::BadRequest(
                            "Request body must be a JSON object".into(),
                        ))
                    }
                }
            }
        }
        _ => return Err(not_allowed("GET,HEAD,POST")),
    };
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let options = feed_options(state, req, &keyspace, &body)?;
    // An EventSource reconnecting names the last event it saw; that wins over `since`, as in
    // CouchDB (a browser repeats the URL it first opened, `since` included).
    let since = match req.header("last-event-id").or(req.param("since")) {
        None => SeqVector::zero(keyspace.bucket().vbuckets()),
        Some("now") => keyspace.high_seqnos()?,
        Some(text) => parse_seq(&keyspace, text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Malformed sequence supplied in 'since' parameter: {text}"
            ))
        })?,
    };
    if options.feed != Feed::Normal {
        let open_now = state.open_feeds.fetch_add(1, Ordering::AcqRel) + 1;
        if open_now > state.config.max_open_feeds {
            state.open_feeds.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::ServiceUnavailable(
                "too many open _changes feeds".into(),
            ));
        }
    }
    let (sender, receiver) = mpsc::channel::<Bytes>(16);
    let (head, started) = oneshot::channel();
    let shutdown = state.shutdown.clone();
    let feed = options.feed;
    let counter = if feed == Feed::Normal {
        None
    } else {
        Some(FeedGuard(state.open_feeds.clone()))
    };
    let output = Output::new(feed, sender, head);
    tokio::spawn(async move {
        let _counter = counter;
        run_feed(keyspace, since, options, output, shutdown).await;
    });
    // A task that ended without a word (it cannot) leaves whatever it sent.
    if let Ok(Err(error)) = started.await {
        return Err(error);
    }
    let mut response = Response::new(channel_body(receiver));
    let content_type = match feed {
        Feed::EventSource => "text/event-stream",
        _ => "application/json",
    };
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("must-revalidate"),
    );
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

/// The feed task's side of the response: the body channel, and the status line held back
/// until the first bytes (see the module documentation).
struct Output {
    sender: mpsc::Sender<Bytes>,
    /// Fired with the first bytes (`Ok`: answer 200) or with a failure before them.
    head: Option<oneshot::Sender<ApiResult<()>>>,
    /// `{"results":[` of a normal or longpoll feed, sent with the first bytes.
    prefix: Vec<u8>,
}

impl Output {
    fn new(
        feed: Feed,
        sender: mpsc::Sender<Bytes>,
        head: oneshot::Sender<ApiResult<()>>,
    ) -> Output {
        let prefix = match feed {
            Feed::Normal | Feed::Longpoll => b"{\"results\":[\n".to_vec(),
            Feed::Continuous | Feed::EventSource => Vec::new(),
        };
        Output {
            sender,
            head: Some(head),
            prefix,
        }
    }

    /// Sends `bytes` (after the held-back prefix); false once the client has gone.
    async fn send(&mut self, bytes: Vec<u8>) -> bool {
        if let Some(head) = self.head.take() {
            let _ = head.send(Ok(()));
        }
        let bytes = if self.prefix.is_empty() {
            bytes
        } else {
            let mut all = std::mem::take(&mut self.prefix);
            all.extend_from_slice(&bytes);
            all
        };
        bytes.is_empty() || self.sender.send(Bytes::from(bytes)).await.is_ok()
    }

    /// Lets the status line go before the feed waits for writes (CouchDB sends its headers
    /// then too), so a client sees the feed open.
    async fn release(&mut self) -> bool {
        self.send(Vec::new()).await
    }

    /// Ends the feed with `error`: as the response's status if nothing was sent yet, else as
    /// a last line of the body.
    async fn fail(&mut self, error: ApiError) {
        match self.head.take() {
            Some(head) => {
                let _ = head.send(Err(error));
            }
            None => {
                let mut line = error.body().to_string().into_bytes();
                line.push(b'\n');
                let _ = self.sender.send(Bytes::from(line)).await;
            }
        }
    }
}

/// Decrements the open-feeds counter when the feed task ends, however it ends.
struct FeedGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for FeedGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn feed_options(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    body: &Value,
) -> ApiResult<FeedOptions> {
    let feed = feed_param(req)?;
    let heartbeat_ms = heartbeat_param(req)?;
    let timeout_ms = req
        .u64_param("timeout")?
        .unwrap_or(DEFAULT_TIMEOUT_MS)
        .min(state.config.changes_timeout_max_ms);
    let filter = match req.param("filter") {
        None => Filter::None,
        Some("_doc_ids") => {
            let ids = match req.json_param("doc_ids")? {
                Some(ids) => ids,
                None => body.get("doc_ids").cloned().unwrap_or(Value::Null),
            };
            let ids = ids.as_array().ok_or_else(|| {
                ApiError::BadRequest("`doc_ids` filter parameter is not a list of doc ids.".into())
            })?;
            Filter::DocIds(
                ids.iter()
                    .filter_map(|id| id.as_str().map(str::to_string))
                    .collect(),
            )
        }
        Some("_selector") => {
            let selector = body.get("selector").cloned().ok_or_else(|| {
                ApiError::BadRequest("Selector must be specified in POST payload".into())
            })?;
            // CouchDB answers a bad `_changes` selector with `bad_request` and Mango's reason.
            Filter::Selector(
                Selector::parse(&selector)
                    .map_err(|error| ApiError::BadRequest(error.reason().to_string()))?,
            )
        }
        Some("_design") => Filter::Design,
        Some("_view") => {
            let view = req.param("view").ok_or_else(|| {
                ApiError::BadRequest("`view` filter parameter is not provided.".into())
            })?;
            Filter::Js(
                state
                    .js_filters
                    .view(keyspace, req.design.as_deref(), view)?,
            )
        }
        Some(other) if other.starts_with('_') => {
            return Err(ApiError::BadRequest(format!(
                "unknown builtin filter name: {other}"
            )))
        }
        Some(other) => Filter::Js(state.js_filters.function(
            keyspace,
            req,
            other,
            body,
            &state.config.node_name,
        )?),
    };
    let mut render = crate::doc_api::render_options(req, keyspace)?;
    render.revs = false;
    Ok(FeedOptions {
        feed,
        node_name: state.config.node_name.clone(),
        limit: req.u64_param("limit")?.map(|limit| limit as usize),
        descending: req.flag("descending", false),
        include_docs: req.flag("include_docs", false),
        all_docs_style: req.param("style") == Some("all_docs"),
        heartbeat_ms,
        timeout_ms,
        filter,
        filter_budget: Duration::from_millis(state.config.changes_filter_timeout_ms),
        render,
        only: req.vbuckets.clone(),
    })
}

/// Renders one change row, or `None` when the filter rejects it; `Err` when a JavaScript
/// filter failed (it threw, or `budget` ran out).
fn change_row(
    keyspace: &Keyspace,
    entry: &ChangeEntry,
    seq: &str,
    options: &FeedOptions,
    budget: &mut FilterBudget,
) -> ApiResult<Option<Vec<u8>>> {
    let id = String::from_utf8_lossy(&entry.key).into_owned();
    match &options.filter {
        Filter::DocIds(ids) if !ids.contains(&id) => return Ok(None),
        Filter::Design if !id.starts_with("_design/") => return Ok(None),
        _ => {}
    }
    let needs_record = options.include_docs
        || options.all_docs_style
        || matches!(options.filter, Filter::Selector(_) | Filter::Js(_));
    // A record that does not decode, or a body past the document limits, reads as no document:
    // counted and logged once, and the feed goes on (issue 18).
    let record = if needs_record {
        keyspace.read_record_or_skip(&entry.key).ok().flatten()
    } else {
        None
    };
    let rendered = match (&record, needs_record) {
        (Some(record), true) => record.winner().and_then(|winner| {
            crate::doc_api::within_limits(keyspace, &id, winner).ok()?;
            render_doc(
                &id,
                record,
                winner,
                &options.render,
                &attachment_fetcher(keyspace, &id),
            )
            .ok()
        }),
        _ => None,
    };
    if let Filter::Js(filter) = &options.filter {
        let doc = rendered
            .as_ref()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .unwrap_or_else(|| "null".to_string());
        if !filter.passes(doc, budget)? {
            return Ok(None);
        }
    }
    if let Filter::Selector(selector) = &options.filter {
        let doc: Value = rendered
            .as_ref()
            .and_then(|bytes| serde_json::from_slice(bytes).ok())
            .unwrap_or(Value::Null);
        if !selector.matches(&doc) {
            return Ok(None);
        }
    }
    let mut out = format!(
        "{{\"seq\":\"{seq}\",\"id\":{},\"changes\":[",
        json_string(&id)
    );
    match (&record, options.all_docs_style) {
        (Some(record), true) => {
            for (index, leaf) in record.leaves.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&format!("{{\"rev\":\"{}\"}}", leaf.rev));
            }
        }
        _ => out.push_str(&format!("{{\"rev\":\"{}\"}}", entry.rev)),
    }
    out.push(']');
    if entry.deleted {
        out.push_str(",\"deleted\":true");
    }
    let mut out = out.into_bytes();
    if options.include_docs {
        out.extend_from_slice(b",\"doc\":");
        match rendered {
            Some(doc) => out.extend_from_slice(&doc),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    Ok(Some(out))
}

/// A batch of rows from a cursor kept across batches (a new cursor reads a chunk from every
/// vbucket before it yields anything, so one per batch of 500 rows read up to 64 x 256
/// entries for each 500: a long `_changes` page took 0.4 s at 40,000 documents); advances
/// `position`. Returns (rows, exhausted).
fn next_batch_from(
    keyspace: &Keyspace,
    cursor: &mut settee_engine::ChangeCursor<'_>,
    position: &mut SeqVector,
    options: &FeedOptions,
    rows_max: usize,
    budget: &mut FilterBudget,
) -> ApiResult<(Vec<Vec<u8>>, bool)> {
    let mut rows = Vec::new();
    let mut scanned = 0;
    // A batch is one body chunk: bounded in bytes too (documents may be large).
    let mut bytes = 0usize;
    loop {
        if rows.len() >= rows_max || scanned >= SCANNED_PER_BATCH || bytes >= STREAM_CHUNK_BYTES_MAX
        {
            *position = settee_engine::ChangeCursor::position(cursor).clone();
            return Ok((rows, false));
        }
        match cursor.next() {
            Some(Ok(entry)) => {
                scanned += 1;
                let seq = settee_engine::ChangeCursor::position(cursor).encode();
                if let Some(row) = change_row(keyspace, &entry, &seq, options, budget)? {
                    bytes += row.len();
                    rows.push(row);
                }
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "change stream read failed");
                *position = settee_engine::ChangeCursor::position(cursor).clone();
                return Ok((rows, true));
            }
            None => {
                *position = cursor.end_position();
                return Ok((rows, true));
            }
        }
    }
}

/// `feed=` as CouchDB reads it.
pub fn feed_param(req: &Req) -> ApiResult<Feed> {
    Ok(match req.param("feed").unwrap_or("normal") {
        "normal" => Feed::Normal,
        "longpoll" => Feed::Longpoll,
        // CouchDB takes `live` as another name of `continuous`.
        "continuous" | "live" => Feed::Continuous,
        "eventsource" => Feed::EventSource,
        other => {
            return Err(ApiError::BadRequest(format!(
            "Supported `feed` types: normal, continuous, live, longpoll, eventsource; got {other}"
        )))
        }
    })
}

/// `heartbeat=` (ms) as CouchDB reads it.
pub fn heartbeat_param(req: &Req) -> ApiResult<Option<u64>> {
    Ok(match req.param("heartbeat") {
        None => None,
        Some("true") | Some("") => Some(DEFAULT_HEARTBEAT_MS),
        // CouchDB's two reasons: a number that is not positive, and anything else.
        Some(text) => match text.parse::<i64>() {
            Ok(ms) if ms > 0 => Some(ms as u64),
            Ok(_) => {
                return Err(ApiError::BadRequest(
                    "The heartbeat value should be a positive integer (in milliseconds).".into(),
                ))
            }
            Err(_) => return Err(ApiError::BadRequest(
                "Invalid heartbeat value. Expecting a positive integer value (in milliseconds)."
                    .into(),
            )),
        },
    })
}

/// What a waiting feed sends as its heartbeat.
pub fn heartbeat_bytes(feed: Feed) -> Vec<u8> {
    match feed {
        Feed::EventSource => b"event: heartbeat\ndata: \n\n".to_vec(),
        _ => b"\n".to_vec(),
    }
}

/// Frames rows for the feed type.
pub fn frame(feed: Feed, row: &[u8], first: bool) -> Vec<u8> {
    match feed {
        Feed::Normal | Feed::Longpoll => {
            let mut out = Vec::with_capacity(row.len() + 3);
            if !first {
                out.extend_from_slice(b",\n");
            }
            out.extend_from_slice(row);
            out
        }
        Feed::Continuous => {
            let mut out = row.to_vec();
            out.push(b'\n');
            out
        }
        Feed::EventSource => {
            let seq = serde_json::from_slice::<Value>(row)
                .ok()
                .and_then(|value| {
                    value
                        .get("seq")
                        .and_then(|seq| seq.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let mut out = b"data: ".to_vec();
            out.extend_from_slice(row);
            out.extend_from_slice(format!("\nid: {seq}\n\n").as_bytes());
            out
        }
    }
}

/// A sequence this bucket handed out, in either form (docs/format/update-seq.md).
pub fn parse_seq(keyspace: &Keyspace, text: &str) -> Option<SeqVector> {
    let vbuckets = keyspace.bucket().vbuckets();
    SeqVector::decode(text, vbuckets)
        .or_else(|| settee_http_wire::couch_seq::decode(text, vbuckets).map(SeqVector::from_seqnos))
}

/// `position` in CouchDB's form, for sequences an answer gives once (`update_seq`,
/// `last_seq`); rows of a feed keep the compact form.
pub fn couch_seq(node: &str, keyspace: &Keyspace, position: &SeqVector) -> String {
    let bucket = keyspace.bucket();
    let uuids: Vec<u64> = (0..bucket.vbuckets())
        .map(|vbucket| bucket.vbucket_uuid(vbucket))
        .collect();
    settee_http_wire::couch_seq::encode(position.seqnos(), &uuids, node)
}

async fn run_feed(
    keyspace: Keyspace,
    since: SeqVector,
    options: FeedOptions,
    mut out: Output,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let feed = options.feed;
    let mut position = since;
    let mut emitted = 0usize;
    let limit = options.limit.unwrap_or(usize::MAX);
    // A normal feed's filter work shares one budget; a longpoll or continuous feed renews it
    // for each batch.
    let mut budget = FilterBudget::new(options.filter_budget);
    if options.descending && feed == Feed::Normal {
        descending_feed(&keyspace, position, &options, &mut budget, out).await;
        return;
    }
    let deadline = (options.heartbeat_ms.is_none() || feed == Feed::Longpoll)
        .then(|| tokio::time::Instant::now() + Duration::from_millis(options.timeout_ms));
    let mut changed = keyspace.bucket().subscribe();
    let mut pending = 0u64;
    loop {
        changed.borrow_and_update();
        let mut exhausted = false;
        // One cursor while rows flow; a new one after each wait, to see the new writes.
        let mut cursor = match options.cursor(&keyspace, position.clone()) {
            Ok(cursor) => cursor,
            Err(error) => {
                out.fail(error.into()).await;
                return;
            }
        };
        while emitted < limit {
            if feed != Feed::Normal {
                budget.renew();
            }
            let batch = next_batch_from(
                &keyspace,
                &mut cursor,
                &mut position,
                &options,
                (limit - emitted).min(ROWS_PER_BATCH),
                &mut budget,
            );
            let (rows, done) = match batch {
                Ok(batch) => batch,
                Err(error) => {
                    out.fail(error).await;
                    return;
                }
            };
            // One body chunk per batch: a chunk per row cost a write per row (4,000 rows of
            // a replicator's page took 0.2 s).
            let mut chunk = Vec::new();
            for row in rows {
                chunk.extend_from_slice(&frame(feed, &row, emitted == 0));
                emitted += 1;
            }
            if !chunk.is_empty() && !out.send(chunk).await {
                return;
            }
            if done {
                exhausted = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        if !exhausted {
            pending = count_pending(&keyspace, &options, &position);
        }
        let finished =
            feed == Feed::Normal || emitted >= limit || (feed == Feed::Longpoll && emitted > 0);
        if finished {
            break;
        }
        if !out.release().await {
            return;
        }
        // Wait for a write, a heartbeat, the timeout or shutdown.
        let heartbeat = options.heartbeat_ms.map(Duration::from_millis);
        let woke = tokio::select! {
            result = changed.changed() => if result.is_err() { Wake::Stop } else { Wake::Changed },
            _ = sleep_opt(heartbeat) => Wake::Heartbeat,
            _ = sleep_until_opt(deadline) => Wake::Stop,
            _ = shutdown.changed() => Wake::Stop,
            _ = out.sender.closed() => return,
        };
        match woke {
            Wake::Changed => continue,
            Wake::Heartbeat => {
                if !out.send(heartbeat_bytes(feed)).await {
                    return;
                }
            }
            Wake::Stop => break,
        }
    }
    let last_seq = couch_seq(&options.node_name, &keyspace, &position);
    let tail = match feed {
        Feed::Normal | Feed::Longpoll => {
            format!("\n],\n\"last_seq\":\"{last_seq}\",\"pending\":{pending}}}\n").into_bytes()
        }
        Feed::Continuous => {
            format!("{{\"last_seq\":\"{last_seq}\",\"pending\":{pending}}}\n").into_bytes()
        }
        Feed::EventSource => Vec::new(),
    };
    if !out.send(tail).await {
        tracing::debug!("changes client went away before the end of the feed");
    }
}

enum Wake {
    Changed,
    Heartbeat,
    Stop,
}

async fn sleep_opt(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Entries counted exactly before `pending` falls back to an estimate.
const PENDING_SCAN_MAX: usize = 1_000;

/// Entries after `position`: counted when few, else estimated from the vbuckets' high seqnos
/// (an upper bound: updated documents leave gaps). Every page of a replicator's `_changes`
/// reads carries `pending`; counting a large backlog on each page made reading a 100,000-change
/// feed in pages of 500 quadratic.
fn count_pending(keyspace: &Keyspace, options: &FeedOptions, position: &SeqVector) -> u64 {
    let Ok(cursor) = options.cursor(keyspace, position.clone()) else {
        return 0;
    };
    let counted = cursor.take(PENDING_SCAN_MAX).count();
    if counted < PENDING_SCAN_MAX {
        return counted as u64;
    }
    let Ok(high) = keyspace.high_seqnos() else {
        return 0;
    };
    let read = |vbucket: usize| {
        options
            .only
            .as_ref()
            .is_none_or(|only| only.get(vbucket) == Some(&true))
    };
    high.seqnos()
        .iter()
        .zip(position.seqnos())
        .enumerate()
        .filter(|(vbucket, _)| read(*vbucket))
        .map(|(_, (high, at))| high.saturating_sub(*at))
        .sum::<u64>()
        .max(counted as u64)
}

/// `descending=true`: newest first, read backwards (`Bucket::changes_descending`) and sent in
/// chunks as it is read, so a long feed is never held whole; `last_seq` is the last row's.
async fn descending_feed(
    keyspace: &Keyspace,
    since: SeqVector,
    options: &FeedOptions,
    budget: &mut FilterBudget,
    mut out: Output,
) {
    let limit = options.limit.unwrap_or(usize::MAX);
    let mut cursor = match keyspace.changes_descending(since) {
        Ok(cursor) => match &options.only {
            Some(only) => cursor.only(only),
            None => cursor,
        },
        Err(error) => {
            out.fail(error.into()).await;
            return;
        }
    };
    // A scattered part gives each row's CAS, by which the front node merges the nodes' rows
    // (settee-gather's `merge_changes_descending`).
    let mut cas = options.only.as_ref().map(|_| String::new());
    let mut emitted = 0usize;
    let mut last_seq = String::from("0");
    let mut done = false;
    while !done && emitted < limit {
        // One body chunk per batch, bounded in rows, bytes and entries read.
        let mut chunk = Vec::new();
        let mut scanned = 0;
        while emitted < limit && scanned < SCANNED_PER_BATCH && chunk.len() < STREAM_CHUNK_BYTES_MAX
        {
            match cursor.next() {
                Some(Ok(entry)) => {
                    scanned += 1;
                    let seq = cursor.position().encode();
                    let row = match change_row(keyspace, &entry, &seq, options, budget) {
                        Ok(row) => row,
                        Err(error) => {
                            if !chunk.is_empty() {
                                let _ = out.send(chunk).await;
                            }
                            out.fail(error).await;
                            return;
                        }
                    };
                    if let Some(row) = row {
                        chunk.extend_from_slice(&frame(Feed::Normal, &row, emitted == 0));
                        if let Some(cas) = cas.as_mut() {
                            if emitted > 0 {
                                cas.push(',');
                            }
                            cas.push_str(&entry.cas.to_string());
                        }
                        emitted += 1;
                        last_seq = seq;
                    }
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "change stream read failed");
                    done = true;
                    break;
                }
                None => {
                    done = true;
                    break;
                }
            }
        }
        if !chunk.is_empty() && !out.send(chunk).await {
            return;
        }
        tokio::task::yield_now().await;
    }
    let cas = cas.map_or_else(String::new, |cas| format!(",\"cas\":[{cas}]"));
    let tail = format!("\n],\n\"last_seq\":\"{last_seq}\",\"pending\":0{cas}}}\n");
    let _ = out.send(tail.into_bytes()).await;
}
