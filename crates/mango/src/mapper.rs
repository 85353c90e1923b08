//! JSON indexes on the view indexer: each one is an index group of one view whose rows a
//! native [`MangoMapper`] emits — no JavaScript. A document's row is `key = [value of each
//! indexed field]`, `value = null`, and a document missing a field, or refused by the partial
//! filter, has no row (CouchDB's `mango_native_proc`). The indexer stores the rows in view
//! collation order, so a plan's key ranges are plain range scans of it.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use settee_engine::{md5_of, Keyspace};
use settee_views::{DocInput, GroupSpec, IndexGroup, MappedBatch, Mapper, ViewError, Views};

use crate::index::{Index, IndexKind};

/// Extracts a JSON index's key from each document.
pub struct MangoMapper {
    index: Index,
    /// `null`, the value of every row, made once.
    null: Box<RawValue>,
}

impl MangoMapper {
    pub fn new(index: Index) -> Result<MangoMapper, ViewError> {
        let null = serde_json::value::to_raw_value(&Value::Null)
            .map_err(|error| ViewError::Internal(error.to_string()))?;
        Ok(MangoMapper { index, null })
    }
}

impl Mapper for MangoMapper {
    fn views(&self) -> usize {
        1
    }

    fn map(&self, docs: &[DocInput<'_>]) -> Result<MappedBatch, ViewError> {
        Ok(docs
            .iter()
            .map(|doc| {
                let key = serde_json::from_str::<Value>(doc.json)
                    .ok()
                    .and_then(|value| self.index.key_of(&value));
                let rows = key
                    .map(|key| vec![(Value::Array(key), self.null.clone())])
                    .unwrap_or_default();
                vec![rows]
            })
            .collect())
    }
}

/// What a JSON index's rows depend on: its fields, in order, and its partial filter. Equal
/// definitions share one index, whatever design document or name they have; field directions
/// do not change the rows.
pub fn signature(index: &Index) -> [u8; 16] {
    let partial = index
        .partial_filter
        .as_ref()
        .map_or_else(|| json!({}), |filter| filter.to_json());
    let mut definition = json!({
        "mango": "json",
        "fields": index.columns(),
        "partial_filter_selector": partial,
    });
    if index.partitioned {
        // Rows keyed by partition first: another index than the global one of these fields
        // (absent otherwise, so global indexes keep the signatures they had).
        definition["partitioned"] = json!(true);
    }
    md5_of(definition.to_string().as_bytes())
}

/// The indexer's group for a JSON index of `keyspace` (opened, not necessarily built: see
/// [`IndexGroup::wait_for`]). `None` for `_all_docs`, which needs no index.
pub async fn open_index(
    views: &Views,
    keyspace: &Keyspace,
    index: &Index,
) -> Result<Option<Arc<IndexGroup>>, ViewError> {
    if index.kind != IndexKind::Json {
        return Ok(None);
    }
    let spec = GroupSpec {
        signature: signature(index),
        name: index.ddoc.clone().unwrap_or_default(),
        view_names: vec![index.name.clone()],
        include_design: false,
        partitioned: index.partitioned,
        raw_collation: Vec::new(),
        local_seq: false,
        mapper: Arc::new(MangoMapper::new(index.clone())?),
    };
    views.open_group(keyspace, spec).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{add_to_ddoc, indexes_in_ddoc, AddOutcome, NewIndex};

    fn index(body: Value) -> Index {
        let new = NewIndex::parse(&body).expect("valid");
        let AddOutcome::Updated(ddoc) = add_to_ddoc(None, &new).expect("adds") else {
            panic!("created");
        };
        indexes_in_ddoc(&new.ddoc, &ddoc, false).remove(0)
    }

    #[test]
    fn rows_are_the_field_values_of_documents_that_have_them_all() {
        let mapper = MangoMapper::new(index(json!({
            "index": {"fields": ["a", "b.c"], "partial_filter_selector": {"x": {"$ne": 0}}},
        })))
        .expect("mapper");
        let docs = [
            r#"{"_id":"1","_rev":"1-a","a":1,"b":{"c":"z"},"x":2}"#,
            r#"{"_id":"2","_rev":"1-a","a":1}"#,
            r#"{"_id":"3","_rev":"1-a","a":null,"b":{"c":[1]},"x":0}"#,
            r#"{"_id":"4","_rev":"1-a","a":null,"b":{"c":[1]},"x":1}"#,
        ];
        let inputs: Vec<DocInput> = docs.iter().map(|json| DocInput { id: "", json }).collect();
        let mapped = mapper.map(&inputs).expect("maps");
        let keys: Vec<Option<Value>> = mapped
            .iter()
            .map(|views| views[0].first().map(|(key, _)| key.clone()))
            .collect();
        assert_eq!(
            keys,
            [Some(json!([1, "z"])), None, None, Some(json!([null, [1]]))]
        );
        assert_eq!(mapped[0][0][0].1.get(), "null");
    }

    #[test]
    fn signatures_follow_the_rows_not_the_names() {
        let a = index(json!({"index": {"fields": ["a"]}, "ddoc": "x", "name": "one"}));
        let b = index(json!({"index": {"fields": [{"a": "desc"}]}, "ddoc": "y", "name": "two"}));
        let c = index(json!({"index": {"fields": ["a"], "partial_filter_selector": {"b": 1}}}));
        let d = index(json!({"index": {"fields": ["a", "b"]}}));
        assert_eq!(signature(&a), signature(&b));
        assert_ne!(signature(&a), signature(&c));
        assert_ne!(signature(&a), signature(&d));
    }
}
