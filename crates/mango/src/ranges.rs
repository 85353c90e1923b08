//! Which parts of an index can hold a document that matches a selector.
//!
//! A selector is turned into *boxes*: each box gives every index column one interval, and every
//! matching document's key lies in at least one box. Conditions under `$and` intersect, the
//! branches of `$or` and the values of `$in` add boxes (a union), and conditions an index cannot
//! locate (`$ne`, `$regex`, fields not indexed, ...) leave their column unconstrained. Each box
//! then becomes one key range, and the ranges are sorted and merged until they are disjoint, so
//! a scan visits every index row — and so every document, which has one row — at most once.
//!
//! Ranges are supersets: whatever they let through that does not match is removed by the
//! residual filter. JSON index keys are arrays compared in view collation; `_all_docs` keys are
//! document ids compared byte by byte, which is how the selector compares `_id` too.

use std::cmp::Ordering;
use std::ops::Bound;

use serde_json::{json, Value};

use crate::selector::{collate, Cond, JsonType, Node, TermOrder};

/// Most boxes one selector may expand into; past it a union is replaced by its hull (one box
/// around all of them), which is still a superset, only less tight.
pub const RANGES_MAX: usize = 1024;

/// How a column's values are ordered and compared by the selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnOrder {
    /// A JSON index column: view collation, as the selector compares every field but `_id`.
    Collation,
    /// `_id` in a JSON index: the index collates it, the selector compares bytes; only
    /// equality is safe to locate (equal bytes are equal in collation).
    IdInCollation,
    /// `_id` in `_all_docs`: byte order, as the selector compares it.
    Bytes,
}

/// A set of values of one column: an interval, or "any value" (which still means the field
/// exists, as `$exists: true` says).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interval {
    pub low: Bound<Value>,
    pub high: Bound<Value>,
}

impl Interval {
    pub fn full() -> Interval {
        Interval {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
        }
    }

    fn point(value: &Value) -> Interval {
        Interval {
            low: Bound::Included(value.clone()),
            high: Bound::Included(value.clone()),
        }
    }

    fn new(low: Bound<Value>, high: Bound<Value>) -> Interval {
        Interval { low, high }
    }

    pub fn is_point(&self, order: TermOrder) -> bool {
        match (&self.low, &self.high) {
            (Bound::Included(a), Bound::Included(b)) => order.compare(a, b).is_eq(),
            _ => false,
        }
    }

    fn is_empty(&self, order: TermOrder) -> bool {
        let (low, low_open) = match &self.low {
            Bound::Unbounded => return false,
            Bound::Included(v) => (v, false),
            Bound::Excluded(v) => (v, true),
        };
        let (high, high_open) = match &self.high {
            Bound::Unbounded => return false,
            Bound::Included(v) => (v, false),
            Bound::Excluded(v) => (v, true),
        };
        match order.compare(low, high) {
            Ordering::Greater => true,
            Ordering::Equal => low_open || high_open,
            Ordering::Less => false,
        }
    }

    fn intersect(&self, other: &Interval, order: TermOrder) -> Interval {
        Interval {
            low: tighter(&self.low, &other.low, order, Side::Low),
            high: tighter(&self.high, &other.high, order, Side::High),
        }
    }

    fn hull(&self, other: &Interval, order: TermOrder) -> Interval {
        Interval {
            low: looser(&self.low, &other.low, order, Side::Low),
            high: looser(&self.high, &other.high, order, Side::High),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Low,
    High,
}

/// Orders two bounds of the same side from loosest to tightest.
fn compare_tightness(a: &Bound<Value>, b: &Bound<Value>, order: TermOrder, side: Side) -> Ordering {
    let rank = |bound: &Bound<Value>| match bound {
        Bound::Unbounded => 0,
        Bound::Included(_) => 1,
        Bound::Excluded(_) => 2,
    };
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            let by_value = match side {
                Side::Low => order.compare(x, y),
                Side::High => order.compare(y, x),
            };
            by_value.then(rank(a).cmp(&rank(b)))
        }
    }
}

