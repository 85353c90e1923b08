//! View queries in a cluster (docs/format/cluster-transport.md, "A view query"): the front
//! node reads the design document (its own copy when its vbucket is active here, else from its
//! active node), checks the query against it, sends it with the query to every node holding
//! active vbuckets of the bucket, and merges their rows (`settee-gather`'s `views`), re-reducing
//! the nodes' partial reductions with the design document's reduce.

use hyper::{Method, StatusCode};
use serde_json::{Map, Value};
use settee_engine::Keyspace;
use settee_views::{Grouping, ParsedDesign, ReduceKind, Reducer, ViewError};

use crate::{gather_answers, gather_parts, json_post_for_nodes, malformed, request_for_nodes};
use settee_http::auth::Operation;
use settee_http::db_api::open;
use settee_http::error::{ApiError, ApiResult};
use settee_http::request::Req;
use settee_http::response::{json_bytes, HttpResponse};
use settee_http::view_params::{QueryKind, ViewParams};
use settee_http::HttpState;
pub use settee_http_core::scattered::ViewPath;

/// The design document as the query runs it: its JSON (carried to the nodes) and parsed.
struct CarriedDesign {
    json: Vec<u8>,
    parsed: ParsedDesign,
}

/// Reads `_design/{ddoc}` wherever it lives (`designs.rs`) and parses its views.
async fn read_design(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    path: &ViewPath<'_>,
) -> ApiResult<CarriedDesign> {
    let doc = settee_http::designs::read(state, req, keyspace, path.db, path.ddoc).await?;
    let json = doc.to_json();
    let parsed = state
        .views
        .carried_design(keyspace, &doc.id, &json)?
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    Ok(CarriedDesign { json, parsed })
}

/// `GET|POST` of a view (or its `/queries`) on a database whose vbuckets are active on
/// several nodes.
pub(crate) async fn view(state: &HttpState, req: &mut Req) -> ApiResult<HttpResponse> {
    let path_segments = req.path.clone();
    let path = ViewPath::of(&path_segments).ok_or_else(ApiError::missing)?;
    let keyspace = open(state, req, path.db, Operation::ReadDb)?;
    let mut members = Map::new();
    if req.method == Method::POST {
        members = settee_http::view_api::object_body(state, req).await?;
    } else if path.queries {
        return Err(settee_http::router::not_allowed("POST"));
    }
    let design = read_design(state, req, &keyspace, &path).await?;
    let view = design
        .parsed
        .0
        .view_index(path.view)
        .ok_or_else(|| ApiError::NotFound("missing_named_view".into()))?;
    let list = match (path.queries, members.get("queries")) {
        (true, None) => return Err(ApiError::BadRequest("Missing `queries` field".into())),
        (_, Some(Value::Array(list))) => Some(list.clone()),
        (_, Some(_)) => return Err(ApiError::BadRequest("`queries` must be an array".into())),
        (false, None) => None,
    };
    let Some(list) = list else {
        // The query string's parameters win over the body's, as in CouchDB.
        let query = req.query.clone();
        members.retain(|name, _| !req.has_param(name));
        return Ok(
            match one_query(state, req, &keyspace, &path, &design, view, query, members).await {
                Ok(body) => json_bytes(StatusCode::OK, body),
                Err(Relay::Answer(answer)) => answer,
                Err(Relay::Error(error)) => return Err(error),
            },
        );
    };
    if list.len() > settee_http::view_api::QUERIES_PER_REQUEST_MAX {
        return Err(ApiError::BadRequest(format!(
            "at most {} queries per request",
            settee_http::view_api::QUERIES_PER_REQUEST_MAX
        )));
    }
    let mut out = b"{\"results\":[".to_vec();
    for (index, query) in list.into_iter().enumerate() {
        let Value::Object(members) = query else {
            return Err(ApiError::BadRequest(
                "Each query must be a JSON object".into(),
            ));
        };
        let body = match one_query(
            state,
            req,
            &keyspace,
            &path,
            &design,
            view,
            Vec::new(),
            members,
        )
        .await
        {
            Ok(body) => body,
            Err(Relay::Answer(answer)) => return Ok(answer),
            Err(Relay::Error(error)) => return Err(error),
        };
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(body.strip_suffix(b"\n").unwrap_or(&body));
    }
    out.extend_from_slice(b"]}\n");
    Ok(json_bytes(StatusCode::OK, out))
}

/// The parameters the front node sets itself for the nodes.
const REWRITTEN: &[&str] = &["skip", "limit", "keys"];
/// Also set by the front node for a reduce with `keys` (the nodes group exactly).
const REWRITTEN_GROUPING: &[&str] = &["group", "group_level"];

/// Why one query has no merged body: an error here, or a node's answer that is the client's.
enum Relay {
    Error(ApiError),
    Answer(HttpResponse),
}

impl From<ApiError> for Relay {
    fn from(error: ApiError) -> Relay {
        Relay::Error(error)
    }
}

