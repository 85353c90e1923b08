//! A replication request — the body of `POST /_replicate` or a `_replicator` document — parsed
//! and checked the way CouchDB 3.x does (same option names, defaults and error reasons).

use std::time::Duration;

use serde_json::{Map, Value};

use crate::endpoint::Endpoint;
use crate::error::ReplicatorError;

/// How a replication picks the changes it copies.
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    None,
    /// `doc_ids`: sorted, unique, percent-decoded (CouchDB accepts encoded ids).
    DocIds(Vec<String>),
    /// `selector`: a Mango selector the source evaluates (`filter=_selector`).
    Selector(Value),
    /// `filter: "ddoc/name"`: a JavaScript filter function in the source's design document.
    User {
        ddoc: String,
        name: String,
        query_params: Value,
    },
    /// A built-in filter named with a leading underscore (`_view`, `_design`, ...).
    Builtin {
        name: String,
        query_params: Value,
    },
}

/// Everything a replication job needs to know, with CouchDB's defaults.
#[derive(Clone, Debug)]
pub struct ReplicationParams {
    pub source: Endpoint,
    pub target: Endpoint,
    pub continuous: bool,
    pub create_target: bool,
    pub create_target_params: Map<String, Value>,
    pub filter: Filter,
    pub since_seq: Option<Value>,
    pub winning_revs_only: bool,
    pub worker_processes: usize,
    pub worker_batch_size: usize,
    pub http_connections: usize,
    pub connection_timeout: Duration,
    pub retries_per_request: u32,
    pub checkpoint_interval: Duration,
    pub use_checkpoints: bool,
    pub use_bulk_get: bool,
    /// For a `_replicator` document: the user its job runs as, with that user's rights on
    /// local databases: its `user_ctx.name`, else its `owner` (the user who wrote it, recorded
    /// and checked by the HTTP door as CouchDB does); `None`: anonymous. `POST /_replicate`
    /// ignores it and runs as the requester.
    pub user_name: Option<String>,
}

/// A request to `POST /_replicate` that cancels instead of starting.
#[derive(Clone, Debug)]
pub enum Request {
    Start(Box<ReplicationParams>),
    /// Cancel by explicit id (`"replication_id"`/`"id"`/`"_local_id"`), or by the parameters
    /// whose id is then computed.
    Cancel {
        id: Option<String>,
        params: Option<Box<ReplicationParams>>,
    },
}

/// Upper bounds that keep a request from asking for absurd resources.
pub const WORKER_PROCESSES_MAX: usize = 64;
pub const WORKER_BATCH_SIZE_MAX: usize = 10_000;
pub const HTTP_CONNECTIONS_MAX: usize = 256;

fn bad(reason: impl Into<String>) -> ReplicatorError {
    ReplicatorError::BadRequest(reason.into())
}

fn boolean(props: &Map<String, Value>, name: &str) -> Result<Option<bool>, ReplicatorError> {
    match props.get(name) {
        None => Ok(None),
        Some(Value::Bool(value)) => Ok(Some(*value)),
        Some(_) => Err(bad(format!("parameter `{name}` must be a boolean"))),
    }
}

