//! One view query's answer, written as its rows are read: a query is planned (and waits for
//! the index as `update` asks) on the request's task, then [`write`] runs on a blocking thread
//! and writes map rows (with their documents for `include_docs`) or reduce groups into a
//! [`ChunkWriter`], which sends them on in bounded chunks (`streamed.rs`). No answer is ever
//! held whole, however many rows or however large the documents.

use std::sync::Arc;

use serde_json::Value;
use settee_engine::Keyspace;
use settee_views::{
    DesignViews, GroupedReduce, Grouping, IndexGroup, KeyBound, KeyRange, ReduceKind, Reducer, Row,
};

use crate::couch_doc::{render_doc, RenderOptions};
use crate::doc_api::{attachment_fetcher, read_doc_or_skip, within_limits};
use crate::error::ApiResult;
use crate::replicator_docs::CredentialsShown;
use crate::response::json_string;
use crate::streamed::ChunkWriter;
use crate::view_params::{QueryKind, UpdateMode, ViewParams};
use crate::HttpState;

/// A query ready to be read.
pub struct PlannedQuery {
    params: ViewParams,
    view: usize,
    kind: QueryKind,
    reducer: Option<Reducer>,
    /// Scattered here by another node: only the rows of documents of these vbuckets, and
    /// partial reductions (docs/format/cluster-transport.md).
    only: Option<Arc<[bool]>>,
}

impl PlannedQuery {
    /// Answers for the vbuckets `only` flags (`None`: all), as a node a view query was
    /// scattered to answers.
    pub fn only(self, only: Option<Arc<[bool]>>) -> PlannedQuery {
        PlannedQuery { only, ..self }
    }
}

/// The rows of a scattered query, when the group holds rows of vbuckets it does not answer
/// for (replicas): those of documents of the listed vbuckets.
fn row_filter(group: &IndexGroup, only: Option<&[bool]>) -> Option<impl Fn(&[u8]) -> bool + Sync> {
    let only = only?;
    let indexed = group.update_seq();
    let others_indexed = only
        .iter()
        .enumerate()
        .any(|(vbucket, listed)| !listed && indexed.get(vbucket as u16) > 0);
    let vbuckets = group.bucket().vbuckets();
    let only: Arc<[bool]> = only.into();
    others_indexed.then_some(move |id: &[u8]| {
        let vbucket = settee_engine::vbucket::vbucket_of(id, vbuckets);
        only.get(usize::from(vbucket)) == Some(&true)
    })
}

/// Checks and plans `params` on view `view`, then waits for the index as `update` asks.
pub async fn plan(
    state: &HttpState,
    keyspace: &Keyspace,
    found: &DesignViews,
    view: usize,
    params: ViewParams,
) -> ApiResult<PlannedQuery> {
    let reduce_kind = found.design.views[view].reduce.clone();
    let kind = params.plan(
        reduce_kind.is_some(),
        found.design.views[view].raw_collation,
    )?;
    match params.update {
        UpdateMode::Wait => {
            found
                .group
                .wait_for(&keyspace.bucket().high_seqnos())
                .await?
        }
        // Brought up to date once the rows are read (`write`).
        UpdateMode::Lazy | UpdateMode::No => {}
    }
    let reducer = match (kind, reduce_kind) {
        (QueryKind::Reduce(_), Some(ReduceKind::JavaScript(_))) => Some(Reducer::JavaScript {
            pool: state.views.js().clone(),
            program: found.program.clone(),
            view,
        }),
        (QueryKind::Reduce(_), Some(builtin)) => Some(Reducer::Builtin(builtin)),
        _ => None,
    };
    Ok(PlannedQuery {
        params,
        view,
        kind,
        reducer,
        only: None,
    })
}

/// Writes the answer to `query` (its documents as `credentials` lets the reader see them).
pub fn write(
    keyspace: &Keyspace,
    group: &Arc<IndexGroup>,
    query: &PlannedQuery,
    credentials: &CredentialsShown,
    out: &mut ChunkWriter,
) -> ApiResult<()> {
    let written = match (query.kind, &query.reducer) {
        (QueryKind::Reduce(grouping), Some(reducer)) => {
            reduce_rows(group, query, grouping, reducer, out)
        }
        _ => map_rows(keyspace, group, query, credentials, out),
    };
    // `update=lazy`: the rows came from the index as it was; now it catches up.
    if query.params.update == UpdateMode::Lazy {
        group.update_after();
    }
    written
}

