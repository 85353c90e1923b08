#![no_main]
//! `since=` values: decoding never panics and whatever decodes re-encodes to itself.
use libfuzzer_sys::fuzz_target;
use settee_engine::SeqVector;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(vector) = SeqVector::decode(text, 64) {
        assert_eq!(SeqVector::decode(&vector.encode(), 64), Some(vector));
    }
});
