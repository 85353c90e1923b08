//! A `descending=true` normal `_changes` feed across nodes. Each node answered newest first for
//! its own vbuckets, with each row's CAS in the answer's `cas` array (one per row, the order
//! its own vbuckets were merged in); the front node merges the nodes' rows by that CAS,
//! highest first, as one node merges its vbuckets (settee-engine's `changes_descending`).
//!
//! Each merged row's `seq` is the forward feed's resume point just after it, as on one node:
//! for every node's vbuckets, the resume point of that node's next row not yet taken (its row
//! `seq` says exactly that for the node's own vbuckets), or `since` for a node with no row
//! left. A client may follow the feed forward from any row's `seq`.

use std::collections::BinaryHeap;

use serde::Deserialize;
use serde_json::value::RawValue;
use settee_record::seqvec::SeqVector;

use crate::{row_seq, take_components, with_seq, Answer, Malformed, MergedChanges};

#[derive(Deserialize)]
struct DescendingAnswer<'a> {
    #[serde(borrow)]
    results: Vec<&'a RawValue>,
    cas: Vec<u64>,
}

/// One node's rows, with each row's text, `seq` as written and decoded, and CAS.
struct NodeRows<'a> {
    vbuckets: &'a [u16],
    rows: Vec<(&'a str, String, SeqVector, u64)>,
}

/// Merges descending normal `_changes` answers: at most `limit` rows, newest (highest CAS)
/// first; `last` is the last row's `seq` (`since` when there is none), `pending` 0 as on one
/// node.
pub fn merge_changes_descending(
    answers: &[Answer<'_>],
    since: &SeqVector,
    limit: Option<usize>,
    vbuckets: u16,
) -> Result<MergedChanges, Malformed> {
    let nodes = answers
        .iter()
        .map(|answer| node_rows(answer, vbuckets))
        .collect::<Result<Vec<_>, _>>()?;
    let mut position = since.clone();
    let mut heap = BinaryHeap::new();
    for (index, node) in nodes.iter().enumerate() {
        if let Some((_, _, at, cas)) = node.rows.first() {
            take_components(&mut position, at, node.vbuckets);
            // Ties go to the first answer, as a node's own ties go to its lowest vbucket.
            heap.push((*cas, std::cmp::Reverse(index)));
        }
    }
    let limit = limit.unwrap_or(usize::MAX);
    let mut next = vec![0usize; nodes.len()];
    let mut rows = Vec::new();
    let mut last = since.clone();
    while rows.len() < limit {
        let Some((_, std::cmp::Reverse(index))) = heap.pop() else {
            break;
        };
        let node = &nodes[index];
        let (text, old, at, _) = &node.rows[next[index]];
        take_components(&mut position, at, node.vbuckets);
        rows.push(with_seq(text, old, &position.encode())?);
        last.clone_from(&position);
        next[index] += 1;
        match node.rows.get(next[index]) {
            Some((_, _, at, cas)) => {
                take_components(&mut position, at, node.vbuckets);
                heap.push((*cas, std::cmp::Reverse(index)));
            }
            // Every entry of the node's vbuckets is taken: their floor.
            None => take_components(&mut position, since, node.vbuckets),
        }
    }
    Ok(MergedChanges {
        rows,
        last,
        pending: 0,
    })
}

fn node_rows<'a>(answer: &Answer<'a>, vbuckets: u16) -> Result<NodeRows<'a>, Malformed> {
    let parsed: DescendingAnswer<'a> =
        serde_json::from_slice(answer.body).map_err(|error| Malformed(error.to_string()))?;
    if parsed.cas.len() != parsed.results.len() {
        return Err(Malformed(format!(
            "{} rows but {} CAS values",
            parsed.results.len(),
            parsed.cas.len()
        )));
    }
    let rows = parsed
        .results
        .iter()
        .zip(parsed.cas)
        .map(|(row, cas)| {
            let text = row.get();
            let (old, at) = row_seq(text, vbuckets)?;
            Ok((text, old, at, cas))
        })
        .collect::<Result<Vec<_>, Malformed>>()?;
    Ok(NodeRows {
        vbuckets: answer.vbuckets,
        rows,
    })
}
