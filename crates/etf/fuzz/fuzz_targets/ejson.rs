#![no_main]
//! A document body to the EJSON bytes its CouchDB revision id hashes (`settee-etf`
//! `json_to_ejson`): never panics, and for JSON without objects (where serde's value and
//! jiffy's term cannot differ by repeated members) and without integers past 64 bits it
//! writes exactly what the term tree of serde's value writes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut direct = vec![131];
    let written = settee_etf::json_to_ejson(data, &mut direct);
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Some(()) = written else {
        return; // deeper than the encoder follows, or a bignum: the engine falls back
    };
    let text = String::from_utf8_lossy(data);
    let wide_integer = text
        .split(|c: char| !c.is_ascii_digit())
        .any(|digits| digits.len() > 18);
    // serde reads `-0` as the float -0.0; jiffy (and CouchDB's revision ids) the integer 0.
    // Floats compare with serde's correctly rounded parser (`float_roundtrip`), as Rust's and
    // jiffy's are.
    let negative_zero = text.contains("-0");
    if !wide_integer && !negative_zero && !has_object(&value) {
        assert_eq!(settee_etf::Term::from_json(&value).to_binary(), direct, "{text}");
    }
});

fn has_object(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(_) => true,
        serde_json::Value::Array(items) => items.iter().any(has_object),
        _ => false,
    }
}
