//! `validate_doc_update` runs on every write path of the CouchDB door, as CouchDB runs it:
//! PUT, POST, DELETE, COPY, attachments, `_bulk_docs` with and without `new_edits`; with
//! `userCtx` (name, roles, db), `secObj`, `oldDoc`; `forbidden` answers 403, `unauthorized`
//! 401, anything else thrown 500; design documents are not validated; a function that does not
//! compile refuses the design document; removing it lets the writes through again.

mod support;

use serde_json::{json, Value};
use support::{add_member, Client, Server};

const VALIDATE: &str = r#"function (newDoc, oldDoc, userCtx, secObj) {
    if (!userCtx.name) { throw({unauthorized: 'please log in'}); }
    if (newDoc._deleted) {
        if (oldDoc && oldDoc.keep) { throw({forbidden: 'kept by ' + secObj.members.names[0]}); }
        return;
    }
    if (newDoc.bad) {
        throw({forbidden: 'bad ' + newDoc._id + ' by ' + userCtx.name + ' in ' + userCtx.db});
    }
    if (oldDoc && oldDoc.frozen) { throw({forbidden: 'frozen at ' + oldDoc._rev}); }
    if (newDoc._attachments && newDoc._attachments['no.txt']) {
        throw({forbidden: 'no such attachment'});
    }
    if (newDoc.plain) { throw 'plain'; }
    if (newDoc.history && newDoc._revisions.ids.length < 2) { throw({forbidden: 'no history'}); }
}"#;

fn rev_of(answer: &Value) -> String {
    answer["rev"].as_str().expect("rev").to_string()
}

