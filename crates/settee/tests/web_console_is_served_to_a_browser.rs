//! The web console at `/_utils/` as a browser fetches it, without a session: every file the
//! page references (found by following the references from `index.html`, as a browser does)
//! is served with its type, a strong ETag and `Cache-Control`, and a 304 for a current copy;
//! `/_utils` redirects; unknown or malicious paths are 404s; no file names an outside host.
//! And what the overview charts is on the CouchDB door: the machine's figures in `_system`,
//! the KV door's latencies in `_prometheus`.

mod support;

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use settee_kv_codec::opcode;
use support::kv::{store_extras, Kv};
use support::{Client, Response, Server, ADMIN};

fn get(http: &mut Client, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut all = vec![("Authorization", "")];
    all.extend_from_slice(headers);
    http.request_with("GET", path, &all, None).unwrap()
}

/// The relative references of a console file: HTML `src`/`href`, JavaScript `import`s.
fn references(name: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut collect = |start: &str, end: char| {
        for (index, _) in text.match_indices(start) {
            let rest = &text[index + start.len()..];
            if let Some(stop) = rest.find(end) {
                found.push(rest[..stop].to_string());
            }
        }
    };
    if name.ends_with(".html") {
        collect("src=\"", '"');
        collect("href=\"", '"');
    }
    if name.ends_with(".js") {
        collect("from '", '\'');
    }
    found
        .into_iter()
        .filter(|reference| !reference.starts_with("data:") && !reference.starts_with('#'))
        .collect()
}

/// `reference` seen in the file `name` (both relative to /_utils/) -> its name.
fn resolve(name: &str, reference: &str) -> String {
    let mut parts: Vec<&str> = name.split('/').collect();
    parts.pop();
    for part in reference.split('/') {
        match part {
            "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// `http://` and `https://` in a served file, past the license banner a minified library
/// opens with (`/*! https://github.com/... */`: a comment, which the browser never requests).
fn outside_hosts(text: &str) -> Vec<String> {
    let body = match text.strip_prefix("/*!") {
        Some(rest) => rest.split_once("*/").map_or("", |(_, after)| after),
        None => text,
    };
    ["http://", "https://"]
        .iter()
        .flat_map(|scheme| body.match_indices(scheme))
        .map(|(index, _)| body[index..].chars().take(60).collect())
        .collect()
}

#[test]
fn every_file_of_the_console_is_served_with_type_etag_and_cache_control() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();

    let redirect = get(&mut http, "/_utils", &[]);
    assert_eq!(redirect.status, 301);
    assert_eq!(redirect.header("location"), Some("/_utils/"));

    let mut queue = VecDeque::from(["index.html".to_string()]);
    let mut seen = BTreeSet::new();
    while let Some(name) = queue.pop_front() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let path = if name == "index.html" {
            "/_utils/".to_string()
        } else {
            format!("/_utils/{name}")
        };
        let response = get(&mut http, &path, &[]);
        assert_eq!(response.status, 200, "{path}");
        let expected = match name.rsplit_once('.').map(|(_, extension)| extension) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            _ => "text/plain; charset=utf-8",
        };
        assert_eq!(response.header("content-type"), Some(expected), "{path}");
        assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
        let cache = response.header("cache-control").unwrap_or_default();
        assert!(
            if name.starts_with("vendor/") {
                cache.contains("max-age=")
            } else {
                cache == "no-cache"
            },
            "{path}: {cache}"
        );
        let etag = response.header("etag").expect("an ETag").to_string();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "strong: {etag}"
        );
        let again = get(&mut http, &path, &[("If-None-Match", &etag)]);
        assert_eq!((again.status, again.body.len()), (304, 0), "{path}");
        assert_eq!(again.header("etag"), Some(etag.as_str()));
        let stale = get(&mut http, &path, &[("If-None-Match", "\"stale\"")]);
        assert_eq!(stale.status, 200);

        let text = String::from_utf8(response.body).expect("text");
        let outside = outside_hosts(&text);
        assert!(outside.is_empty(), "{path} names {outside:?}");
        for reference in references(&name, &text) {
            queue.push_back(resolve(&name, &reference));
        }
    }
    // The shell, the pages, uPlot and its stylesheet were all reached from index.html.
    for expected in [
        "js/main.js",
        "js/pages/overview.js",
        "js/pages/queries.js",
        "js/charts.js",
        "vendor/uplot-1.6.32/uPlot.iife.min.js",
        "vendor/uplot-1.6.32/uPlot.min.css",
    ] {
        assert!(seen.contains(expected), "{expected} not reached: {seen:?}");
    }
    let license = get(&mut http, "/_utils/vendor/uplot-1.6.32/LICENSE", &[]);
    assert_eq!(license.status, 200);
    assert!(String::from_utf8_lossy(&license.body).contains("MIT License"));

    let index = get(&mut http, "/_utils/", &[]);
    let policy = index.header("content-security-policy").unwrap_or_default();
    assert!(policy.contains("default-src 'self'") && policy.contains("connect-src 'self'"));
}

