//! `_changes` of a database whose vbuckets are active on several nodes (docs/format/
//! cluster-transport.md, "Whole-bucket HTTP requests"). Every feed type is built from normal
//! feeds asked of the nodes from the position the merged feed has reached (each node answers
//! for its own vbuckets; `settee-gather` merges their rows, each row's `seq` naming every
//! vbucket): a normal feed is one round; a longpoll feed asks again until a round has rows or
//! the wait is over; a continuous or eventsource feed streams each round's rows as they come,
//! asks again every [`POLL_INTERVAL_MS`] while nothing changed, sends heartbeats, and ends
//! with `last_seq` (continuous) at its timeout when it has no heartbeat, as on one node. A
//! `descending=true` normal feed asks each node for its rows newest first, with their CAS, and
//! merges them by it (`settee_gather::merge_changes_descending`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use settee_engine::{Keyspace, SeqVector};
use settee_gather::MergedChanges;
use settee_http::auth::Operation;
use settee_http::changes_api::{self, Feed};
use settee_http::db_api::open;
use settee_http::error::{ApiError, ApiResult};
use settee_http::forward::{ForwardHttp, ForwardHttpReply};
use settee_http::request::Req;
use settee_http::response::{channel_body, json_bytes, HttpResponse};
use settee_http::{ClusterView, HttpState};
use tokio::sync::mpsc;

use crate::{gather_answers, gather_through, malformed, request_for_nodes};

/// How often a waiting feed asks the nodes again while nothing changed.
const POLL_INTERVAL_MS: u64 = 250;

/// One feed's round trips to the nodes: the request they get, with the position filled in.
struct Rounds {
    cluster: Arc<dyn ClusterView>,
    db: String,
    /// A JavaScript filter's design document, carried to the nodes (most do not hold it).
    design: Option<Vec<u8>>,
    /// The client's request with `since` left out; each round adds its own.
    template: ForwardHttp,
    /// Query pairs of the nodes' normal feed (the client's, less the feed type and waits).
    query: Vec<(String, String)>,
    path: String,
    vbuckets: u16,
}

impl Rounds {
    /// The nodes' request target: the client's path and query, `since`, `limit` and
    /// `descending` this round's.
    fn target(&self, since: Option<&str>, limit: Option<usize>, descending: bool) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &self.query {
            query.append_pair(name, value);
        }
        if descending {
            query.append_pair("descending", "true");
        }
        if let Some(since) = since {
            query.append_pair("since", since);
        }
        if let Some(limit) = limit {
            query.append_pair("limit", &limit.to_string());
        }
        format!("{}?{}", self.path, query.finish())
    }

    /// One round: every node's normal feed from `since` (the client's text the first time,
    /// then the merged position), merged after `position`.
    async fn ask(
        &self,
        since: Option<&str>,
        position: &SeqVector,
        limit: Option<usize>,
    ) -> Result<MergedChanges, ApiResult<HttpResponse>> {
        let answers = self.answers(self.target(since, limit, false)).await?;
        let parts = gather_answers(&answers);
        settee_gather::merge_changes(&parts, position, limit, self.vbuckets)
            .map_err(|error| Err(malformed(error)))
    }

    /// A `descending=true` normal feed: every node's rows newest first, with their CAS,
    /// merged by it.
    async fn ask_descending(
        &self,
        since: Option<&str>,
        position: &SeqVector,
        limit: Option<usize>,
    ) -> Result<MergedChanges, ApiResult<HttpResponse>> {
        let answers = self.answers(self.target(since, limit, true)).await?;
        let parts = gather_answers(&answers);
        settee_gather::merge_changes_descending(&parts, position, limit, self.vbuckets)
            .map_err(|error| Err(malformed(error)))
    }

    /// Every node's 200 answer to the template sent to `target`.
    async fn answers(
        &self,
        target: String,
    ) -> Result<Vec<(Vec<u16>, ForwardHttpReply)>, ApiResult<HttpResponse>> {
        let mut request = self.template.clone();
        request.target = target;
        let parts = move |groups: &[Vec<u16>]| vec![Some(request.clone()); groups.len()];
        gather_through(
            self.cluster.as_ref(),
            &self.db,
            self.design.as_deref(),
            &parts,
            &[200],
        )
        .await
    }
}

