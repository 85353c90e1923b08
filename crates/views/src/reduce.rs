//! Reductions at query time: the built-ins natively (`_count`, `_sum`, `_stats`,
//! `_approx_count_distinct`), JavaScript reduce functions on the JS pool (in chunks, then
//! `rereduce`), and grouping by key or key prefix (`group`, `group_level`).

use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::{json, Map, Number, Value};
use settee_js::{JsPool, Program};

use crate::design::ReduceKind;
use crate::error::ViewError;
use crate::query::Row;

/// Rows handed to one JavaScript reduce call; longer groups are reduced in chunks and the
/// chunks' results re-reduced, as CouchDB reduces B-tree nodes.
pub const JS_REDUCE_CHUNK_ROWS: usize = 1000;
/// CouchDB's `reduce_limit`: a JavaScript reduce whose output is over this size must at least
/// halve its input.
pub const REDUCE_OUTPUT_BYTES_MAX: usize = 4096;

/// How rows are grouped before reducing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// `group=false`: one reduction over the whole range, key `null`.
    All,
    /// `group=true`: by the whole key.
    Exact,
    /// `group_level=n`: by the first n elements of array keys (other keys whole).
    Level(usize),
}

impl Grouping {
    fn key_of(self, key: Value) -> Value {
        match (self, key) {
            (Grouping::All, _) => Value::Null,
            (Grouping::Level(n), Value::Array(mut items)) => {
                items.truncate(n);
                Value::Array(items)
            }
            (_, key) => key,
        }
    }
}

pub enum Reducer {
    Builtin(ReduceKind),
    JavaScript {
        pool: Arc<JsPool>,
        program: Arc<Program>,
        view: usize,
    },
}

/// Feeds rows in order, gets `(group key, reduction)` each time a group ends.
pub struct GroupedReduce<'a> {
    reducer: &'a Reducer,
    grouping: Grouping,
    current: Option<(Value, Accumulator)>,
    /// Each group's partial reduction instead of its value ([`GroupedReduce::partial`]).
    partial: bool,
}

