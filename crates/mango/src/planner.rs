//! The query planner: a pure function from (selector, sort, `use_index`, the database's
//! indexes) to a [`Plan`] — which index to scan, which key ranges of it, in which direction,
//! and the residual filter the scanned documents still have to pass.
//!
//! Index choice follows CouchDB 3.5 (`mango_idx:get_usable_indexes`, `mango_cursor:create`,
//! `mango_cursor_view:choose_best_index`): an index is usable when the selector requires every
//! indexed field to exist (a document without one is not in the index) and the sort is a
//! prefix of its fields, constant fields aside; a partial index is used only when `use_index`
//! names it; JSON indexes are preferred to `_all_docs`; among them the one whose leading fields
//! cover the most constrained fields of the selector wins, then the narrower, then by name.
//!
//! Unlike CouchDB, a field constrained by `$in`, or by every branch of an `$or`, counts as
//! constrained, and the plan scans one range per `$in` value and per `$or` branch (see
//! [`crate::ranges`]); CouchDB scans the whole index for those.

use std::collections::BTreeSet;

use crate::error::{MangoError, MangoResult};
use crate::fields::Fields;
use crate::index::{Index, IndexKind};
use crate::normal_form::join_field;
use crate::ranges::{
    self, boxes, id_range, is_indexable, key_range, merge_id_ranges, merge_key_ranges, ColumnOrder,
    IdRange, KeyRange, Region,
};
use crate::request::{design_id, FindRequest, UseIndex};
use crate::selector::{Cond, Node, Selector, TermOrder};
use crate::sort::{Direction, Sort};

/// What the plan is for: `_find` fails when nothing can answer, `_explain` says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Find,
    Explain,
}

/// The query, as far as planning is concerned.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub selector: &'a Selector,
    pub sort: &'a Sort,
    pub use_index: &'a UseIndex,
    pub allow_fallback: bool,
    pub fields: &'a Fields,
}

impl<'a> Query<'a> {
    pub fn of(request: &'a FindRequest) -> Query<'a> {
        Query {
            selector: &request.selector,
            sort: &request.sort,
            use_index: &request.use_index,
            allow_fallback: request.allow_fallback,
            fields: &request.fields,
        }
    }
}

/// The parts of the chosen index to scan, in ascending order and disjoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Ranges {
    /// `_all_docs`: document id ranges.
    Ids(Vec<IdRange>),
    /// A JSON index: key ranges.
    Keys(Vec<KeyRange>),
}

impl Ranges {
    pub fn is_empty(&self) -> bool {
        match self {
            Ranges::Ids(ranges) => ranges.is_empty(),
            Ranges::Keys(ranges) => ranges.is_empty(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Ranges::Ids(ranges) => ranges.len(),
            Ranges::Keys(ranges) => ranges.len(),
        }
    }
}

/// Why an index was not chosen, in CouchDB's words (`_explain`'s `index_candidates`).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub index: Index,
    pub usable: bool,
    pub reason: &'static str,
    pub ranking: usize,
    /// Whether the index alone holds every field the query needs (JSON indexes only).
    pub covering: Option<bool>,
}

/// How to answer one query.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `None` only for `_explain` of a query no index can answer.
    pub index: Option<Index>,
    pub ranges: Ranges,
    /// Scan the ranges from the top (a `desc` sort).
    pub descending: bool,
    /// What the scanned documents must still match: the selector without the conditions the
    /// ranges decide exactly. Empty when the ranges alone answer the selector.
    pub residual: Selector,
    /// The index holds every field the query reads, so documents need not be fetched.
    pub covering: bool,
    /// A union of boxes grew past [`ranges::RANGES_MAX`] and was replaced by its hull.
    pub hulled: bool,
    /// The other indexes and why they lost.
    pub candidates: Vec<Candidate>,
    /// CouchDB's warning when `use_index` named an index that was not used.
    pub use_index_warning: Option<String>,
}

