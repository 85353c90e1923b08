#![no_main]
//! What the replicator parses from the network and from users: `POST /_replicate` bodies and
//! `_replicator` documents (endpoint URLs, headers, credentials, filters, options), and the
//! peers' `_changes` pages. Never panics; ids are computed for whatever parses.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = settee_replicator::endpoint::RemoteDb::parse(text, &[], None);
        let header = [("Authorization".to_string(), text.to_string())];
        let _ = settee_replicator::endpoint::RemoteDb::parse("http://h/db", &header, None);
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = settee_replicator::changes::parse_page(&value);
        if let Ok(settee_replicator::Request::Start(params)) = settee_replicator::Request::parse(&value) {
            let id = settee_replicator::ids::replication_id(&params, "uuid", Some("function(){}"));
            assert_eq!(id.base.len(), 32);
        }
    }
});
