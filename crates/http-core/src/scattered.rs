//! Which whole-bucket CouchDB-door requests a cluster's front node sends to every node holding
//! active vbuckets of the database (docs/format/cluster-transport.md, "Whole-bucket HTTP
//! requests"), from their method and decoded path: settee-http's `scatter*.rs`
//! answer them. Pure.

use hyper::Method;
use serde_json::Value;

/// The whole-bucket requests that are scattered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scattered {
    /// `_all_docs` and `_design_docs`.
    AllDocs,
    /// A `_changes` feed of any type (normal, longpoll, continuous, eventsource); a normal
    /// `descending=true` feed is merged newest first.
    Changes,
    /// `GET /db`: document counts and sizes summed, `update_seq` naming every vbucket.
    DbInfo,
    /// Split by document: each node gets the documents of its vbuckets.
    BulkDocs,
    BulkGet,
    RevsDiff,
    /// `POST _missing_revs`, split by document as `_revs_diff` is.
    MissingRevs,
    /// `POST _purge`, split by document: each node purges the documents of its vbuckets.
    Purge,
    /// A view query (`settee-http-scatter` views.rs).
    View,
    /// `_find`, `_explain`, `GET _index` (`settee-http-scatter` mango.rs).
    Mango,
    /// `POST _index/_bulk_delete`, split by design document (`settee-http-scatter` mango.rs).
    IndexBulkDelete,
    /// `POST _view_cleanup`, with every design document of the database (`settee-http-scatter` mango.rs).
    ViewCleanup,
    /// `PUT _security` and `PUT _revs_limit`: set on every node, as CouchDB sets them on every
    /// shard; `POST _compact`: every node compacts its own vbuckets.
    EveryNode,
    /// `GET _design/{d}/_info`: every node's index of the design document, summed.
    DesignInfo,
    /// `POST _compact/{ddoc}`: every node compacts its index of the design document.
    CompactDesign,
}

impl Scattered {
    /// `(list member, id member)` of a body split by document (`None`: an object split by
    /// member name, `_revs_diff`).
    pub fn items(self) -> Option<(&'static str, &'static str)> {
        match self {
            Scattered::BulkDocs => Some(("docs", "_id")),
            Scattered::BulkGet => Some(("docs", "id")),
            _ => None,
        }
    }
}

/// Which scattered request `method` on `path` is, with its database.
pub fn scattered<'a>(method: &Method, path: &'a [String]) -> Option<(&'a str, Scattered)> {
    if let [db] = path {
        return (*method == Method::GET && !db.starts_with('_')).then_some((db, Scattered::DbInfo));
    }
    if let [db, what] = path {
        if what == "_view_cleanup" && *method == Method::POST && !db.starts_with('_') {
            return Some((db, Scattered::ViewCleanup));
        }
        let settings = what == "_security" || what == "_revs_limit";
        if settings && *method == Method::PUT && !db.starts_with('_') {
            return Some((db, Scattered::EveryNode));
        }
        if what == "_compact" && *method == Method::POST && !db.starts_with('_') {
            return Some((db, Scattered::EveryNode));
        }
    }
    if let [db, compact, _] = path {
        if compact == "_compact" && *method == Method::POST && !db.starts_with('_') {
            return Some((db, Scattered::CompactDesign));
        }
    }
    if let [db, design, _, info] = path {
        let design_info = design == "_design" && info == "_info" && *method == Method::GET;
        if design_info && !db.starts_with('_') {
            return Some((db, Scattered::DesignInfo));
        }
    }
    if let [db, index, bulk_delete] = path {
        if index == "_index" && bulk_delete == "_bulk_delete" && *method == Method::POST {
            return (!db.starts_with('_')).then_some((db, Scattered::IndexBulkDelete));
        }
    }
    if let Some((db, _, _)) = mango_request(method, path) {
        return Some((db, Scattered::Mango));
    }
    if let Some(view) = ViewPath::of(path) {
        return matches!(*method, Method::GET | Method::POST).then_some((view.db, Scattered::View));
    }
    let [db, what] = path else {
        return None;
    };
    if db.starts_with('_') || !matches!(*method, Method::GET | Method::POST) {
        return None;
    }
    let post = *method == Method::POST;
    match what.as_str() {
        "_bulk_docs" if post => Some((db, Scattered::BulkDocs)),
        "_bulk_get" if post => Some((db, Scattered::BulkGet)),
        "_revs_diff" if post => Some((db, Scattered::RevsDiff)),
        "_missing_revs" if post => Some((db, Scattered::MissingRevs)),
        "_purge" if post => Some((db, Scattered::Purge)),
        "_all_docs" | "_design_docs" => Some((db, Scattered::AllDocs)),
        "_changes" => Some((db, Scattered::Changes)),
        _ => None,
    }
}

