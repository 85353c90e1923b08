//! `_show`, `_list` and `_update` through a real node, as CouchDB serves them: the request
//! object, `provides` by Accept and `?format=`, the show's ETag and 304, a list over a view's
//! rows with its query parameters and over another design document's view, an update that
//! saves what it returns (with the document API's checks and `X-Couch-Update-NewRev`), and the
//! errors (invalid path, missing function, a function that throws, no acceptable type).

mod support;

use serde_json::{json, Value};
use support::{Client, Server};

fn ddoc() -> Value {
    json!({
        "views": {"by_n": {"map": "function(doc) { if (doc.n !== undefined) emit(doc.n, doc.name); }"}},
        "shows": {
            "hello": "function(doc, req) { return doc ? 'Hello ' + doc.name : (req.id ? 'New ' + req.id : 'Empty'); }",
            "req": "function(doc, req) { return {json: {path: req.path, query: req.query, id: req.id, method: req.method, accept: req.headers['Accept'], db: req.info.db_name, raw: req.raw_path, body: req.body, sec: req.secObj}}; }",
            "typed": "function(doc, req) { registerType('foo', 'application/x-foo'); provides('html', function() { return '<b>' + doc.name + '</b>'; }); provides('foo', function() { send('foo:'); return doc.name; }); }",
            "throws": "function(doc, req) { return doc.name.length; }",
            "etag": "function(doc, req) { return {headers: {'Etag': 'mine', 'X-Mine': 'yes'}, body: 'x'}; }"
        },
        "lists": {
            "names": "function(head, req) { start({headers: {'Content-Type': 'text/plain'}}); send('total=' + head.total_rows + ';'); var row; while ((row = getRow())) { send(row.key + ':' + row.value + ';'); } return req.query.tail || 'end'; }",
            "coded": "function(head, req) { getRow(); start({code: 418, headers: {'X-Row': 'one'}}); send('teapot'); }"
        },
        "updates": {
            "bump": "function(doc, req) { if (!doc) { return [{_id: req.id || req.uuid, n: 0}, 'created']; } doc.n = (doc.n || 0) + 1; doc.by = req.form.by || null; return [doc, {code: 202, json: {n: doc.n}}]; }",
            "nothing": "function(doc, req) { return [null, 'uuid ' + req.uuid]; }",
            "anonymous": "function(doc, req) { return [{n: 1}, 'no id']; }"
        }
    })
}

