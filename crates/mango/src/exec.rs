//! Running a [`Plan`]: scan its ranges in order, fetch each row's document, keep those that
//! pass the residual selector, apply `skip`, `limit` and `fields`, and count CouchDB's
//! `execution_stats`. Documents reach the client through `emit` as they are found, so memory
//! does not grow with the result.
//!
//! The HTTP door supplies `render`, which turns a stored record into the JSON document a client
//! sees (`_id`, `_rev`, attachment stubs, `_conflicts` when asked), or `None` when the document
//! is deleted, expired or not JSON; matching sees that same JSON, as CouchDB's does.

use std::ops::Bound;
use std::time::Instant;

use serde_json::{json, Value};
use settee_engine::{DocRecord, EngineError, Keyspace, ScanRange};
use settee_views::{EncodedRange, IndexGroup, ViewError};

use crate::bookmark::Bookmark;
use crate::error::{MangoError, MangoResult};
use crate::fields::set_field;
use crate::fields::Fields;
use crate::index::IndexKind;
use crate::planner::{Plan, Ranges};
use crate::ranges::{IdRange, KeyPart, KeyRange};
use crate::request::FindRequest;

/// `execution_stats`, as CouchDB counts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionStats {
    /// Index rows read.
    pub keys_examined: u64,
    /// Documents read with their rows (`r` = 1).
    pub docs_examined: u64,
    /// Documents read one by one (`r` > 1).
    pub quorum_docs_examined: u64,
    pub results_returned: u64,
    pub execution_time_ms: f64,
}

impl ExecutionStats {
    pub fn to_json(&self) -> Value {
        json!({
            "total_keys_examined": self.keys_examined,
            "total_docs_examined": self.docs_examined,
            "total_quorum_docs_examined": self.quorum_docs_examined,
            "results_returned": self.results_returned,
            "execution_time_ms": self.execution_time_ms,
        })
    }
}

/// What a finished `_find` adds after its documents.
#[derive(Debug, Clone)]
pub struct FindOutcome {
    pub bookmark: String,
    pub stats: ExecutionStats,
    /// CouchDB's warnings, joined by newlines.
    pub warning: Option<String>,
}

/// CouchDB's `[mango] index_scan_warning_threshold`: warn when more than this many documents
/// were examined per result.
pub const INDEX_SCAN_WARNING_RATIO: u64 = 10;

/// A row of the index being scanned.
struct Row {
    key: Value,
    id: String,
    /// The document, when the scan read it with the row (`_all_docs`).
    record: Option<DocRecord>,
}

/// Renders a stored document as the JSON a client sees; `None` skips it.
pub type Render<'a> = dyn Fn(&str, &DocRecord) -> Option<Vec<u8>> + 'a;