/// Plans `query` over `indexes` (which include `_all_docs`).
pub fn plan(query: &Query, indexes: &[Index], purpose: Purpose) -> MangoResult<Plan> {
    let selector = query.selector.root();
    let sort_names = query.sort.names();
    let global: Vec<&Index> = indexes
        .iter()
        .filter(|index| index.partial_filter.is_none())
        .collect();
    let named: Vec<&Index> = indexes
        .iter()
        .filter(|index| names(index, query.use_index))
        .collect();
    let mut considered: Vec<&Index> = global.clone();
    for index in named {
        if !considered.iter().any(|seen| same(seen, index)) {
            considered.push(index);
        }
    }
    let usability: Vec<(&Index, Result<(), &'static str>)> = considered
        .iter()
        .map(|index| (*index, usable(index, selector, &sort_names)))
        .collect();
    let usable_indexes: Vec<&Index> = usability
        .iter()
        .filter(|(_, verdict)| verdict.is_ok())
        .map(|(index, _)| *index)
        .collect();
    if usable_indexes.is_empty() && purpose == Purpose::Find {
        return Err(MangoError::bad_request(
            "no_usable_index",
            "No index exists for this sort, try indexing by the sort fields.",
        ));
    }
    let by_use_index: Vec<&Index> = usable_indexes
        .iter()
        .copied()
        .filter(|index| names(index, query.use_index))
        .collect();
    let chosen_from = if !by_use_index.is_empty() {
        by_use_index
    } else if query.allow_fallback || (query.use_index.is_empty() && usable_indexes.len() > 1) {
        usable_indexes.clone()
    } else {
        return Err(invalid_index(query.use_index));
    };
    // JSON indexes first; `_all_docs` only when no JSON index can answer.
    let kind = if chosen_from.iter().any(|i| i.kind == IndexKind::Json) {
        IndexKind::Json
    } else {
        IndexKind::Special
    };
    let of_kind: Vec<&Index> = chosen_from
        .iter()
        .copied()
        .filter(|index| index.kind == kind)
        .collect();
    let constrained = constrained_fields(selector);
    let mut ranked: Vec<(&Index, usize)> = of_kind
        .iter()
        .map(|index| (*index, prefix_difference(index, &constrained)))
        .collect();
    ranked.sort_by(|(a, da), (b, db)| {
        da.cmp(db)
            .then(a.fields.fields.len().cmp(&b.fields.fields.len()))
            .then(a.sort_key().cmp(&b.sort_key()))
    });
    let required = required_fields(query, selector);
    let Some(&(winner, _)) = ranked.first() else {
        return Ok(Plan {
            index: None,
            ranges: Ranges::Ids(Vec::new()),
            descending: false,
            residual: query.selector.clone(),
            covering: false,
            hulled: false,
            candidates: candidates(&Candidates {
                all: indexes,
                global: &global,
                considered: &considered,
                usability: &usability,
                chosen_from: &chosen_from,
                of_kind: &of_kind,
                ranked: &ranked,
                winner: None,
                required: &required,
            }),
            use_index_warning: None,
        });
    };
    let columns = column_orders(winner);
    let boxes = boxes(selector, &columns);
    let ranges = match winner.kind {
        IndexKind::Special => Ranges::Ids(merge_id_ranges(
            boxes.regions.iter().map(id_range).collect(),
        )),
        IndexKind::Json => Ranges::Keys(merge_key_ranges(
            boxes.regions.iter().map(key_range).collect(),
        )),
    };
    let residual = residual(
        query.selector,
        winner,
        &columns,
        &boxes.regions,
        boxes.hulled,
    );
    let use_index_warning = if query.use_index.is_empty() || names(winner, query.use_index) {
        None
    } else {
        Some(not_used_warning(query.use_index))
    };
    Ok(Plan {
        index: Some(winner.clone()),
        ranges,
        descending: query.sort.direction() == Direction::Desc,
        residual,
        covering: covers(winner, required.as_ref()),
        hulled: boxes.hulled,
        candidates: candidates(&Candidates {
            all: indexes,
            global: &global,
            considered: &considered,
            usability: &usability,
            chosen_from: &chosen_from,
            of_kind: &of_kind,
            ranked: &ranked,
            winner: Some(winner),
            required: &required,
        }),
        use_index_warning,
    })
}

fn same(a: &Index, b: &Index) -> bool {
    a.sort_key() == b.sort_key()
}

/// True when `use_index` names this index (its design document, and its name if given).
fn names(index: &Index, use_index: &UseIndex) -> bool {
    match (use_index.ddoc_id(), &use_index.name) {
        (None, _) => false,
        (Some(ddoc), name) => {
            index.ddoc.as_deref() == Some(ddoc.as_str())
                && name.as_ref().is_none_or(|name| *name == index.name)
        }
    }
}

fn invalid_index(use_index: &UseIndex) -> MangoError {
    let reason = match (&use_index.ddoc, &use_index.name) {
        (None, _) => "You must specify an index with the `use_index` parameter.".to_string(),
        (Some(ddoc), None) => format!(
            "{} specified by `use_index` could not be found or it is not suitable.",
            design_id(ddoc)
        ),
        (Some(ddoc), Some(name)) => format!(
            "{}, {name} specified by `use_index` could not be found or it is not suitable.",
            design_id(ddoc)
        ),
    };
    MangoError::bad_request("invalid_index", reason)
}

fn not_used_warning(use_index: &UseIndex) -> String {
    let ddoc = design_id(use_index.ddoc.as_deref().unwrap_or_default());
    match &use_index.name {
        None => {
            format!("{ddoc} was not used because it does not contain a valid index for this query.")
        }
        Some(name) => {
            format!("{ddoc}, {name} was not used because it is not a valid index for this query.")
        }
    }
}

/// `Ok` when `index` can answer the selector and the sort; otherwise CouchDB's first reason.
fn usable(index: &Index, selector: Option<&Node>, sort: &[&str]) -> Result<(), &'static str> {
    let columns = index.columns();
    match index.kind {
        IndexKind::Special => {
            if sort.is_empty() {
                return Ok(());
            }
            if !constrained_fields(selector).contains(&vec!["_id".to_string()]) {
                return Err("field_mismatch");
            }
            if !columns.starts_with(sort) {
                return Err("sort_order_mismatch");
            }
            Ok(())
        }
        IndexKind::Json => {
            if selector.is_some_and(is_text_search) {
                return Err("needs_text_search");
            }
            let existing = existing_fields(selector);
            let all_required = index
                .fields
                .fields
                .iter()
                .filter(|field| !sort.contains(&field.name.as_str()))
                .filter(|field| field.name != "_id" && field.name != "_rev")
                .all(|field| existing.contains(&field.path));
            if !all_required {
                return Err("field_mismatch");
            }
            if !can_use_sort(index, sort, selector) {
                return Err("sort_order_mismatch");
            }
            Ok(())
        }
    }
}