fn bound(key: &Option<Value>, doc_id: &Option<String>) -> Option<KeyBound> {
    key.as_ref().map(|key| KeyBound {
        key: key.clone(),
        doc_id: doc_id.clone(),
    })
}

/// The key ranges a query reads, in order: one per `keys` entry, else one.
fn ranges(params: &ViewParams) -> Vec<KeyRange> {
    if let Some(keys) = &params.keys {
        return keys
            .iter()
            .map(|key| KeyRange {
                // `startkey_docid` / `endkey_docid` bound each key's rows, as with `key`.
                start: bound(&Some(key.clone()), &params.start_key_doc_id),
                end: bound(&Some(key.clone()), &params.end_key_doc_id),
                inclusive_end: params.inclusive_end,
                descending: params.descending,
                partition: params.partition.clone(),
            })
            .collect();
    }
    if let Some(key) = &params.key {
        return vec![KeyRange {
            start: bound(&Some(key.clone()), &params.start_key_doc_id),
            end: bound(&Some(key.clone()), &params.end_key_doc_id),
            inclusive_end: params.inclusive_end,
            descending: params.descending,
            partition: params.partition.clone(),
        }];
    }
    vec![KeyRange {
        start: bound(&params.start_key, &params.start_key_doc_id),
        end: bound(&params.end_key, &params.end_key_doc_id),
        inclusive_end: params.inclusive_end,
        descending: params.descending,
        partition: params.partition.clone(),
    }]
}

fn push_meta(out: &mut Vec<u8>, group: &IndexGroup, params: &ViewParams) {
    if params.update_seq {
        out.extend_from_slice(b"\"update_seq\":");
        out.extend_from_slice(json_string(&group.update_seq().encode()).as_bytes());
        out.push(b',');
    }
}

fn map_rows(
    keyspace: &Keyspace,
    group: &IndexGroup,
    query: &PlannedQuery,
    credentials: &CredentialsShown,
    out: &mut ChunkWriter,
) -> ApiResult<()> {
    let (view, params) = (query.view, &query.params);
    let filter = row_filter(group, query.only.as_deref());
    let only = filter.as_ref().map(|f| f as settee_views::RowFilter<'_>);
    let ranges = ranges(params);
    let offset = match ranges.first() {
        Some(range) => group.offset_among(view, range, only)? + params.skip,
        None => 0,
    };
    let total_rows = match (&params.partition, only) {
        (None, None) => group.total_rows(view),
        (partition, only) => group.rows_of(view, partition.as_deref(), only)?,
    };
    let head = out.buffer();
    head.extend_from_slice(
        format!("{{\"total_rows\":{total_rows},\"offset\":{offset},").as_bytes(),
    );
    push_meta(head, group, params);
    head.extend_from_slice(b"\"rows\":[");
    let mut to_skip = params.skip;
    let mut left = params.limit.unwrap_or(u64::MAX);
    let mut first = true;
    let options = RenderOptions {
        conflicts: params.conflicts,
        attachments: params.attachments,
        att_encoding_info: params.att_encoding_info,
        ..RenderOptions::for_reader(credentials.clone())
    };
    'ranges: for range in &ranges {
        for row in group.scan(view, range) {
            if left == 0 {
                break 'ranges;
            }
            let row = row?;
            if only.is_some_and(|only| !only(&row.id)) {
                continue;
            }
            if to_skip > 0 {
                to_skip -= 1;
                continue;
            }
            left -= 1;
            let buffer = out.buffer();
            buffer.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
            first = false;
            write_row(buffer, &row);
            if params.include_docs {
                buffer.extend_from_slice(b",\"doc\":");
                include_doc(buffer, keyspace, &row, &options)?;
            }
            buffer.push(b'}');
            out.flush_when_full()?;
        }
    }
    out.buffer().extend_from_slice(b"\r\n]}\n");
    Ok(())
}

fn write_row(out: &mut Vec<u8>, row: &Row) {
    out.extend_from_slice(b"{\"id\":");
    out.extend_from_slice(json_string(&row.id_str()).as_bytes());
    out.extend_from_slice(b",\"key\":");
    out.extend_from_slice(&row.key_json);
    out.extend_from_slice(b",\"value\":");
    out.extend_from_slice(&row.value_json);
}

