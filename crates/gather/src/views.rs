//! A view query scattered over the nodes (docs/format/cluster-transport.md, "A view query"):
//! map rows merged in the view's order, reduce groups of equal key merged from the nodes'
//! partial reductions, `keys` answered key by key in the client's order.
//!
//! The view's key order and the reducer are the caller's (`position`, `combine`): this crate
//! knows neither collation nor reduce functions.

use std::cmp::Ordering;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::{Answer, Malformed};

/// What the client asked, as the front node planned it. The nodes were sent `skip` 0, `limit`
/// raised to `skip + limit`, and with `keys` each distinct key once (`unique`), and for a
/// reduce `group=true`.
pub struct ViewQuery<'a> {
    pub skip: usize,
    pub limit: Option<usize>,
    pub descending: bool,
    /// The client's `update_seq=true`.
    pub update_seq: bool,
    /// A key's place in the view's order (its collated or raw encoding): equal places are
    /// equal keys.
    pub position: &'a dyn Fn(&Value) -> Vec<u8>,
    /// With `keys`: the distinct keys' positions in the order the nodes were sent them, and
    /// for each of the client's keys (in its order) the index of its distinct key.
    pub keys: Option<(&'a [Vec<u8>], &'a [usize])>,
}

#[derive(Deserialize)]
struct MapAnswer<'a> {
    total_rows: u64,
    offset: Option<u64>,
    update_seq: Option<String>,
    #[serde(borrow)]
    rows: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct MapRow {
    id: String,
    key: Value,
}

#[derive(Deserialize)]
struct ReduceAnswer {
    update_seq: Option<String>,
    rows: Vec<Value>,
}

/// The nodes' `update_seq`s with their vbuckets.
fn seqs<'a>(answers: &[Answer<'a>], seqs: &'a [Option<String>]) -> Vec<(&'a [u16], &'a str)> {
    answers
        .iter()
        .zip(seqs)
        .filter_map(|(answer, seq)| Some((answer.vbuckets, seq.as_deref()?)))
        .collect()
}

fn parse<'a, T: Deserialize<'a>>(answers: &[Answer<'a>]) -> Result<Vec<T>, Malformed> {
    answers
        .iter()
        .map(|answer| {
            serde_json::from_slice::<T>(answer.body).map_err(|error| Malformed(error.to_string()))
        })
        .collect()
}

/// A row with its key's position in the view's order.
type Placed<T> = (Vec<u8>, T);

/// Splits one node's rows (in the order of the distinct keys) by distinct key.
fn by_key<T>(rows: Vec<Placed<T>>, unique: &[Vec<u8>]) -> Result<Vec<Vec<Placed<T>>>, Malformed> {
    let mut split: Vec<Vec<Placed<T>>> = unique.iter().map(|_| Vec::new()).collect();
    let mut at = 0;
    for (position, row) in rows {
        while unique.get(at).is_some_and(|key| *key != position) {
            at += 1;
        }
        let Some(share) = split.get_mut(at) else {
            return Err(Malformed("a row of a key that was not asked for".into()));
        };
        share.push((position, row));
    }
    Ok(split)
}

fn write_rows<'a>(out: &mut Vec<u8>, rows: impl Iterator<Item = &'a [u8]>) {
    out.extend_from_slice(b"\"rows\":[");
    let mut first = true;
    for row in rows {
        out.extend_from_slice(if first { b"\r\n" } else { b",\r\n" });
        first = false;
        out.extend_from_slice(row);
    }
    out.extend_from_slice(b"\r\n]}\n");
}