/// Runs `plan` for `request` over `keyspace`, handing each result's JSON and its place in the
/// index to `emit` (which returns `false` when the client has gone, to stop early). `group` is
/// the indexer's group of the plan's JSON index (`None` for `_all_docs`). `only`: the
/// documents a node a query was scattered to answers for (by id; `None`: all).
pub fn execute(
    keyspace: &Keyspace,
    group: Option<&IndexGroup>,
    request: &FindRequest,
    plan: &Plan,
    render: &Render,
    emit: &mut dyn FnMut(&[u8], &Bookmark) -> bool,
    only: Option<&dyn Fn(&str) -> bool>,
) -> MangoResult<FindOutcome> {
    let started = Instant::now();
    let resume = request
        .bookmark
        .as_deref()
        .map(Bookmark::decode)
        .transpose()?;
    let Some(index) = &plan.index else {
        return Err(MangoError::bad_request(
            "no_usable_index",
            "No index exists for this sort, try indexing by the sort fields.",
        ));
    };
    let mut stats = ExecutionStats::default();
    let mut last: Option<Bookmark> = None;
    let mut skip = request.skip;
    let mut limit = request.limit;
    let needs_doc_json = !plan.residual.is_empty() || request.fields != Fields::All;
    let columns: Vec<Vec<String>> = index
        .fields
        .fields
        .iter()
        .map(|field| field.path.clone())
        .collect();
    let mut visit = |mut row: Row, stats: &mut ExecutionStats| -> MangoResult<bool> {
        if limit == 0 {
            return Ok(false);
        }
        // Scattered here: another node answers for the rest (rows of replica vbuckets).
        if only.is_some_and(|only| !only(&row.id)) {
            return Ok(true);
        }
        stats.keys_examined += 1;
        // The document as matched (when the residual or `fields` need it) and as sent whole.
        let (doc, rendered) = if plan.covering {
            // Every field the query reads is in the key: no document is read.
            let mut derived = json!({ "_id": row.id });
            if let Value::Array(values) = &row.key {
                for (path, value) in columns.iter().zip(values) {
                    set_field(&mut derived, path, value.clone());
                }
            }
            (Some(derived), None)
        } else {
            let record = match row.record.take() {
                Some(record) => record,
                // A record that does not decode is skipped (counted by the engine).
                None => match keyspace
                    .read_record_or_skip(row.id.as_bytes())
                    .map_err(engine_error)?
                {
                    Some(record) => record,
                    None => return Ok(true),
                },
            };
            if request.r > 1 {
                stats.quorum_docs_examined += 1;
            } else {
                stats.docs_examined += 1;
            }
            let Some(rendered) = render(&row.id, &record) else {
                return Ok(true);
            };
            let doc = if needs_doc_json {
                let Ok(parsed) = serde_json::from_slice::<Value>(&rendered) else {
                    return Ok(true);
                };
                Some(parsed)
            } else {
                None
            };
            (doc, Some(rendered))
        };
        if let Some(doc) = &doc {
            if !plan.residual.matches(doc) {
                return Ok(true);
            }
        }
        let at = last.insert(Bookmark {
            key: row.key,
            id: row.id,
        });
        if skip > 0 {
            skip -= 1;
            return Ok(true);
        }
        let delivered = match (&request.fields, doc, rendered) {
            (Fields::Only(_), Some(doc), _) => {
                emit(request.fields.extract(doc).to_string().as_bytes(), at)
            }
            (_, _, Some(rendered)) => emit(&rendered, at),
            (_, Some(doc), None) => emit(doc.to_string().as_bytes(), at),
            (_, None, None) => true,
        };
        stats.results_returned += 1;
        limit -= 1;
        Ok(delivered && limit > 0)
    };
    if request.limit > 0 {
        match (&plan.ranges, index.kind) {
            (Ranges::Ids(ranges), _) => scan_ids(
                keyspace,
                &partition_ranges(ranges, request.partition.as_deref()),
                plan.descending,
                resume.as_ref(),
                &mut |row| visit(row, &mut stats),
            )?,
            (Ranges::Keys(ranges), IndexKind::Json) => {
                let Some(group) = group else {
                    return Err(MangoError::Internal {
                        error: "internal_error",
                        reason: "the JSON index is not open".into(),
                    });
                };
                scan_index(
                    group,
                    ranges,
                    request.partition.as_deref(),
                    plan.descending,
                    resume.as_ref(),
                    &mut |row| visit(row, &mut stats),
                )?
            }
            (Ranges::Keys(_), IndexKind::Special) => {}
        }
    }
    stats.execution_time_ms = started.elapsed().as_secs_f64() * 1000.0;
    let bookmark = match (last, &request.bookmark) {
        (Some(last), _) => last.encode(),
        (None, Some(given)) => given.clone(),
        (None, None) => "nil".to_string(),
    };
    Ok(FindOutcome {
        bookmark,
        warning: warning(plan, &stats),
        stats,
    })
}