impl<'a> GroupedReduce<'a> {
    pub fn new(reducer: &'a Reducer, grouping: Grouping) -> GroupedReduce<'a> {
        GroupedReduce {
            reducer,
            grouping,
            current: None,
            partial: false,
        }
    }

    /// Gives each group's **partial** reduction, which [`merge_partials`] merges with other
    /// nodes' partials of the same group into its value (a scattered view query's answer;
    /// docs/format/cluster-transport.md): a count, a sum, a stats object, the ranked values,
    /// `[key, id, value]` of the first or last row (or `null`), the distinct-count sketch's
    /// registers in hex, or the JavaScript reduce's output.
    pub fn partial(reducer: &'a Reducer, grouping: Grouping) -> GroupedReduce<'a> {
        GroupedReduce {
            partial: true,
            ..GroupedReduce::new(reducer, grouping)
        }
    }

    /// Adds a row; returns the previous group's result when this row starts a new group.
    pub fn push(&mut self, row: &Row) -> Result<Option<(Value, Value)>, ViewError> {
        let key = row.key();
        let group_key = self.grouping.key_of(key.clone());
        let finished = match &self.current {
            Some((current, _))
                if settee_collate::collate(current, &group_key) != Ordering::Equal =>
            {
                self.take_result()?
            }
            _ => None,
        };
        let reducer = self.reducer;
        let (_, accumulator) = self
            .current
            .get_or_insert_with(|| (group_key, Accumulator::new(reducer)));
        accumulator.add(reducer, key, row)?;
        Ok(finished)
    }

    /// The last group's result, if any rows were pushed.
    pub fn finish(mut self) -> Result<Option<(Value, Value)>, ViewError> {
        self.take_result()
    }

    fn take_result(&mut self) -> Result<Option<(Value, Value)>, ViewError> {
        match self.current.take() {
            Some((key, accumulator)) if self.partial => {
                Ok(Some((key, accumulator.partial(self.reducer)?)))
            }
            Some((key, accumulator)) => Ok(Some((key, accumulator.finish(self.reducer)?))),
            None => Ok(None),
        }
    }
}

enum Accumulator {
    Count(u64),
    Sum(Option<Value>),
    Stats(Option<Value>),
    Distinct(HyperLogLog),
    /// `_top_N` / `_bottom_N`: at most N distinct values, in rank order.
    Rank {
        values: Vec<Value>,
        limit: usize,
        top: bool,
    },
    /// `_first` / `_last`: the chosen row's (key, doc id, value).
    Edge {
        row: Option<(Value, String, Value)>,
        last: bool,
    },
    JavaScript {
        keys: Vec<Value>,
        values: Vec<Value>,
        partials: Vec<Value>,
    },
}

impl Accumulator {
    fn new(reducer: &Reducer) -> Accumulator {
        match reducer {
            Reducer::Builtin(ReduceKind::Count) => Accumulator::Count(0),
            Reducer::Builtin(ReduceKind::Sum) => Accumulator::Sum(None),
            Reducer::Builtin(ReduceKind::Stats) => Accumulator::Stats(None),
            Reducer::Builtin(ReduceKind::ApproxCountDistinct) => {
                Accumulator::Distinct(HyperLogLog::new())
            }
            Reducer::Builtin(ReduceKind::Top(limit)) => Accumulator::Rank {
                values: Vec::new(),
                limit: *limit,
                top: true,
            },
            Reducer::Builtin(ReduceKind::Bottom(limit)) => Accumulator::Rank {
                values: Vec::new(),
                limit: *limit,
                top: false,
            },
            Reducer::Builtin(ReduceKind::First) => Accumulator::Edge {
                row: None,
                last: false,
            },
            Reducer::Builtin(ReduceKind::Last) => Accumulator::Edge {
                row: None,
                last: true,
            },
            Reducer::Builtin(ReduceKind::JavaScript(_)) | Reducer::JavaScript { .. } => {
                Accumulator::JavaScript {
                    keys: Vec::new(),
                    values: Vec::new(),
                    partials: Vec::new(),
                }
            }
        }
    }

    fn add(&mut self, reducer: &Reducer, key: Value, row: &Row) -> Result<(), ViewError> {
        match self {
            Accumulator::Count(count) => *count += 1,
            Accumulator::Sum(total) => {
                let value = row.value();
                *total = Some(match total.take() {
                    None => check_summable(value)?,
                    Some(total) => sum(total, check_summable(value)?)?,
                });
            }
            Accumulator::Stats(total) => {
                let value = stats_of(&row.value())?;
                *total = Some(match total.take() {
                    None => value,
                    Some(total) => merge_stats(total, value),
                });
            }
            Accumulator::Distinct(sketch) => sketch.add(&settee_collate::encode_key(&key)),
            Accumulator::Rank { values, limit, top } => {
                rank_insert(values, row.value(), *limit, *top)
            }
            Accumulator::Edge { row: chosen, last } => {
                let id = row.id_str();
                let replaces = match chosen {
                    None => true,
                    Some((chosen_key, chosen_id, _)) => {
                        let order = settee_collate::collate(&key, chosen_key)
                            .then_with(|| id.as_bytes().cmp(chosen_id.as_bytes()));
                        if *last {
                            order == Ordering::Greater
                        } else {
                            order == Ordering::Less
                        }
                    }
                };
                if replaces {
                    *chosen = Some((key, id.to_string(), row.value()));
                }
            }
            Accumulator::JavaScript {
                keys,
                values,
                partials,
            } => {
                keys.push(json!([key, row.id_str()]));
                values.push(row.value());
                if keys.len() >= JS_REDUCE_CHUNK_ROWS {
                    let (keys, values) = (std::mem::take(keys), std::mem::take(values));
                    partials.push(js_reduce(reducer, Value::Array(keys), values, false)?);
                }
            }
        }
        Ok(())
    }

    fn finish(self, reducer: &Reducer) -> Result<Value, ViewError> {
        Ok(match self {
            Accumulator::Count(count) => json!(count),
            Accumulator::Sum(total) => total.unwrap_or(json!(0)),
            Accumulator::Stats(total) => total.unwrap_or(Value::Null),
            Accumulator::Distinct(sketch) => json!(sketch.estimate()),
            Accumulator::Rank { values, .. } => Value::Array(values),
            Accumulator::Edge { row, .. } => row.map_or(json!([]), |(_, _, value)| value),
            Accumulator::JavaScript {
                keys,
                values,
                mut partials,
            } => {
                if !keys.is_empty() || partials.is_empty() {
                    partials.push(js_reduce(reducer, Value::Array(keys), values, false)?);
                }
                if partials.len() == 1 {
                    partials.pop().unwrap_or(Value::Null)
                } else {
                    js_reduce(reducer, Value::Null, partials, true)?
                }
            }
        })
    }
}

impl Accumulator {
    /// What [`merge_partials`] takes (see [`GroupedReduce::partial`]).
    fn partial(self, reducer: &Reducer) -> Result<Value, ViewError> {
        Ok(match self {
            Accumulator::Distinct(sketch) => Value::String(sketch.to_hex()),
            Accumulator::Edge { row, .. } => {
                row.map_or(Value::Null, |(key, id, value)| json!([key, id, value]))
            }
            other => other.finish(reducer)?,
        })
    }
}

/// One group's value from the partial reductions of that group on several nodes (see
/// [`GroupedReduce::partial`]); a partial that is not of the reducer's shape is an error.
pub fn merge_partials(reducer: &Reducer, partials: Vec<Value>) -> Result<Value, ViewError> {
    let malformed = |partial: &Value| {
        ViewError::Internal(format!(
            "a partial reduction that does not merge: {partial}"
        ))
    };
    let kind = match reducer {
        Reducer::Builtin(ReduceKind::JavaScript(_)) | Reducer::JavaScript { .. } => {
            return if partials.len() == 1 {
                Ok(partials.into_iter().next().unwrap_or(Value::Null))
            } else {
                js_reduce(reducer, Value::Null, partials, true)
            };
        }
        Reducer::Builtin(kind) => kind,
    };
    let mut accumulator = Accumulator::new(reducer);
    for partial in partials {
        match (&mut accumulator, kind) {
            (Accumulator::Count(count), _) => {
                *count += partial.as_u64().ok_or_else(|| malformed(&partial))?;
            }
            (Accumulator::Sum(total), _) => {
                *total = Some(match total.take() {
                    None => check_summable(partial)?,
                    Some(total) => sum(total, check_summable(partial)?)?,
                });
            }
            (Accumulator::Stats(total), _) if partial.is_null() => {
                let _ = total;
            }
            (Accumulator::Stats(total), _) => {
                let partial = stats_of(&partial)?;
                *total = Some(match total.take() {
                    None => partial,
                    Some(total) => merge_stats(total, partial),
                });
            }
            (Accumulator::Distinct(sketch), _) => {
                let text = partial.as_str().ok_or_else(|| malformed(&partial))?;
                sketch.merge_hex(text).ok_or_else(|| malformed(&partial))?;
            }
            (Accumulator::Rank { values, limit, top }, _) => {
                let Value::Array(ranked) = partial else {
                    return Err(malformed(&partial));
                };
                for value in ranked {
                    rank_insert(values, value, *limit, *top);
                }
            }
            (Accumulator::Edge { row: chosen, last }, _) => {
                let candidate = match partial {
                    Value::Null => continue,
                    Value::Array(mut parts) if parts.len() == 3 => {
                        let value = parts.pop().unwrap_or(Value::Null);
                        let id = parts.pop().unwrap_or(Value::Null);
                        let key = parts.pop().unwrap_or(Value::Null);
                        match id {
                            Value::String(id) => (key, id, value),
                            other => return Err(malformed(&other)),
                        }
                    }
                    other => return Err(malformed(&other)),
                };
                let replaces = match chosen {
                    None => true,
                    Some((chosen_key, chosen_id, _)) => {
                        let order = settee_collate::collate(&candidate.0, chosen_key)
                            .then_with(|| candidate.1.as_bytes().cmp(chosen_id.as_bytes()));
                        if *last {
                            order == Ordering::Greater
                        } else {
                            order == Ordering::Less
                        }
                    }
                };
                if replaces {
                    *chosen = Some(candidate);
                }
            }
            (Accumulator::JavaScript { .. }, _) => {
                return Err(ViewError::Internal("not a built-in reduce".into()))
            }
        }
    }
    accumulator.finish(reducer)
}

fn js_reduce(
    reducer: &Reducer,
    keys: Value,
    values: Vec<Value>,
    rereduce: bool,
) -> Result<Value, ViewError> {
    let Reducer::JavaScript {
        pool,
        program,
        view,
    } = reducer
    else {
        return Err(ViewError::Internal("not a JavaScript reduce".into()));
    };
    let keys_json = keys.to_string();
    let values_json = Value::Array(values).to_string();
    let input_len = keys_json.len() + values_json.len();
    let output = pool
        .reduce(program.clone(), *view, keys_json, values_json, rereduce)
        .wait()?;
    let output_len = output.to_string().len();
    if output_len > REDUCE_OUTPUT_BYTES_MAX && output_len * 2 > input_len {
        return Err(ViewError::ReduceOverflow(format!(
            "Reduce output must shrink more rapidly: input size: {input_len} output size: {output_len}"
        )));
    }
    Ok(output)
}

/// Adds `value` to `values` (at most `limit` distinct values, greatest first when `top`, least
/// first otherwise), as CouchDB's `_top_N` / `_bottom_N` merge: equal values count once.
fn rank_insert(values: &mut Vec<Value>, value: Value, limit: usize, top: bool) {
    let ranked = |a: &Value, b: &Value| {
        let order = settee_collate::collate(a, b);
        if top {
            order.reverse()
        } else {
            order
        }
    };
    match values.binary_search_by(|probe| ranked(probe, &value)) {
        Ok(_) => {}
        Err(at) if at < limit => {
            values.insert(at, value);
            values.truncate(limit);
        }
        Err(_) => {}
    }
}

const SUM_REASON: &str = "The _sum function requires that map values be numbers, arrays of numbers, or objects. Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, provided that the values for all fields are themselves numbers, arrays of numbers, or objects.";

fn check_summable(value: Value) -> Result<Value, ViewError> {
    fn ok(value: &Value) -> bool {
        match value {
            Value::Number(_) => true,
            Value::Array(items) => items.iter().all(|item| item.is_number()),
            Value::Object(members) => members.values().all(ok),
            _ => false,
        }
    }
    if ok(&value) {
        Ok(value)
    } else {
        Err(ViewError::BuiltinReduce(SUM_REASON.into(), value))
    }
}

fn add_numbers(a: &Number, b: &Number) -> Value {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) if x.checked_add(y).is_some() => json!(x + y),
        _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
    }
}

