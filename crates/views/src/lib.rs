//! settee's view indexer: one sorted index per view per node, whatever the vbucket count.
//!
//! The engine knows nothing of views. This crate consumes the vbuckets' change streams
//! ([`settee_engine::Bucket::vbucket_changes`]), maps documents through a [`Mapper`] (the
//! design document's JavaScript on the `settee-js` pool, or a native extractor), and stores
//! rows keyed by (bucket, group, view, collated key, doc id) in the `view` column family
//! (`docs/format/views.md`). Start reading at [`group`] (indexing), then [`query`] (range scans)
//! and [`reduce`]. A rebalance move carries a vbucket's rows to another node as a sorted file
//! ([`export`]: the engine's `IndexExporter`), so they are not mapped again there.
//!
//! # Using the indexer (for Mango and other index kinds)
//!
//! ```text
//! // 1. Register an index group with your Mapper (it emits, per document, per view, the
//! //    (key, value) rows; for a Mango JSON index the key is the array of field values and a
//! //    document without the fields or failing partial_filter_selector emits nothing).
//! let group = views.open_group(&bucket, GroupSpec {
//!     signature,                       // md5 of everything that determines the rows
//!     name: "_design/my-index".into(), // shown in /_active_tasks
//!     view_names: vec!["my-index".into()],
//!     include_design: false,
//!     partitioned: false,              // rows keyed by the document's partition first
//!     raw_collation: vec![],           // per view: options.collation == "raw"
//!     local_seq: false,                // map functions see _local_seq
//!     mapper: Arc::new(MyMapper { .. }),   // impl settee_views::Mapper
//! }).await?;
//! // 2. Bring it up to date with what was written before now (update=true), or don't wait
//! //    (update=false; call group.ensure_builder() for update=lazy):
//! group.wait_for(&bucket.high_seqnos()).await?;
//! // 3. Range-scan a view (blocking RocksDB reads: run on a blocking thread):
//! for row in group.scan(0, &KeyRange { start, end, inclusive_end: true, descending: false }) {
//!     let row = row?;   // row.id, row.key_json, row.value_json
//! }
//! // group.total_rows(0), group.offset_of(0, &range), group.update_seq()
//! // 4. views.cleanup(&bucket, &signatures_in_use) deletes groups no design document uses:
//! //    include your index signatures in `signatures_in_use` (see settee-http view_api).
//! ```
#![deny(clippy::unwrap_used)]

pub mod design;
mod drop;
mod error;
pub mod export;
pub mod group;
mod keys;
mod map_doc;
mod mapper;
pub mod moves;
pub mod query;
pub mod reduce;
mod validate;
mod views;

pub use design::{Design, ReduceKind, ViewDefinition};
pub use error::ViewError;
pub use export::{GroupTargets, ViewRowsExporter};
pub use group::IndexGroup;
pub use mapper::{DocInput, Emitted, JsMapper, MappedBatch, Mapper};
pub use query::{position_after, row_position, EncodedRange, KeyBound, KeyRange, Row, RowFilter};
pub use reduce::{merge_partials, GroupedReduce, Grouping, Reducer};
pub use views::{hex, DesignViews, GroupSpec, ParsedDesign, Views, ViewsConfig};
