#![no_main]
//! `Term::from_binary` on any bytes (a `since` a client sends carries one): never panics, and
//! whatever decodes re-encodes to bytes that decode and re-encode to themselves (compared as
//! bytes: a NaN is not equal to itself, and a list of bytes comes back as a string).
use libfuzzer_sys::fuzz_target;
use settee_etf::Term;

fuzz_target!(|data: &[u8]| {
    if let Some(term) = Term::from_binary(data) {
        let again = term.to_binary();
        let third = Term::from_binary(&again).expect("an encoding decodes").to_binary();
        assert_eq!(again, third);
    }
});
