//! The node's metrics (issue 24, part 2): `/_node/_local/_prometheus` in the Prometheus text
//! format with CouchDB's names, `_stats` and `_system` in CouchDB's JSON shapes, and `/metrics`
//! on the management port with Couchbase's; admins only; and the counters move by exactly
//! the requests made between two scrapes.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use settee_kv_codec::opcode;
use support::kv::{store_extras, Kv};
use support::{Client, Server, ADMIN};

/// Longest wait for a closed KV connection's timings to reach the node's totals.
const GIVE_UP_AFTER: Duration = Duration::from_secs(20);

/// `series -> value` of an exposition, after checking that every line is a comment or a
/// `name{labels} value` sample whose family was declared with `# TYPE` before it.
fn parse_exposition(text: &str) -> HashMap<String, f64> {
    let mut declared: Vec<String> = Vec::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split(' ');
            let name = words.next().unwrap().to_string();
            let kind = words.next().unwrap();
            assert!(
                ["counter", "gauge", "histogram", "summary"].contains(&kind),
                "{line}"
            );
            assert!(!declared.contains(&name), "{name} declared twice");
            declared.push(name);
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let name = series.split('{').next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|family| declared.iter().any(|known| known == family))
            .unwrap_or(name);
        assert!(
            declared.iter().any(|known| known == family),
            "{name} has no # TYPE"
        );
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "NaN" => f64::NAN,
            number => number.parse().unwrap_or_else(|_| panic!("{line:?}")),
        };
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "{series} twice"
        );
    }
    samples
}

fn scrape(http: &mut Client, path: &str) -> HashMap<String, f64> {
    let response = http.request("GET", path, None).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse_exposition(std::str::from_utf8(&response.body).unwrap())
}

fn moved(before: &HashMap<String, f64>, after: &HashMap<String, f64>, series: &str) -> f64 {
    let value = |samples: &HashMap<String, f64>| samples.get(series).copied().unwrap_or(0.0);
    assert!(after.contains_key(series), "{series} missing");
    value(after) - value(before)
}

#[test]
fn couchdb_metrics_move_by_the_requests_made() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    let path = "/_node/_local/_prometheus";

    let before = scrape(&mut http, path);
    assert_eq!(http.call("PUT", "/metered", None).0, 201);
    for id in ["a", "b", "c"] {
        let (status, _) = http.call(
            "PUT",
            &format!("/metered/{id}"),
            Some(serde_json::json!({})),
        );
        assert_eq!(status, 201);
    }
    assert_eq!(http.call("GET", "/metered/a", None).0, 200);
    assert_eq!(http.call("GET", "/metered/b", None).0, 200);
    assert_eq!(http.call("GET", "/metered/missing", None).0, 404);
    let after = scrape(&mut http, path);

    // The first scrape is counted too (after it was written), the second not yet.
    assert_eq!(moved(&before, &after, "couchdb_httpd_requests_total"), 8.0);
    let method = |name: &str| format!("couchdb_httpd_request_methods{{method=\"{name}\"}}");
    assert_eq!(moved(&before, &after, &method("GET")), 4.0);
    assert_eq!(moved(&before, &after, &method("PUT")), 4.0);
    let code = |code: u16| format!("couchdb_httpd_status_codes{{code=\"{code}\"}}");
    assert_eq!(moved(&before, &after, &code(201)), 4.0);
    assert_eq!(moved(&before, &after, &code(200)), 3.0);
    assert_eq!(moved(&before, &after, &code(404)), 1.0);
    assert_eq!(moved(&before, &after, "couchdb_database_writes_total"), 3.0);
    assert_eq!(moved(&before, &after, "couchdb_database_reads_total"), 2.0);
    assert_eq!(
        moved(&before, &after, "couchdb_request_time_seconds_count"),
        8.0
    );
    assert_eq!(
        moved(
            &before,
            &after,
            "settee_http_request_duration_seconds_count{method=\"PUT\"}"
        ),
        4.0
    );
    assert_eq!(
        after["settee_http_request_duration_seconds_bucket{method=\"PUT\",le=\"+Inf\"}"],
        after["settee_http_request_duration_seconds_count{method=\"PUT\"}"]
    );
    // _users, _replicator and the new one.
    assert_eq!(after["couchdb_open_databases_total"], 3.0);
    assert_eq!(after["settee_http_open_connections"], 1.0);
    // Counted in clock ticks (10 ms): a fresh node may not have used one yet. It is read, and
    // it never goes back.
    assert!(after["process_cpu_seconds_total"] >= before["process_cpu_seconds_total"]);
    assert!(after["process_resident_memory_bytes"] > 0.0);
    assert!(after["settee_rocksdb_block_cache_capacity_bytes"] > 0.0);
    assert!(after.contains_key("settee_rocksdb_compaction_pending_bytes"));
    assert!(after.contains_key("settee_rocksdb_background_jobs_running"));
    assert!(after["settee_rocksdb_memtable_bytes"] > 0.0);

    // CouchDB's JSON shapes.
    let (status, stats) = http.call("GET", "/_node/_local/_stats", None);
    assert_eq!(status, 200);
    let couchdb = &stats["couchdb"];
    assert_eq!(couchdb["httpd_request_methods"]["PUT"]["type"], "counter");
    assert_eq!(couchdb["httpd_request_methods"]["PUT"]["value"], 4);
    assert_eq!(couchdb["httpd_status_codes"]["404"]["value"], 1);
    assert_eq!(couchdb["database_writes"]["value"], 3);
    let (status, request_time) =
        http.call("GET", "/_node/_local/_stats/couchdb/request_time", None);
    assert_eq!(status, 200);
    assert_eq!(request_time["type"], "histogram");
    assert!(request_time["value"]["n"].as_u64().unwrap() >= 10);
    assert_eq!(request_time["value"]["percentile"][0][0], 50);
    assert_eq!(
        http.call("GET", "/_node/_local/_stats/couchdb/nothing", None)
            .0,
        404
    );
    let (status, system) = http.call("GET", "/_node/_local/_system", None);
    assert_eq!(status, 200);
    assert!(system["uptime"].is_u64());
    assert!(system["memory"]["other"].as_u64().unwrap() > 0);
    assert!(system["process_count"].as_u64().unwrap() > 1);
    assert_eq!(http.call("POST", "/_node/_local/_prometheus", None).0, 405);

    // Server admins only, as CouchDB.
    let mut anonymous = Client::connect_as(&server.addr, "nobody:x").unwrap();
    for path in [
        "/_node/_local/_prometheus",
        "/_node/_local/_stats",
        "/_node/_local/_system",
    ] {
        let refused = anonymous
            .request_with("GET", path, &[("Authorization", "")], None)
            .unwrap();
        assert_eq!(refused.status, 401, "{path}");
    }
    drop((http, anonymous));
    server.stop();
}