/// The merged answer of a map query (`reduce=false`, or a view without reduce). `merge_seq`
/// makes the `update_seq` of the nodes' own.
pub fn merge_map(
    answers: &[Answer<'_>],
    query: &ViewQuery<'_>,
    merge_seq: impl FnOnce(&[(&[u16], &str)]) -> Result<String, Malformed>,
) -> Result<Vec<u8>, Malformed> {
    let parsed: Vec<MapAnswer<'_>> = parse(answers)?;
    let order = |a: &(Vec<u8>, String, &RawValue), b: &(Vec<u8>, String, &RawValue)| {
        crate::by_place((&a.0, &a.1), (&b.0, &b.1), query.descending)
    };
    let mut per_node = Vec::with_capacity(parsed.len());
    for answer in &parsed {
        let mut rows = Vec::with_capacity(answer.rows.len());
        for row in &answer.rows {
            let MapRow { id, key } = serde_json::from_str(row.get())
                .map_err(|error| Malformed(format!("a view row: {error}")))?;
            rows.push(((query.position)(&key), (id, *row)));
        }
        per_node.push(rows);
    }
    let rows: Vec<(Vec<u8>, String, &RawValue)> = match query.keys {
        None => {
            let mut all: Vec<_> = per_node
                .into_iter()
                .flatten()
                .map(|(position, (id, row))| (position, id, row))
                .collect();
            all.sort_by(order);
            all
        }
        Some((unique, client)) => {
            let split = per_node
                .into_iter()
                .map(|rows| by_key(rows, unique))
                .collect::<Result<Vec<_>, _>>()?;
            let mut merged = Vec::new();
            for &index in client {
                let mut rows: Vec<_> = split
                    .iter()
                    .filter_map(|shares| shares.get(index))
                    .flatten()
                    .map(|(position, (id, row))| (position.clone(), id.clone(), *row))
                    .collect();
                rows.sort_by(order);
                merged.extend(rows);
            }
            merged
        }
    };
    let total_rows: u64 = parsed.iter().map(|answer| answer.total_rows).sum();
    let offset = parsed
        .iter()
        .filter_map(|answer| answer.offset)
        .sum::<u64>()
        + query.skip as u64;
    let mut out = format!("{{\"total_rows\":{total_rows},\"offset\":{offset},").into_bytes();
    if query.update_seq {
        let seq_texts: Vec<Option<String>> = parsed
            .iter()
            .map(|answer| answer.update_seq.clone())
            .collect();
        let merged = merge_seq(&seqs(answers, &seq_texts))?;
        out.extend_from_slice(format!("\"update_seq\":\"{merged}\",").as_bytes());
    }
    let kept = rows
        .iter()
        .skip(query.skip)
        .take(query.limit.unwrap_or(usize::MAX));
    write_rows(&mut out, kept.map(|(_, _, row)| row.get().as_bytes()));
    Ok(out)
}

/// The merged `GET /db/_design/{d}/_info` (JSON bodies): each node gave its own index of the
/// design document; sizes, positions, pending updates and waiting clients are summed, the
/// running flags are any node's, the rest is the first answer's.
pub fn merge_design_info(answers: &[&[u8]]) -> Result<Vec<u8>, Malformed> {
    let parsed = answers
        .iter()
        .map(|body| {
            serde_json::from_slice::<Value>(body).map_err(|error| Malformed(error.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(mut merged) = parsed.first().cloned() else {
        return Err(Malformed("no answer".into()));
    };
    let summed: [&[&str]; 8] = [
        &["sizes", "file"],
        &["sizes", "active"],
        &["sizes", "external"],
        &["update_seq"],
        &["updates_pending", "minimum"],
        &["updates_pending", "preferred"],
        &["updates_pending", "total"],
        &["waiting_clients"],
    ];
    let indexes = parsed
        .iter()
        .map(|info| {
            info.get("view_index")
                .ok_or_else(|| Malformed("an answer without `view_index`".into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(target) = merged.get_mut("view_index") else {
        return Err(Malformed("an answer without `view_index`".into()));
    };
    let at = |value: &Value, path: &[&str]| {
        path.iter()
            .try_fold(value, |value, name| value.get(name))
            .and_then(Value::as_u64)
    };
    for path in summed {
        let total: u64 = indexes.iter().filter_map(|index| at(index, path)).sum();
        let slot = path
            .iter()
            .try_fold(&mut *target, |value, name| value.get_mut(name));
        if let Some(slot) = slot {
            *slot = total.into();
        }
    }
    for flag in ["updater_running", "compact_running", "waiting_commit"] {
        let any = indexes
            .iter()
            .any(|index| index.get(flag).and_then(Value::as_bool) == Some(true));
        if let Some(slot) = target.get_mut(flag) {
            *slot = any.into();
        }
    }
    Ok(merged.to_string().into_bytes())
}

/// The merged answer of a reduce query: the nodes' groups of equal key merged by `combine`
/// (their partial reductions in, the group's value out). With `keys`, `group_key` gives each
/// client key's group its key (the client's grouping: the key, a prefix of it, or `null`).
pub fn merge_reduce(
    answers: &[Answer<'_>],
    query: &ViewQuery<'_>,
    group_key: &dyn Fn(&Value) -> Value,
    combine: &mut dyn FnMut(Vec<Value>) -> Result<Value, Malformed>,
    merge_seq: impl FnOnce(&[(&[u16], &str)]) -> Result<String, Malformed>,
) -> Result<Vec<u8>, Malformed> {
    let parsed: Vec<ReduceAnswer> = parse(answers)?;
    let seq_texts: Vec<Option<String>> = parsed.iter().map(|a| a.update_seq.clone()).collect();
    let mut error_row = None;
    let mut per_node = Vec::with_capacity(parsed.len());
    for answer in parsed {
        let mut rows = Vec::with_capacity(answer.rows.len());
        for row in answer.rows {
            if row.get("error").is_some() {
                error_row.get_or_insert(row);
                continue;
            }
            let (Some(key), Some(value)) = (row.get("key"), row.get("value")) else {
                return Err(Malformed(format!("a reduce row: {row}")));
            };
            rows.push(((query.position)(key), (key.clone(), value.clone())));
        }
        per_node.push(rows);
    }
    // (group key, the nodes' partials) in the order the client reads the groups.
    let groups: Vec<(Value, Vec<Value>)> = match query.keys {
        None => {
            let mut all: Vec<_> = per_node.into_iter().flatten().collect();
            all.sort_by(|a, b| {
                let order: Ordering = a.0.cmp(&b.0);
                if query.descending {
                    order.reverse()
                } else {
                    order
                }
            });
            let mut groups: Vec<(Vec<u8>, Value, Vec<Value>)> = Vec::new();
            for (position, (key, value)) in all {
                match groups.last_mut() {
                    Some((last, _, partials)) if *last == position => partials.push(value),
                    _ => groups.push((position, key, vec![value])),
                }
            }
            groups
                .into_iter()
                .map(|(_, key, partials)| (key, partials))
                .collect()
        }
        Some((unique, client)) => {
            let split = per_node
                .into_iter()
                .map(|rows| by_key(rows, unique))
                .collect::<Result<Vec<_>, _>>()?;
            client
                .iter()
                .filter_map(|&index| {
                    let rows: Vec<&(Value, Value)> = split
                        .iter()
                        .filter_map(|shares| shares.get(index))
                        .flatten()
                        .map(|(_, row)| row)
                        .collect();
                    let (key, _) = rows.first()?;
                    let partials = rows.iter().map(|(_, value)| value.clone()).collect();
                    Some((group_key(key), partials))
                })
                .collect()
        }
    };
    let mut out = b"{".to_vec();
    if query.update_seq {
        let merged = merge_seq(&seqs(answers, &seq_texts))?;
        out.extend_from_slice(format!("\"update_seq\":\"{merged}\",").as_bytes());
    }
    let mut rows = Vec::new();
    for (key, partials) in groups
        .into_iter()
        .skip(query.skip)
        .take(query.limit.unwrap_or(usize::MAX))
    {
        let value = combine(partials)?;
        rows.push(format!("{{\"key\":{key},\"value\":{value}}}").into_bytes());
    }
    if let Some(error) = error_row {
        rows.push(error.to_string().into_bytes());
    }
    write_rows(&mut out, rows.iter().map(Vec::as_slice));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Positions as strings' bytes and numbers' digits: enough order for the tests.
    fn position(key: &Value) -> Vec<u8> {
        key.to_string().into_bytes()
    }

    fn query<'a>(keys: Option<(&'a [Vec<u8>], &'a [usize])>) -> ViewQuery<'a> {
        ViewQuery {
            skip: 0,
            limit: None,
            descending: false,
            update_seq: false,
            position: &position,
            keys,
        }
    }

    fn no_seq(_: &[(&[u16], &str)]) -> Result<String, Malformed> {
        Ok(String::new())
    }

    /// Two nodes' answers, of vbuckets 0 and 1.
    fn two<'a>(a: &'a [u8], b: &'a [u8]) -> [Answer<'a>; 2] {
        [
            Answer {
                vbuckets: &[0],
                body: a,
            },
            Answer {
                vbuckets: &[1],
                body: b,
            },
        ]
    }

    fn rows(body: &[u8]) -> Vec<Value> {
        let value: Value = serde_json::from_slice(body).expect("json");
        value["rows"].as_array().expect("rows").clone()
    }

    #[test]
    fn map_rows_merge_in_key_then_id_order_with_skip_limit_and_sums() {
        let a = br#"{"total_rows":3,"offset":1,"rows":[{"id":"b","key":"k1","value":1},{"id":"a","key":"k3","value":3}]}"#;
        let b = br#"{"total_rows":2,"offset":0,"rows":[{"id":"a","key":"k1","value":2},{"id":"c","key":"k2","value":null}]}"#;
        let answers = two(a, b);
        let mut asked = query(None);
        asked.skip = 1;
        asked.limit = Some(2);
        let body = merge_map(&answers, &asked, no_seq).expect("merges");
        let value: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(value["total_rows"], json!(5));
        assert_eq!(value["offset"], json!(2));
        let ids: Vec<&str> = value["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| row["id"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["b", "c"]);
        asked.descending = true;
        asked.skip = 0;
        asked.limit = None;
        let ids: Vec<Value> = rows(&merge_map(&answers, &asked, no_seq).expect("merges"))
            .iter()
            .map(|row| row["id"].clone())
            .collect();
        assert_eq!(ids, [json!("a"), json!("c"), json!("b"), json!("a")]);
    }

    #[test]
    fn keys_are_answered_in_the_clients_order_with_repeats() {
        let unique = [position(&json!("y")), position(&json!("x"))];
        // The client asked x, y, x; the nodes were sent y, x.
        let client = [1, 0, 1];
        let a = br#"{"total_rows":2,"offset":0,"rows":[{"id":"d2","key":"y","value":0},{"id":"d1","key":"x","value":0}]}"#;
        let b = br#"{"total_rows":1,"offset":0,"rows":[{"id":"d0","key":"x","value":0}]}"#;
        let answers = two(a, b);
        let ids: Vec<Value> =
            rows(&merge_map(&answers, &query(Some((&unique, &client))), no_seq).expect("merges"))
                .iter()
                .map(|row| row["id"].clone())
                .collect();
        assert_eq!(ids, ["d0", "d1", "d2", "d0", "d1"].map(|id| json!(id)));
    }

    #[test]
    fn reduce_groups_of_equal_keys_are_combined() {
        let a = br#"{"rows":[{"key":"a","value":1},{"key":"c","value":5}]}"#;
        let b = br#"{"rows":[{"key":"a","value":2},{"key":"b","value":7}]}"#;
        let answers = two(a, b);
        let mut sum = |partials: Vec<Value>| -> Result<Value, Malformed> {
            Ok(json!(partials
                .iter()
                .filter_map(Value::as_u64)
                .sum::<u64>()))
        };
        let body = merge_reduce(&answers, &query(None), &|key| key.clone(), &mut sum, no_seq)
            .expect("merges");
        assert_eq!(
            rows(&body),
            [
                json!({"key":"a","value":3}),
                json!({"key":"b","value":7}),
                json!({"key":"c","value":5})
            ]
        );
        let unique = [position(&json!("c")), position(&json!("a"))];
        let client = [1, 0];
        let answers = two(
            br#"{"rows":[{"key":"c","value":5},{"key":"a","value":1}]}"#,
            br#"{"rows":[{"key":"a","value":2}]}"#,
        );
        let body = merge_reduce(
            &answers,
            &query(Some((&unique, &client))),
            &|_| Value::Null,
            &mut sum,
            no_seq,
        )
        .expect("merges");
        assert_eq!(
            rows(&body),
            [json!({"key":null,"value":3}), json!({"key":null,"value":5})]
        );
        let broken = [Answer {
            vbuckets: &[0],
            body: br#"{"rows":[{"key":"a"}]}"#,
        }];
        assert!(merge_reduce(&broken, &query(None), &|k| k.clone(), &mut sum, no_seq).is_err());
    }
}