/// One query, scattered and merged: its answer's body.
#[allow(clippy::too_many_arguments)]
async fn one_query(
    state: &HttpState,
    req: &Req,
    keyspace: &Keyspace,
    path: &ViewPath<'_>,
    design: &CarriedDesign,
    view: usize,
    mut query: Vec<(String, String)>,
    mut members: Map<String, Value>,
) -> Result<Vec<u8>, Relay> {
    let (parsed_design, program) = &design.parsed;
    let definition = &parsed_design.views[view];
    let mut params = ViewParams::from_query(&query)?;
    params.merge_json(&members)?;
    if let Some(partition) = path.partition {
        params.partition = Some(partition.to_owned());
    }
    let kind = params.plan(definition.reduce.is_some(), definition.raw_collation)?;
    let raw = definition.raw_collation;
    let position = move |key: &Value| {
        if raw {
            settee_collate::encode_raw_key(key)
        } else {
            settee_collate::encode_key(key)
        }
    };
    // `keys` go to the nodes once each, in the order they first appear.
    let keys = params.keys.as_ref().map(|keys| {
        let mut unique: Vec<Vec<u8>> = Vec::new();
        let mut unique_keys = Vec::new();
        let client: Vec<usize> = keys
            .iter()
            .map(|key| {
                let at = position(key);
                match unique.iter().position(|seen| *seen == at) {
                    Some(index) => index,
                    None => {
                        unique.push(at);
                        unique_keys.push(key.clone());
                        unique.len() - 1
                    }
                }
            })
            .collect();
        (unique, unique_keys, client)
    });
    let reduce = matches!(kind, QueryKind::Reduce(_));
    let strip = |name: &str| {
        REWRITTEN.contains(&name)
            || (reduce && keys.is_some() && REWRITTEN_GROUPING.contains(&name))
    };
    query.retain(|(name, _)| !strip(name) && name != "partition");
    members.retain(|name, _| !strip(name) && name != "partition" && name != "queries");
    let skip = params.skip;
    if let Some(limit) = params.limit {
        members.insert("limit".into(), skip.saturating_add(limit).into());
    }
    if let Some((_, unique_keys, _)) = &keys {
        members.insert("keys".into(), Value::Array(unique_keys.clone()));
        if reduce {
            members.insert("group".into(), Value::Bool(true));
        }
    }
    let target = path.target(&query);
    let request = if members.is_empty() {
        request_for_nodes(req, "GET", target, Vec::new())
    } else {
        json_post_for_nodes(req, target, Value::Object(members).to_string().into_bytes())
    };
    let parts = move |groups: &[Vec<u16>]| vec![Some(request.clone()); groups.len()];
    let answers = match gather_parts(state, path.db, Some(&design.json), &parts, &[200]).await {
        Ok(answers) => answers,
        Err(Ok(answer)) => return Err(Relay::Answer(answer)),
        Err(Err(error)) => return Err(Relay::Error(error)),
    };
    let vbuckets = keyspace.bucket().vbuckets();
    let reducer = match (kind, &definition.reduce) {
        (QueryKind::Reduce(_), Some(ReduceKind::JavaScript(_))) => Some(Reducer::JavaScript {
            pool: state.views.js().clone(),
            program: program.clone(),
            view,
        }),
        (QueryKind::Reduce(_), Some(builtin)) => Some(Reducer::Builtin(builtin.clone())),
        _ => None,
    };
    let descending = params.descending;
    let limit = params.limit.map(|limit| limit as usize);
    let update_seq = params.update_seq;
    // A JavaScript re-reduce waits for the JS pool: off the runtime's threads.
    let merged = tokio::task::spawn_blocking(move || -> ApiResult<Vec<u8>> {
        let parts = gather_answers(&answers);
        let merge_seq = |seqs: &[(&[u16], &str)]| {
            let zero = settee_engine::SeqVector::zero(vbuckets);
            Ok(settee_gather::merge_seqs(&zero, seqs, vbuckets)?.encode())
        };
        let keys = keys
            .as_ref()
            .map(|(unique, _, client)| (unique.as_slice(), client.as_slice()));
        let query = settee_gather::views::ViewQuery {
            skip: skip as usize,
            limit,
            descending,
            update_seq,
            position: &position,
            keys,
        };
        match (kind, reducer) {
            (QueryKind::Reduce(grouping), Some(reducer)) => {
                let mut failed: Option<ViewError> = None;
                let mut combine = |partials: Vec<Value>| {
                    settee_views::merge_partials(&reducer, partials).map_err(|error| {
                        let reason = error.to_string();
                        failed.get_or_insert(error);
                        settee_gather::Malformed(reason)
                    })
                };
                let group_key = |key: &Value| grouping_key(grouping, key);
                let merged = settee_gather::views::merge_reduce(
                    &parts,
                    &query,
                    &group_key,
                    &mut combine,
                    merge_seq,
                );
                match (merged, failed) {
                    (Ok(body), _) => Ok(body),
                    (Err(_), Some(error)) => Err(error.into()),
                    (Err(error), None) => Err(malformed(error)),
                }
            }
            _ => settee_gather::views::merge_map(&parts, &query, merge_seq).map_err(malformed),
        }
    })
    .await
    .map_err(|error| ApiError::Internal(format!("view merge: {error}")))??;
    Ok(merged)
}

/// The key a group of a `keys` query gets under the client's grouping.
fn grouping_key(grouping: Grouping, key: &Value) -> Value {
    match (grouping, key) {
        (Grouping::All, _) => Value::Null,
        (Grouping::Level(level), Value::Array(items)) => {
            Value::Array(items.iter().take(level).cloned().collect())
        }
        (_, key) => key.clone(),
    }
}
