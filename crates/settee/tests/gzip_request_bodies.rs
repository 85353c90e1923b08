//! Request bodies sent with `Content-Encoding: gzip` (as IBM's `ibmcloudant` SDKs send every
//! body) are decoded on every path that reads a body, within the same size limit as a plain
//! body; other encodings get CouchDB's 415.

mod support;

use std::io::Write;

use support::{Client, Server};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

const GZIP_JSON: &[(&str, &str)] = &[
    ("Content-Type", "application/json"),
    ("Content-Encoding", "gzip"),
];

#[test]
fn gzip_request_bodies_are_decoded_within_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    // A small request limit: the gzip bomb below decodes to 64 times more.
    let server = Server::start_with(dir.path(), &["--max-request-size", "1048576"]);
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/db", None).unwrap().status, 201);

    // A document, a bulk write, a POST with keys: each body gzipped.
    let put = http
        .request_with("PUT", "/db/one", GZIP_JSON, Some(&gzip(br#"{"n":1}"#)))
        .unwrap();
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    let bulk = br#"{"docs":[{"_id":"two","n":2},{"_id":"three","n":3}]}"#;
    let bulk = http
        .request_with("POST", "/db/_bulk_docs", GZIP_JSON, Some(&gzip(bulk)))
        .unwrap();
    assert_eq!(bulk.status, 201, "{}", String::from_utf8_lossy(&bulk.body));
    let keys = gzip(br#"{"keys":["one","three"]}"#);
    let listed = http
        .request_with("POST", "/db/_all_docs", GZIP_JSON, Some(&keys))
        .unwrap();
    assert_eq!(listed.status, 200);
    let ids: Vec<_> = listed.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["one", "three"]);
    assert_eq!(http.request("GET", "/db/one", None).unwrap().json()["n"], 1);
    // `identity` is the body as sent.
    let identity = http
        .request_with(
            "PUT",
            "/db/four",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "identity"),
            ],
            Some(br#"{"n":4}"#),
        )
        .unwrap();
    assert_eq!(identity.status, 201);

    // Any other encoding: 415 bad_content_type, and nothing is written.
    let deflate = http
        .request_with(
            "PUT",
            "/db/five",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", "deflate"),
            ],
            Some(b"x\x9c\xab\xae\x05\x00\x01u\x00\xf9"),
        )
        .unwrap();
    assert_eq!(deflate.status, 415);
    assert_eq!(deflate.json()["error"], "bad_content_type");
    assert_eq!(http.request("GET", "/db/five", None).unwrap().status, 404);

    // A body that claims gzip but is not: 400, never stored.
    let damaged = http
        .request_with("PUT", "/db/six", GZIP_JSON, Some(br#"{"n":6}"#))
        .unwrap();
    assert_eq!(damaged.status, 400);
    assert_eq!(damaged.json()["error"], "bad_request");

    // A gzip bomb: 64 KiB on the wire, 64 MiB decoded, 64 times the request limit. It is
    // refused with 413 (decoding stops one byte past the limit), and the node goes on.
    let mut zeros = b"{\"docs\":[{\"pad\":\"".to_vec();
    zeros.resize(64 << 20, b'0');
    let bomb = gzip(&zeros);
    assert!(bomb.len() < 1 << 20, "the bomb fits the limit compressed");
    let mut fresh = Client::connect(&server.addr).unwrap();
    let refused = fresh
        .request_with("POST", "/db/_bulk_docs", GZIP_JSON, Some(&bomb))
        .unwrap();
    assert_eq!(refused.status, 413);
    assert_eq!(refused.json()["error"], "too_large");
    let info = Client::connect(&server.addr)
        .unwrap()
        .request("GET", "/db", None)
        .unwrap();
    assert_eq!(info.json()["doc_count"], 4);
}