fn tighter(a: &Bound<Value>, b: &Bound<Value>, order: TermOrder, side: Side) -> Bound<Value> {
    if compare_tightness(a, b, order, side).is_ge() {
        a.clone()
    } else {
        b.clone()
    }
}

fn looser(a: &Bound<Value>, b: &Bound<Value>, order: TermOrder, side: Side) -> Bound<Value> {
    if compare_tightness(a, b, order, side).is_le() {
        a.clone()
    } else {
        b.clone()
    }
}

/// One interval per index column.
pub(crate) type Region = Vec<Interval>;

/// The boxes of `node` over `columns`, and whether a union had to be replaced by its hull.
#[derive(Debug, Clone)]
pub(crate) struct Boxes {
    pub regions: Vec<Region>,
    pub hulled: bool,
}

pub(crate) fn term_order(column: ColumnOrder) -> TermOrder {
    match column {
        ColumnOrder::Bytes => TermOrder::Erlang,
        ColumnOrder::Collation | ColumnOrder::IdInCollation => TermOrder::Collation,
    }
}

/// The boxes holding every document `root` (`None`: the empty selector) can match.
pub(crate) fn boxes(root: Option<&Node>, columns: &[(Vec<String>, ColumnOrder)]) -> Boxes {
    let full = vec![Interval::full(); columns.len()];
    let mut boxes = Boxes {
        regions: vec![full.clone()],
        hulled: false,
    };
    if let Some(root) = root {
        boxes.regions = node_boxes(root, columns, &mut boxes.hulled);
    }
    boxes
}

fn node_boxes(
    node: &Node,
    columns: &[(Vec<String>, ColumnOrder)],
    hulled: &mut bool,
) -> Vec<Region> {
    let full = || vec![Interval::full(); columns.len()];
    match node {
        Node::And(children) => {
            let mut acc = vec![full()];
            for child in children {
                let mut theirs = node_boxes(child, columns, hulled);
                if acc.len().saturating_mul(theirs.len()) > RANGES_MAX {
                    theirs = hull_all(theirs, columns, hulled);
                    acc = hull_all(acc, columns, hulled);
                }
                acc = cross(&acc, &theirs, columns);
                if acc.is_empty() {
                    break;
                }
            }
            acc
        }
        Node::Or(children) if children.is_empty() => vec![full()],
        Node::Or(children) => {
            let mut acc = Vec::new();
            for child in children {
                acc.extend(node_boxes(child, columns, hulled));
            }
            if acc.len() > RANGES_MAX {
                acc = hull_all(acc, columns, hulled);
            }
            acc
        }
        Node::Field { path, cond } => {
            let Some(column) = columns.iter().position(|(column, _)| column == path) else {
                return vec![full()];
            };
            match cond_intervals(cond, columns[column].1) {
                None => vec![full()],
                Some(intervals) => {
                    let regions: Vec<Region> = intervals
                        .into_iter()
                        .map(|interval| {
                            let mut region = full();
                            region[column] = interval;
                            region
                        })
                        .collect();
                    if regions.len() > RANGES_MAX {
                        hull_all(regions, columns, hulled)
                    } else {
                        regions
                    }
                }
            }
        }
        // Negations survive normalisation only inside $elemMatch and friends; $text matches
        // everything here.
        Node::Nor(_) | Node::Not(_) | Node::Text(_) => vec![full()],
    }
}

fn cross(a: &[Region], b: &[Region], columns: &[(Vec<String>, ColumnOrder)]) -> Vec<Region> {
    let mut out = Vec::with_capacity(a.len() * b.len());
    for left in a {
        for right in b {
            let region: Region = left
                .iter()
                .zip(right)
                .zip(columns)
                .map(|((x, y), (_, order))| x.intersect(y, term_order(*order)))
                .collect();
            let empty = region
                .iter()
                .zip(columns)
                .any(|(interval, (_, order))| interval.is_empty(term_order(*order)));
            if !empty {
                out.push(region);
            }
        }
    }
    out
}

