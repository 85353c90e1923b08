//! `_find` end to end over a real bucket: random documents are written through the engine,
//! random selectors planned and executed, and the documents returned — paged through with a
//! small limit and bookmarks — must be exactly those a brute-force filter over every document
//! keeps: once each, in index order. Runs with no JSON index, with indexes the planner may
//! choose, and with an index forced by `use_index` (partial ones included). JSON indexes are
//! built by the view indexer with Mango's native mapper, as the server does.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use common::{doc, selector};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use settee_engine::{DocRecord, DocUpdate, Engine, EngineOptions, Keyspace};
use settee_mango::{execute, open_index, plan, FindRequest, Index, IndexKind, Purpose, Query};
use settee_views::{Views, ViewsConfig};

struct Fixture {
    _dir: tempfile::TempDir,
    engine: Arc<Engine>,
    views: Arc<Views>,
    runtime: tokio::runtime::Runtime,
    next_bucket: AtomicUsize,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine =
            Arc::new(Engine::open(dir.path(), EngineOptions::default()).expect("open engine"));
        let views = Views::new(engine.clone(), ViewsConfig::default()).expect("views");
        Fixture {
            _dir: dir,
            engine,
            views,
            runtime: tokio::runtime::Runtime::new().expect("runtime"),
            next_bucket: AtomicUsize::new(0),
        }
    })
}

const INDEX_DEFS: [&str; 5] = [
    r#"{"index": {"fields": ["a"]}, "ddoc": "d", "name": "a"}"#,
    r#"{"index": {"fields": ["a", "b"]}, "ddoc": "d", "name": "ab"}"#,
    r#"{"index": {"fields": [{"b": "desc"}]}, "ddoc": "e", "name": "b"}"#,
    r#"{"index": {"fields": ["n.x", "c"]}, "ddoc": "e", "name": "nxc"}"#,
    r#"{"index": {"fields": ["c"], "partial_filter_selector": {"a": {"$exists": true}}}, "ddoc": "p", "name": "pc"}"#,
];

fn indexes(chosen: &[bool]) -> Vec<Index> {
    common::indexes_from(&INDEX_DEFS, chosen)
}

/// The document as a client sees it: `_id`, `_rev`, then the body.
fn render(id: &str, record: &DocRecord) -> Option<Vec<u8>> {
    let leaf = record.winner()?;
    if leaf.deleted {
        return None;
    }
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&leaf.body) else {
        return None;
    };
    let mut doc = Map::new();
    doc.insert("_id".into(), json!(id));
    doc.insert("_rev".into(), json!(leaf.rev.to_string()));
    doc.extend(body);
    Some(Value::Object(doc).to_string().into_bytes())
}

