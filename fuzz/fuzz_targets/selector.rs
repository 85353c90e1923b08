#![no_main]
//! `_changes?filter=_selector` and `_find` selectors: validate + match never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let (selector, doc) = match &value {
        serde_json::Value::Array(items) if items.len() == 2 => (&items[0], &items[1]),
        _ => (&value, &value),
    };
    if settee_mango::selector::validate(selector).is_ok() {
        let _ = settee_mango::selector::matches(selector, doc);
    }
});
