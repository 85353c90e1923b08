//! The `Mapper` seam: what turns documents into emitted rows. The indexer does not care how:
//! [`JsMapper`] runs a design document's JavaScript map functions on the JS pool; Mango JSON
//! indexes plug in a native field extractor.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;
use settee_js::{JsPool, Program};

use crate::error::ViewError;

/// One live document to map.
#[derive(Debug, Clone, Copy)]
pub struct DocInput<'a> {
    pub id: &'a str,
    /// The whole document as JSON text: `_id` and `_rev` first, then the body's members.
    pub json: &'a str,
}

/// One emitted row: the key (to be collated) and the value as JSON text.
pub type Emitted = (Value, Box<RawValue>);

/// Per document (in input order), per view of the group (in view order), the rows emitted.
pub type MappedBatch = Vec<Vec<Vec<Emitted>>>;

pub trait Mapper: Send + Sync + 'static {
    /// How many views the group has; every document's output has this many lists.
    fn views(&self) -> usize;

    /// Maps a batch of documents. The indexer calls this from several threads at once, each
    /// with a part of its batch. A document a map function cannot process gets empty lists
    /// (and the mapper logs why); `Err` stops the whole index build (for example a function
    /// that ran past the JS time limit), and the next query retries.
    fn map(&self, docs: &[DocInput<'_>]) -> Result<MappedBatch, ViewError>;
}

/// A design document's JavaScript map functions, run on the node's JS pool.
pub struct JsMapper {
    pool: Arc<JsPool>,
    program: Arc<Program>,
    /// For log lines: `_design/name`.
    design: String,
}

impl JsMapper {
    pub fn new(pool: Arc<JsPool>, program: Arc<Program>, design: String) -> JsMapper {
        JsMapper {
            pool,
            program,
            design,
        }
    }
}

impl Mapper for JsMapper {
    fn views(&self) -> usize {
        self.program.views()
    }

    fn map(&self, docs: &[DocInput<'_>]) -> Result<MappedBatch, ViewError> {
        let mut text = String::with_capacity(docs.iter().map(|doc| doc.json.len() + 1).sum());
        text.push('[');
        for (index, doc) in docs.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            text.push_str(doc.json);
        }
        text.push(']');
        let output = self.pool.map(self.program.clone(), text).wait()?;
        for line in &output.logs {
            tracing::info!(target: "settee_views", design = %self.design, "log: {line}");
        }
        for (doc, view, message) in &output.errors {
            let id = docs.get(*doc).map_or("?", |doc| doc.id);
            tracing::info!(
                target: "settee_views",
                design = %self.design, view, doc = id,
                "map function threw, document skipped: {message}"
            );
        }
        if output.rows.len() != docs.len() {
            return Err(ViewError::Internal(
                "map output has the wrong length".into(),
            ));
        }
        Ok(output.rows)
    }
}