pub(crate) async fn changes(state: &HttpState, req: &mut Req, db: &str) -> ApiResult<HttpResponse> {
    let keyspace = open(state, req, db, Operation::ReadDb)?;
    let feed = changes_api::feed_param(req)?;
    let heartbeat = changes_api::heartbeat_param(req)?.map(Duration::from_millis);
    let timeout = Duration::from_millis(
        req.u64_param("timeout")?
            .unwrap_or(changes_api::DEFAULT_TIMEOUT_MS)
            .min(state.config.changes_timeout_max_ms),
    );
    let vbuckets = keyspace.bucket().vbuckets();
    // An EventSource reconnecting names the last event it saw, as on one node.
    let since_text = req
        .header("last-event-id")
        .or(req.param("since"))
        .map(str::to_owned);
    let position = match since_text.as_deref() {
        None | Some("now") => SeqVector::zero(vbuckets),
        Some(text) => changes_api::parse_seq(&keyspace, text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Malformed sequence supplied in 'since' parameter: {text}"
            ))
        })?,
    };
    let limit = req.u64_param("limit")?.map(|limit| limit as usize);
    let body = match req.method {
        Method::POST => {
            req.require_json_content_type()?;
            req.body_bytes(state.config.max_request_size_bytes)
                .await?
                .to_vec()
        }
        _ => Vec::new(),
    };
    let Some(cluster) = state.cluster.get().cloned() else {
        return Err(ApiError::ServiceUnavailable("not in a cluster".into()));
    };
    let rounds = Rounds {
        cluster,
        db: db.to_owned(),
        design: filter_design(state, req, &keyspace, db).await?,
        template: {
            let mut template = request_for_nodes(req, req.method.as_str(), String::new(), body);
            // Each round names its own `since`; the client's Last-Event-ID would win over it
            // on every node, and every round would start again from the client's position.
            template.headers.retain(|(name, _)| name != "last-event-id");
            template
        },
        query: req
            .query
            .iter()
            .filter(|(name, _)| {
                !matches!(
                    name.as_str(),
                    "feed" | "timeout" | "heartbeat" | "since" | "limit" | "descending"
                )
            })
            .cloned()
            .collect(),
        path: req.uri.path().to_owned(),
        vbuckets,
    };
    let node_name = state.config.node_name.clone();
    let last_seq =
        move |keyspace: &Keyspace, at: &SeqVector| changes_api::couch_seq(&node_name, keyspace, at);
    match feed {
        // Newest first only in a normal feed, as on one node.
        Feed::Normal if req.flag("descending", false) => {
            let merged = match rounds
                .ask_descending(since_text.as_deref(), &position, limit)
                .await
            {
                Ok(merged) => merged,
                Err(answer) => return answer,
            };
            let last = last_seq(&keyspace, &merged.last);
            Ok(raw_json(merged.finish(&last)))
        }
        Feed::Normal | Feed::Longpoll => {
            // A heartbeat shortens a longpoll wait: an empty answer keeps the connection alive.
            let wait = heartbeat.map_or(timeout, |beat| beat.min(timeout));
            let deadline = tokio::time::Instant::now() + wait;
            let mut shutdown = state.shutdown.clone();
            let mut since = since_text;
            let mut position = position;
            loop {
                let merged = match rounds.ask(since.as_deref(), &position, limit).await {
                    Ok(merged) => merged,
                    Err(answer) => return answer,
                };
                let done = feed == Feed::Normal
                    || !merged.rows.is_empty()
                    || tokio::time::Instant::now() >= deadline
                    || *shutdown.borrow();
                if done {
                    let last = last_seq(&keyspace, &merged.last);
                    return Ok(raw_json(merged.finish(&last)));
                }
                // Nothing yet: ask again from where every node stands now (`now` resolved).
                since = Some(merged.last.encode());
                position = merged.last;
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
        Feed::Continuous | Feed::EventSource => {
            let open_now = state.open_feeds.fetch_add(1, Ordering::AcqRel) + 1;
            let guard = OpenFeed(state.open_feeds.clone());
            if open_now > state.config.max_open_feeds {
                return Err(ApiError::ServiceUnavailable(
                    "too many open _changes feeds".into(),
                ));
            }
            // The first round answers here, so a node's refusal is the response's status.
            let first = match rounds.ask(since_text.as_deref(), &position, limit).await {
                Ok(merged) => merged,
                Err(answer) => return answer,
            };
            let (sender, receiver) = mpsc::channel::<Bytes>(16);
            let stream = Stream {
                rounds,
                feed,
                heartbeat,
                // Without a heartbeat a feed ends at its timeout, as on one node.
                deadline: heartbeat
                    .is_none()
                    .then(|| tokio::time::Instant::now() + timeout),
                limit: limit.unwrap_or(usize::MAX),
                sender,
                shutdown: state.shutdown.clone(),
            };
            tokio::spawn(async move {
                let _guard = guard;
                if let Some((position, pending)) = stream.run(first).await {
                    if feed == Feed::Continuous {
                        let last = last_seq(&keyspace, &position);
                        let tail = format!("{{\"last_seq\":\"{last}\",\"pending\":{pending}}}\n");
                        let _ = stream.sender.send(Bytes::from(tail)).await;
                    }
                }
            });
            let mut response = Response::new(channel_body(receiver));
            let content_type = match feed {
                Feed::EventSource => "text/event-stream",
                _ => "application/json",
            };
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("must-revalidate"));
            *response.status_mut() = StatusCode::OK;
            Ok(response)
        }
    }
}