/// CouchDB's `_sum`: numbers add, arrays add element-wise (the longer one's tail kept),
/// objects add member-wise; a number and an array add the number to the first element.
fn sum(a: Value, b: Value) -> Result<Value, ViewError> {
    Ok(match (a, b) {
        (Value::Number(x), Value::Number(y)) => add_numbers(&x, &y),
        (Value::Array(xs), Value::Array(ys)) => {
            let (mut longer, shorter) = if xs.len() >= ys.len() {
                (xs, ys)
            } else {
                (ys, xs)
            };
            for (slot, item) in longer.iter_mut().zip(shorter) {
                *slot = sum(slot.take(), item)?;
            }
            Value::Array(longer)
        }
        (Value::Number(x), Value::Array(mut ys)) | (Value::Array(mut ys), Value::Number(x)) => {
            match ys.first_mut() {
                Some(first) => *first = sum(Value::Number(x), first.take())?,
                None => ys.push(Value::Number(x)),
            }
            Value::Array(ys)
        }
        (Value::Object(mut xs), Value::Object(ys)) => {
            for (name, item) in ys {
                let merged = match xs.remove(&name) {
                    Some(existing) => sum(existing, item)?,
                    None => item,
                };
                xs.insert(name, merged);
            }
            Value::Object(xs)
        }
        (_, other) => return Err(ViewError::BuiltinReduce(SUM_REASON.into(), other)),
    })
}

