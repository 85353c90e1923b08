//! Mango, CouchDB's JSON query language: `_index`, `_find` and `_explain` without the HTTP.
//!
//! A request body becomes a [`FindRequest`] ([`request`]) whose [`Selector`] ([`selector`]) is
//! parsed and normalised once. The pure [`planner`] picks an [`Index`] ([`index`]: `_all_docs`
//! or a JSON index stored in a `"language": "query"` design document) and the key ranges of it
//! to scan ([`ranges`]); the executor ([`exec`]) scans them — `_all_docs` through the engine,
//! JSON indexes through the view indexer (`settee-views`), whose rows a native
//! [`MangoMapper`] emits ([`mapper`]) — filters with the plan's residual selector, projects
//! [`Fields`], and counts `execution_stats`; [`explain`] renders a plan the
//! way CouchDB's `_explain` does. Errors carry CouchDB's status, name and reason
//! ([`MangoError`]). The selector matcher and view collation are also what `_changes` filters
//! with.
//!
//! Start reading at [`planner::plan`].
#![deny(clippy::unwrap_used)]

pub mod bookmark;
pub mod error;
pub mod exec;
pub mod explain;
pub mod fields;
pub mod index;
pub mod mapper;
mod normal_form;
pub mod planner;
pub mod ranges;
pub mod request;
pub mod selector;
pub mod sort;

pub use error::{MangoError, MangoResult};
pub use exec::{execute, warning, ExecutionStats, FindOutcome};
pub use explain::explain;
pub use fields::Fields;
pub use index::{Index, IndexKind, NewIndex};
pub use mapper::{open_index, signature, MangoMapper};
pub use planner::{plan, Plan, Purpose, Query};
pub use request::FindRequest;
pub use selector::{collate, Selector};
pub use sort::Sort;
