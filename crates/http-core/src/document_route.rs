//! Which single document a CouchDB-door request is about, from its method and decoded path:
//! in a cluster such a request is answered by the document's active node (settee-http
//! `forward.rs`; docs/format/cluster-transport.md, "Forwarded HTTP document requests"). Pure.

use hyper::Method;

/// Path segments after the document id that are design functions or views, not attachments:
/// answered where the request arrives.
const DESIGN_FUNCTIONS: &[&str] = &["_view", "_info", "_show", "_update", "_list", "_rewrite"];

/// Which document a request is about, when it is about exactly one that lives in a vbucket.
#[derive(Debug, PartialEq, Eq)]
pub enum DocumentRoute<'a> {
    /// `/db/docid...`: the database segment and the document id.
    Document { db: &'a str, id: String },
    /// `POST /db`: a new document, whose id is in its body or made by the front node.
    NewDocument { db: &'a str },
    /// `POST /db/_index`: a Mango index, written into the design document its body names or
    /// the one its definition's name gives.
    NewIndex { db: &'a str },
}

/// The document a request names (decoded path segments), or `None` for anything else: database
/// and server requests, design functions and views, whole-database requests (`_all_docs`,
/// `_changes`, `_find`...). `_local` documents are routed by their id like any other (as a
/// CouchDB cluster keeps them in the shard of their id), so a replication checkpoint written
/// through one node is read through every node.
pub fn document_route<'a>(method: &Method, segments: &'a [String]) -> Option<DocumentRoute<'a>> {
    let (db, rest) = segments.split_first()?;
    let db = db.as_str();
    match rest {
        [] if *method == Method::POST => Some(DocumentRoute::NewDocument { db }),
        [] => None,
        [index] if index == "_index" && *method == Method::POST => {
            Some(DocumentRoute::NewIndex { db })
        }
        [index, more @ ..] if index == "_index" && *method == Method::DELETE => {
            let ddoc = match more {
                [design, ddoc, _, _] if design == "_design" => format!("_design/{ddoc}"),
                [ddoc, _, _] if ddoc.starts_with("_design/") => ddoc.clone(),
                [ddoc, _, _] => format!("_design/{ddoc}"),
                _ => return None,
            };
            Some(DocumentRoute::Document { db, id: ddoc })
        }
        [local, name] if local == "_local" && !name.is_empty() => Some(DocumentRoute::Document {
            db,
            id: format!("_local/{name}"),
        }),
        [design, _, function, _, id, ..]
            if design == "_design" && (function == "_show" || function == "_update") =>
        {
            document_of_function(db, id)
        }
        [design, name, more @ ..] if design == "_design" => match more.first() {
            Some(segment) if DESIGN_FUNCTIONS.contains(&segment.as_str()) => None,
            _ => Some(DocumentRoute::Document {
                db,
                id: format!("_design/{name}"),
            }),
        },
        [id, more @ ..] => {
            let design = id
                .strip_prefix("_design/")
                .is_some_and(|name| !name.is_empty());
            let local = id
                .strip_prefix("_local/")
                .is_some_and(|name| !name.is_empty());
            if id.is_empty() || (id.starts_with('_') && !design && !local) {
                return None;
            }
            if local && !more.is_empty() {
                return None;
            }
            if design {
                if let [function, _, id, ..] = more {
                    if function == "_show" || function == "_update" {
                        return document_of_function(db, id);
                    }
                }
            }
            if design
                && more
                    .first()
                    .is_some_and(|s| DESIGN_FUNCTIONS.contains(&s.as_str()))
            {
                return None;
            }
            Some(DocumentRoute::Document { db, id: id.clone() })
        }
    }
}

/// A show or update function run on a document: answered by the document's node (which
/// reads the design document from wherever it lives).
fn document_of_function<'a>(db: &'a str, id: &str) -> Option<DocumentRoute<'a>> {
    (!id.is_empty()).then(|| DocumentRoute::Document {
        db,
        id: id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::split_path;

    fn segments(path: &str) -> Vec<String> {
        split_path(path, false).expect("utf-8")
    }

    fn doc(path: &str, method: Method) -> Option<(String, String)> {
        let segments = segments(path);
        match document_route(&method, &segments)? {
            DocumentRoute::Document { db, id } => Some((db.to_owned(), id)),
            DocumentRoute::NewDocument { db } => Some((db.to_owned(), String::new())),
            DocumentRoute::NewIndex { db } => Some((db.to_owned(), "_index".into())),
        }
    }

    #[test]
    fn mango_index_writes_are_routed_by_their_design_document() {
        let pair = |db: &str, id: &str| Some((db.to_owned(), id.to_owned()));
        assert_eq!(doc("/db/_index", Method::POST), pair("db", "_index"));
        assert_eq!(doc("/db/_index", Method::GET), None);
        assert_eq!(
            doc("/db/_index/_design/x/json/by-a", Method::DELETE),
            pair("db", "_design/x")
        );
        assert_eq!(
            doc("/db/_index/x/json/by-a", Method::DELETE),
            pair("db", "_design/x")
        );
        assert_eq!(
            doc("/db/_index/_design%2Fx/json/by-a", Method::DELETE),
            pair("db", "_design/x")
        );
        assert_eq!(doc("/db/_index/_bulk_delete", Method::POST), None);
        assert_eq!(
            doc("/db/_design/d/_show/s/a%2Fb", Method::GET),
            pair("db", "a/b")
        );
        assert_eq!(
            doc("/db/_design/d/_update/u/x", Method::PUT),
            pair("db", "x")
        );
        assert_eq!(doc("/db/_design/d/_update/u", Method::POST), None);
        assert_eq!(doc("/db/_design/d/_show/s", Method::GET), None);
    }

    #[test]
    fn documents_attachments_and_design_documents_are_routed_by_their_id() {
        let pair = |db: &str, id: &str| Some((db.to_owned(), id.to_owned()));
        assert_eq!(doc("/db/a", Method::GET), pair("db", "a"));
        assert_eq!(doc("/db/a/file.txt", Method::PUT), pair("db", "a"));
        assert_eq!(doc("/db/a/dir/file.txt", Method::GET), pair("db", "a"));
        assert_eq!(doc("/db/a/_lookup", Method::POST), pair("db", "a"));
        assert_eq!(doc("/db/_design/x", Method::PUT), pair("db", "_design/x"));
        assert_eq!(doc("/db/_design%2Fx", Method::GET), pair("db", "_design/x"));
        assert_eq!(
            doc("/db/_design/x/att", Method::GET),
            pair("db", "_design/x")
        );
        assert_eq!(doc("/b$s$c/k", Method::GET), pair("b$s$c", "k"));
        assert_eq!(doc("/db", Method::POST), pair("db", ""));
        assert_eq!(doc("/db/_local/x", Method::PUT), pair("db", "_local/x"));
        assert_eq!(doc("/db/_local%2Fx", Method::GET), pair("db", "_local/x"));
    }

    #[test]
    fn whole_database_requests_local_documents_and_design_functions_stay_here() {
        for path in [
            "/db",
            "/",
            "/db/_all_docs",
            "/db/_changes",
            "/db/_find",
            "/db/_local/x/y",
            "/db/_local/",
            "/db/_design/x/_view/v",
            "/db/_design/x/_show/s",
            "/db/_design%2Fx/_info",
            "/db/_bulk_docs",
        ] {
            let method = if path == "/db/_bulk_docs" {
                Method::POST
            } else {
                Method::GET
            };
            assert_eq!(doc(path, method), None, "{path}");
        }
    }
}