#[test]
fn every_write_path_of_the_couchdb_door_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/v", None).0, 201);
    add_member(&mut http, "v", "bob", "secret");

    // A function that does not compile refuses its design document.
    let (status, answer) = http.call(
        "PUT",
        "/v/_design/broken",
        Some(json!({"validate_doc_update": "function (newDoc) { ("})),
    );
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("compilation_error"))
    );

    // Written before the function exists: not validated.
    let (status, frozen) = http.call("PUT", "/v/frozen", Some(json!({"frozen": true})));
    assert_eq!(status, 201);
    let (status, kept) = http.call("PUT", "/v/kept", Some(json!({"keep": true})));
    assert_eq!(status, 201);
    assert_eq!(
        http.call("PUT", "/v/old_bad", Some(json!({"bad": true}))).0,
        201
    );
    let (status, ddoc) = http.call(
        "PUT",
        "/v/_design/rules",
        Some(json!({"validate_doc_update": VALIDATE})),
    );
    assert_eq!(status, 201, "{ddoc}");

    // PUT and POST.
    let (status, answer) = http.call("PUT", "/v/d1", Some(json!({"bad": true})));
    assert_eq!(
        (status, &answer),
        (
            403,
            &json!({"error": "forbidden", "reason": "bad d1 by admin in v"})
        )
    );
    assert_eq!(
        http.call("POST", "/v", Some(json!({"_id": "d2", "bad": 1})))
            .0,
        403
    );
    let (status, good) = http.call("PUT", "/v/good", Some(json!({"x": 1})));
    assert_eq!(status, 201);
    // oldDoc is the revision being replaced.
    let (status, answer) = http.call(
        "PUT",
        "/v/frozen",
        Some(json!({"_rev": rev_of(&frozen), "frozen": false})),
    );
    assert_eq!(
        (status, answer["reason"].clone()),
        (403, json!(format!("frozen at {}", rev_of(&frozen))))
    );
    // Anything else thrown: 500.
    let (status, answer) = http.call("PUT", "/v/p", Some(json!({"plain": true})));
    assert_eq!(
        (status, answer),
        (500, json!({"error": "unknown_error", "reason": "plain"}))
    );
    // _revisions: a new document has a history of one.
    assert_eq!(
        http.call("PUT", "/v/h", Some(json!({"history": true}))).0,
        403
    );

    // DELETE, by query rev: the function sees _deleted and the old document.
    let path = format!("/v/kept?rev={}", rev_of(&kept));
    let (status, answer) = http.call("DELETE", &path, None);
    assert_eq!(
        (status, answer["reason"].clone()),
        (403, json!("kept by bob"))
    );
    let path = format!("/v/good?rev={}", rev_of(&good));
    let (status, deleted) = http.call("DELETE", &path, None);
    assert_eq!(status, 200, "{deleted}");

    // COPY onto a new id writes the source's body there, validated as a new document.
    let copy = http
        .request_with("COPY", "/v/frozen", &[("Destination", "copied")], None)
        .unwrap();
    assert_eq!(copy.status, 201, "a copy is a new document: no oldDoc");
    let copy = http
        .request_with("COPY", "/v/old_bad", &[("Destination", "copied_bad")], None)
        .unwrap();
    assert_eq!(copy.status, 403);
    assert_eq!(copy.json()["reason"], json!("bad copied_bad by admin in v"));

    // An attachment upload is a write of the document.
    let (status, doc) = http.call("PUT", "/v/att", Some(json!({"x": 1})));
    assert_eq!(status, 201);
    let path = format!("/v/att/no.txt?rev={}", rev_of(&doc));
    let refused = http
        .request_with(
            "PUT",
            &path,
            &[("Content-Type", "text/plain")],
            Some(b"hello"),
        )
        .unwrap();
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["reason"], json!("no such attachment"));
    let path = format!("/v/att/yes.txt?rev={}", rev_of(&doc));
    let allowed = http
        .request_with(
            "PUT",
            &path,
            &[("Content-Type", "text/plain")],
            Some(b"hello"),
        )
        .unwrap();
    assert_eq!(allowed.status, 201);

    // _bulk_docs: one verdict per document, the others saved.
    let (status, rows) = http.call(
        "POST",
        "/v/_bulk_docs",
        Some(
            json!({"docs": [{"_id": "b1", "bad": true}, {"_id": "b2"}, {"_id": "b3", "plain": 1}]}),
        ),
    );
    assert_eq!(status, 201);
    assert_eq!(
        rows[0],
        json!({"id": "b1", "error": "forbidden", "reason": "bad b1 by admin in v"})
    );
    assert_eq!(rows[1]["ok"], json!(true));
    assert_eq!(rows[2]["error"], json!("unknown_error"));
    // new_edits=false (replication) is validated too.
    let (status, rows) = http.call(
        "POST",
        "/v/_bulk_docs",
        Some(json!({"new_edits": false, "docs": [
            {"_id": "r1", "_rev": "1-abc", "bad": true},
            {"_id": "r2", "_rev": "1-abd"},
        ]})),
    );
    assert_eq!(status, 201);
    assert_eq!(
        rows,
        json!([{"id": "r1", "error": "forbidden", "reason": "bad r1 by admin in v"}])
    );
    assert_eq!(http.call("GET", "/v/r1", None).0, 404);
    assert_eq!(http.call("GET", "/v/r2", None).0, 200);

    // A member writes under their own name; an anonymous writer of a public database is
    // refused with 401 by the function.
    let mut bob = Client::connect_as(&server.addr, "bob:secret").unwrap();
    let (status, answer) = bob.call("PUT", "/v/bobs", Some(json!({"bad": true})));
    assert_eq!(
        (status, answer["reason"].clone()),
        (403, json!("bad bobs by bob in v"))
    );
    assert_eq!(http.call("PUT", "/v/_security", Some(json!({}))).0, 200);
    let anonymous = http
        .request_with(
            "PUT",
            "/v/anon",
            &[("Authorization", ""), ("Content-Type", "application/json")],
            Some(b"{}"),
        )
        .unwrap();
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        anonymous.json(),
        json!({"error": "unauthorized", "reason": "please log in"})
    );

    // Design documents are not validated; without the function, the writes go through.
    let path = format!("/v/_design/rules?rev={}", rev_of(&ddoc));
    assert_eq!(http.call("DELETE", &path, None).0, 200);
    assert_eq!(http.call("PUT", "/v/d1", Some(json!({"bad": true}))).0, 201);
    server.stop();
}
