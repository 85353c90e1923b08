//! `POST /{db}/_explain`: a plan written out the way CouchDB 3.5 writes it (`dbname`, `index`,
//! `selector`, `opts`, `limit`, `skip`, `fields`, `index_candidates`, `selector_hints`,
//! `mrargs`, `covering`), plus settee's own `plan` member: every range it will scan and the
//! residual selector documents must still match.

use serde_json::{json, Map, Value};

use crate::planner::{selector_fields, Candidate, Plan, Ranges};
use crate::request::FindRequest;

impl Plan {
    /// The plan alone, as `_explain`'s `plan` member and the planner's golden files show it.
    pub fn summary(&self) -> Value {
        let index = match &self.index {
            None => Value::Null,
            Some(index) => match &index.ddoc {
                None => json!(index.name),
                Some(ddoc) => json!(format!("{ddoc}/{}", index.name)),
            },
        };
        let ranges: Vec<Value> = match &self.ranges {
            Ranges::Ids(ranges) => ranges.iter().map(|range| range.to_json()).collect(),
            Ranges::Keys(ranges) => ranges.iter().map(|range| range.to_json()).collect(),
        };
        let mut summary = Map::new();
        summary.insert("index".into(), index);
        summary.insert(
            "direction".into(),
            json!(if self.descending { "rev" } else { "fwd" }),
        );
        summary.insert("ranges".into(), Value::Array(ranges));
        summary.insert(
            "residual_selector".into(),
            if self.residual.is_empty() {
                Value::Null
            } else {
                self.residual.to_json()
            },
        );
        summary.insert("covering".into(), json!(self.covering));
        if self.hulled {
            summary.insert("hulled".into(), json!(true));
        }
        Value::Object(summary)
    }
}

/// The `_explain` response for `request` planned as `plan` in database `db`.
pub fn explain(db: &str, request: &FindRequest, plan: &Plan) -> Value {
    let mut out = Map::new();
    out.insert("dbname".into(), json!(db));
    out.insert(
        "index".into(),
        plan.index
            .as_ref()
            .map_or(Value::Null, |index| index.to_json()),
    );
    out.insert("partitioned".into(), json!(false));
    out.insert("selector".into(), request.selector.to_json());
    out.insert("opts".into(), request.opts_json());
    out.insert("limit".into(), json!(request.limit));
    out.insert("skip".into(), json!(request.skip));
    out.insert("fields".into(), json!(request.fields.names()));
    out.insert(
        "index_candidates".into(),
        Value::Array(plan.candidates.iter().map(candidate_json).collect()),
    );
    out.insert("selector_hints".into(), selector_hints(request));
    if plan.index.is_some() {
        out.insert("mrargs".into(), mrargs(request, plan));
        out.insert("covering".into(), json!(plan.covering));
    }
    out.insert("plan".into(), plan.summary());
    Value::Object(out)
}

fn candidate_json(candidate: &Candidate) -> Value {
    json!({
        "index": candidate.index.to_json(),
        "analysis": {
            "usable": candidate.usable,
            "reasons": [{"name": candidate.reason}],
            "ranking": candidate.ranking,
            "covering": candidate.covering,
        },
    })
}

fn selector_hints(request: &FindRequest) -> Value {
    let root = request.selector.root();
    let indexable: Vec<String> = crate::planner::constrained_fields(root)
        .iter()
        .map(|path| crate::normal_form::join_field(path))
        .collect();
    let unindexable: Vec<String> = selector_fields(root)
        .into_iter()
        .filter(|name| !indexable.contains(name))
        .collect();
    json!([{
        "type": "json",
        "indexable_fields": indexable,
        "unindexable_fields": unindexable,
    }])
}

/// CouchDB's view arguments: the hull of the ranges (`null`s when there is nothing to scan),
/// swapped for a descending scan.
fn mrargs(request: &FindRequest, plan: &Plan) -> Value {
    let (start, end) = match &plan.ranges {
        Ranges::Ids(ranges) => match (ranges.first(), ranges.last()) {
            (Some(first), Some(last)) => (
                first.to_json()["start_key"].clone(),
                last.to_json()["end_key"].clone(),
            ),
            _ => (Value::Null, Value::Null),
        },
        Ranges::Keys(ranges) => match (ranges.first(), ranges.last()) {
            (Some(first), Some(last)) => (
                first.to_json()["start_key"].clone(),
                last.to_json()["end_key"].clone(),
            ),
            _ => (Value::Null, Value::Null),
        },
    };
    let (start, end) = if plan.descending {
        (end, start)
    } else {
        (start, end)
    };
    json!({
        "include_docs": request.r == 1 && !plan.covering,
        "view_type": "map",
        "reduce": false,
        "partition": request.partition,
        "start_key": start,
        "end_key": end,
        "direction": if plan.descending { "rev" } else { "fwd" },
        "stable": request.stable,
        "update": request.update,
        "conflicts": request.conflicts,
    })
}
