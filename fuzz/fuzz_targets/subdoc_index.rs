#![no_main]
//! The structural-index reader on arbitrary index bytes over an arbitrary document: never a
//! panic, every span it hands out lies inside the document, and a lookup through it agrees
//! with a scan whenever the index was built from that document.
use libfuzzer_sys::fuzz_target;
use settee_engine::subdoc::{index, json, path};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = (data[0] as usize * 256 + data[1] as usize) % data.len().max(1);
    let (doc, raw) = data[2..].split_at(split.min(data.len() - 2));
    let components = [
        path::Component::Key(std::borrow::Cow::Borrowed(&b"a"[..])),
        path::Component::Index(0),
        path::Component::Index(-1),
    ];
    if let Some(index) = index::Index::open(raw) {
        for start in 0..doc.len().min(64) {
            for component in &components {
                if let Ok(Some(((value_start, value_end), _))) = index.child(doc, start, component) {
                    assert!(value_start <= value_end && value_end <= doc.len());
                }
            }
            if let Ok(end) = index.value_end(doc, start) {
                assert!(end <= doc.len());
            }
        }
        let paths: Vec<&[path::Component<'_>]> = vec![&components[..1], &components[1..2]];
        for (found_start, found_end) in json::resolve_all_indexed(doc, Some(&index), &paths)
            .into_iter()
            .flatten()
        {
            assert!(found_start <= found_end && found_end <= doc.len());
        }
    }
    // An index built from the document answers like a scan.
    if let Some(built) = index::build(doc) {
        let index = index::Index::open(&built).expect("a fresh index opens");
        let paths: Vec<&[path::Component<'_>]> = vec![&components[..1], &components[1..2], &components[2..]];
        assert_eq!(
            json::resolve_all(doc, &paths),
            json::resolve_all_indexed(doc, Some(&index), &paths)
        );
    }
});
