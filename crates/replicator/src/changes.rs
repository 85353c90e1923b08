//! Reading the source's `_changes` feed in batches: `feed=normal` with `limit` until caught up,
//! then `feed=longpoll` for continuous replications. Filters become the feed's parameters.

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use crate::client::Peer;
use crate::error::ReplicatorError;
use crate::params::{Filter, ReplicationParams};

/// How long one long poll waits on the source before asking again.
pub const LONGPOLL_TIMEOUT: Duration = Duration::from_secs(10);

/// One change: a document and the leaf revisions the source listed for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeRow {
    pub id: String,
    pub revs: Vec<String>,
}

/// A page of the feed.
#[derive(Debug)]
pub struct ChangesPage {
    pub rows: Vec<ChangeRow>,
    pub last_seq: Value,
}

/// The sequence as a query-string value (strings as they are, numbers and others as JSON).
pub fn seq_param(seq: &Value) -> String {
    match seq {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Parses a normal/longpoll `_changes` answer. Rows without an id or revisions are skipped;
/// a missing `last_seq` is a protocol error (the position could not advance).
pub fn parse_page(body: &Value) -> Result<ChangesPage, String> {
    let results = body
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no results array")?;
    let mut rows = Vec::with_capacity(results.len());
    for result in results {
        let Some(id) = result.get("id").and_then(Value::as_str) else {
            continue;
        };
        let revs: Vec<String> = result
            .get("changes")
            .and_then(Value::as_array)
            .map(|changes| {
                changes
                    .iter()
                    .filter_map(|change| change.get("rev").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !revs.is_empty() {
            rows.push(ChangeRow {
                id: id.to_string(),
                revs,
            });
        }
    }
    let last_seq = body
        .get("last_seq")
        .cloned()
        .filter(|seq| !seq.is_null())
        .ok_or("no last_seq")?;
    Ok(ChangesPage { rows, last_seq })
}

/// The request for one page after `since`: path and optional POST body.
pub fn page_request(
    params: &ReplicationParams,
    since: &Value,
    limit: usize,
    longpoll: bool,
) -> (String, Option<Value>) {
    let style = if params.winning_revs_only {
        "main_only"
    } else {
        "all_docs"
    };
    let mut path = format!(
        "_changes?style={style}&since={}&limit={limit}",
        Peer::encode_query(&seq_param(since))
    );
    if longpoll {
        path.push_str(&format!(
            "&feed=longpoll&timeout={}",
            LONGPOLL_TIMEOUT.as_millis()
        ));
    } else {
        path.push_str("&feed=normal");
    }
    let mut body = None;
    let push_query = |path: &mut String, query: &Value| {
        if let Some(members) = query.as_object() {
            for (key, value) in members {
                path.push_str(&format!(
                    "&{}={}",
                    Peer::encode_query(key),
                    Peer::encode_query(&seq_param(value))
                ));
            }
        }
    };
    match &params.filter {
        Filter::None => {}
        Filter::DocIds(ids) => {
            path.push_str("&filter=_doc_ids");
            body = Some(json!({ "doc_ids": ids }));
        }
        Filter::Selector(selector) => {
            path.push_str("&filter=_selector");
            body = Some(json!({ "selector": selector }));
        }
        Filter::User {
            ddoc,
            name,
            query_params,
        } => {
            path.push_str(&format!(
                "&filter={}/{}",
                Peer::encode_query(ddoc),
                Peer::encode_query(name)
            ));
            push_query(&mut path, query_params);
        }
        Filter::Builtin { name, query_params } => {
            path.push_str(&format!("&filter={}", Peer::encode_query(name)));
            push_query(&mut path, query_params);
        }
    }
    (path, body)
}

/// Fetches one page.
pub async fn read_page(
    source: &Peer,
    params: &ReplicationParams,
    since: &Value,
    limit: usize,
    longpoll: bool,
) -> Result<ChangesPage, ReplicatorError> {
    let (path, body) = page_request(params, since, limit, longpoll);
    let method = if body.is_some() {
        Method::POST
    } else {
        Method::GET
    };
    let timeout = longpoll.then(|| LONGPOLL_TIMEOUT + params.connection_timeout);
    let answer = source
        .send(
            method,
            &path,
            body.map(|body| Bytes::from(body.to_string())),
            "application/json",
            timeout,
        )
        .await?;
    let value = source.expect_ok(answer, &path)?;
    parse_page(&value).map_err(|reason| ReplicatorError::Protocol {
        url: format!("{}{path}", source.url()),
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_parse_and_skip_junk_rows() {
        let body = json!({"results": [
            {"seq": "1-a", "id": "a", "changes": [{"rev": "1-x"}, {"rev": "1-y"}]},
            {"seq": "2-a", "changes": [{"rev": "1-z"}]},
            {"seq": "3-a", "id": "c", "changes": []},
        ], "last_seq": "3-a", "pending": 0});
        let page = parse_page(&body).expect("page");
        assert_eq!(
            page.rows,
            vec![ChangeRow {
                id: "a".into(),
                revs: vec!["1-x".into(), "1-y".into()]
            }]
        );
        assert_eq!(page.last_seq, json!("3-a"));
        assert!(parse_page(&json!({"results": []})).is_err());
        assert!(parse_page(&json!([])).is_err());
    }
}