fn stats_of(value: &Value) -> Result<Value, ViewError> {
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            Ok(json!({"sum": x, "count": 1, "min": x, "max": x, "sumsqr": x * x}))
        }
        Value::Array(items) => items.iter().map(stats_of).collect::<Result<Vec<_>, _>>().map(Value::Array),
        Value::Object(members)
            if ["sum", "count", "min", "max", "sumsqr"]
                .iter()
                .all(|field| members.get(*field).is_some_and(Value::is_number)) =>
        {
            Ok(value.clone())
        }
        other => Err(ViewError::BuiltinReduce(
            format!(
                "The _stats function requires that map values be numbers or arrays of numbers, not '{other}'"
            ),
            other.clone(),
        )),
    }
}

fn merge_stats(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Array(xs), Value::Array(ys)) => Value::Array(
            xs.into_iter()
                .zip(ys)
                .map(|(x, y)| merge_stats(x, y))
                .collect(),
        ),
        (Value::Object(x), Value::Object(y)) => {
            let field = |m: &Map<String, Value>, name: &str| {
                m.get(name).and_then(Value::as_f64).unwrap_or(0.0)
            };
            let count = x.get("count").and_then(Value::as_u64).unwrap_or(0)
                + y.get("count").and_then(Value::as_u64).unwrap_or(0);
            json!({
                "sum": field(&x, "sum") + field(&y, "sum"),
                "count": count,
                "min": field(&x, "min").min(field(&y, "min")),
                "max": field(&x, "max").max(field(&y, "max")),
                "sumsqr": field(&x, "sumsqr") + field(&y, "sumsqr"),
            })
        }
        (a, _) => a,
    }
}

