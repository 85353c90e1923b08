//! Reading a view: key ranges become one bytewise range scan of the view's rows.

use serde_json::Value;
use settee_storage::Cf;

use crate::error::ViewError;
use crate::group::IndexGroup;
use crate::keys;

/// One end of a key range: a key and optionally a document id among that key's rows
/// (`startkey_docid` / `endkey_docid`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyBound {
    pub key: Value,
    pub doc_id: Option<String>,
}

/// Which rows of a view to read, with CouchDB's meaning: `start` is where reading begins (the
/// high end when `descending`), always inclusive; `end` is inclusive when `inclusive_end`.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange {
    pub start: Option<KeyBound>,
    pub end: Option<KeyBound>,
    pub inclusive_end: bool,
    pub descending: bool,
    /// Only this partition's rows, of a partitioned group (partitions.md).
    pub partition: Option<String>,
}

impl Default for KeyRange {
    fn default() -> Self {
        KeyRange {
            start: None,
            end: None,
            inclusive_end: true,
            descending: false,
            partition: None,
        }
    }
}

impl KeyRange {
    /// Exactly the rows of `key`.
    pub fn key(key: Value) -> KeyRange {
        KeyRange {
            start: Some(KeyBound {
                key: key.clone(),
                doc_id: None,
            }),
            end: Some(KeyBound { key, doc_id: None }),
            ..KeyRange::default()
        }
    }
}

/// Which rows a scattered query reads: those whose document id (the row's, as stored) it
/// keeps.
pub type RowFilter<'a> = &'a (dyn Fn(&[u8]) -> bool + Sync);

/// A row as stored: the document id and the emitted key and value as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: Vec<u8>,
    pub key_json: Vec<u8>,
    pub value_json: Vec<u8>,
}

impl Row {
    pub fn id_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.id)
    }

    pub fn key(&self) -> Value {
        serde_json::from_slice(&self.key_json).unwrap_or(Value::Null)
    }

    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.value_json).unwrap_or(Value::Null)
    }
}

/// A range of a view's rows by encoded position, `[lower, upper)`, the view's own prefix left
/// out: a position is an encoded key (`settee_collate::encode_key`), optionally followed by a
/// document id ([`row_position`]), or any byte string between two of those. For callers whose
/// bounds a [`KeyRange`] cannot state, such as Mango's "every key that begins with these array
/// elements" (the array's encoding without its closing byte, then `0xFF`).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRange {
    pub lower: Vec<u8>,
    pub upper: Vec<u8>,
    pub descending: bool,
    /// Only this partition's rows, of a partitioned group.
    pub partition: Option<String>,
}

/// Where the rows of `key` begin or, with `doc_id`, where that document's rows under `key`
/// begin. [`position_after`] of it is just past them.
pub fn row_position(key: &Value, doc_id: Option<&str>) -> Vec<u8> {
    let mut bytes = settee_collate::encode_key(key);
    if let Some(id) = doc_id {
        keys::push_escaped_id(id.as_bytes(), &mut bytes);
    }
    bytes
}

/// The first position after every position that starts with `position`.
pub fn position_after(position: &[u8]) -> Vec<u8> {
    keys::prefix_end(position)
}

fn bound_bytes(group: &IndexGroup, view: usize, prefix: &[u8], bound: &KeyBound) -> Vec<u8> {
    let mut bytes = prefix.to_vec();
    group.encode_key_to(view, &bound.key, &mut bytes);
    if let Some(id) = &bound.doc_id {
        keys::push_escaped_id(id.as_bytes(), &mut bytes);
    }
    bytes
}

