//! The sandbox through the pool's public calls: CouchDB's map globals, errors, require, and
//! the time and memory limits (after which the pool keeps serving).

use std::sync::Arc;

use serde_json::{json, Value};
use settee_js::{JsConfig, JsError, JsPool, Program, ProgramSpec, Validation};

fn pool(timeout_ms: u64) -> JsPool {
    JsPool::new(JsConfig {
        threads: 2,
        timeout_ms,
        memory_bytes_max: 64 << 20,
        ..JsConfig::default()
    })
    .expect("pool")
}

fn program(maps: &[&str]) -> Arc<Program> {
    Arc::new(Program::new(&ProgramSpec {
        names: (0..maps.len()).map(|i| format!("v{i}")).collect(),
        maps: maps.iter().map(|m| m.to_string()).collect(),
        reduces: vec![None; maps.len()],
        lib: json!({"views": {"lib": {"util": "exports.twice = function (x) { return require('./more').k * x; };", "more": "exports.k = 2;"}}}),
        ..ProgramSpec::default()
    }))
}

fn rows(output: &settee_js::MapOutput) -> serde_json::Value {
    json!(output
        .rows
        .iter()
        .map(|doc| doc
            .iter()
            .map(|view| view
                .iter()
                .map(|(k, v)| json!([
                    k,
                    serde_json::from_str::<serde_json::Value>(v.get()).expect("value")
                ]))
                .collect::<Vec<_>>())
            .collect::<Vec<_>>())
        .collect::<Vec<_>>())
}

#[test]
fn maps_with_couchdb_globals_and_skips_throwing_documents() {
    let pool = pool(5000);
    let program = program(&[
        "function (doc) { if (isArray(doc.tags)) { emit(doc._id, sum(doc.tags)); } }",
        "function (doc) { emit(toJSON(doc.n), null); if (doc.n === 2) throw new Error('boom'); }",
        "function (doc) { emit(require('views/lib/util').twice(doc.n)); }",
    ]);
    let docs = json!([{"_id": "a", "n": 1, "tags": [1, 2]}, {"_id": "b", "n": 2}]).to_string();
    let output = pool.map(program, docs).wait().expect("map");
    assert_eq!(
        rows(&output),
        json!([
            [[["a", 3]], [["1", null]], [[2, null]]],
            [[], [], [[4, null]]]
        ])
    );
    assert_eq!(output.errors.len(), 1);
    assert_eq!((output.errors[0].0, output.errors[0].1), (1, 1));
    assert!(output.errors[0].2.contains("boom"), "{:?}", output.errors);
}

#[test]
fn documents_are_frozen_for_map_functions() {
    let pool = pool(5000);
    let program = program(&[
        "function (doc) { doc.n = 99; }",
        "function (doc) { emit(doc.n, null); }",
    ]);
    let output = pool
        .map(program, json!([{"_id": "a", "n": 1}]).to_string())
        .wait()
        .expect("map");
    assert_eq!(rows(&output), json!([[[], [[1, null]]]]));
}

