//! A page from another origin (PouchDB in a browser) reaches the node when CORS is configured,
//! as CouchDB's `[cors]` section allows it: the browser's preflight, then the request itself
//! with its credentials. Settings come from flags and from the config file.

mod support;

use support::{Client, Server};

const APP: &str = "http://app.example:8000";

fn preflight(http: &mut Client, origin: &str, method: &str, headers: &str) -> support::Response {
    // A browser sends the preflight without credentials.
    http.request_with(
        "OPTIONS",
        "/db/doc",
        &[
            ("Authorization", ""),
            ("Origin", origin),
            ("Access-Control-Request-Method", method),
            ("Access-Control-Request-Headers", headers),
        ],
        None,
    )
    .unwrap()
}

#[test]
fn a_page_from_an_allowed_origin_gets_through_and_others_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--cors-enable",
            "--cors-origins",
            "http://app.example:8000, https://other.example",
        ],
    );
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.request("PUT", "/db", None).unwrap().status, 201);

    // The preflight PouchDB's PUT causes: answered 204 before authentication.
    let answer = preflight(&mut http, APP, "PUT", "authorization,content-type");
    assert_eq!(answer.status, 204);
    assert_eq!(answer.header("access-control-allow-origin"), Some(APP));
    assert_eq!(
        answer.header("access-control-allow-headers"),
        Some("authorization,content-type")
    );
    assert_eq!(
        answer.header("access-control-allow-methods"),
        Some("CONNECT, COPY, DELETE, GET, HEAD, OPTIONS, POST, PUT, TRACE")
    );
    assert_eq!(answer.header("access-control-max-age"), Some("600"));
    assert_eq!(answer.header("access-control-allow-credentials"), None);

    // The request itself: the origin echoed, CouchDB's headers exposed.
    let put = http
        .request_with(
            "PUT",
            "/db/doc",
            &[("Origin", APP), ("Content-Type", "application/json")],
            Some(br#"{"from":"the page"}"#),
        )
        .unwrap();
    assert_eq!(put.status, 201);
    assert_eq!(put.header("access-control-allow-origin"), Some(APP));
    let exposed = put.header("access-control-expose-headers").unwrap();
    for name in ["content-type", "etag", "x-couch-request-id"] {
        assert!(exposed.split(", ").any(|item| item == name), "{exposed}");
    }
    // Errors carry them too, so the page can read why.
    let missing = http
        .request_with("GET", "/db/nothing", &[("Origin", APP)], None)
        .unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("access-control-allow-origin"), Some(APP));

    // Another origin, or the same one spelled in another case: no CORS headers, and its
    // preflight is a plain OPTIONS (405, as CouchDB).
    for origin in ["http://evil.example", "HTTP://APP.EXAMPLE:8000"] {
        let answer = preflight(&mut http, origin, "PUT", "");
        assert_eq!(answer.status, 405, "{origin}");
        assert_eq!(answer.header("access-control-allow-origin"), None);
        let get = http
            .request_with("GET", "/db/doc", &[("Origin", origin)], None)
            .unwrap();
        assert_eq!(get.status, 200);
        assert_eq!(get.header("access-control-allow-origin"), None);
    }
    // A header outside the allowed list, a method outside it: not answered as a preflight.
    assert_eq!(preflight(&mut http, APP, "PUT", "x-secret").status, 405);
    assert_eq!(preflight(&mut http, APP, "PATCH", "").status, 405);
}

#[test]
fn cors_settings_come_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("settee.toml");
    std::fs::write(
        &config,
        "cors_enable = true\ncors_origins = \"*\"\ncors_credentials = true\n\
         cors_methods = \"GET, PUT\"\ncors_headers = \"Content-Type, X-Foo\"\ncors_max_age = 3600\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = Server::start_with(&data, &["--config", config.to_str().unwrap()]);
    let mut http = Client::connect(&server.addr).unwrap();

    let answer = preflight(&mut http, APP, "PUT", "content-type, x-foo");
    assert_eq!(answer.status, 204);
    assert_eq!(answer.header("access-control-allow-origin"), Some(APP));
    assert_eq!(
        answer.header("access-control-allow-methods"),
        Some("GET, PUT")
    );
    assert_eq!(answer.header("access-control-max-age"), Some("3600"));
    assert_eq!(
        answer.header("access-control-allow-credentials"),
        Some("true")
    );
    // Only the configured headers and methods.
    assert_eq!(
        preflight(&mut http, APP, "PUT", "authorization").status,
        405
    );
    assert_eq!(preflight(&mut http, APP, "DELETE", "").status, 405);

    let welcome = http
        .request_with("GET", "/", &[("Origin", APP)], None)
        .unwrap();
    assert_eq!(welcome.header("access-control-allow-origin"), Some(APP));
    assert_eq!(
        welcome.header("access-control-allow-credentials"),
        Some("true")
    );
    // The literal origin `*` is echoed but never gets credentials.
    let star = http
        .request_with("GET", "/", &[("Origin", "*")], None)
        .unwrap();
    assert_eq!(star.header("access-control-allow-origin"), Some("*"));
    assert_eq!(star.header("access-control-allow-credentials"), None);
}

#[test]
fn without_cors_no_request_gets_its_headers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    let answer = preflight(&mut http, APP, "GET", "");
    assert_eq!(answer.header("access-control-allow-origin"), None);
    let welcome = http
        .request_with("GET", "/", &[("Origin", APP)], None)
        .unwrap();
    assert_eq!(welcome.status, 200);
    assert_eq!(welcome.header("access-control-allow-origin"), None);
}