/// The vbucket whose node answers for an `_all_docs` key: a document id's, and vbucket 0 for
/// a key that is not a string (its row is `not_found` wherever it is answered).
pub fn key_vbucket(key: &Value, vbuckets: u16) -> u16 {
    match key {
        Value::String(id) => settee_engine::vbucket::vbucket_of(id.as_bytes(), vbuckets),
        _ => 0,
    }
}

/// A view query's path: `/db/_design/d/_view/v[/queries]` or
/// `/db/_partition/p/_design/d/_view/v`.
pub struct ViewPath<'a> {
    pub db: &'a str,
    pub ddoc: &'a str,
    pub view: &'a str,
    pub partition: Option<&'a str>,
    /// `/queries`: the body's `queries`, each answered as one query.
    pub queries: bool,
}

impl<'a> ViewPath<'a> {
    pub fn of(path: &'a [String]) -> Option<ViewPath<'a>> {
        let (db, partition, rest) = match path {
            [db, marker, partition, rest @ ..] if marker == "_partition" => {
                (db, Some(partition.as_str()), rest)
            }
            [db, rest @ ..] => (db, None, rest),
            [] => return None,
        };
        if db.starts_with('_') {
            return None;
        }
        let (ddoc, view, queries) = match rest {
            [design, ddoc, marker, view] if design == "_design" && marker == "_view" => {
                (ddoc, view, false)
            }
            [design, ddoc, marker, view, last]
                if design == "_design"
                    && marker == "_view"
                    && last == "queries"
                    && partition.is_none() =>
            {
                (ddoc, view, true)
            }
            _ => return None,
        };
        Some(ViewPath {
            db,
            ddoc,
            view,
            partition,
            queries,
        })
    }

    /// The request target of one query of this view (without `/queries`).
    pub fn target(&self, query: &[(String, String)]) -> String {
        use crate::location::encode_segment as enc;
        let mut target = format!("/{}", enc(self.db));
        if let Some(partition) = self.partition {
            target.push_str(&format!("/_partition/{}", enc(partition)));
        }
        target.push_str(&format!(
            "/_design/{}/_view/{}",
            enc(self.ddoc),
            enc(self.view)
        ));
        if !query.is_empty() {
            let mut encoded = form_urlencoded::Serializer::new(String::new());
            for (name, value) in query {
                encoded.append_pair(name, value);
            }
            target.push('?');
            target.push_str(&encoded.finish());
        }
        target
    }
}

/// A Mango request of a database: `_find`, `_explain` (also under `/_partition/p/`), or the
/// listing of its indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MangoRequest {
    Find,
    Explain,
    ListIndexes,
}

/// Which Mango request `method` on `path` is, with its database and partition.
pub fn mango_request<'a>(
    method: &Method,
    path: &'a [String],
) -> Option<(&'a str, Option<&'a str>, MangoRequest)> {
    let (db, partition, what) = match path {
        [db, what] => (db, None, what),
        [db, marker, partition, what] if marker == "_partition" => {
            (db, Some(partition.as_str()), what)
        }
        _ => return None,
    };
    if db.starts_with('_') {
        return None;
    }
    let request = match (what.as_str(), method) {
        ("_find", &Method::POST) => MangoRequest::Find,
        ("_explain", &Method::POST) => MangoRequest::Explain,
        ("_index", &Method::GET) if partition.is_none() => MangoRequest::ListIndexes,
        _ => return None,
    };
    Some((db, partition, request))
}