/// CouchDB's `couch_util:to_integer`: a JSON integer or a string of digits.
fn integer(
    props: &Map<String, Value>,
    name: &str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ReplicatorError> {
    let value = match props.get(name) {
        None => return Ok(default),
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.trim().parse().ok(),
        Some(_) => None,
    };
    match value {
        Some(value) if range.contains(&value) => Ok(value),
        _ => Err(bad(format!(
            "parameter `{name}` must be an integer between {} and {}",
            range.start(),
            range.end()
        ))),
    }
}

fn id_option(props: &Map<String, Value>) -> Option<String> {
    ["replication_id", "_local_id", "id"]
        .iter()
        .find_map(|name| props.get(*name).and_then(Value::as_str))
        // A `+` in a URL path may have been decoded to a space on the way.
        .map(|id| id.replace(' ', "+"))
}

impl Request {
    /// Parses a `POST /_replicate` body.
    pub fn parse(body: &Value) -> Result<Request, ReplicatorError> {
        let props = body
            .as_object()
            .ok_or_else(|| bad("Request body must be a JSON object"))?;
        if boolean(props, "cancel")?.unwrap_or(false) {
            let id = id_option(props);
            let params = match id {
                Some(_) => None,
                None => Some(Box::new(ReplicationParams::parse(props)?)),
            };
            return Ok(Request::Cancel { id, params });
        }
        Ok(Request::Start(Box::new(ReplicationParams::parse(props)?)))
    }
}

impl ReplicationParams {
    pub fn parse(props: &Map<String, Value>) -> Result<ReplicationParams, ReplicatorError> {
        let source = Endpoint::parse(props.get("source"), "source")?;
        let target = Endpoint::parse(props.get("target"), "target")?;
        let filter = parse_filter(props)?;
        let create_target_params = match props.get("create_target_params") {
            None => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => {
                return Err(bad(
                    "parameter `create_target_params` must be a JSON object",
                ))
            }
        };
        Ok(ReplicationParams {
            source,
            target,
            continuous: boolean(props, "continuous")?.unwrap_or(false),
            create_target: boolean(props, "create_target")?.unwrap_or(false),
            create_target_params,
            filter,
            since_seq: props.get("since_seq").filter(|seq| !seq.is_null()).cloned(),
            winning_revs_only: boolean(props, "winning_revs_only")?.unwrap_or(false),
            worker_processes: integer(
                props,
                "worker_processes",
                4,
                1..=WORKER_PROCESSES_MAX as u64,
            )? as usize,
            worker_batch_size: integer(
                props,
                "worker_batch_size",
                500,
                1..=WORKER_BATCH_SIZE_MAX as u64,
            )? as usize,
            http_connections: integer(
                props,
                "http_connections",
                20,
                1..=HTTP_CONNECTIONS_MAX as u64,
            )? as usize,
            connection_timeout: Duration::from_millis(integer(
                props,
                "connection_timeout",
                30_000,
                100..=3_600_000,
            )?),
            retries_per_request: integer(props, "retries_per_request", 5, 0..=100)? as u32,
            checkpoint_interval: Duration::from_millis(integer(
                props,
                "checkpoint_interval",
                30_000,
                1..=86_400_000,
            )?),
            use_checkpoints: boolean(props, "use_checkpoints")?.unwrap_or(true),
            use_bulk_get: boolean(props, "use_bulk_get")?.unwrap_or(true),
            user_name: props
                .get("user_ctx")
                .and_then(|ctx| ctx.get("name"))
                .or_else(|| props.get("owner"))
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

fn parse_filter(props: &Map<String, Value>) -> Result<Filter, ReplicatorError> {
    let doc_ids = match props.get("doc_ids") {
        None | Some(Value::Null) => None,
        Some(Value::Array(ids)) => {
            let mut decoded = Vec::with_capacity(ids.len());
            for id in ids {
                let id = id
                    .as_str()
                    .ok_or_else(|| bad("parameter `doc_ids` must be an array of strings"))?;
                decoded.push(
                    percent_encoding::percent_decode_str(id)
                        .decode_utf8_lossy()
                        .into_owned(),
                );
            }
            decoded.sort();
            decoded.dedup();
            Some(decoded)
        }
        Some(_) => return Err(bad("parameter `doc_ids` must be an array")),
    };
    let selector = match props.get("selector") {
        None => None,
        Some(Value::Object(_)) => props.get("selector").cloned(),
        Some(_) => return Err(bad("parameter `selector` must be a JSON object")),
    };
    let filter = match props.get("filter") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return Err(bad("Invalid filter. Must match `ddocname/filtername`.")),
    };
    let query_params = match props.get("query_params") {
        None => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(map.clone()),
        Some(_) => return Err(bad("parameter `query_params` must be an object")),
    };
    match (doc_ids, selector, filter) {
        (None, None, None) => Ok(Filter::None),
        (Some(ids), None, None) => Ok(Filter::DocIds(ids)),
        (None, Some(selector), None) => Ok(Filter::Selector(selector)),
        (None, None, Some(name)) if name.starts_with('_') => {
            if name == "_view" {
                let view = query_params.get("view").and_then(Value::as_str);
                if view.is_none_or(|view| view.split('/').count() != 2) {
                    return Err(bad("Invalid `view` parameter."));
                }
            }
            Ok(Filter::Builtin { name, query_params })
        }
        (None, None, Some(name)) => match name.split_once('/') {
            Some((ddoc, function)) => Ok(Filter::User {
                ddoc: ddoc.to_string(),
                name: function.to_string(),
                query_params,
            }),
            None => Err(bad("Invalid filter. Must match `ddocname/filtername`.")),
        },
        _ => Err(bad("`doc_ids`,`filter`,`selector` are mutually exclusive")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<Request, ReplicatorError> {
        Request::parse(&body)
    }

    #[test]
    fn defaults_and_options() {
        let Ok(Request::Start(params)) = parse(json!({"source": "a", "target": "http://h/b"}))
        else {
            panic!("start");
        };
        assert_eq!(params.worker_batch_size, 500);
        assert_eq!(params.worker_processes, 4);
        assert_eq!(params.http_connections, 20);
        assert_eq!(params.filter, Filter::None);
        let Ok(Request::Start(params)) = parse(json!({
            "source": "a", "target": "b", "doc_ids": ["b", "a%2Fx", "b"],
            "worker_batch_size": "7", "continuous": true
        })) else {
            panic!("start");
        };
        assert_eq!(
            params.filter,
            Filter::DocIds(vec!["a/x".into(), "b".into()])
        );
        assert_eq!(params.worker_batch_size, 7);
        assert!(params.continuous);
    }

    #[test]
    fn refusals_name_the_problem() {
        let reason = |body: Value| match parse(body) {
            Err(ReplicatorError::BadRequest(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert!(reason(json!({"source": "a"})).contains("target"));
        assert!(
            reason(json!({"source": "a", "target": "b", "continuous": 1})).contains("continuous")
        );
        assert!(
            reason(json!({"source": "a", "target": "b", "doc_ids": [], "filter": "d/f"}))
                .contains("mutually exclusive")
        );
        assert!(
            reason(json!({"source": "a", "target": "b", "filter": "nofunction"}))
                .contains("ddocname/filtername")
        );
        assert!(
            reason(json!({"source": "a", "target": "b", "worker_processes": 0}))
                .contains("worker_processes")
        );
        assert!(reason(json!({"source": "a", "target": "b", "filter": "_view"})).contains("view"));
        assert!(matches!(
            parse(json!({"cancel": true, "replication_id": "abc continuous"})),
            Ok(Request::Cancel { id: Some(id), .. }) if id == "abc+continuous"
        ));
    }
}