#[test]
fn kv_metrics_count_operations_by_opcode() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let mut http = Client::connect(&server.addr).unwrap();
    assert_eq!(http.call("PUT", "/bucket", None).0, 201);
    let mut mgmt = Client::connect(&server.mgmt_addr).unwrap();
    let before = scrape(&mut mgmt, "/metrics");

    let (user, password) = ADMIN.split_once(':').unwrap();
    let mut kv = Kv::open(&server.kv_addr, user, password, "bucket");
    for key in [b"k1", b"k2"] {
        let reply = kv.call(opcode::SET, key, &store_extras(0, 0), b"{\"a\":1}", 0);
        assert_eq!(reply.status, 0);
    }
    assert_eq!(kv.call(opcode::GET, b"k1", &[], &[], 0).status, 0);
    assert_eq!(kv.call(opcode::DELETE, b"k2", &[], &[], 0).status, 0);
    // A connection merges its timings into the node's when it closes.
    drop(kv);
    let deadline = Instant::now() + GIVE_UP_AFTER;
    let after = loop {
        let after = scrape(&mut mgmt, "/metrics");
        // Writes are timed where they finish, reads on the connection (merged as it closes).
        if moved(&before, &after, "kv_ops{op=\"get\"}") >= 1.0
            && moved(&before, &after, "kv_ops{op=\"del\"}") >= 1.0
        {
            break after;
        }
        assert!(
            Instant::now() < deadline,
            "KV timings never reached /metrics"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(moved(&before, &after, "kv_ops{op=\"set\"}"), 2.0);
    assert_eq!(moved(&before, &after, "kv_ops{op=\"get\"}"), 1.0);
    assert_eq!(moved(&before, &after, "kv_ops{op=\"del\"}"), 1.0);
    assert_eq!(after["kv_cmd_duration_seconds_count{opcode=\"SET\"}"], 2.0);
    assert_eq!(
        after["kv_cmd_duration_seconds_bucket{opcode=\"SET\",le=\"+Inf\"}"],
        2.0
    );
    assert_eq!(after["kv_curr_items{bucket=\"bucket\"}"], 1.0);
    assert!(after.contains_key("kv_curr_connections"));
    // Counted in clock ticks (10 ms): a fresh node may not have used one yet. It is read, and
    // it never goes back.
    assert!(after["process_cpu_seconds_total"] >= before["process_cpu_seconds_total"]);
    assert!(after.contains_key("settee_rocksdb_block_cache_hits_total"));

    // Server admins only.
    let mut anonymous = Client::connect_as(&server.mgmt_addr, "nobody:x").unwrap();
    let refused = anonymous.request("GET", "/metrics", None).unwrap();
    assert_eq!(refused.status, 401);
    drop((http, mgmt, anonymous));
    server.stop();
}