/// The `warning` of a query's answer, from its plan and what it read (`None`: no warning).
pub fn warning(plan: &Plan, stats: &ExecutionStats) -> Option<String> {
    let mut warnings = Vec::new();
    warnings.extend(plan.use_index_warning.clone());
    if plan
        .index
        .as_ref()
        .is_none_or(|index| index.kind == IndexKind::Special)
    {
        warnings.push("No matching index found, create an index to optimize query time.".into());
    }
    let examined = (stats.docs_examined + stats.quorum_docs_examined) as f64;
    let ratio = match stats.results_returned {
        0 => examined,
        returned => examined / returned as f64,
    };
    if ratio > INDEX_SCAN_WARNING_RATIO as f64 {
        warnings.push(
            "The number of documents examined is high in proportion to the number of results \
             returned. Consider adding a more specific index to improve this."
                .into(),
        );
    }
    (!warnings.is_empty()).then(|| warnings.join("\n"))
}

fn engine_error(error: EngineError) -> MangoError {
    MangoError::Internal {
        error: "internal_error",
        reason: error.to_string(),
    }
}

/// `_all_docs` ranges, each scanned in key order (live documents only; design documents are
/// never results), resuming strictly after a bookmark.
fn scan_ids(
    keyspace: &Keyspace,
    ranges: &[IdRange],
    descending: bool,
    resume: Option<&Bookmark>,
    visit: &mut dyn FnMut(Row) -> MangoResult<bool>,
) -> MangoResult<()> {
    let ordered: Vec<&IdRange> = if descending {
        ranges.iter().rev().collect()
    } else {
        ranges.iter().collect()
    };
    for range in ordered {
        let Some(range) = resume_within(range, resume, descending) else {
            continue;
        };
        for item in keyspace.scan_docs(scan_range(&range, descending)) {
            let (key, record) = item.map_err(engine_error)?;
            let Ok(id) = String::from_utf8(key) else {
                continue;
            };
            if !range.contains(&id) {
                continue;
            }
            let live = record.winner().is_some_and(|leaf| !leaf.deleted)
                && (record.expiry == 0 || record.expiry > keyspace.bucket().now_secs());
            if !live || id.starts_with("_design/") {
                continue;
            }
            let row = Row {
                key: json!(id),
                id,
                record: Some(record),
            };
            if !visit(row)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// `ranges` cut to partition `p`'s ids, `[p:, p;)` (the ranges that miss it are dropped).
fn partition_ranges(ranges: &[IdRange], partition: Option<&str>) -> Vec<IdRange> {
    let Some(partition) = partition else {
        return ranges.to_vec();
    };
    let (low, high) = settee_engine::partition::id_bounds(partition);
    ranges
        .iter()
        .filter_map(|range| {
            let start = match &range.start {
                Bound::Included(start) | Bound::Excluded(start) if *start >= low => {
                    range.start.clone()
                }
                _ => Bound::Included(low.clone()),
            };
            let end = match &range.end {
                Bound::Included(end) | Bound::Excluded(end) if *end < high => range.end.clone(),
                _ => Bound::Excluded(high.clone()),
            };
            let empty = match (&start, &end) {
                (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e)) => s > e,
                (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
                _ => false,
            };
            (!empty).then_some(IdRange { start, end })
        })
        .collect()
}

/// The part of `range` after (before, descending) the bookmarked id.
fn resume_within(range: &IdRange, resume: Option<&Bookmark>, descending: bool) -> Option<IdRange> {
    let Some(bookmark) = resume else {
        return Some(range.clone());
    };
    let at = bookmark.id.clone();

    if descending {
        let end_below = match &range.start {
            Bound::Unbounded => true,
            Bound::Included(start) | Bound::Excluded(start) => *start < at,
        };
        end_below.then(|| IdRange {
            start: range.start.clone(),
            end: tighter_end(&range.end, at),
        })
    } else {
        let start_above = match &range.end {
            Bound::Unbounded => true,
            Bound::Included(end) | Bound::Excluded(end) => *end > at,
        };
        start_above.then(|| IdRange {
            start: tighter_start(&range.start, at),
            end: range.end.clone(),
        })
    }
}

fn tighter_start(start: &Bound<String>, after: String) -> Bound<String> {
    match start {
        Bound::Included(s) | Bound::Excluded(s) if *s > after => start.clone(),
        _ => Bound::Excluded(after),
    }
}

fn tighter_end(end: &Bound<String>, before: String) -> Bound<String> {
    match end {
        Bound::Included(e) | Bound::Excluded(e) if *e < before => end.clone(),
        _ => Bound::Excluded(before),
    }
}

/// The engine's scan covering `range` (an excluded start becomes its successor, the id with a
/// NUL appended; an excluded high end in a descending scan is filtered by the caller).
fn scan_range(range: &IdRange, descending: bool) -> ScanRange {
    let low = match &range.start {
        Bound::Unbounded => None,
        Bound::Included(id) => Some(id.clone().into_bytes()),
        Bound::Excluded(id) => Some(format!("{id}\0").into_bytes()),
    };
    let (high, high_inclusive) = match &range.end {
        Bound::Unbounded => (None, true),
        Bound::Included(id) => (Some(id.clone().into_bytes()), true),
        Bound::Excluded(id) => (Some(id.clone().into_bytes()), false),
    };
    if descending {
        ScanRange {
            collection: 0,
            start: high,
            end: low,
            inclusive_end: true,
            descending: true,
        }
    } else {
        ScanRange {
            collection: 0,
            start: low,
            end: high,
            inclusive_end: high_inclusive,
            descending: false,
        }
    }
}

/// A JSON index's ranges, scanned in the indexer's order (key, then document id), resuming
/// strictly after a bookmark. A range's end `[v1 .. vk, <MAX>]` is every key that begins with
/// `v1 .. vk`: the array's encoding without its closing byte, then `0xFF` (above every
/// element's type tag; `docs/format/views.md`).
fn scan_index(
    group: &IndexGroup,
    ranges: &[KeyRange],
    partition: Option<&str>,
    descending: bool,
    resume: Option<&Bookmark>,
    visit: &mut dyn FnMut(Row) -> MangoResult<bool>,
) -> MangoResult<()> {
    let ordered: Vec<&KeyRange> = if descending {
        ranges.iter().rev().collect()
    } else {
        ranges.iter().collect()
    };
    for range in ordered {
        let mut lower = settee_views::row_position(&Value::Array(range.start.clone()), None);
        let mut upper = upper_position(&range.end);
        if let Some(bookmark) = resume {
            let at = settee_views::row_position(&bookmark.key, Some(&bookmark.id));
            if descending {
                upper = upper.min(at);
            } else {
                lower = lower.max(settee_views::position_after(&at));
            }
        }
        let encoded = EncodedRange {
            lower,
            upper,
            descending,
            partition: partition.map(str::to_string),
        };
        for row in group.scan_encoded(0, &encoded) {
            let row = row.map_err(view_error)?;
            let visited = Row {
                key: row.key(),
                id: row.id_str().into_owned(),
                record: None,
            };
            if !visit(visited)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The exclusive upper position of a key range's end.
fn upper_position(end: &[KeyPart]) -> Vec<u8> {
    let values: Vec<Value> = end
        .iter()
        .take_while(|part| matches!(part, KeyPart::Value(_)))
        .filter_map(|part| match part {
            KeyPart::Value(value) => Some(value.clone()),
            KeyPart::Max => None,
        })
        .collect();
    let mut position = settee_collate::encode_key(&Value::Array(values.clone()));
    if end.len() > values.len() {
        // Ends in <MAX>: every key with these first elements.
        position.pop();
        position.push(0xFF);
        position
    } else {
        // Ends at this exact key: just past its rows.
        settee_views::position_after(&position)
    }
}

fn view_error(error: ViewError) -> MangoError {
    MangoError::Internal {
        error: "internal_error",
        reason: error.to_string(),
    }
}
