//! A rebalance move's manifest as a peer sends it in MoveCommit (docs/format/rebalance.md):
//! any bytes are parsed or refused, never a panic; what parses writes back to JSON that parses
//! to the same manifest, and checking its files against an empty directory refuses or accepts
//! without a panic (names, families and hex keys checked before any file is read).
#![no_main]

use libfuzzer_sys::fuzz_target;
use settee_move_files::MoveManifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(manifest) = MoveManifest::parse(data) {
        let again = serde_json::to_vec(&manifest).expect("a parsed manifest serialises");
        assert_eq!(MoveManifest::parse(&again).ok(), Some(manifest.clone()));
        let _ = manifest.checked_files(std::path::Path::new("/nonexistent-settee-fuzz"));
    }
});