#[test]
fn unknown_and_hostile_console_paths_are_404s_and_the_node_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    let long = format!("/_utils/{}", "a/".repeat(3000));
    for path in [
        "/_utils/nothing.js",
        "/_utils/../_all_dbs",
        "/_utils/%2e%2e/%2e%2e/etc/passwd",
        "/_utils/js%2Fmain.js",
        "/_utils/js/../../Cargo.toml",
        "/_utils//index.html",
        "/_utils/index.html%00",
        long.as_str(),
    ] {
        let response = get(&mut http, path, &[]);
        assert_eq!(response.status, 404, "{}", &path[..path.len().min(60)]);
        assert_eq!(response.json()["error"], "not_found");
    }
    // A segment that is not UTF-8 is refused before any route, as for every other path.
    assert_eq!(get(&mut http, "/_utils/%ff%fe", &[]).status, 400);
    let post = http
        .request_with("POST", "/_utils/", &[("Authorization", "")], Some(b"{}"))
        .unwrap();
    assert_eq!(post.status, 405);
    assert_eq!(get(&mut http, "/_utils/", &[]).status, 200);
}

#[test]
fn the_overview_finds_the_machine_and_both_doors_on_the_couchdb_door() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    let (status, system) = http.call("GET", "/_node/_local/_system", None);
    assert_eq!(status, 200);
    let stats = &system["system_stats"];
    let cores = stats["cpu_cores"].as_array().expect("cpu_cores");
    assert!(!cores.is_empty());
    assert_eq!(stats["cpu_cores_available"], cores.len());
    for core in cores {
        assert!(core["busy_ticks"].as_u64().unwrap() <= core["total_ticks"].as_u64().unwrap());
    }
    assert!(stats["mem_total"].as_u64().unwrap() >= stats["mem_free"].as_u64().unwrap());
    assert!(stats["disk_total"].as_u64().unwrap() > 0);

    assert_eq!(http.call("PUT", "/bucket", None).0, 201);
    let (user, password) = ADMIN.split_once(':').unwrap();
    let mut kv = Kv::open(&server.kv_addr, user, password, "bucket");
    let reply = kv.call(opcode::SET, b"k", &store_extras(0, 0), b"{\"a\":1}", 0);
    assert_eq!(reply.status, 0);
    drop(kv);
    // Writes are timed where they finish; the node's totals are merged at most once a second.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = http
            .request("GET", "/_node/_local/_prometheus", None)
            .unwrap()
            .body;
        let text = String::from_utf8(text).unwrap();
        if text.contains("kv_cmd_duration_seconds_count{opcode=\"SET\"} 1") {
            assert!(text.contains("settee_http_request_duration_seconds_count{method=\"PUT\"}"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the KV door's latencies never reached _prometheus"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