/// Runs the query page by page (`limit` documents each, following bookmarks) and returns every
/// document returned, in order.
fn find_all(
    bucket: &Arc<settee_engine::Bucket>,
    mut body: Value,
    indexes: &[Index],
    page: u64,
) -> Result<(Vec<Value>, Index), String> {
    let mut out = Vec::new();
    body["limit"] = json!(page);
    // A bookmark that does not move on would page forever: no result set here needs more.
    for _ in 0..100 {
        let request = FindRequest::parse(&body).map_err(|e| e.reason().to_string())?;
        let plan = plan(&Query::of(&request), indexes, Purpose::Find)
            .map_err(|e| e.reason().to_string())?;
        let index = plan.index.clone().expect("find plans pick an index");
        let fixture = fixture();
        let keyspace = Keyspace::default_of(bucket.clone());
        let group = fixture
            .runtime
            .block_on(async {
                let group = open_index(&fixture.views, &keyspace, &index).await?;
                if let Some(group) = &group {
                    group.wait_for(&bucket.high_seqnos()).await?;
                }
                Ok::<_, settee_views::ViewError>(group)
            })
            .map_err(|e| e.to_string())?;
        let mut docs = Vec::new();
        let outcome = execute(
            &keyspace,
            group.as_deref(),
            &request,
            &plan,
            &render,
            &mut |doc: &[u8], _: &settee_mango::bookmark::Bookmark| {
                docs.push(serde_json::from_slice::<Value>(doc).expect("emitted JSON"));
                true
            },
            None,
        )
        .map_err(|e| e.reason().to_string())?;
        assert_eq!(outcome.stats.results_returned, docs.len() as u64);
        let done = (docs.len() as u64) < page;
        out.extend(docs);
        if done {
            return Ok((out, index));
        }
        body["bookmark"] = json!(outcome.bookmark);
    }
    Err("bookmarks did not reach the end in 100 pages".into())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn find_returns_exactly_the_matching_documents(
        selector in selector(),
        bodies in prop::collection::vec(doc(), 0..30),
        chosen in prop::collection::vec(any::<bool>(), INDEX_DEFS.len()),
        force in prop::option::of(0usize..INDEX_DEFS.len()),
        page in 1u64..6,
    ) {
        let fixture = fixture();
        let name = format!("p{}", fixture.next_bucket.fetch_add(1, Ordering::Relaxed));
        let bucket = fixture.runtime.block_on(async {
            fixture.engine.create_bucket(&name, 8).await.expect("bucket");
            let bucket = fixture.engine.bucket(&name).expect("exists");
            let updates = bodies
                .iter()
                .enumerate()
                .map(|(i, body)| DocUpdate {
                    key: format!("doc{i:02}").into_bytes(),
                    parent: None,
                    history: Vec::new(),
                    deleted: false,
                    body: Bytes::from(Value::Object(body.clone()).to_string()),
                    attachments: Vec::new(),
                })
                .collect();
            bucket.update_docs(updates, true).await.expect("writes");
            bucket
        });
        let mut chosen = chosen;
        let mut body = json!({"selector": selector});
        if let Some(forced) = force {
            chosen[forced] = true;
            let def: Value = serde_json::from_str(INDEX_DEFS[forced]).expect("json");
            body["use_index"] = json!([def["ddoc"], def["name"]]);
        }
        let indexes = indexes(&chosen);
        let Ok(request) = FindRequest::parse(&body) else {
            return Ok(());
        };
        let (found, index) = match find_all(&bucket, body, &indexes, page) {
            Ok(found) => found,
            Err(error) => return Err(TestCaseError::fail(error)),
        };
        // The oracle: every document, rendered, filtered by the selector (and by the partial
        // filter when the chosen index has one: such an index answers for its documents only).
        let mut expected: Vec<Value> = Vec::new();
        for item in bucket.scan_docs(Default::default()) {
            let (key, record) = item.expect("scan");
            let id = String::from_utf8(key).expect("utf-8");
            let doc: Value = serde_json::from_slice(&render(&id, &record).expect("live"))
                .expect("json");
            let in_partial = index.partial_filter.as_ref().is_none_or(|f| f.matches(&doc));
            if request.selector.matches(&doc) && in_partial {
                expected.push(doc);
            }
        }
        // Index order: by key, then id; `_all_docs` is id order already.
        if index.kind == IndexKind::Json {
            let key = |doc: &Value| json!(index.key_of(doc).expect("matching docs are indexed"));
            expected.sort_by(|x, y| {
                // Index keys ascend whatever directions the fields were declared with.
                settee_mango::collate(&key(x), &key(y)).then_with(|| x["_id"].as_str().cmp(&y["_id"].as_str()))
            });
        }
        let ids = |docs: &[Value]| -> Vec<String> {
            docs.iter().map(|d| d["_id"].as_str().unwrap_or_default().to_string()).collect()
        };
        prop_assert_eq!(
            ids(&found), ids(&expected),
            "selector {} index {} page {}", request.selector.to_json(), index.name, page
        );
        prop_assert_eq!(found, expected);
    }
}
