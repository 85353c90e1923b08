//! `validate_doc_update`: the engine's [`WriteValidator`], run on the views' JavaScript pool.
//!
//! Per keyspace (bucket, collection), the design documents that have a validation function
//! are read once and compiled into one [`Program`] each, cached under the bucket's
//! [`Bucket::design_stamp`]: a design document written anywhere, the design documents a
//! cluster node gathered from the others replaced, or a bucket created or dropped, makes the
//! next write read them again. A keyspace without validation functions
//! costs a write one cache lookup.
//!
//! Each function runs as CouchDB runs it: `fn.call(ddoc, newDoc, oldDoc, userCtx, secObj)`,
//! in design document id order, the first refusal deciding. `newDoc` and `oldDoc` carry `_id`,
//! `_rev`, `_revisions`, `_deleted` (when true) and `_attachments` stubs around their fields;
//! `userCtx` is `{db, name, roles}`; `secObj` the bucket's `_security` object.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use settee_engine::{
    Bucket, Leaf, ProposedWrite, Refusal, RevId, ScanRange, Verdict, WriteValidator, Writer,
};
use settee_js::{JsPool, Program, ProgramSpec, Validation};

/// The validation functions of one keyspace, as of one design stamp.
struct Cached {
    stamp: (u64, u64),
    functions: Arc<Vec<Arc<Program>>>,
}

pub(crate) struct DesignValidators {
    js: Arc<JsPool>,
    /// By (bucket id, collection id).
    cache: Mutex<HashMap<(u32, u32), Cached>>,
}

impl DesignValidators {
    pub(crate) fn new(js: Arc<JsPool>) -> DesignValidators {
        DesignValidators {
            js,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The keyspace's validation functions, read again when the stamp has moved.
    fn functions(&self, bucket: &Bucket, collection: u32) -> Arc<Vec<Arc<Program>>> {
        // Read before the design documents: a change made meanwhile moves it again.
        let stamp = bucket.design_stamp();
        let key = (bucket.id(), collection);
        if let Some(cached) = self.cache.lock().get(&key) {
            if cached.stamp == stamp {
                return cached.functions.clone();
            }
        }
        let functions = Arc::new(read_functions(bucket, collection));
        self.cache.lock().insert(
            key,
            Cached {
                stamp,
                functions: functions.clone(),
            },
        );
        functions
    }
}

/// Every live design document of the keyspace with a `validate_doc_update` string, in id
/// order: the node's own, and those gathered from the cluster (`Bucket::shared_designs`), the
/// higher revision of a document winning (a deletion here included). A design document that
/// does not decode is left out (it was checked when written).
fn read_functions(bucket: &Bucket, collection: u32) -> Vec<Arc<Program>> {
    let range = ScanRange {
        collection,
        start: Some(b"_design/".to_vec()),
        end: Some(b"_design0".to_vec()),
        inclusive_end: false,
        descending: false,
    };
    // id -> (revision, the document when live)
    let mut designs: BTreeMap<String, (String, Option<Map<String, Value>>)> = BTreeMap::new();
    for item in bucket.scan_docs(range) {
        let Ok((key, record)) = item else { continue };
        let Some(winner) = record.winner() else {
            continue;
        };
        let ddoc = if winner.deleted {
            None
        } else {
            match serde_json::from_slice::<Map<String, Value>>(&winner.body) {
                Ok(ddoc) => Some(ddoc),
                Err(_) => continue,
            }
        };
        let id = String::from_utf8_lossy(&key).into_owned();
        designs.insert(id, (winner.rev.to_string(), ddoc));
    }
    for shared in bucket.shared_designs().iter() {
        if shared.collection != collection {
            continue;
        }
        let newer = designs
            .get(&shared.id)
            .is_none_or(|(rev, _)| later_rev(&shared.rev, rev));
        if let (true, Ok(ddoc)) = (newer, serde_json::from_slice(&shared.json)) {
            designs.insert(shared.id.clone(), (shared.rev.clone(), Some(ddoc)));
        }
    }
    let mut functions = Vec::new();
    for (id, (rev, ddoc)) in designs {
        let Some(mut ddoc) = ddoc else { continue };
        let Some(source) = ddoc
            .get("validate_doc_update")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            continue;
        };
        ddoc.insert("_id".into(), Value::String(id));
        ddoc.insert("_rev".into(), Value::String(rev));
        functions.push(Arc::new(Program::new(&ProgramSpec {
            validate: Some(source),
            lib: Value::Object(ddoc),
            ..ProgramSpec::default()
        })));
    }
    functions
}

/// Whether revision `a` (`N-hash`) is later than `b`: the higher generation, then the higher
/// hash, as CouchDB picks a winner.
fn later_rev(a: &str, b: &str) -> bool {
    let parse = |rev: &str| {
        let (generation, hash) = rev.split_once('-').unwrap_or(("0", rev));
        (generation.parse::<u64>().unwrap_or(0), hash.to_string())
    };
    parse(a) > parse(b)
}

impl WriteValidator for DesignValidators {
    fn active(&self, bucket: &Bucket, collection: u32) -> bool {
        !self.functions(bucket, collection).is_empty()
    }