#[test]
fn functions_that_do_not_compile_are_named() {
    let pool = pool(5000);
    let error = pool
        .check(program(&["function (doc) { emit(doc._id "]))
        .wait();
    match error {
        Err(JsError::Compile(reason)) => assert!(
            reason.starts_with("Compilation of the map function in the 'v0' view failed"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    match pool.check(program(&["42"])).wait() {
        Err(JsError::Compile(reason)) => {
            assert!(reason.contains("does not eval to a function"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pool.check(program(&["function (doc) {}"])).wait(), Ok(()));
}

#[test]
fn a_function_followed_by_semicolons_compiles_as_in_couchdb() {
    let pool = pool(5000);
    let semicolons = program(&[
        "function (doc) { emit(doc._id, 1); };",
        "function (doc) { emit(doc.n, 2); } ; \n ;\n",
    ]);
    assert_eq!(pool.check(semicolons.clone()).wait(), Ok(()));
    let output = pool
        .map(semicolons, json!([{"_id": "a", "n": 7}]).to_string())
        .wait()
        .expect("map");
    assert_eq!(rows(&output), json!([[[["a", 1]], [[7, 2]]]]));
    // What follows the semicolon is not dropped: still refused.
    assert!(matches!(
        pool.check(program(&["function (doc) {}; 1"])).wait(),
        Err(JsError::Compile(_))
    ));
}

#[test]
fn an_endless_loop_is_stopped_and_the_pool_keeps_serving() {
    let pool = pool(300);
    let result = pool
        .map(
            program(&["function (doc) { while (true) {} }"]),
            "[{}]".into(),
        )
        .wait();
    assert!(matches!(result, Err(JsError::Timeout(300))), "{result:?}");
    let fine = pool
        .map(program(&["function (doc) { emit(1, 2); }"]), "[{}]".into())
        .wait()
        .expect("map after a timeout");
    assert_eq!(rows(&fine), json!([[[[1, 2]]]]));
}

#[test]
fn a_memory_hog_is_stopped_and_the_pool_keeps_serving() {
    let pool = pool(20_000);
    let hog =
        "function (doc) { var all = []; while (true) { all.push(new Array(100000).fill(doc)); } }";
    let result = pool.map(program(&[hog]), "[{}]".into()).wait();
    assert!(matches!(result, Err(JsError::OutOfMemory)), "{result:?}");
    let fine = pool
        .map(
            program(&["function (doc) { emit(null, 1); }"]),
            "[{}]".into(),
        )
        .wait()
        .expect("map after running out of memory");
    assert_eq!(rows(&fine), json!([[[[null, 1]]]]));
}

#[test]
fn javascript_reduce_and_rereduce() {
    let pool = pool(5000);
    let program = Arc::new(Program::new(&ProgramSpec {
        names: vec!["v".into()],
        maps: vec!["function (doc) {}".into()],
        reduces: vec![Some(
            "function (keys, values, rereduce) { return rereduce ? sum(values) * 10 : values.length; }".into(),
        )],
        ..ProgramSpec::default()
    }));
    let first = pool
        .reduce(
            program.clone(),
            0,
            "[[1,\"a\"],[2,\"b\"]]".into(),
            "[5,6]".into(),
            false,
        )
        .wait();
    assert_eq!(first, Ok(json!(2)));
    let again = pool
        .reduce(program.clone(), 0, "null".into(), "[2,3]".into(), true)
        .wait();
    assert_eq!(again, Ok(json!(50)));
    let thrown = Arc::new(Program::new(&ProgramSpec {
        names: vec!["v".into()],
        maps: vec!["function (doc) {}".into()],
        reduces: vec![Some(
            "function () { throw {error: 'nope', reason: 'bad'}; }".into(),
        )],
        ..ProgramSpec::default()
    }));
    assert_eq!(
        pool.reduce(thrown, 0, "[]".into(), "[]".into(), false)
            .wait(),
        Err(JsError::Script("nope: bad".into()))
    );
}

fn filters(name: &str, source: &str) -> Arc<Program> {
    let mut spec = ProgramSpec::default();
    spec.filters.insert(name.into(), source.into());
    Arc::new(Program::new(&spec))
}

#[test]
fn a_filter_answers_throws_and_stops_at_the_callers_limit() {
    let pool = pool(20_000);
    let limit = std::time::Duration::from_secs(20);
    let keeps = filters(
        "f",
        "function (doc, req) { return doc.type === req.query.type; }",
    );
    let answer = |doc: &str| {
        pool.filter(
            keeps.clone(),
            "f".into(),
            doc.into(),
            r#"{"query":{"type":"a"}}"#.into(),
            limit,
        )
        .wait()
    };
    assert_eq!(answer(r#"{"type":"a"}"#), Ok(true));
    assert_eq!(answer(r#"{"type":"b"}"#), Ok(false));

    let throws = filters(
        "f",
        "function (doc) { throw new TypeError('no ' + doc.n); }",
    );
    let thrown = pool
        .filter(throws, "f".into(), r#"{"n":1}"#.into(), "{}".into(), limit)
        .wait();
    assert_eq!(thrown, Err(JsError::Script("TypeError: no 1".into())));

    // The caller's limit (what is left of a request's budget) wins over the pool's 20 s.
    let loops = filters("f", "function (doc) { while (true) {} }");
    let stopped = pool
        .filter(
            loops,
            "f".into(),
            "{}".into(),
            "{}".into(),
            std::time::Duration::from_millis(200),
        )
        .wait();
    assert_eq!(stopped, Err(JsError::Timeout(200)));
    assert_eq!(
        answer(r#"{"type":"a"}"#),
        Ok(true),
        "the pool keeps serving"
    );
}

#[test]
fn validate_doc_update_answers_as_couchdb_reads_what_it_throws() {
    let pool = pool(5000);
    let ddoc = json!({
        "_id": "_design/v",
        "owner_field": "author",
        "lib": {"rules": "exports.minimum = 2;"},
    });
    let program = Arc::new(Program::new(&ProgramSpec {
        validate: Some(
            "function (newDoc, oldDoc, userCtx, secObj) {
                if (newDoc.kind === 'error') { null.crash; }
                if (newDoc.kind === 'string') { throw 'plain'; }
                if (newDoc.kind === 'other') { throw {bad: 'x'}; }
                if (!userCtx.name) { throw({unauthorized: 'log in'}); }
                if (newDoc[this.owner_field] !== userCtx.name) { throw({forbidden: 'not yours'}); }
                if ((newDoc.n || 0) < require('lib/rules').minimum) { throw({forbidden: 'too small'}); }
                if (oldDoc && oldDoc.locked && secObj.admins.names.indexOf(userCtx.name) < 0) {
                    throw({forbidden: 'locked'});
                }
            };"
            .into(),
        ),
        lib: ddoc,
        ..ProgramSpec::default()
    }));
    let run = |new: Value, old: Value, user: Value| {
        pool.validate(
            program.clone(),
            new.to_string(),
            old.to_string(),
            user.to_string(),
            json!({"admins": {"names": ["boss"]}}).to_string(),
        )
        .wait()
    };
    let bob = json!({"name": "bob", "roles": []});
    assert_eq!(
        run(json!({"author": "bob", "n": 3}), Value::Null, bob.clone()),
        Ok(Validation::Allowed)
    );
    assert_eq!(
        run(
            json!({"author": "bob", "n": 3}),
            Value::Null,
            json!({"name": null, "roles": []})
        ),
        Ok(Validation::Unauthorized("log in".into()))
    );
    assert_eq!(
        run(json!({"author": "eve", "n": 3}), Value::Null, bob.clone()),
        Ok(Validation::Forbidden("not yours".into()))
    );
    assert_eq!(
        run(json!({"author": "bob", "n": 1}), Value::Null, bob.clone()),
        Ok(Validation::Forbidden("too small".into()))
    );
    assert_eq!(
        run(
            json!({"author": "bob", "n": 3}),
            json!({"locked": true}),
            bob.clone()
        ),
        Ok(Validation::Forbidden("locked".into()))
    );
    assert_eq!(
        run(
            json!({"author": "boss", "n": 3}),
            json!({"locked": true}),
            json!({"name": "boss", "roles": []})
        ),
        Ok(Validation::Allowed)
    );
    assert_eq!(
        run(json!({"kind": "string"}), Value::Null, bob.clone()),
        Ok(Validation::Failed("plain".into()))
    );
    assert_eq!(
        run(json!({"kind": "other"}), Value::Null, bob.clone()),
        Ok(Validation::Failed("x".into()))
    );
    assert!(matches!(
        run(json!({"kind": "error"}), Value::Null, bob.clone()),
        Ok(Validation::Failed(message)) if message.contains("TypeError")
    ));
    // The function may not change the documents it is given.
    let mutating = Arc::new(Program::new(&ProgramSpec {
        validate: Some("function (newDoc) { newDoc.x = 1; if (newDoc.x === 1) throw({forbidden: 'changed'}); }".into()),
        ..ProgramSpec::default()
    }));
    let verdict = pool
        .validate(
            mutating,
            "{}".into(),
            "null".into(),
            "{}".into(),
            "{}".into(),
        )
        .wait();
    assert!(
        !matches!(verdict, Ok(Validation::Forbidden(_))),
        "{verdict:?}"
    );
}

fn design(ddoc: serde_json::Value) -> Arc<Program> {
    Arc::new(Program::new(&ProgramSpec {
        lib: ddoc,
        ..ProgramSpec::default()
    }))
}

fn render(
    pool: &JsPool,
    program: &Arc<Program>,
    kind: &'static str,
    name: &str,
    first: serde_json::Value,
    req: serde_json::Value,
) -> serde_json::Value {
    pool.render(
        program.clone(),
        kind,
        name.to_string(),
        first.to_string(),
        req.to_string(),
    )
    .wait()
    .expect("render")
}

#[test]
fn shows_answer_strings_objects_and_the_provided_type() {
    let pool = pool(2_000);
    let program = design(json!({
        "_id": "_design/t",
        "shows": {
            "hello": "function(doc, req) { return doc ? 'Hello ' + doc.name : 'Empty'; }",
            "json": "function(doc, req) { return {json: {id: req.id}, code: 201}; }",
            "mixed": "function(doc, req) { start({'X-A': 'a'}); send('1, '); provides('text', function() { send('3, '); return '4'; }); return '2, '; }",
            "typed": "function(doc, req) { registerType('foo', 'application/foo', 'application/x-foo'); provides('html', function() { return 'html'; }); provides('foo', function() { return 'foo'; }); }",
            "broken": "function(doc, req) { return noSuchVariable; }",
            "lib": "function(doc, req) { return require('lib/greet').greet(doc.name); }",
            "bad": "function(doc, req) { return ; ; }}"
        },
        "lib": {"greet": "exports.greet = function(name) { return 'hi ' + name; };"}
    }));
    let doc = json!({"_id": "d", "name": "Rusty"});
    let req = |query: serde_json::Value, accept: &str| json!({"id": "d", "query": query, "headers": {"Accept": accept}});
    let answer = render(
        &pool,
        &program,
        "shows",
        "hello",
        doc.clone(),
        req(json!({}), "*/*"),
    );
    assert_eq!(answer["ok"]["body"], "Hello Rusty");
    assert_eq!(answer["ok"].get("code"), None);
    assert_eq!(
        answer["ok"]["headers"]["Content-Type"],
        "text/html; charset=utf-8"
    );
    let answer = render(
        &pool,
        &program,
        "shows",
        "hello",
        json!(null),
        req(json!({}), ""),
    );
    assert_eq!(answer["ok"]["body"], "Empty");
    let answer = render(
        &pool,
        &program,
        "shows",
        "json",
        doc.clone(),
        req(json!({}), ""),
    );
    assert_eq!(answer["ok"]["body"], "{\"id\":\"d\"}");
    assert_eq!(answer["ok"]["code"], 201);
    assert_eq!(answer["ok"]["headers"]["Content-Type"], "application/json");
    // Chunks sent, then the return value, then the provider's chunks and return value.
    let answer = render(
        &pool,
        &program,
        "shows",
        "mixed",
        doc.clone(),
        req(json!({"format": "text"}), ""),
    );
    assert_eq!(answer["ok"]["body"], "1, 2, 3, 4");
    assert_eq!(answer["ok"]["headers"]["X-A"], "a");
    assert_eq!(
        answer["ok"]["headers"]["Content-Type"],
        "text/plain; charset=utf-8"
    );
    // The Accept header picks the provider and the registered type that matched.
    let typed = |accept: &str| {
        render(
            &pool,
            &program,
            "shows",
            "typed",
            doc.clone(),
            req(json!({}), accept),
        )
    };
    assert_eq!(
        typed("text/html,application/atom+xml; q=0.9")["ok"]["body"],
        "html"
    );
    let foo = typed("application/x-foo");
    assert_eq!(foo["ok"]["body"], "foo");
    assert_eq!(foo["ok"]["headers"]["Content-Type"], "application/x-foo");
    assert_eq!(typed("text/monkeys")["error"], "not_acceptable");
    assert_eq!(typed("*/*")["ok"]["body"], "html");
    let broken = render(
        &pool,
        &program,
        "shows",
        "broken",
        doc.clone(),
        req(json!({}), ""),
    );
    assert_eq!(broken["error"], "render_error");
    assert!(broken["reason"]
        .as_str()
        .is_some_and(|reason| reason.contains("noSuchVariable")));
    let lib = render(
        &pool,
        &program,
        "shows",
        "lib",
        doc.clone(),
        req(json!({}), ""),
    );
    assert_eq!(lib["ok"]["body"], "hi Rusty");
    // A show that does not compile fails alone; a missing one is not_found.
    let bad = render(
        &pool,
        &program,
        "shows",
        "bad",
        doc.clone(),
        req(json!({}), ""),
    );
    assert_eq!(bad["error"], "compilation_error");
    assert_eq!(
        render(&pool, &program, "shows", "nope", doc, req(json!({}), ""))["error"],
        "not_found"
    );
}

#[test]
fn updates_return_the_document_and_the_response() {
    let pool = pool(2_000);
    let program = design(json!({
        "_id": "_design/u",
        "updates": {
            "bump": "function(doc, req) { doc.n = (doc.n || 0) + 1; return [doc, {code: 302, body: 'bumped'}]; }",
            "none": "function(doc, req) { return [null, req.uuid]; }",
            "binary": "function(doc, req) { return [doc, {base64: 'aGk=', headers: {'Content-Type': 'application/octet-stream'}}]; }",
            "wrong": "function(doc, req) { return 'not a pair'; }"
        },
        "lists": {
            "plain": "function(head, req) { return '{}'; }",
            "rows": "function(head, req) { start({headers: {'Content-Type': 'text/plain'}}); var row; while ((row = getRow())) { send(row.key + ';'); } return 'total ' + head.total_rows; }"
        }
    }));
    let bump = render(
        &pool,
        &program,
        "updates",
        "bump",
        json!({"_id": "a", "n": 1}),
        json!({}),
    );
    assert_eq!(bump["doc"], json!({"_id": "a", "n": 2}));
    assert_eq!(bump["ok"]["code"], 302);
    assert_eq!(bump["ok"]["body"], "bumped");
    let none = render(
        &pool,
        &program,
        "updates",
        "none",
        json!(null),
        json!({"uuid": "u1"}),
    );
    assert_eq!(none["doc"], json!(null));
    assert_eq!(none["ok"]["body"], "u1");
    let binary = render(
        &pool,
        &program,
        "updates",
        "binary",
        json!({"_id": "a"}),
        json!({}),
    );
    assert_eq!(binary["ok"]["base64"], "aGk=");
    assert_eq!(
        binary["ok"]["headers"]["Content-Type"],
        "application/octet-stream"
    );
    assert_eq!(
        render(&pool, &program, "updates", "wrong", json!({}), json!({}))["error"],
        "render_error"
    );
    let listed = render(
        &pool,
        &program,
        "lists",
        "rows",
        json!({"head": {"total_rows": 2}, "rows": [{"key": "a"}, {"key": "b"}]}),
        json!({}),
    );
    assert_eq!(listed["ok"]["body"], "a;b;total 2");
    let plain = render(
        &pool,
        &program,
        "lists",
        "plain",
        json!({"head": {}, "rows": []}),
        json!({}),
    );
    assert_eq!(plain["ok"]["headers"]["Content-Type"], "application/json");
    assert_eq!(listed["ok"]["headers"]["Content-Type"], "text/plain");
}