fn hull_all(
    regions: Vec<Region>,
    columns: &[(Vec<String>, ColumnOrder)],
    hulled: &mut bool,
) -> Vec<Region> {
    if regions.len() <= 1 {
        return regions;
    }
    *hulled = true;
    let mut iter = regions.into_iter();
    let Some(mut hull) = iter.next() else {
        return Vec::new();
    };
    for region in iter {
        hull = hull
            .iter()
            .zip(&region)
            .zip(columns)
            .map(|((x, y), (_, order))| x.hull(y, term_order(*order)))
            .collect();
    }
    vec![hull]
}

/// True when `cond` narrows its column (it can be located in an index).
pub(crate) fn is_indexable(cond: &Cond) -> bool {
    cond_intervals(cond, ColumnOrder::Collation).is_some()
}

/// The values of a column `cond` allows, as a union of intervals (`Some(vec![])`: none);
/// `None` when the condition cannot be located in an index.
pub(crate) fn cond_intervals(cond: &Cond, column: ColumnOrder) -> Option<Vec<Interval>> {
    match column {
        ColumnOrder::Collation => collation_intervals(cond),
        ColumnOrder::IdInCollation => match cond {
            Cond::Eq(Value::String(_)) | Cond::In(_) | Cond::Exists(true) => {
                id_intervals(cond, TermOrder::Collation)
            }
            _ => None,
        },
        ColumnOrder::Bytes => id_intervals(cond, TermOrder::Erlang),
    }
}

fn collation_intervals(cond: &Cond) -> Option<Vec<Interval>> {
    use Bound::{Excluded, Included, Unbounded};
    let one = |low, high| Some(vec![Interval::new(low, high)]);
    match cond {
        Cond::Eq(v) => Some(vec![Interval::point(v)]),
        Cond::Gt(v) => one(Excluded(v.clone()), Unbounded),
        Cond::Gte(v) => one(Included(v.clone()), Unbounded),
        Cond::Lt(v) => one(Unbounded, Excluded(v.clone())),
        Cond::Lte(v) => one(Unbounded, Included(v.clone())),
        // Every string with the prefix sorts at or after it and before every array.
        Cond::BeginsWith(prefix) => one(Included(json!(prefix)), Excluded(json!([]))),
        Cond::Exists(true) => Some(vec![Interval::full()]),
        // `$in` also matches an array field holding one of the values, and an array is
        // indexed whole: every array stays in range.
        Cond::In(values) if values.is_empty() => Some(Vec::new()),
        Cond::In(values) => {
            let mut intervals: Vec<Interval> = values.iter().map(Interval::point).collect();
            intervals.push(Interval::new(Included(json!([])), Excluded(json!({}))));
            Some(intervals)
        }
        // The type ranks of view collation: null < booleans < numbers < strings < arrays <
        // objects, each starting at its smallest value.
        Cond::Type(json_type) => Some(vec![match json_type {
            JsonType::Null => Interval::point(&Value::Null),
            JsonType::Boolean => Interval::new(Included(json!(false)), Included(json!(true))),
            JsonType::Number => Interval::new(Excluded(json!(true)), Excluded(json!(""))),
            JsonType::String => Interval::new(Included(json!("")), Excluded(json!([]))),
            JsonType::Array => Interval::new(Included(json!([])), Excluded(json!({}))),
            JsonType::Object => Interval::new(Included(json!({})), Unbounded),
        }]),
        _ => None,
    }
}

