#![no_main]
//! The revision fields of documents (`_revisions`, `_rev`, `_deleted`, attachments) as the HTTP
//! door parses them, applied one after another to one document's record as `PUT` and
//! `_bulk_docs` do, with `new_edits=true` and `false` (issue 18): never a panic, and every update
//! the engine accepts leaves a record whose revision tree is not empty, that the engine would
//! store, and whose encoding (tree and record) decodes back to it.
use libfuzzer_sys::fuzz_target;
use settee_engine::record::DocRecord;
use settee_engine::{plan_update, DocLimits, DocUpdate, RevId};
use settee_revtree::RevTree;

/// Documents per input, separated by 0xff (a byte JSON text never holds).
const DOCS_MAX: usize = 8;

fuzz_target!(|data: &[u8]| {
    // Byte 0: bit i says whether document i is written with new_edits=true. Byte 1: the
    // revision limit (0: CouchDB's 1000), small ones make stemming happen.
    let [modes, revs_limit, rest @ ..] = data else { return };
    let revs_limit = if *revs_limit == 0 { 1000 } else { u32::from(*revs_limit) };
    let limits = DocLimits::default();
    let mut record: Option<DocRecord> = None;
    for (index, doc) in rest.split(|byte| *byte == 0xff).take(DOCS_MAX).enumerate() {
        if settee_http::request::check_json_limits(doc, limits.json_depth_max).is_err() {
            continue;
        }
        let Ok(parsed) = settee_http::couch_doc::parse_doc(doc) else { continue };
        let new_edits = modes & (1 << index) != 0;
        // As doc_api::save and bulk_api build the update.
        let history = match (&parsed.revisions, &parsed.rev) {
            (Some(history), _) => history.clone(),
            (None, Some(rev)) => vec![rev.clone()],
            (None, None) => Vec::new(),
        };
        // Whatever the door lets through is a valid revision id.
        assert!(history.iter().all(RevId::is_valid), "{history:?}");
        if !new_edits && history.is_empty() {
            continue;
        }
        let update = DocUpdate {
            key: b"doc".to_vec(),
            parent: parsed.rev.clone(),
            history,
            deleted: parsed.deleted,
            body: parsed.body.clone(),
            attachments: parsed.attachments.clone().unwrap_or_default(),
        };
        let Ok(planned) = plan_update(record.as_ref(), &update, new_edits, revs_limit, &limits)
        else {
            continue;
        };
        assert!(!planned.tree.is_empty());
        assert_eq!(planned.check_storable(), Ok(()));
        let mut tree = Vec::new();
        planned.tree.encode(&mut tree);
        assert_eq!(RevTree::decode(&tree).as_ref(), Ok(&planned.tree));
        let decoded = DocRecord::decode(&planned.encode()).expect("a planned record decodes");
        assert_eq!(decoded, planned);
        record = Some(planned);
    }
});