fn is_text_search(node: &Node) -> bool {
    match node {
        Node::Text(_) => true,
        Node::And(children) | Node::Or(children) | Node::Nor(children) => {
            children.iter().any(is_text_search)
        }
        Node::Not(inner) => is_text_search(inner),
        Node::Field { .. } => false,
    }
}

/// The sort is a prefix of the index's fields once leading fields fixed by `$eq` are skipped.
fn can_use_sort(index: &Index, sort: &[&str], selector: Option<&Node>) -> bool {
    let Some(first) = sort.first() else {
        return true;
    };
    let fields = &index.fields.fields;
    for (at, field) in fields.iter().enumerate() {
        if field.name == *first {
            let rest: Vec<&str> = fields[at..].iter().map(|f| f.name.as_str()).collect();
            return rest.starts_with(sort);
        }
        if !selector.is_some_and(|node| is_constant_field(node, &field.path)) {
            return false;
        }
    }
    false
}

fn is_constant_field(node: &Node, path: &[String]) -> bool {
    match node {
        Node::And(children) => children.iter().any(|child| is_constant_field(child, path)),
        Node::Field {
            path: field,
            cond: Cond::Eq(_),
        } => field == path,
        _ => false,
    }
}

/// The fields every matching document has: named by a condition other than `$exists: false`
/// under `$and`, or in every branch of an `$or`.
fn existing_fields(node: Option<&Node>) -> BTreeSet<Vec<String>> {
    fn walk(node: &Node) -> BTreeSet<Vec<String>> {
        match node {
            Node::Field {
                cond: Cond::Exists(false),
                ..
            } => BTreeSet::new(),
            Node::Field { path, .. } => BTreeSet::from([path.clone()]),
            Node::And(children) => children.iter().flat_map(walk).collect(),
            Node::Or(children) => intersection(children.iter().map(walk)),
            Node::Nor(_) | Node::Not(_) | Node::Text(_) => BTreeSet::new(),
        }
    }
    node.map(walk).unwrap_or_default()
}