/// `_id` is always a string, and in Erlang term order every other value sorts before every
/// string: a lower bound that is not a string bounds nothing, an upper one excludes all.
fn id_intervals(cond: &Cond, order: TermOrder) -> Option<Vec<Interval>> {
    use Bound::{Excluded, Included, Unbounded};
    let string = |v: &Value| v.is_string();
    let one = |low, high| Some(vec![Interval::new(low, high)]);
    let nothing = || Some(Vec::new());
    let any = || Some(vec![Interval::full()]);
    match cond {
        Cond::Eq(v) if string(v) => Some(vec![Interval::point(v)]),
        Cond::Eq(_) => nothing(),
        Cond::Gt(v) if string(v) => one(Excluded(v.clone()), Unbounded),
        Cond::Gte(v) if string(v) => one(Included(v.clone()), Unbounded),
        Cond::Gt(_) | Cond::Gte(_) => any(),
        Cond::Lt(v) if string(v) => one(Unbounded, Excluded(v.clone())),
        Cond::Lte(v) if string(v) => one(Unbounded, Included(v.clone())),
        Cond::Lt(_) | Cond::Lte(_) => nothing(),
        Cond::In(values) => Some(
            values
                .iter()
                .filter(|v| string(v))
                .map(Interval::point)
                .collect(),
        ),
        Cond::Exists(true) => any(),
        Cond::Type(JsonType::String) => any(),
        Cond::Type(_) => nothing(),
        Cond::BeginsWith(prefix) if order == TermOrder::Erlang => one(
            Included(json!(prefix)),
            successor(prefix).map_or(Unbounded, |next| Excluded(json!(next))),
        ),
        _ => None,
    }
}

/// The smallest string greater than every string that starts with `prefix`, in byte order
/// (which is code point order): the prefix with its last character that can grow, grown.
fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(c as u32 + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// One element of a key bound: a value, or the sentinel above every value (CouchDB's
/// `<MAX>`).
#[derive(Debug, Clone, PartialEq)]
pub enum KeyPart {
    Value(Value),
    Max,
}

impl KeyPart {
    /// `<MAX>` for the sentinel, as `_explain` shows it.
    pub fn to_json(&self) -> Value {
        match self {
            KeyPart::Value(value) => value.clone(),
            KeyPart::Max => json!("<MAX>"),
        }
    }
}

/// A range of JSON index keys, both ends included: every key `k` with `start <= k <= end`,
/// arrays compared element by element in view collation, a prefix before its extensions (so
/// `start: [5]` begins before `[5, "x"]` and `end: [5, <MAX>]` ends after it).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange {
    pub start: Vec<Value>,
    pub end: Vec<KeyPart>,
}

impl KeyRange {
    pub fn to_json(&self) -> Value {
        json!({
            "start_key": self.start,
            "end_key": self.end.iter().map(KeyPart::to_json).collect::<Vec<_>>(),
        })
    }

    /// True when `key` (a full index key) lies in the range.
    pub fn contains(&self, key: &[Value]) -> bool {
        let key: Vec<KeyPart> = key.iter().cloned().map(KeyPart::Value).collect();
        compare_keys(&lift(&self.start), &key).is_le() && compare_keys(&key, &self.end).is_le()
    }
}

/// A range of document ids in byte order.
#[derive(Debug, Clone, PartialEq)]
pub struct IdRange {
    pub start: Bound<String>,
    pub end: Bound<String>,
}

impl IdRange {
    pub fn full() -> IdRange {
        IdRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// `start_key` / `end_key` as CouchDB's `_explain` shows an `_all_docs` scan, with
    /// `inclusive_start` / `inclusive_end` set to `false` for an excluded end.
    pub fn to_json(&self) -> Value {
        let end = match &self.end {
            Bound::Unbounded => json!("<MAX>"),
            Bound::Included(id) | Bound::Excluded(id) => json!(id),
        };
        let start = match &self.start {
            Bound::Unbounded => Value::Null,
            Bound::Included(id) | Bound::Excluded(id) => json!(id),
        };
        let mut out = json!({"start_key": start, "end_key": end});
        if matches!(self.start, Bound::Excluded(_)) {
            out["inclusive_start"] = json!(false);
        }
        if matches!(self.end, Bound::Excluded(_)) {
            out["inclusive_end"] = json!(false);
        }
        out
    }

    pub fn contains(&self, id: &str) -> bool {
        let above = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(start) => id >= start.as_str(),
            Bound::Excluded(start) => id > start.as_str(),
        };
        let below = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(end) => id <= end.as_str(),
            Bound::Excluded(end) => id < end.as_str(),
        };
        above && below
    }
}

