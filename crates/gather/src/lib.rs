//! The front node's half of a whole-bucket request in a cluster (docs/format/cluster-transport.md,
//! "Whole-bucket HTTP requests"): each node answered for its active vbuckets; these functions
//! merge their answers into the one a single node holding every vbucket would give.
//!
//! Pure functions over the answers' bytes: no I/O, no cluster map, no HTTP. Rows are carried as
//! the nodes wrote them (`RawValue`), so documents keep their members' order and numbers'
//! spelling; only a change row's leading `seq` is rewritten.
#![deny(clippy::unwrap_used)]

use serde::Deserialize;
use serde_json::value::RawValue;
use settee_record::seqvec::SeqVector;

pub use descending::merge_changes_descending;

pub mod descending;
pub mod find;
pub mod split;
pub mod views;

/// One node's answer: the vbuckets it answered for and its 200 body.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    pub vbuckets: &'a [u16],
    pub body: &'a [u8],
}

/// Why answers could not be merged (a node answered something that is not its JSON shape).
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a node's answer to a scattered request: {}", self.0)
    }
}

/// The order of two rows by place: an index position, then the document id's bytes; reversed
/// when `descending`.
pub(crate) fn by_place(a: (&[u8], &str), b: (&[u8], &str), descending: bool) -> std::cmp::Ordering {
    let order =
        a.0.cmp(b.0)
            .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()));
    if descending {
        order.reverse()
    } else {
        order
    }
}

#[derive(Deserialize)]
struct AllDocsAnswer<'a> {
    total_rows: u64,
    offset: Option<u64>,
    #[serde(borrow)]
    update_seq: Option<&'a RawValue>,
    #[serde(borrow)]
    rows: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct RowKey {
    key: serde_json::Value,
}

/// What the client asked of an `_all_docs` (the nodes were sent `skip` 0 and `limit` raised to
/// `skip + limit`).
#[derive(Clone, Debug, Default)]
pub struct AllDocsQuery {
    pub skip: usize,
    pub limit: Option<usize>,
    pub descending: bool,
    /// With `keys`: for each key in the order the rows are given (reversed when descending),
    /// the index of the answer that holds its row.
    pub key_answers: Option<Vec<usize>>,
}

