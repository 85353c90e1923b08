//! The HTTP details CouchDB clients check (issue 22, point 7), each as CouchDB 3.5.0 answered
//! the same request: request ids, `Location`, conditional GETs, attachment ranges and names,
//! method override, `batch=ok`, removed and refused endpoints, query-string booleans.

mod support;

use support::{Client, Server};

fn json(http: &mut Client, method: &str, path: &str, body: &str) -> support::Response {
    http.request(method, path, Some(body.as_bytes())).unwrap()
}

fn octets(http: &mut Client, path: &str, headers: &[(&str, &str)]) -> support::Response {
    http.request_with("GET", path, headers, None).unwrap()
}

#[test]
fn http_details_match_couchdb() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();

    // Every answer has a request id (10 lower-case hex digits) and CouchDB's body time.
    let created = http.request("PUT", "/db", None).unwrap();
    assert_eq!(created.status, 201);
    let id = created.header("x-couch-request-id").unwrap().to_string();
    assert!(
        id.len() == 10
            && id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(created.header("x-couchdb-body-time"), Some("0"));
    let other = http.request("GET", "/nothing", None).unwrap();
    assert_ne!(other.header("x-couch-request-id"), Some(id.as_str()));
    // A client may choose it (up to 36 letters, digits, - and _), as CouchDB lets it.
    let chosen = "E7498DE1-B661-42FA-943D-17F890143068";
    let echoed = http
        .request_with("GET", "/", &[("X-Couch-Request-ID", chosen)], None)
        .unwrap();
    assert_eq!(echoed.header("x-couch-request-id"), Some(chosen));
    let refused = http
        .request_with("GET", "/", &[("X-Couch-Request-ID", "no spaces")], None)
        .unwrap();
    assert_ne!(refused.header("x-couch-request-id"), Some("no spaces"));
    assert_eq!(created.header("location"), Some("http://test/db"));

    // Location: letters, digits and _ . - : stay; the rest, a design id's slash included,
    // is escaped; X-Forwarded-Host wins over Host; an attachment's points at it.
    let put = json(&mut http, "PUT", "/db/a~b%20c:d(e)!*%27", "{}");
    assert_eq!(
        put.header("location"),
        Some("http://test/db/a%7Eb%20c:d%28e%29%21%2A%27")
    );
    let design = json(&mut http, "PUT", "/db/_design/x~y", "{}");
    assert_eq!(
        design.header("location"),
        Some("http://test/db/_design%2Fx%7Ey")
    );
    let forwarded = http
        .request_with(
            "PUT",
            "/db/fw",
            &[("X-Forwarded-Host", "example.com:8080")],
            Some(b"{}"),
        )
        .unwrap();
    assert_eq!(
        forwarded.header("location"),
        Some("http://example.com:8080/db/fw")
    );
    let attachment = http
        .request_with(
            "PUT",
            "/db/att/f~1%20x.bin",
            &[("Content-Type", "application/octet-stream")],
            Some(b"hello world"),
        )
        .unwrap();
    assert_eq!(attachment.status, 201);
    assert_eq!(
        attachment.header("location"),
        Some("http://test/db/att/f%7E1%20x.bin")
    );
    assert_eq!(attachment.header("etag"), None);

    // batch=ok: 202 without a revision, as CouchDB acknowledges a write it has not made yet.
    let batched = json(&mut http, "PUT", "/db/batched?batch=ok", "{}");
    assert_eq!(batched.status, 202);
    assert_eq!(
        batched.json(),
        serde_json::json!({"ok": true, "id": "batched"})
    );
    assert_eq!(
        http.request("GET", "/db/batched", None).unwrap().status,
        200
    );
    // A batched write that conflicts is acknowledged all the same, and lost, as on CouchDB.
    let lost = json(&mut http, "PUT", "/db/batched?batch=ok", r#"{"lost":true}"#);
    assert_eq!(lost.status, 202);
    let kept = http.request("GET", "/db/batched", None).unwrap();
    assert!(kept.json().get("lost").is_none());

    // A write quorum above the node's one copy: written, answered 202 as a single CouchDB
    // node with n=1 answers it; _bulk_docs marks each written row "accepted".
    let quorum = json(&mut http, "PUT", "/db/quorum?w=2", "{}");
    assert_eq!(quorum.status, 202);
    assert!(quorum.json()["rev"].as_str().unwrap().starts_with("1-"));
    assert_eq!(quorum.header("location"), Some("http://test/db/quorum"));
    assert_eq!(json(&mut http, "PUT", "/db/one-copy?w=1", "{}").status, 201);
    let bulk = json(
        &mut http,
        "POST",
        "/db/_bulk_docs",
        r#"{"w":3,"docs":[{"_id":"bq"},{"_id":"quorum"}]}"#,
    );
    assert_eq!(bulk.status, 202);
    assert_eq!(bulk.json()[0]["accepted"], true);
    assert_eq!(bulk.json()[1]["error"], "conflict");
    let rev = quorum.json()["rev"].as_str().unwrap().to_string();
    let deleted = json(
        &mut http,
        "DELETE",
        &format!("/db/quorum?w=2&rev={rev}"),
        "",
    );
    assert_eq!(deleted.status, 202);

    // Conditional GET: the ETag, weak or in a list, gives 304 with no body; `*` does not.
    let doc = http.request("GET", "/db/fw", None).unwrap();
    let etag = doc.header("etag").unwrap().to_string();
    for tag in [etag.clone(), format!("W/{etag}"), format!("\"x\", {etag}")] {
        let answer = octets(&mut http, "/db/fw", &[("If-None-Match", &tag)]);
        assert_eq!(answer.status, 304, "{tag}");
        assert!(answer.body.is_empty());
        assert_eq!(answer.header("etag"), Some(etag.as_str()));
    }
    assert_eq!(
        octets(&mut http, "/db/fw", &[("If-None-Match", "*")]).status,
        200
    );

    // Ranges on an attachment: one range, several, unsatisfiable, ignored.
    let path = "/db/att/f~1%20x.bin";
    let whole = octets(&mut http, path, &[]);
    assert_eq!(whole.header("accept-ranges"), Some("bytes"));
    let first = octets(&mut http, path, &[("Range", "bytes=0-4")]);
    assert_eq!(first.status, 206);
    assert_eq!(first.body, b"hello");
    assert_eq!(first.header("content-range"), Some("bytes 0-4/11"));
    let suffix = octets(&mut http, path, &[("Range", "bytes=-3")]);
    assert_eq!((suffix.status, suffix.body.as_slice()), (206, &b"rld"[..]));
    let several = octets(&mut http, path, &[("Range", "bytes=0-1,3-4")]);
    assert_eq!(several.status, 206);
    let content_type = several.header("content-type").unwrap();
    let boundary = content_type
        .strip_prefix("multipart/byteranges; boundary=\"")
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap();
    let expected = format!(
        "--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 0-1/11\r\n\r\nhe\r\n\
         --{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 3-4/11\r\n\r\nlo\r\n\
         --{boundary}--"
    );
    assert_eq!(String::from_utf8_lossy(&several.body), expected);
    for refused in ["bytes=20-30", "bytes=5-2", "bytes=0-1,20-30"] {
        let answer = octets(&mut http, path, &[("Range", refused)]);
        assert_eq!(answer.status, 416, "{refused}");
        assert_eq!(answer.json()["error"], "requested_range_not_satisfiable");
    }
    let ten = "bytes=0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1";
    for ignored in ["items=0-1", "bytes=x-1", "bytes=0-,2-5", ten] {
        let answer = octets(&mut http, path, &[("Range", ignored)]);
        assert_eq!((answer.status, answer.body.len()), (200, 11), "{ignored}");
    }

    // Attachment names starting with `_`: refused, standalone or inline.
    for (method, path, body) in [
        ("PUT", "/db/att2/_foo", "hi"),
        (
            "PUT",
            "/db/att3",
            r#"{"_attachments":{"_x":{"content_type":"text/plain","data":"aGk="}}}"#,
        ),
    ] {
        let answer = json(&mut http, method, path, body);
        assert_eq!(answer.status, 400, "{path}");
        assert!(answer.json()["reason"]
            .as_str()
            .unwrap()
            .contains("starts with prohibited character '_'"));
    }

    let bulk = json(
        &mut http,
        "POST",
        "/db/_bulk_docs",
        r#"{"docs":[{"_id":"att4","_attachments":{"_y":{"content_type":"text/plain","data":"aGk="}}}]}"#,
    );
    assert_eq!(bulk.status, 201);
    assert_eq!(bulk.json()[0]["error"], "bad_request");

    // An HTML form adding a file to a document (multipart/form-data), from the node's pages.
    let rev = http.request("GET", "/db/fw", None).unwrap().json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let form = format!(
        "------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n{rev}\r\n\
         ------TF\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"file.txt\"\r\n\
         Content-Type: text/plain\r\n\r\ncontents of file.txt\r\n\r\n------TF--"
    );
    let form_type = ("Content-Type", "multipart/form-data; boundary=----TF");
    let uploaded = http
        .request_with(
            "POST",
            "/db/fw",
            &[form_type, ("Referer", "http://test/_utils/")],
            Some(form.as_bytes()),
        )
        .unwrap();
    assert_eq!(
        uploaded.status,
        201,
        "{}",
        String::from_utf8_lossy(&uploaded.body)
    );
    let stub = &http.request("GET", "/db/fw", None).unwrap().json()["_attachments"]["file.txt"];
    assert_eq!(
        (stub["length"].as_u64(), stub["content_type"].as_str()),
        (Some(22), Some("text/plain"))
    );
    for (referer, reason) in [
        (None, "Referer header required."),
        (
            Some("http://evil.example/"),
            "Referer header must match host.",
        ),
    ] {
        let mut headers = vec![form_type];
        headers.extend(referer.map(|referer| ("Referer", referer)));
        let refused = http
            .request_with("POST", "/db/fw", &headers, Some(form.as_bytes()))
            .unwrap();
        assert_eq!(
            (refused.status, refused.json()["reason"].as_str()),
            (400, Some(reason))
        );
    }
    let not_a_form = http
        .request_with(
            "POST",
            "/db/fw",
            &[
                ("Content-Type", "application/json"),
                ("Referer", "http://test/"),
            ],
            Some(b"{}"),
        )
        .unwrap();
    assert_eq!(not_a_form.status, 415);
    assert_eq!(
        not_a_form.json()["reason"],
        "Content-Type must be multipart/form-data"
    );

    // X-HTTP-Method-Override on POST only.
    let overridden = http
        .request_with("POST", "/db/fw", &[("X-HTTP-Method-Override", "GET")], None)
        .unwrap();
    assert_eq!(overridden.status, 200);
    assert_eq!(overridden.json()["_id"], "fw");
    let not_on_put = http
        .request_with(
            "PUT",
            "/db/fw",
            &[("X-HTTP-Method-Override", "GET")],
            Some(b"{}"),
        )
        .unwrap();
    assert_eq!(not_on_put.status, 409);

    // Removed and refused: _temp_view, a COPY to another server, a missing design's compaction.
    let temp = json(
        &mut http,
        "POST",
        "/db/_temp_view",
        r#"{"map":"function(d){}"}"#,
    );
    assert_eq!(temp.status, 410);
    assert_eq!(temp.json()["error"], "gone");
    let copy = http
        .request_with(
            "COPY",
            "/db/fw",
            &[("Destination", "http://example.com/db/b")],
            None,
        )
        .unwrap();
    assert_eq!(copy.status, 400);
    assert_eq!(copy.json()["reason"], "Destination URL must be relative.");
    assert_eq!(
        json(&mut http, "POST", "/db/_compact/nothing", "").status,
        404
    );
    assert_eq!(json(&mut http, "POST", "/db/_compact/x~y", "").status, 202);

    // Query-string booleans: document options take only `true`; view-like queries take
    // true/false in any case and refuse anything else.
    let ignored = http
        .request("GET", "/db/fw?revs=True&conflicts=1", None)
        .unwrap();
    assert_eq!(ignored.status, 200);
    assert!(ignored.json().get("_revisions").is_none());
    let taken = http.request("GET", "/db/fw?revs=true", None).unwrap();
    assert!(taken.json().get("_revisions").is_some());
    let rows = http
        .request("GET", "/db/_all_docs?include_docs=True&limit=1", None)
        .unwrap();
    assert_eq!(rows.status, 200);
    assert!(rows.json()["rows"][0].get("doc").is_some());
    let refused = http
        .request("GET", "/db/_all_docs?include_docs=yes", None)
        .unwrap();
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json()["reason"],
        "Invalid boolean parameter: \"yes\""
    );

    // Raw quotes in a query string, as curl sends `.../_all_docs?key="fw"` (the door
    // percent-encodes them before hyper parses the request line), on a fresh connection and
    // on one that has answered requests already.
    let mut fresh = Client::connect(&server.addr).unwrap();
    for client in [&mut fresh, &mut http] {
        let quoted = client
            .request("GET", "/db/_all_docs?key=\"fw\"", None)
            .unwrap();
        assert_eq!(
            quoted.status,
            200,
            "{}",
            String::from_utf8_lossy(&quoted.body)
        );
        assert_eq!(quoted.json()["rows"][0]["id"], "fw");
        let ranged = client
            .request(
                "GET",
                "/db/_all_docs?startkey=\"att\"&endkey=\"att~\"&inclusive_end=true",
                None,
            )
            .unwrap();
        assert_eq!(ranged.json()["rows"][0]["id"], "att");
    }

    // JSONP is off in CouchDB 3.5 by default: `callback` is ignored.
    let plain = http.request("GET", "/db/fw?callback=f", None).unwrap();
    assert_eq!(plain.header("content-type"), Some("application/json"));
    assert_eq!(plain.json()["_id"], "fw");

    // Document ids past the engine's 250 bytes: CouchDB's answer to an id over its configured
    // limit (docs/compatibility.md).
    let long = format!("/db/{}", "x".repeat(251));
    let answer = json(&mut http, "PUT", &long, "{}");
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"], "illegal_docid");
    assert_eq!(answer.json()["reason"], "Document id is too long");
}

/// A request refused before its body mattered still has its body read, so the connection
/// serves the next request (hyper would close it): CouchDB clients send a body with requests
/// that fail early (a `DELETE` with a payload, a write to `_temp_view`).
#[test]
fn an_unread_body_does_not_end_the_connection() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let stream = std::net::TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let auth = support::base64_engine::encode(support::ADMIN.as_bytes());
    let body = br#"{"map":"function(doc){}"}"#;
    // The body is sent only once the server asks for it, so it cannot arrive with the head.
    let head = format!(
        "POST /db/_temp_view HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {auth}\r\n\
         Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    reader.get_mut().write_all(head.as_bytes()).unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim_end(),
        "HTTP/1.1 100 Continue",
        "the body is asked for"
    );
    reader.read_line(&mut line).unwrap();
    reader.get_mut().write_all(body).unwrap();
    let refused = support::read_response(&mut reader).unwrap();
    assert_eq!(refused.status, 410);
    let next =
        format!("GET /db/_temp_view HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {auth}\r\n\r\n");
    reader.get_mut().write_all(next.as_bytes()).unwrap();
    assert_eq!(support::read_response(&mut reader).unwrap().status, 410);
}
