//! A bucket's Couchbase collections manifest as a pure value (`docs/format/collections.md`):
//! scopes and collections with their ids, names and max TTLs, the uid that rises with every
//! change, validation of names and stored records, kv_engine's JSON shape, lookups by path,
//! the planning of a change into the next manifest and its system events, and the names under
//! which the CouchDB door shows each collection (`door_name`).
//!
//! Must not know: storage, the engine's keys, either door's protocol.

mod door_name;
mod error;
mod events_to;
mod manifest;

pub use door_name::{decode_part, door_name, encode_part, split_door_name, DoorName};
pub use error::ManifestError;
pub use manifest::{
    check_new_name, Collection, Manifest, ManifestChange, ManifestLimits, PlannedChange,
    PlannedEvent, Scope, SystemEventKind, DEFAULT_NAME, FIRST_COLLECTION_ID, MAX_TTL_MAX,
    NAME_BYTES_MAX,
};
