#![no_main]
//! `since=` values: decoding never panics and whatever decodes re-encodes to itself, in the
//! compact form and in CouchDB's (docs/format/update-seq.md).
use libfuzzer_sys::fuzz_target;
use settee_engine::SeqVector;
use settee_http_wire::couch_seq;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(vector) = SeqVector::decode(text, 64) {
        assert_eq!(SeqVector::decode(&vector.encode(), 64), Some(vector));
    }
    if let Some(seqnos) = couch_seq::decode(text, 64) {
        let again = couch_seq::encode(&seqnos, &[], "node@host");
        if seqnos.iter().all(|seqno| *seqno == 0) {
            // The start is written "0" (the compact form's reader takes it).
            assert_eq!(again, "0");
        } else {
            assert_eq!(couch_seq::decode(&again, 64), Some(seqnos));
        }
    }
});