/// The row's document, or the document its value links to (`{"_id": ...}`, CouchDB's linked
/// documents), or `null`.
fn include_doc(
    out: &mut Vec<u8>,
    keyspace: &Keyspace,
    row: &Row,
    options: &RenderOptions,
) -> ApiResult<()> {
    let value = row.value();
    // As CouchDB: an object value's `_id` names the document (else the row's), and its `_rev`
    // the revision (else the winner), with or without an `_id`.
    let id = match value.get("_id").and_then(Value::as_str) {
        Some(linked) => linked.to_string(),
        None => row.id_str().into_owned(),
    };
    let rev = value
        .get("_rev")
        .and_then(Value::as_str)
        .map(str::to_string);
    // A document whose record does not decode, or whose body is past the document limits,
    // is `null` here, as a missing one is: one bad document never fails the query (issue 18).
    let record = read_doc_or_skip(keyspace, &id)?;
    // An emitted `_rev` may name an inner revision whose old body is still kept.
    let kept;
    let leaf = match (record.as_ref(), &rev) {
        (Some(record), Some(rev)) => match settee_engine::RevId::parse(rev) {
            Some(rev) => {
                kept = keyspace.revision(id.as_bytes(), record, &rev)?;
                kept.as_ref().filter(|leaf| !leaf.deleted)
            }
            None => None,
        },
        (Some(record), None) => record.winner().filter(|leaf| !leaf.deleted),
        (None, _) => None,
    };
    let leaf = leaf.filter(|leaf| within_limits(keyspace, &id, leaf).is_ok());
    match (record.as_ref(), leaf) {
        (Some(record), Some(leaf)) => {
            let fetch = attachment_fetcher(keyspace, &id);
            out.extend(render_doc(&id, record, leaf, options, &fetch)?);
        }
        _ => out.extend_from_slice(b"null"),
    }
    Ok(())
}

fn reduce_rows(
    group: &IndexGroup,
    query: &PlannedQuery,
    grouping: Grouping,
    reducer: &Reducer,
    out: &mut ChunkWriter,
) -> ApiResult<()> {
    let (view, params) = (query.view, &query.params);
    let filter = row_filter(group, query.only.as_deref());
    let only = filter.as_ref().map(|f| f as settee_views::RowFilter<'_>);
    let head = out.buffer();
    head.push(b'{');
    push_meta(head, group, params);
    head.extend_from_slice(b"\"rows\":[");
    let mut to_skip = params.skip;
    let mut left = params.limit.unwrap_or(u64::MAX);
    let mut first = true;
    // Whether more groups are wanted after this one.
    let mut emit = |out: &mut ChunkWriter, (key, value): (Value, Value)| -> ApiResult<bool> {
        if left == 0 {
            return Ok(false);
        }
        if to_skip > 0 {
            to_skip -= 1;
            return Ok(true);
        }
        left -= 1;
        let buffer = out.buffer();
        buffer.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
        first = false;
        buffer.extend_from_slice(format!("{{\"key\":{key},\"value\":{value}}}").as_bytes());
        out.flush_when_full()?;
        Ok(true)
    };
    // Groups never span two `keys` entries: each key is reduced on its own.
    let reduced = (|| -> ApiResult<()> {
        'ranges: for range in ranges(params) {
            let mut grouped = match query.only {
                Some(_) => GroupedReduce::partial(reducer, grouping),
                None => GroupedReduce::new(reducer, grouping),
            };
            for row in group.scan(view, &range) {
                let row = row?;
                if only.is_some_and(|only| !only(&row.id)) {
                    continue;
                }
                if let Some(done) = grouped.push(&row)? {
                    if !emit(out, done)? {
                        break 'ranges;
                    }
                }
            }
            if let Some(done) = grouped.finish()? {
                if !emit(out, done)? {
                    break;
                }
            }
        }
        Ok(())
    })();
    match reduced {
        // CouchDB answers 200 and ends the rows with the overflow as an error row.
        Err(crate::error::ApiError::ReduceOverflow(reason)) => {
            let buffer = out.buffer();
            buffer.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
            let row = serde_json::json!({"key": null, "error": "reduce_overflow_error", "reason": reason});
            buffer.extend_from_slice(row.to_string().as_bytes());
        }
        other => other?,
    }
    out.buffer().extend_from_slice(b"\r\n]}\n");
    Ok(())
}