#[test]
fn shows_lists_and_updates_answer_as_couchdb() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/d", None).0, 201);
    assert_eq!(http.call("PUT", "/d/_design/f", Some(ddoc())).0, 201);
    for (id, n, name) in [("a", 1, "Ann"), ("b", 2, "Bob"), ("c", 3, "Cid")] {
        let doc = json!({"n": n, "name": name});
        assert_eq!(http.call("PUT", &format!("/d/{id}"), Some(doc)).0, 201);
    }
    let get = |http: &mut Client, path: &str, headers: &[(&str, &str)]| {
        http.request_with("GET", path, headers, None).unwrap()
    };

    // Shows: with a document, without one, and for an id that does not exist.
    let shown = get(&mut http, "/d/_design/f/_show/hello/a", &[]);
    assert_eq!((shown.status, &shown.body[..]), (200, &b"Hello Ann"[..]));
    assert_eq!(
        shown.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(shown
        .header("server")
        .is_some_and(|server| server.starts_with("CouchDB/")));
    assert_eq!(
        get(&mut http, "/d/_design/f/_show/hello", &[]).body,
        b"Empty"
    );
    assert_eq!(
        get(&mut http, "/d/_design/f/_show/hello/zz", &[]).body,
        b"New zz"
    );
    // The request object.
    let request = get(
        &mut http,
        "/d/_design/f/_show/req/a%2Fb?x=1",
        &[("Accept", "text/plain")],
    )
    .json();
    assert_eq!(
        request["path"],
        json!(["d", "_design", "f", "_show", "req", "a/b"])
    );
    assert_eq!(request["query"], json!({"x": "1"}));
    assert_eq!(request["id"], "a/b");
    assert_eq!(request["method"], "GET");
    assert_eq!(request["accept"], "text/plain");
    assert_eq!(request["db"], "d");
    assert_eq!(request["raw"], "/d/_design/f/_show/req/a%2Fb?x=1");
    assert_eq!(request["body"], "undefined");
    // Provides: by Accept (the registered type that matched), by format, or 406.
    let html = get(
        &mut http,
        "/d/_design/f/_show/typed/b",
        &[("Accept", "text/html")],
    );
    assert_eq!(html.body, b"<b>Bob</b>");
    let foo = get(
        &mut http,
        "/d/_design/f/_show/typed/b",
        &[("Accept", "application/x-foo")],
    );
    assert_eq!(
        (foo.body.as_slice(), foo.header("content-type")),
        (&b"foo:Bob"[..], Some("application/x-foo"))
    );
    assert_eq!(
        get(&mut http, "/d/_design/f/_show/typed/b?format=foo", &[]).body,
        b"foo:Bob"
    );
    let refused = get(
        &mut http,
        "/d/_design/f/_show/typed/b",
        &[("Accept", "text/monkeys")],
    );
    assert_eq!(
        (refused.status, refused.json()["error"].clone()),
        (406, json!("not_acceptable"))
    );
    // The ETag is the server's: it moves with the document, and a match answers 304.
    let tag = shown.header("etag").expect("etag").to_string();
    assert_eq!(
        get(
            &mut http,
            "/d/_design/f/_show/hello/a",
            &[("If-None-Match", &tag)]
        )
        .status,
        304
    );
    let (_, a) = http.call("GET", "/d/a", None);
    let changed = json!({"_rev": a["_rev"], "n": 1, "name": "Ada"});
    assert_eq!(http.call("PUT", "/d/a", Some(changed)).0, 201);
    let again = get(
        &mut http,
        "/d/_design/f/_show/hello/a",
        &[("If-None-Match", &tag)],
    );
    assert_eq!(
        (again.status, again.body.as_slice()),
        (200, &b"Hello Ada"[..])
    );
    let own = get(&mut http, "/d/_design/f/_show/etag", &[]);
    assert_eq!(own.header("x-mine"), Some("yes"));
    assert_ne!(own.header("etag"), Some("mine"));
    // Errors.
    let invalid = get(&mut http, "/d/_design/f/_show/", &[]).json();
    assert_eq!(invalid["reason"], "Invalid path.");
    assert_eq!(get(&mut http, "/d/_design/f/_show/nope/a", &[]).status, 404);
    assert_eq!(
        get(&mut http, "/d/_design/none/_show/hello/a", &[]).status,
        404
    );
    let thrown = get(&mut http, "/d/_design/f/_show/throws", &[]);
    assert_eq!(
        (thrown.status, thrown.json()["error"].clone()),
        (500, json!("render_error"))
    );
    assert_eq!(
        get(&mut http, "/d/_design/f/_show/throws/missing", &[]).status,
        404
    );

    // Lists: the view's rows with its parameters, another design document's view, start().
    let listed = get(
        &mut http,
        "/d/_design/f/_list/names/by_n?startkey=2&tail=done",
        &[],
    );
    assert_eq!(listed.status, 200);
    assert_eq!(
        std::str::from_utf8(&listed.body).unwrap(),
        "total=3;2:Bob;3:Cid;done"
    );
    assert_eq!(listed.header("content-type"), Some("text/plain"));
    let other =
        json!({"views": {"neg": {"map": "function(doc) { if (doc.n) emit(-doc.n, doc.name); }"}}});
    assert_eq!(http.call("PUT", "/d/_design/other", Some(other)).0, 201);
    let across = get(&mut http, "/d/_design/f/_list/names/other/neg?limit=1", &[]);
    assert_eq!(
        std::str::from_utf8(&across.body).unwrap(),
        "total=3;-3:Cid;end"
    );
    let coded = get(&mut http, "/d/_design/f/_list/coded/by_n", &[]);
    assert_eq!(
        (coded.status, coded.header("x-row"), coded.body.as_slice()),
        (418, Some("one"), &b"teapot"[..])
    );
    let bad_query = get(&mut http, "/d/_design/f/_list/names/by_n?limit=x", &[]);
    assert_eq!(bad_query.status, 400);

    // Updates: create, change (with a form body), nothing to save, and a document without id.
    let created = http
        .request("PUT", "/d/_design/f/_update/bump/u1", None)
        .unwrap();
    assert_eq!(
        (created.status, created.body.as_slice()),
        (201, &b"created"[..])
    );
    assert_eq!(created.header("x-couch-id"), Some("u1"));
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let bumped = http
        .request_with(
            "POST",
            "/d/_design/f/_update/bump/u1",
            &form,
            Some(b"by=me"),
        )
        .unwrap();
    assert_eq!((bumped.status, bumped.json()), (202, json!({"n": 1})));
    let new_rev = bumped
        .header("x-couch-update-newrev")
        .expect("new rev")
        .to_string();
    let (_, stored) = http.call("GET", "/d/u1", None);
    assert_eq!(
        (
            stored["n"].clone(),
            stored["by"].clone(),
            stored["_rev"].clone()
        ),
        (json!(1), json!("me"), json!(new_rev))
    );
    let nothing = http
        .request("POST", "/d/_design/f/_update/nothing", None)
        .unwrap();
    assert_eq!(nothing.status, 200);
    assert_eq!(nothing.body.len(), "uuid ".len() + 32);
    let anonymous = http
        .request("POST", "/d/_design/f/_update/anonymous", None)
        .unwrap();
    assert_eq!(
        (anonymous.status, anonymous.json()["reason"].clone()),
        (400, json!("Document id must not be empty"))
    );
    assert_eq!(
        get(&mut http, "/d/_design/f/_update/bump/u1", &[]).status,
        405
    );
    server.stop();
}