/// The merged `_all_docs` body. `update_seq` (CouchDB's form, when the nodes gave one) is
/// `merge_seq` of the nodes' own.
pub fn merge_all_docs(
    answers: &[Answer<'_>],
    query: &AllDocsQuery,
    merge_seq: impl FnOnce(&[(&[u16], &str)]) -> String,
) -> Result<Vec<u8>, Malformed> {
    let parsed = answers
        .iter()
        .map(|answer| {
            serde_json::from_slice::<AllDocsAnswer<'_>>(answer.body)
                .map_err(|error| Malformed(error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let total_rows: u64 = parsed.iter().map(|answer| answer.total_rows).sum();
    let rows: Vec<&RawValue> = match &query.key_answers {
        Some(order) => {
            let mut next = vec![0usize; parsed.len()];
            let mut rows = Vec::with_capacity(order.len());
            for &index in order {
                let (Some(answer), Some(at)) = (parsed.get(index), next.get_mut(index)) else {
                    return Err(Malformed(format!("no answer {index}")));
                };
                // A node gives at most `skip + limit` rows: the keys past them are not asked for.
                let Some(row) = answer.rows.get(*at) else {
                    break;
                };
                *at += 1;
                rows.push(*row);
            }
            rows
        }
        None => {
            let mut keyed = Vec::new();
            for answer in &parsed {
                for row in &answer.rows {
                    let key = serde_json::from_str::<RowKey>(row.get())
                        .map_err(|error| Malformed(format!("a row without its key: {error}")))?
                        .key;
                    let key = key.as_str().unwrap_or_default().to_owned();
                    keyed.push((key, *row));
                }
            }
            // Stable: rows of equal keys (none in `_all_docs`) keep the nodes' order.
            keyed.sort_by(|(left, _), (right, _)| {
                let order = left.as_bytes().cmp(right.as_bytes());
                if query.descending {
                    order.reverse()
                } else {
                    order
                }
            });
            keyed.into_iter().map(|(_, row)| row).collect()
        }
    };
    let offset = match &query.key_answers {
        Some(_) => "null".to_owned(),
        None => {
            let before: u64 = parsed.iter().filter_map(|answer| answer.offset).sum();
            (before + query.skip as u64).to_string()
        }
    };
    let mut out = format!("{{\"total_rows\":{total_rows},\"offset\":{offset}").into_bytes();
    let seqs: Vec<(&[u16], &str)> = answers
        .iter()
        .zip(&parsed)
        .filter_map(|(answer, parsed)| {
            let seq = parsed.update_seq?;
            let text = serde_json::from_str::<&str>(seq.get()).ok()?;
            Some((answer.vbuckets, text))
        })
        .collect();
    if !seqs.is_empty() {
        let merged = merge_seq(&seqs);
        out.extend_from_slice(format!(",\"update_seq\":\"{merged}\"").as_bytes());
    }
    out.extend_from_slice(b",\"rows\":[\r\n");
    let kept = rows
        .into_iter()
        .skip(query.skip)
        .take(query.limit.unwrap_or(usize::MAX));
    for (index, row) in kept.enumerate() {
        if index > 0 {
            out.extend_from_slice(b",\r\n");
        }
        out.extend_from_slice(row.get().as_bytes());
    }
    out.extend_from_slice(b"\r\n]}");
    Ok(out)
}

/// The merged `GET /db`: the first answer's members, with `doc_count`, `doc_del_count` and
/// `sizes` and `purge_seq` summed over the answers, `compact_running` any node's, and
/// `update_seq` as `merge_seq` makes it of theirs.
pub fn merge_db_info(
    answers: &[Answer<'_>],
    merge_seq: impl FnOnce(&[(&[u16], &str)]) -> Result<String, Malformed>,
) -> Result<Vec<u8>, Malformed> {
    let parsed = answers
        .iter()
        .map(|answer| {
            serde_json::from_slice::<serde_json::Value>(answer.body)
                .map_err(|error| Malformed(error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut merged = parsed
        .first()
        .cloned()
        .ok_or_else(|| Malformed("no answer".into()))?;
    let sum = |path: &[&str]| -> u64 {
        parsed
            .iter()
            .filter_map(|info| {
                path.iter()
                    .try_fold(info, |value, name| value.get(name))
                    .and_then(serde_json::Value::as_u64)
            })
            .sum()
    };
    merged["doc_count"] = sum(&["doc_count"]).into();
    merged["doc_del_count"] = sum(&["doc_del_count"]).into();
    for size in ["file", "external", "active"] {
        merged["sizes"][size] = sum(&["sizes", size]).into();
    }
    // Each node counts the purges of its own vbuckets.
    if merged
        .get("purge_seq")
        .is_some_and(serde_json::Value::is_string)
    {
        let purges: u64 = parsed
            .iter()
            .filter_map(|info| info["purge_seq"].as_str()?.parse::<u64>().ok())
            .sum();
        merged["purge_seq"] = purges.to_string().into();
    }
    // A compaction runs while any node's does.
    if merged.get("compact_running").is_some() {
        merged["compact_running"] = parsed
            .iter()
            .any(|info| info["compact_running"] == serde_json::Value::Bool(true))
            .into();
    }
    let seqs: Vec<(&[u16], &str)> = answers
        .iter()
        .zip(&parsed)
        .filter_map(|(answer, info)| Some((answer.vbuckets, info.get("update_seq")?.as_str()?)))
        .collect();
    merged["update_seq"] = merge_seq(&seqs)?.into();
    Ok(merged.to_string().into_bytes())
}

/// Decodes a sequence a node of this bucket gave, in either form (docs/format/update-seq.md).
pub fn decode_seq(text: &str, vbuckets: u16) -> Option<SeqVector> {
    SeqVector::decode(text, vbuckets)
        .or_else(|| settee_http_wire::couch_seq::decode(text, vbuckets).map(SeqVector::from_seqnos))
}

/// `into` with the components of `vbuckets` taken from `from`.
pub fn take_components(into: &mut SeqVector, from: &SeqVector, vbuckets: &[u16]) {
    for &vbucket in vbuckets {
        into.set(vbucket, from.get(vbucket));
    }
}

/// `since` with each answer's vbuckets taken from the sequence that answer gave.
pub fn merge_seqs(
    since: &SeqVector,
    seqs: &[(&[u16], &str)],
    vbuckets: u16,
) -> Result<SeqVector, Malformed> {
    let mut merged = since.clone();
    for (listed, text) in seqs {
        let seq = decode_seq(text, vbuckets)
            .ok_or_else(|| Malformed(format!("a sequence that does not decode: {text}")))?;
        take_components(&mut merged, &seq, listed);
    }
    Ok(merged)
}

#[derive(Deserialize)]
struct ChangesAnswer<'a> {
    #[serde(borrow)]
    results: Vec<&'a RawValue>,
    last_seq: String,
    #[serde(default)]
    pending: u64,
}

#[derive(Deserialize)]
struct RowSeq {
    seq: String,
}

/// A merged normal `_changes` feed: the body's rows and what its tail names.
#[derive(Debug)]
pub struct MergedChanges {
    /// The rows in feed order, each one JSON object with its merged `seq`: a normal feed's
    /// body is [`MergedChanges::finish`], a continuous feed frames them one by one.
    pub rows: Vec<Vec<u8>>,
    /// Where the feed ends (`last_seq`).
    pub last: SeqVector,
    pub pending: u64,
}

impl MergedChanges {
    /// The whole body of a normal feed, with `last_seq` as the caller encodes it (CouchDB's
    /// form).
    pub fn finish(self, last_seq: &str) -> Vec<u8> {
        let mut body = b"{\"results\":[\n".to_vec();
        for (index, row) in self.rows.iter().enumerate() {
            if index > 0 {
                body.extend_from_slice(b",\n");
            }
            body.extend_from_slice(row);
        }
        body.extend_from_slice(
            format!(
                "\n],\n\"last_seq\":\"{last_seq}\",\"pending\":{}}}\n",
                self.pending
            )
            .as_bytes(),
        );
        body
    }
}

/// Merges normal `_changes` answers: rows node by node, at most `limit`, each row's `seq` the
/// compact vector of everything emitted up to it (see the format document).
pub fn merge_changes(
    answers: &[Answer<'_>],
    since: &SeqVector,
    limit: Option<usize>,
    vbuckets: u16,
) -> Result<MergedChanges, Malformed> {
    let parsed = answers
        .iter()
        .map(|answer| {
            serde_json::from_slice::<ChangesAnswer<'_>>(answer.body)
                .map_err(|error| Malformed(error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limit = limit.unwrap_or(usize::MAX);
    let mut position = since.clone();
    let mut rows = Vec::new();
    let mut cut = 0u64;
    for (answer, changes) in answers.iter().zip(&parsed) {
        for row in &changes.results {
            if rows.len() >= limit {
                cut += 1;
                continue;
            }
            let text = row.get();
            let (old, at) = row_seq(text, vbuckets)?;
            take_components(&mut position, &at, answer.vbuckets);
            rows.push(with_seq(text, &old, &position.encode())?);
        }
    }
    let last = if cut > 0 {
        position
    } else {
        let seqs: Vec<(&[u16], &str)> = answers
            .iter()
            .zip(&parsed)
            .map(|(answer, changes)| (answer.vbuckets, changes.last_seq.as_str()))
            .collect();
        merge_seqs(since, &seqs, vbuckets)?
    };
    Ok(MergedChanges {
        rows,
        last,
        pending: parsed.iter().map(|changes| changes.pending).sum::<u64>() + cut,
    })
}

/// A change row's `seq` as the node wrote it, and decoded.
pub(crate) fn row_seq(row: &str, vbuckets: u16) -> Result<(String, SeqVector), Malformed> {
    let old = serde_json::from_str::<RowSeq>(row)
        .map_err(|error| Malformed(format!("a change row without its seq: {error}")))?
        .seq;
    let at = decode_seq(&old, vbuckets)
        .ok_or_else(|| Malformed(format!("a change row's seq: {old}")))?;
    Ok((old, at))
}

/// `row` with its `seq` member's value replaced: the leading `{"seq":"old"` as a node writes
/// it, else by re-serialising the row.
fn with_seq(row: &str, old: &str, new: &str) -> Result<Vec<u8>, Malformed> {
    let head = format!("{{\"seq\":\"{old}\"");
    if let Some(rest) = row.strip_prefix(&head) {
        return Ok(format!("{{\"seq\":\"{new}\"{rest}").into_bytes());
    }
    let mut value: serde_json::Value =
        serde_json::from_str(row).map_err(|error| Malformed(error.to_string()))?;
    value["seq"] = serde_json::Value::String(new.to_owned());
    Ok(value.to_string().into_bytes())
}

#[cfg(test)]
mod tests;