    fn validate<'a>(
        &'a self,
        bucket: &'a Bucket,
        collection: u32,
        writer: &'a Writer,
        write: ProposedWrite<'a>,
    ) -> Verdict<'a> {
        Box::pin(async move {
            let functions = self.functions(bucket, collection);
            if functions.is_empty() {
                return Ok(());
            }
            let id = String::from_utf8_lossy(write.key);
            let new_doc = doc_json(&id, write.new, Some(&write.history)).to_string();
            let old_doc = write
                .old
                .map_or(Value::Null, |old| doc_json(&id, old, None))
                .to_string();
            let user_ctx = json!({
                "db": bucket.door_name(collection),
                "name": writer.name,
                "roles": writer.roles,
            })
            .to_string();
            let sec_obj = bucket.with_security(Value::to_string);
            for program in functions.iter() {
                let verdict = self
                    .js
                    .validate(
                        program.clone(),
                        new_doc.clone(),
                        old_doc.clone(),
                        user_ctx.clone(),
                        sec_obj.clone(),
                    )
                    .result()
                    .await;
                match verdict {
                    Ok(Validation::Allowed) => {}
                    Ok(Validation::Forbidden(reason)) => return Err(Refusal::Forbidden(reason)),
                    Ok(Validation::Unauthorized(reason)) => {
                        return Err(Refusal::Unauthorized(reason))
                    }
                    Ok(Validation::Failed(reason)) => return Err(Refusal::Failed(reason)),
                    // A function that cannot run (time or memory limit, a compile error)
                    // refuses: validation never fails open.
                    Err(error) => return Err(Refusal::Failed(error.to_string())),
                }
            }
            Ok(())
        })
    }
}

/// A revision as CouchDB gives it to validation functions.
fn doc_json(id: &str, leaf: &Leaf, history: Option<&[RevId]>) -> Value {
    let mut doc = Map::new();
    doc.insert("_id".into(), Value::String(id.to_string()));
    doc.insert("_rev".into(), Value::String(leaf.rev.to_string()));
    if leaf.deleted {
        doc.insert("_deleted".into(), Value::Bool(true));
    }
    if let Some(history) = history {
        doc.insert(
            "_revisions".into(),
            json!({
                "start": leaf.rev.pos,
                "ids": history.iter().map(|rev| rev.hash.as_str()).collect::<Vec<_>>(),
            }),
        );
    }
    if !leaf.attachments.is_empty() {
        let stubs: Map<String, Value> = leaf
            .attachments
            .iter()
            .map(|meta| {
                let stub = json!({
                    "content_type": meta.content_type,
                    "revpos": meta.revpos,
                    "length": meta.identity_length(),
                    "stub": true,
                });
                (meta.name.clone(), stub)
            })
            .collect();
        doc.insert("_attachments".into(), Value::Object(stubs));
    }
    if leaf.json {
        if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(&leaf.body) {
            for (name, value) in fields {
                doc.entry(name).or_insert(value);
            }
        }
    }
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::later_rev;

    #[test]
    fn a_later_revision_is_the_higher_generation_then_the_higher_hash() {
        assert!(later_rev("10-aa", "9-ff"));
        assert!(later_rev("2-b", "2-a"));
        assert!(!later_rev("2-a", "2-a"));
        assert!(!later_rev("1-ff", "2-00"));
    }
}