/// A continuous or eventsource feed being streamed.
struct Stream {
    rounds: Rounds,
    feed: Feed,
    heartbeat: Option<Duration>,
    deadline: Option<tokio::time::Instant>,
    limit: usize,
    sender: mpsc::Sender<Bytes>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Stream {
    /// Streams `first`'s rows and every later round's until the limit, the deadline, the
    /// server's shutdown or a node's refusal (written as the last line); returns where the feed
    /// ended and the nodes' pending count, or `None` when the client went away.
    async fn run(&self, first: MergedChanges) -> Option<(SeqVector, u64)> {
        let mut shutdown = self.shutdown.clone();
        let mut merged = first;
        let mut emitted = 0usize;
        let mut last_sent = tokio::time::Instant::now();
        loop {
            if !merged.rows.is_empty() {
                let mut chunk = Vec::new();
                for row in &merged.rows {
                    chunk.extend_from_slice(&changes_api::frame(self.feed, row, false));
                }
                emitted += merged.rows.len();
                self.sender.send(Bytes::from(chunk)).await.ok()?;
                last_sent = tokio::time::Instant::now();
            }
            let position = merged.last;
            let now = tokio::time::Instant::now();
            if emitted >= self.limit
                || self.deadline.is_some_and(|deadline| now >= deadline)
                || *shutdown.borrow()
            {
                return Some((position, merged.pending));
            }
            if merged.rows.is_empty() {
                // Nothing new: a heartbeat when one is due, then a pause before asking again.
                if self.heartbeat.is_some_and(|beat| now >= last_sent + beat) {
                    let beat = changes_api::heartbeat_bytes(self.feed);
                    self.sender.send(Bytes::from(beat)).await.ok()?;
                    last_sent = now;
                }
                let pause = tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS));
                tokio::select! {
                    _ = pause => {}
                    _ = shutdown.changed() => {}
                    _ = self.sender.closed() => return None,
                }
            }
            let since = position.encode();
            let left = self
                .limit
                .checked_sub(emitted)
                .filter(|_| self.limit != usize::MAX);
            merged = match self.rounds.ask(Some(&since), &position, left).await {
                Ok(merged) => merged,
                Err(answer) => {
                    let line = match answer {
                        Ok(reply) => refusal_line(reply).await,
                        Err(error) => error.body().to_string(),
                    };
                    let _ = self.sender.send(Bytes::from(format!("{line}\n"))).await;
                    return None;
                }
            };
        }
    }
}

/// A node's refusal as the last line of a streamed feed (its JSON error body).
async fn refusal_line(reply: HttpResponse) -> String {
    use http_body_util::BodyExt;
    match reply.into_body().collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).trim().to_owned(),
        Err(_) => "{\"error\":\"unknown_error\",\"reason\":\"a node refused the feed\"}".into(),
    }
}

/// The design document of a JavaScript filter (`filter=ddoc/name`, `filter=_view&view=ddoc/v`),
/// read wherever it lives, to carry to the nodes.
async fn filter_design(
    state: &HttpState,
    req: &mut Req,
    keyspace: &Keyspace,
    db: &str,
) -> ApiResult<Option<Vec<u8>>> {
    let named = match req.param("filter") {
        Some("_view") => req.param("view"),
        Some(filter) if !filter.starts_with('_') => Some(filter),
        _ => None,
    };
    let Some((ddoc, _)) = named.and_then(|named| named.split_once('/')) else {
        return Ok(None);
    };
    let ddoc = ddoc.to_owned();
    let design = settee_http::designs::read(state, req, keyspace, db, &ddoc)
        .await
        .map_err(|error| match error {
            // As a node that holds it says it (js_filter.rs).
            ApiError::NotFound(reason) => ApiError::NotFound(format!("{reason} design document")),
            other => other,
        })?;
    Ok(Some(design.to_json()))
}

/// A JSON body sent as it is (it ends with its own newline).
fn raw_json(body: Vec<u8>) -> HttpResponse {
    let mut response = json_bytes(StatusCode::OK, Vec::new());
    *response.body_mut() = settee_http::response::full(body);
    response
}

/// Counts the feed among the node's open ones while it streams.
struct OpenFeed(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for OpenFeed {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
