//! A design document's `rewrites` and a request, both from the network: whatever they hold,
//! parsing the rules, matching them and reading a rewrite function's answer never panic, and
//! a target built is a resolved path under `/`.
//!
//! Input: `rewrites JSON \0 method \0 path after _rewrite \0 query string`. The same JSON is
//! also read as a rewrite function's answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_rewrite::{answer, RewriteRequest, Rules};

fn check(target: &str) {
    assert!(target.starts_with('/'), "{target}");
    let path = target.split('?').next().unwrap_or_default();
    assert!(
        path.split('/').all(|segment| segment != "." && segment != ".."),
        "{target}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(4, |byte| *byte == 0);
    let json = parts.next().unwrap_or_default();
    let method = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let path = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let query = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(json) else {
        return;
    };
    let rest: Vec<String> = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .map(String::from)
        .collect();
    let query: Vec<(String, String)> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let request = RewriteRequest {
        method: &method,
        db: "db/with_slash",
        ddoc: "app",
        rest: &rest,
        query: &query,
    };
    if let Some(rules) = value.as_array() {
        for secure in [true, false] {
            if let Ok(target) = Rules::parse(rules, secure).and_then(|rules| rules.rewrite(&request)) {
                check(&target);
            }
        }
    }
    if let Ok(answer::Rewrite::Dispatch { target, .. }) = answer::read(&value, &request) {
        check(&target);
    }
});
