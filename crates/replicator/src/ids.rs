//! Replication ids, computed as CouchDB 3.x computes version 4 (`couch_replicator_ids.erl`):
//!
//! ```text
//! base = md5_hex(term_to_binary([ServerUUID, SourceTerm, TargetTerm | Filter ++ Extras]))
//! id   = base ++ "+continuous" (if continuous) ++ "+create_target" (if create_target)
//! ```
//!
//! - `ServerUUID`: the node's uuid (as `GET /` shows it) as a binary;
//! - an endpoint term is `{remote, User, Host, Port, Path, Headers, undefined}` with the
//!   normalised parts of [`crate::endpoint::RemoteDb`] (`User` the basic-auth user name or
//!   `undefined`, `Port` `default` for 80/5984/443, strings as Erlang strings), or settee's
//!   `{local, DbName}` for a database named without a URL;
//! - `Filter`: `[Code, QueryParams]` for a JavaScript filter (the function's source, trimmed),
//!   `[Name, QueryParams]` for built-in `_` filters, `[DocIds]` for `doc_ids`, `[Selector]`
//!   for a selector (members sorted by name at every level);
//! - `Extras`: `<<"winning_revs_only">>` when set, then `since_seq` when given.
//!
//! The `_local/<base>` documents on both sides hold the checkpoints. Because the id hashes the
//! server uuid, the same request made to two different nodes gets two ids, as in CouchDB.
//! One deviation: CouchDB normalises a selector with Mango's rules (`{"a": 1}` becomes
//! `{"a": {"$eq": 1}}`) before sorting; settee hashes the selector as written, sorted.

use md5::{Digest, Md5};
use serde_json::Value;

use crate::params::{Filter, ReplicationParams};
use crate::term::Term;

/// CouchDB's current replication id version (`?REP_ID_VERSION`).
pub const REP_ID_VERSION: u64 = 4;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicationId {
    /// The hash: names the `_local` checkpoint documents.
    pub base: String,
    /// `+continuous`, `+create_target`, both or nothing.
    pub ext: String,
}

impl ReplicationId {
    /// `base` followed by its options, as `_scheduler/jobs` and `_replicate` show it.
    pub fn full(&self) -> String {
        format!("{}{}", self.base, self.ext)
    }

    /// The checkpoint document id on both sides.
    pub fn checkpoint_doc_id(&self) -> String {
        format!("_local/{}", self.base)
    }
}

/// Computes the id. `filter_code` is the source of a JavaScript filter function, fetched from
/// the source's design document by the caller (ignored for other filters).
pub fn replication_id(
    params: &ReplicationParams,
    server_uuid: &str,
    filter_code: Option<&str>,
) -> ReplicationId {
    let mut terms = vec![
        Term::binary(server_uuid),
        params.source.id_term(),
        params.target.id_term(),
    ];
    match &params.filter {
        Filter::None => {}
        Filter::User { query_params, .. } => {
            terms.push(Term::binary(filter_code.unwrap_or("").trim()));
            terms.push(Term::from_json(query_params));
        }
        Filter::Builtin { name, query_params } => {
            terms.push(Term::binary(name));
            terms.push(Term::from_json(query_params));
        }
        Filter::DocIds(ids) => terms.push(Term::List(ids.iter().map(Term::binary).collect())),
        Filter::Selector(selector) => terms.push(Term::from_json(&sort_members(selector))),
    }
    if params.winning_revs_only {
        terms.push(Term::binary("winning_revs_only"));
    }
    if let Some(since) = &params.since_seq {
        terms.push(Term::from_json(since));
    }
    let digest = Md5::digest(Term::List(terms).to_binary());
    let mut ext = String::new();
    if params.continuous {
        ext.push_str("+continuous");
    }
    if params.create_target {
        ext.push_str("+create_target");
    }
    ReplicationId {
        base: settee_engine::hex(&digest),
        ext,
    }
}

/// Object members sorted by name at every level (CouchDB's `ejsort`), arrays kept in order.
fn sort_members(value: &Value) -> Value {
    match value {
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(key, value)| (key.clone(), sort_members(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_members).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Request;
    use serde_json::json;

    const UUID: &str = "9e4b44fcad0e0b7e8dee6f3e4c6f1a2b";

    fn params(mut body: Value) -> ReplicationParams {
        body["source"] = json!("http://127.0.0.1:15984/a");
        body["target"] = json!({"url": "http://bob:pw@example.org/b", "headers": {"h": "v"}});
        match Request::parse(&body) {
            Ok(Request::Start(params)) => *params,
            other => panic!("{other:?}"),
        }
    }

    // Golden vectors. Each expected hash was computed by Erlang/OTP 25 as
    //   md5(term_to_binary(Base, [{minor_version, 1}]))
    // over the terms CouchDB's `replication_id(Rep, 4)` builds for the same request, with
    //   S = {remote, undefined, "127.0.0.1", 15984, "/a/", [], undefined}
    //   T = {remote, "bob", "example.org", default, "/b/", [{"h","v"}], undefined}
    // (the password never enters the term; the trailing slash is CouchDB's).
    #[test]
    fn plain_replication() {
        // [UUID, S, T]
        let id = replication_id(&params(json!({})), UUID, None);
        assert_eq!(id.base, "afcf45e564336961096ed5030eae7b66");
        assert_eq!(id.ext, "");
        let id = replication_id(
            &params(json!({"continuous": true, "create_target": true})),
            UUID,
            None,
        );
        assert_eq!(
            id.full(),
            "afcf45e564336961096ed5030eae7b66+continuous+create_target"
        );
    }

    #[test]
    fn doc_ids_are_hashed_sorted() {
        // [UUID, S, T, [<<"a">>, <<"b">>]]
        let id = replication_id(&params(json!({"doc_ids": ["b", "a"]})), UUID, None);
        assert_eq!(id.base, "113a8812335b7fdb8314ed657c6be6a7");
    }

    #[test]
    fn js_filter_winning_revs_and_since_seq() {
        // [UUID, S, T, <<"function(doc, req) { return true; }">>, {[{<<"x">>, 1}]},
        //  <<"winning_revs_only">>, <<"5-abc">>]
        let body = json!({
            "filter": "app/mine", "query_params": {"x": 1},
            "winning_revs_only": true, "since_seq": "5-abc"
        });
        let code = "  function(doc, req) { return true; }\n";
        let id = replication_id(&params(body), UUID, Some(code));
        assert_eq!(id.base, "8c1d02c7cf7a085d669fd8c6394978c7");
    }

    #[test]
    fn selector_members_are_sorted() {
        // [UUID, S, T, {[{<<"a">>, {[{<<"$gt">>, 1.5}]}}, {<<"b">>, [null, true, -300]}]}]
        let body = json!({"selector": {"b": [null, true, -300], "a": {"$gt": 1.5}}});
        let id = replication_id(&params(body), UUID, None);
        assert_eq!(id.base, "720162d3d6ea066f8c36cba918d98d55");
    }

    #[test]
    fn local_endpoint() {
        // [UUID, {local, <<"a">>}, T]
        let mut params = params(json!({}));
        params.source = crate::endpoint::Endpoint::Local { db: "a".into() };
        assert_eq!(
            replication_id(&params, UUID, None).base,
            "ae8badb75f4a7251fd01220cd776cfa1"
        );
    }
}
