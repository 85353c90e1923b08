//! CouchDB's document JSON, split out of `settee-http` at 10k lines: [`couch_doc`] splits a
//! body into its `_`-members and the user's members (kept as raw bytes, never re-serialised)
//! and renders a stored record back as CouchDB shows it; [`replicator_docs`] is what
//! `_replicator` documents hide from other readers and record of their writers. No routing, no
//! `HttpState`: `settee-http` re-exports both modules under their old paths.

pub mod couch_doc;
pub mod replicator_docs;