fn lift(values: &[Value]) -> Vec<KeyPart> {
    values.iter().cloned().map(KeyPart::Value).collect()
}

/// Keys as arrays in view collation, [`KeyPart::Max`] above every value.
pub fn compare_keys(a: &[KeyPart], b: &[KeyPart]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let by_part = match (x, y) {
            (KeyPart::Max, KeyPart::Max) => Ordering::Equal,
            (KeyPart::Max, _) => Ordering::Greater,
            (_, KeyPart::Max) => Ordering::Less,
            (KeyPart::Value(x), KeyPart::Value(y)) => collate(x, y),
        };
        if by_part.is_ne() {
            return by_part;
        }
    }
    a.len().cmp(&b.len())
}

/// The key range of one box, CouchDB's way (`mango_idx_view:start_key/end_key`): the start
/// takes each column's lower bound until a column has none, the end each upper bound until a
/// column has none, then `<MAX>`.
pub(crate) fn key_range(region: &Region) -> KeyRange {
    let mut start = Vec::new();
    for interval in region {
        match &interval.low {
            Bound::Included(v) | Bound::Excluded(v) => start.push(v.clone()),
            Bound::Unbounded => break,
        }
    }
    let mut end = Vec::new();
    for interval in region {
        match &interval.high {
            Bound::Included(v) | Bound::Excluded(v) => end.push(KeyPart::Value(v.clone())),
            Bound::Unbounded => break,
        }
    }
    end.push(KeyPart::Max);
    KeyRange { start, end }
}

/// Sorts and merges key ranges until they are disjoint.
pub(crate) fn merge_key_ranges(mut ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    ranges.sort_by(|a, b| compare_keys(&lift(&a.start), &lift(&b.start)));
    let mut merged: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        if let Some(last) = merged.last_mut() {
            if compare_keys(&lift(&range.start), &last.end).is_le() {
                if compare_keys(&range.end, &last.end).is_gt() {
                    last.end = range.end;
                }
                continue;
            }
        }
        merged.push(range);
    }
    merged
}

/// The id range of one single-column box.
pub(crate) fn id_range(region: &Region) -> IdRange {
    let text = |bound: &Bound<Value>| match bound {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(v) => Bound::Included(v.as_str().unwrap_or_default().to_string()),
        Bound::Excluded(v) => Bound::Excluded(v.as_str().unwrap_or_default().to_string()),
    };
    match region.first() {
        None => IdRange::full(),
        Some(interval) => IdRange {
            start: text(&interval.low),
            end: text(&interval.high),
        },
    }
}

/// Sorts and merges id ranges until they are disjoint.
pub(crate) fn merge_id_ranges(mut ranges: Vec<IdRange>) -> Vec<IdRange> {
    let low = |bound: &Bound<String>| match bound {
        Bound::Unbounded => (0, String::new()),
        Bound::Included(id) => (1, id.clone()),
        Bound::Excluded(id) => (1, format!("{id}\0")),
    };
    ranges.sort_by_key(|range| low(&range.start));
    let mut merged: Vec<IdRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        if let Some(last) = merged.last_mut() {
            if touches(&last.end, &range.start) {
                if ends_after(&range.end, &last.end) {
                    last.end = range.end;
                }
                continue;
            }
        }
        merged.push(range);
    }
    merged
}

/// True when a range ending at `end` overlaps or adjoins one starting at `start`.
fn touches(end: &Bound<String>, start: &Bound<String>) -> bool {
    match (end, start) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(e), Bound::Included(s)) => s <= e,
        (Bound::Included(e), Bound::Excluded(s)) | (Bound::Excluded(e), Bound::Included(s)) => {
            s <= e
        }
        (Bound::Excluded(e), Bound::Excluded(s)) => s < e,
    }
}

fn ends_after(a: &Bound<String>, b: &Bound<String>) -> bool {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => false,
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(x), Bound::Excluded(y)) => x >= y,
        (Bound::Excluded(x), Bound::Included(y)) => x > y,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x > y
        }
    }
}