/// The fields whose values every matching document has in a narrowed set: named by an
/// indexable condition under `$and`, or in every branch of an `$or`.
pub(crate) fn constrained_fields(node: Option<&Node>) -> BTreeSet<Vec<String>> {
    fn walk(node: &Node) -> BTreeSet<Vec<String>> {
        match node {
            Node::Field { path, cond } if is_indexable(cond) => BTreeSet::from([path.clone()]),
            Node::Field { .. } => BTreeSet::new(),
            Node::And(children) => children.iter().flat_map(walk).collect(),
            Node::Or(children) => intersection(children.iter().map(walk)),
            Node::Nor(_) | Node::Not(_) | Node::Text(_) => BTreeSet::new(),
        }
    }
    node.map(walk).unwrap_or_default()
}

fn intersection(mut sets: impl Iterator<Item = BTreeSet<Vec<String>>>) -> BTreeSet<Vec<String>> {
    let Some(first) = sets.next() else {
        return BTreeSet::new();
    };
    sets.fold(first, |acc, set| acc.intersection(&set).cloned().collect())
}

/// Constrained fields the index's leading fields do not cover (CouchDB's prefix difference).
fn prefix_difference(index: &Index, constrained: &BTreeSet<Vec<String>>) -> usize {
    let covered = index
        .fields
        .fields
        .iter()
        .take_while(|field| constrained.contains(&field.path))
        .count();
    constrained.len().saturating_sub(covered)
}

fn column_orders(index: &Index) -> Vec<(Vec<String>, ColumnOrder)> {
    index
        .fields
        .fields
        .iter()
        .map(|field| {
            let order = match (index.kind, field.name.as_str()) {
                (IndexKind::Special, _) => ColumnOrder::Bytes,
                (IndexKind::Json, "_id") => ColumnOrder::IdInCollation,
                (IndexKind::Json, _) => ColumnOrder::Collation,
            };
            (field.path.clone(), order)
        })
        .collect()
}

/// The fields the query reads: those returned and those the selector tests. `None`: whole
/// documents.
fn required_fields(query: &Query, selector: Option<&Node>) -> Option<BTreeSet<String>> {
    match query.fields {
        Fields::All => None,
        Fields::Only(fields) => {
            let mut names: BTreeSet<String> = fields.iter().map(|(name, _)| name.clone()).collect();
            names.extend(selector_fields(selector));
            Some(names)
        }
    }
}

/// The field names a selector tests, outside `$elemMatch` and friends.
pub(crate) fn selector_fields(node: Option<&Node>) -> BTreeSet<String> {
    fn walk(node: &Node, out: &mut BTreeSet<String>) {
        match node {
            Node::Field { path, .. } => {
                out.insert(join_field(path));
            }
            Node::And(children) | Node::Or(children) | Node::Nor(children) => {
                children.iter().for_each(|child| walk(child, out))
            }
            Node::Not(inner) => walk(inner, out),
            Node::Text(_) => {
                out.insert("$default".into());
            }
        }
    }
    let mut out = BTreeSet::new();
    if let Some(node) = node {
        walk(node, &mut out);
    }
    out
}

/// A JSON index covers the query when every field it reads is an indexed field or `_id`.
fn covers(index: &Index, required: Option<&BTreeSet<String>>) -> bool {
    let Some(required) = required else {
        return false;
    };
    index.kind == IndexKind::Json
        && required
            .iter()
            .all(|name| name == "_id" || index.columns().contains(&name.as_str()))
}

/// The selector without the top-level conditions that the ranges decide exactly.
fn residual(
    selector: &Selector,
    index: &Index,
    columns: &[(Vec<String>, ColumnOrder)],
    regions: &[Region],
    hulled: bool,
) -> Selector {
    let Some(root) = selector.root() else {
        return selector.clone();
    };
    if hulled {
        return selector.clone();
    }
    let conjuncts: Vec<&Node> = match root {
        Node::And(children) => children.iter().collect(),
        other => vec![other],
    };
    let left: Vec<Node> = conjuncts
        .into_iter()
        .filter(|node| !is_exact(node, index, columns, regions))
        .cloned()
        .collect();
    Selector::from_conjuncts(left)
}