/// A HyperLogLog sketch with 2^11 registers (CouchDB's precision), with linear counting for
/// small cardinalities, where it is close to exact.
struct HyperLogLog {
    registers: Vec<u8>,
}

const HLL_BITS: u32 = 11;

impl HyperLogLog {
    fn new() -> HyperLogLog {
        HyperLogLog {
            registers: vec![0; 1 << HLL_BITS],
        }
    }

    fn add(&mut self, item: &[u8]) {
        let mut hasher = DefaultHasher::new();
        item.hash(&mut hasher);
        let hash = hasher.finish();
        let index = (hash >> (64 - HLL_BITS)) as usize;
        let rest = (hash << HLL_BITS) | (1 << (HLL_BITS - 1));
        let rank = rest.leading_zeros() as u8 + 1;
        if let Some(register) = self.registers.get_mut(index) {
            *register = (*register).max(rank);
        }
    }

    /// The registers as hex digits, two per register (a partial reduction).
    fn to_hex(&self) -> String {
        self.registers
            .iter()
            .map(|register| format!("{register:02x}"))
            .collect()
    }

    /// Takes the larger of each register and `hex`'s (another sketch's [`Self::to_hex`]);
    /// `None` when `hex` is not one.
    fn merge_hex(&mut self, hex: &str) -> Option<()> {
        let bytes = hex.as_bytes();
        if bytes.len() != self.registers.len() * 2 {
            return None;
        }
        for (register, pair) in self.registers.iter_mut().zip(bytes.chunks_exact(2)) {
            let digits = std::str::from_utf8(pair).ok()?;
            let other = u8::from_str_radix(digits, 16).ok()?;
            *register = (*register).max(other);
        }
        Some(())
    }

    fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let estimate = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        estimate.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: Value, value: Value) -> Row {
        Row {
            id: b"d".to_vec(),
            key_json: key.to_string().into_bytes(),
            value_json: value.to_string().into_bytes(),
        }
    }

    fn reduce_all(kind: ReduceKind, grouping: Grouping, rows: &[Row]) -> Vec<(Value, Value)> {
        let reducer = Reducer::Builtin(kind);
        let mut grouped = GroupedReduce::new(&reducer, grouping);
        let mut out = Vec::new();
        for row in rows {
            out.extend(grouped.push(row).expect("push"));
        }
        out.extend(grouped.finish().expect("finish"));
        out
    }

    #[test]
    fn builtins_group_by_level() {
        let rows = [
            row(json!(["a", 1]), json!(1)),
            row(json!(["a", 2]), json!(2)),
            row(json!(["b", 1]), json!(3.5)),
        ];
        assert_eq!(
            reduce_all(ReduceKind::Sum, Grouping::Level(1), &rows),
            [(json!(["a"]), json!(3)), (json!(["b"]), json!(3.5))]
        );
        assert_eq!(
            reduce_all(ReduceKind::Count, Grouping::All, &rows),
            [(Value::Null, json!(3))]
        );
        assert_eq!(
            reduce_all(ReduceKind::Stats, Grouping::All, &rows),
            [(
                Value::Null,
                json!({"sum": 6.5, "count": 3, "min": 1.0, "max": 3.5, "sumsqr": 17.25})
            )]
        );
        assert_eq!(
            reduce_all(ReduceKind::ApproxCountDistinct, Grouping::All, &rows),
            [(Value::Null, json!(3))]
        );
        assert_eq!(
            reduce_all(
                ReduceKind::Sum,
                Grouping::All,
                &[row(json!(1), json!([1, 2])), row(json!(2), json!([3]))]
            ),
            [(Value::Null, json!([4, 2]))]
        );
    }

    #[test]
    fn rank_and_edge_reducers_as_couchdb_3_5() {
        // Rows as a descending query feeds them: the reducers rank by value and by (key, id),
        // not by arrival order.
        let rows = [
            row(json!(3), json!(30)),
            row(json!(2), json!(20)),
            row(json!(2), json!(20)),
            row(json!(1), json!(10)),
            row(json!(1), json!("s")),
        ];
        let all = |kind| reduce_all(kind, Grouping::All, &rows)[0].1.clone();
        assert_eq!(all(ReduceKind::Top(3)), json!(["s", 30, 20]));
        assert_eq!(all(ReduceKind::Bottom(2)), json!([10, 20]));
        assert_eq!(all(ReduceKind::Bottom(9)), json!([10, 20, 30, "s"]));
        assert_eq!(all(ReduceKind::First), json!(10));
        assert_eq!(all(ReduceKind::Last), json!(30));
        let mut by_id = vec![row(json!(1), json!("b")), row(json!(1), json!("a"))];
        by_id[1].id = b"c".to_vec();
        assert_eq!(
            reduce_all(ReduceKind::Last, Grouping::All, &by_id)[0].1,
            json!("b")
        );
        assert_eq!(
            reduce_all(ReduceKind::First, Grouping::All, &by_id)[0].1,
            json!("a")
        );
    }

    /// Rows split between two nodes, each reduced partially, then merged: the value one node
    /// holding every row gives.
    #[test]
    fn partials_of_a_split_merge_into_the_whole_value() {
        let rows: Vec<Row> = (0..40)
            .map(|i| {
                let mut row = row(json!(i % 7), json!(i));
                row.id = format!("d{i:02}").into_bytes();
                row
            })
            .collect();
        let mut sorted = rows.clone();
        sorted.sort_by(|a, b| {
            settee_collate::collate(&a.key(), &b.key()).then_with(|| a.id.cmp(&b.id))
        });
        for kind in [
            ReduceKind::Count,
            ReduceKind::Sum,
            ReduceKind::Stats,
            ReduceKind::ApproxCountDistinct,
            ReduceKind::Top(3),
            ReduceKind::Bottom(4),
            ReduceKind::First,
            ReduceKind::Last,
        ] {
            let whole = reduce_all(kind.clone(), Grouping::All, &sorted)[0]
                .1
                .clone();
            let reducer = Reducer::Builtin(kind.clone());
            let partials: Vec<Value> = [0, 1]
                .into_iter()
                .map(|half| {
                    let mut grouped = GroupedReduce::partial(&reducer, Grouping::All);
                    for (_, row) in sorted.iter().enumerate().filter(|(i, _)| i % 2 == half) {
                        grouped.push(row).expect("push");
                    }
                    grouped
                        .finish()
                        .expect("finish")
                        .map(|(_, partial)| partial)
                        .expect("rows")
                })
                .collect();
            assert_eq!(
                merge_partials(&reducer, partials).expect("merges"),
                whole,
                "{kind:?}"
            );
        }
        let count = Reducer::Builtin(ReduceKind::Count);
        assert!(merge_partials(&count, vec![json!("x")]).is_err());
        let distinct = Reducer::Builtin(ReduceKind::ApproxCountDistinct);
        assert!(merge_partials(&distinct, vec![json!("00")]).is_err());
    }

    #[test]
    fn sum_of_strings_is_a_builtin_reduce_error() {
        let reducer = Reducer::Builtin(ReduceKind::Sum);
        let mut grouped = GroupedReduce::new(&reducer, Grouping::All);
        assert!(matches!(
            grouped.push(&row(json!(1), json!("x"))),
            Err(ViewError::BuiltinReduce(_, _))
        ));
    }

    #[test]
    fn distinct_count_is_close_for_many_keys() {
        let rows: Vec<Row> = (0..20_000)
            .map(|i| row(json!(i % 5000), json!(null)))
            .collect();
        let got = reduce_all(ReduceKind::ApproxCountDistinct, Grouping::All, &rows)[0]
            .1
            .as_u64()
            .expect("number");
        assert!((4700..5300).contains(&got), "{got}");
    }
}