impl IndexGroup {
    /// `[lower, upper)` of the stored rows `range` selects in view `view`.
    fn bounds(&self, view: usize, range: &KeyRange) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let prefix = self.rows_prefix(view, range.partition.as_deref());
        let (low, low_inclusive, high, high_inclusive) = if range.descending {
            (&range.end, range.inclusive_end, &range.start, true)
        } else {
            (&range.start, true, &range.end, range.inclusive_end)
        };
        let lower = match low {
            None => prefix.clone(),
            Some(bound) if low_inclusive => bound_bytes(self, view, &prefix, bound),
            Some(bound) => keys::prefix_end(&bound_bytes(self, view, &prefix, bound)),
        };
        let upper = match high {
            None => keys::prefix_end(&prefix),
            Some(bound) if high_inclusive => {
                keys::prefix_end(&bound_bytes(self, view, &prefix, bound))
            }
            Some(bound) => bound_bytes(self, view, &prefix, bound),
        };
        (prefix, lower, upper)
    }

    /// Where view `view`'s rows start: of one partition's rows when `partition` is given.
    fn rows_prefix(&self, view: usize, partition: Option<&str>) -> Vec<u8> {
        let mut prefix = keys::view_prefix(self.bucket().id(), self.id, view as u16);
        if let Some(partition) = partition {
            keys::push_escaped_id(partition.as_bytes(), &mut prefix);
        }
        prefix
    }

    /// View `view`'s rows of one partition, counted by walking their keys (a partition
    /// query's `total_rows`).
    pub fn partition_rows(&self, view: usize, partition: &str) -> Result<u64, ViewError> {
        self.rows_of(view, Some(partition), None)
    }

    /// View `view`'s rows (of one partition, when given) whose document `only` keeps, counted
    /// by walking their keys: a scattered query's `total_rows`, when the node also indexes
    /// vbuckets it does not answer for.
    pub fn rows_of(
        &self,
        view: usize,
        partition: Option<&str>,
        only: Option<RowFilter<'_>>,
    ) -> Result<u64, ViewError> {
        let prefix = self.rows_prefix(view, partition);
        let end = keys::prefix_end(&prefix);
        self.count_between(prefix.len(), &prefix, &end, only)
    }

    fn count_between(
        &self,
        prefix_len: usize,
        from: &[u8],
        to: &[u8],
        only: Option<RowFilter<'_>>,
    ) -> Result<u64, ViewError> {
        let mut count = 0;
        for item in self.store().scan(Cf::View, from, to, false) {
            let (key, value) = item?;
            if let Some(only) = only {
                let (id, _, _) = keys::split_row(prefix_len, &key, &value)
                    .ok_or_else(|| ViewError::Storage("view row is corrupt".into()))?;
                if !only(&id) {
                    continue;
                }
            }
            count += 1;
        }
        Ok(count)
    }

    /// The rows of view `view` in `range`, in key order (reversed when descending).
    pub fn scan(
        &self,
        view: usize,
        range: &KeyRange,
    ) -> impl Iterator<Item = Result<Row, ViewError>> + '_ {
        let (prefix, lower, upper) = self.bounds(view, range);
        self.scan_between(prefix.len(), lower, upper, range.descending)
    }

    /// The rows of view `view` between two encoded positions (see [`EncodedRange`]), in key
    /// order (reversed when descending).
    pub fn scan_encoded(
        &self,
        view: usize,
        range: &EncodedRange,
    ) -> impl Iterator<Item = Result<Row, ViewError>> + '_ {
        let prefix = self.rows_prefix(view, range.partition.as_deref());
        let mut lower = prefix.clone();
        lower.extend_from_slice(&range.lower);
        let mut upper = prefix.clone();
        upper.extend_from_slice(&range.upper);
        self.scan_between(prefix.len(), lower, upper, range.descending)
    }

    fn scan_between(
        &self,
        prefix_len: usize,
        lower: Vec<u8>,
        upper: Vec<u8>,
        descending: bool,
    ) -> impl Iterator<Item = Result<Row, ViewError>> + '_ {
        let valid = lower < upper;
        let scan = valid.then(|| self.store().scan(Cf::View, &lower, &upper, descending));
        scan.into_iter().flatten().map(move |item| {
            let (key, value) = item?;
            let (id, key_json, value_json) = keys::split_row(prefix_len, &key, &value)
                .ok_or_else(|| ViewError::Storage("view row is corrupt".into()))?;
            Ok(Row {
                id,
                key_json: key_json.to_vec(),
                value_json: value_json.to_vec(),
            })
        })
    }

    /// Rows before the first row of `range` in reading order (CouchDB's `offset`), counted
    /// by walking their keys.
    pub fn offset_of(&self, view: usize, range: &KeyRange) -> Result<u64, ViewError> {
        self.offset_among(view, range, None)
    }

    /// [`IndexGroup::offset_of`] counting only the rows whose document `only` keeps.
    pub fn offset_among(
        &self,
        view: usize,
        range: &KeyRange,
        only: Option<RowFilter<'_>>,
    ) -> Result<u64, ViewError> {
        let (prefix, lower, upper) = self.bounds(view, range);
        let (from, to) = if range.descending {
            (upper.max(prefix.clone()), keys::prefix_end(&prefix))
        } else {
            (prefix.clone(), lower.min(keys::prefix_end(&prefix)))
        };
        if from >= to {
            return Ok(0);
        }
        self.count_between(prefix.len(), &from, &to, only)
    }
}