/// True when every key in the ranges satisfies `node`, so no document needs testing for it.
fn is_exact(
    node: &Node,
    index: &Index,
    columns: &[(Vec<String>, ColumnOrder)],
    regions: &[Region],
) -> bool {
    let Node::Field { path, cond } = node else {
        return false;
    };
    let Some(column) = columns.iter().position(|(c, _)| c == path) else {
        return false;
    };
    match index.kind {
        // Id intervals are exact in byte order, which is how `_id` is compared; every box was
        // intersected with this condition's intervals.
        IndexKind::Special => ranges::cond_intervals(cond, ColumnOrder::Bytes).is_some(),
        // An `$eq` on a column is exact when, in every box, it and every column before it are
        // single values, so each key in range holds exactly that value there.
        // Every document in a JSON index has every indexed field.
        IndexKind::Json if matches!(cond, Cond::Exists(true)) => true,
        IndexKind::Json => {
            matches!(cond, Cond::Eq(_))
                && columns[column].1 == ColumnOrder::Collation
                && regions.iter().all(|region| {
                    region[..=column]
                        .iter()
                        .all(|interval| interval.is_point(TermOrder::Collation))
                })
        }
    }
}

struct Candidates<'a> {
    all: &'a [Index],
    global: &'a [&'a Index],
    considered: &'a [&'a Index],
    usability: &'a [(&'a Index, Result<(), &'static str>)],
    chosen_from: &'a [&'a Index],
    of_kind: &'a [&'a Index],
    ranked: &'a [(&'a Index, usize)],
    winner: Option<&'a Index>,
    required: &'a Option<BTreeSet<String>>,
}

/// Every index but the winner, with CouchDB's reason and ranking
/// (`mango_cursor:extract_candidate_indexes`).
fn candidates(c: &Candidates) -> Vec<Candidate> {
    let contains = |set: &[&Index], index: &Index| set.iter().any(|other| same(other, index));
    let usable: Vec<&Index> = c
        .usability
        .iter()
        .filter(|(_, verdict)| verdict.is_ok())
        .map(|(index, _)| *index)
        .collect();
    let unfavored = c
        .chosen_from
        .iter()
        .filter(|index| !contains(c.of_kind, index))
        .count();
    let excluded = usable
        .iter()
        .filter(|index| !contains(c.chosen_from, index))
        .count();
    let not_usable = c.considered.len() - usable.len();
    let unfavored_rank = c.ranked.len().max(1);
    let excluded_rank = unfavored_rank + usize::from(unfavored > 0);
    let not_usable_rank = excluded_rank + usize::from(excluded > 0);
    let partial_rank = not_usable_rank + usize::from(not_usable > 0);
    let winner_width = c.winner.map_or(0, |w| w.fields.fields.len());
    let mut out = Vec::new();
    for index in c.all {
        if c.winner.is_some_and(|winner| same(winner, index)) {
            continue;
        }
        let covering = (index.kind == IndexKind::Json).then(|| covers(index, c.required.as_ref()));
        let (usable, reason, ranking) = if !contains(c.considered, index) {
            debug_assert!(!contains(c.global, index));
            (false, "is_partial", partial_rank)
        } else if let Some((_, Err(reason))) =
            c.usability.iter().find(|(other, _)| same(other, index))
        {
            (false, *reason, not_usable_rank)
        } else if !contains(c.chosen_from, index) {
            (true, "excluded_by_user", excluded_rank)
        } else if !contains(c.of_kind, index) {
            (true, "unfavored_type", unfavored_rank)
        } else {
            let position = c
                .ranked
                .iter()
                .position(|(other, _)| same(other, index))
                .unwrap_or(0);
            let difference = c.ranked.get(position).map_or(0, |(_, d)| *d);
            let reason = if difference > 0 {
                "less_overlap"
            } else if index.fields.fields.len() > winner_width {
                "too_many_fields"
            } else {
                "alphabetically_comes_after"
            };
            (true, reason, position)
        };
        out.push(Candidate {
            index: index.clone(),
            usable,
            reason,
            ranking,
            covering,
        });
    }
    out
}
