//! A bucket's collections manifest: its scopes and collections, their ids and names, and the
//! uid that rises with every change (`docs/format/collections.md`, "Semantics"). Pure values:
//! validation, the stored record, the Couchbase JSON shape, name lookups, and the planning of a
//! change ([`Manifest::plan`]) are tested without storage.

use serde::{Deserialize, Serialize};

use crate::error::ManifestError;
/// The first id of a scope or collection that is not `_default` (1..=7 are reserved).
pub const FIRST_COLLECTION_ID: u32 = 8;

/// The name of the default scope and of the default collection.
pub const DEFAULT_NAME: &str = "_default";
/// Longest scope or collection name, in bytes.
pub const NAME_BYTES_MAX: usize = 251;
/// Largest `max_ttl`, in seconds (kv_engine keeps it as a signed 32-bit value).
pub const MAX_TTL_MAX: u32 = i32::MAX as u32;

/// One collection of a scope. `max_ttl` in kv_engine's form: `None` = the bucket's applies;
/// `Some(0)` = no limit; `Some(n)` = expiries capped at now + n seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub name: String,
    pub id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<u32>,
}

/// One scope and its collections, in id order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub name: String,
    pub id: u32,
    pub collections: Vec<Collection>,
}

/// A bucket's scopes and collections. Invariants (checked when a record is read): `_default`
/// scope id 0 holds `_default` collection id 0; other ids are at least 8 and below the next-id
/// counters; collection ids are unique in the bucket; names are unique where they must be and
/// valid; scopes and collections are in id order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    uid: u64,
    next_scope_id: u32,
    next_collection_id: u32,
    scopes: Vec<Scope>,
}

/// The per-bucket limits a create is checked against (both count `_default`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestLimits {
    pub scopes_max: usize,
    pub collections_max: usize,
}

/// One change to a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestChange {
    CreateScope {
        name: String,
    },
    DropScope {
        name: String,
    },
    CreateCollection {
        scope: String,
        name: String,
        max_ttl: Option<u32>,
    },
    DropCollection {
        scope: String,
        name: String,
    },
    /// A new `max_ttl` for an existing collection (DCP "collection modified").
    SetMaxTtl {
        scope: String,
        name: String,
        max_ttl: Option<u32>,
    },
}

/// What a system event (a `seq` entry of version 5) says happened; the values are DCP's
/// SYSTEM_EVENT ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemEventKind {
    CollectionCreated = 0,
    CollectionDropped = 1,
    ScopeCreated = 3,
    ScopeDropped = 4,
    CollectionModified = 5,
}

impl SystemEventKind {
    pub fn from_u8(value: u8) -> Option<SystemEventKind> {
        Some(match value {
            0 => SystemEventKind::CollectionCreated,
            1 => SystemEventKind::CollectionDropped,
            3 => SystemEventKind::ScopeCreated,
            4 => SystemEventKind::ScopeDropped,
            5 => SystemEventKind::CollectionModified,
            _ => return None,
        })
    }

    /// Whether the event names a collection (else a scope, with collection id 0).
    pub fn is_collection_event(self) -> bool {
        matches!(
            self,
            SystemEventKind::CollectionCreated
                | SystemEventKind::CollectionDropped
                | SystemEventKind::CollectionModified
        )
    }
}

/// An event a change writes into every vbucket's stream (seqno and cas come at commit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub kind: SystemEventKind,
    pub scope_id: u32,
    pub collection_id: u32,
    pub max_ttl: Option<u32>,
    /// Empty for drop events.
    pub name: String,
}

/// A change planned against a manifest: the manifest it leaves and the events it writes.
#[derive(Clone, Debug)]
pub struct PlannedChange {
    pub manifest: Manifest,
    pub events: Vec<PlannedEvent>,
}

/// Whether `name` is made of 1..=251 bytes of `[A-Za-z0-9_%-]` (what a lookup accepts).
fn well_formed(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_BYTES_MAX
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'%' | b'-'))
}

/// Refuses a name a user may not create: not well formed, or starting with `_` or `%`.
pub fn check_new_name(name: &str) -> Result<(), ManifestError> {
    if !well_formed(name) {
        return Err(ManifestError::InvalidName(format!(
            "a name must be 1..={NAME_BYTES_MAX} bytes of [A-Za-z0-9_%-]"
        )));
    }
    if name.starts_with(['_', '%']) {
        return Err(ManifestError::InvalidName(
            "a name must not start with _ or %".into(),
        ));
    }
    Ok(())
}

fn check_max_ttl(max_ttl: Option<u32>) -> Result<(), ManifestError> {
    match max_ttl {
        Some(seconds) if seconds > MAX_TTL_MAX => Err(ManifestError::Invalid(format!(
            "max_ttl must be at most {MAX_TTL_MAX} seconds"
        ))),
        _ => Ok(()),
    }
}

/// The part of a lookup path naming a scope or collection: empty means `_default`.
fn path_name(part: &str) -> Result<&str, ManifestError> {
    let name = if part.is_empty() { DEFAULT_NAME } else { part };
    if !well_formed(name) {
        return Err(ManifestError::InvalidName(
            "a path names scopes and collections of [A-Za-z0-9_%-]".into(),
        ));
    }
    Ok(name)
}

impl Default for Manifest {
    /// What a bucket has before its first change: `_default._default` only, uid 0.
    fn default() -> Manifest {
        Manifest {
            uid: 0,
            next_scope_id: FIRST_COLLECTION_ID,
            next_collection_id: FIRST_COLLECTION_ID,
            scopes: vec![Scope {
                name: DEFAULT_NAME.into(),
                id: 0,
                collections: vec![Collection {
                    name: DEFAULT_NAME.into(),
                    id: 0,
                    max_ttl: None,
                }],
            }],
        }
    }
}

impl Manifest {
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// Scopes in id order, each with its collections in id order.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    pub fn scope(&self, name: &str) -> Option<&Scope> {
        self.scopes.iter().find(|scope| scope.name == name)
    }

    /// The collection `name` of scope `scope`.
    pub fn find(&self, scope: &str, name: &str) -> Option<&Collection> {
        self.scope(scope)?
            .collections
            .iter()
            .find(|collection| collection.name == name)
    }

    /// The collection with id `cid` and its scope.
    pub fn collection(&self, cid: u32) -> Option<(&Scope, &Collection)> {
        self.scopes.iter().find_map(|scope| {
            scope
                .collections
                .iter()
                .find(|collection| collection.id == cid)
                .map(|collection| (scope, collection))
        })
    }

    /// Whether collection `cid` exists (is live) in this manifest.
    pub fn is_live(&self, cid: u32) -> bool {
        cid == 0 || self.collection(cid).is_some()
    }

    /// Ids of every live collection, ascending.
    pub fn collection_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .scopes
            .iter()
            .flat_map(|scope| scope.collections.iter().map(|collection| collection.id))
            .collect();
        ids.sort_unstable();
        ids
    }

    fn collection_count(&self) -> usize {
        self.scopes
            .iter()
            .map(|scope| scope.collections.len())
            .sum()
    }

    pub fn unknown_scope(&self) -> ManifestError {
        ManifestError::UnknownScope {
            manifest_uid: self.uid,
        }
    }

    pub fn unknown_collection(&self) -> ManifestError {
        ManifestError::UnknownCollection {
            manifest_uid: self.uid,
        }
    }

    /// The id of the collection a `scope.collection` path names, with kv_engine's rules
    /// (GET_COLLECTION_ID): exactly one `.`, an omitted part means `_default` (`.` is
    /// `_default._default`, `.c1` is `_default.c1`).
    pub fn collection_id(&self, path: &str) -> Result<u32, ManifestError> {
        let Some((scope, collection)) = path.split_once('.') else {
            return Err(ManifestError::InvalidName(
                "a collection path is scope.collection".into(),
            ));
        };
        if collection.contains('.') {
            return Err(ManifestError::InvalidName(
                "a collection path has exactly one '.'".into(),
            ));
        }
        let (scope, collection) = (path_name(scope)?, path_name(collection)?);
        let scope = self.scope(scope).ok_or_else(|| self.unknown_scope())?;
        scope
            .collections
            .iter()
            .find(|held| held.name == collection)
            .map(|held| held.id)
            .ok_or_else(|| self.unknown_collection())
    }

    /// The id of the scope a path names (GET_SCOPE_ID): the part before a `.` (a collection
    /// part is ignored), empty meaning `_default`; more than one `.` is refused.
    pub fn scope_id(&self, path: &str) -> Result<u32, ManifestError> {
        if path.matches('.').count() > 1 {
            return Err(ManifestError::InvalidName(
                "a scope path has at most one '.'".into(),
            ));
        }
        let scope = path_name(path.split('.').next().unwrap_or_default())?;
        self.scope(scope)
            .map(|scope| scope.id)
            .ok_or_else(|| self.unknown_scope())
    }

    /// The stored record (`meta` `bucket/manifest/`): JSON with numbers.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a stored record, checking every invariant of the type.
    pub fn decode(raw: &[u8]) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = serde_json::from_slice(raw)
            .map_err(|error| ManifestError::Corrupt(format!("collections manifest: {error}")))?;
        manifest
            .check()
            .map_err(|reason| ManifestError::Corrupt(format!("collections manifest: {reason}")))?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), String> {
        let default = self.scopes.first().filter(|scope| {
            scope.id == 0
                && scope.name == DEFAULT_NAME
                && scope
                    .collections
                    .first()
                    .is_some_and(|collection| collection.id == 0 && collection.name == DEFAULT_NAME)
        });
        if default.is_none() {
            return Err("no _default._default first".into());
        }
        let mut scope_ids = Vec::new();
        let mut collection_ids = Vec::new();
        for (scope_index, scope) in self.scopes.iter().enumerate() {
            if scope_index > 0 {
                if scope.id < FIRST_COLLECTION_ID || scope.id >= self.next_scope_id {
                    return Err(format!("scope id {} out of range", scope.id));
                }
                check_new_name(&scope.name).map_err(|error| error.to_string())?;
            }
            scope_ids.push(scope.id);
            for (index, collection) in scope.collections.iter().enumerate() {
                if scope_index > 0 || index > 0 {
                    if collection.id < FIRST_COLLECTION_ID
                        || collection.id >= self.next_collection_id
                    {
                        return Err(format!("collection id {} out of range", collection.id));
                    }
                    check_new_name(&collection.name).map_err(|error| error.to_string())?;
                }
                check_max_ttl(collection.max_ttl).map_err(|error| error.to_string())?;
                collection_ids.push(collection.id);
            }
            let names = scope.collections.iter().map(|held| held.name.as_str());
            if !distinct(names) || !ascending(scope.collections.iter().map(|held| held.id)) {
                return Err(format!("collections of scope {} not unique", scope.name));
            }
        }
        let scope_names = self.scopes.iter().map(|scope| scope.name.as_str());
        if !distinct(scope_names) || !ascending(scope_ids.iter().copied()) {
            return Err("scopes not unique".into());
        }
        collection_ids.sort_unstable();
        if collection_ids.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err("collection ids not unique".into());
        }
        Ok(())
    }

    /// kv_engine's manifest JSON (GET_COLLECTIONS_MANIFEST, DCP): uid and ids as lowercase
    /// hex strings, `maxTTL` only on collections that set it.
    pub fn to_kv_json(&self) -> String {
        #[derive(Serialize)]
        struct KvCollection<'a> {
            name: &'a str,
            uid: String,
            #[serde(rename = "maxTTL", skip_serializing_if = "Option::is_none")]
            max_ttl: Option<u32>,
        }
        #[derive(Serialize)]
        struct KvScope<'a> {
            name: &'a str,
            uid: String,
            collections: Vec<KvCollection<'a>>,
        }
        #[derive(Serialize)]
        struct KvManifest<'a> {
            uid: String,
            scopes: Vec<KvScope<'a>>,
        }
        let shape = KvManifest {
            uid: format!("{:x}", self.uid),
            scopes: self
                .scopes
                .iter()
                .map(|scope| KvScope {
                    name: &scope.name,
                    uid: format!("{:x}", scope.id),
                    collections: scope
                        .collections
                        .iter()
                        .map(|collection| KvCollection {
                            name: &collection.name,
                            uid: format!("{:x}", collection.id),
                            max_ttl: collection.max_ttl,
                        })
                        .collect(),
                })
                .collect(),
        };
        serde_json::to_string(&shape).unwrap_or_default()
    }

    /// Plans `change`: validates it against this manifest and `limits` and returns the
    /// manifest it leaves (uid + 1) and the system events it writes, in order (dropping a scope:
    /// one drop event per collection it held, then the scope's).
    pub fn plan(
        &self,
        change: &ManifestChange,
        limits: ManifestLimits,
    ) -> Result<PlannedChange, ManifestError> {
        let mut next = self.clone();
        next.uid = self
            .uid
            .checked_add(1)
            .ok_or_else(|| ManifestError::LimitReached("manifest uid".into()))?;
        let events = match change {
            ManifestChange::CreateScope { name } => {
                check_new_name(name)?;
                if self.scope(name).is_some() {
                    return Err(ManifestError::ScopeExists(name.clone()));
                }
                if self.scopes.len() >= limits.scopes_max {
                    return Err(ManifestError::LimitReached(format!(
                        "at most {} scopes per bucket",
                        limits.scopes_max
                    )));
                }
                let id = next.next_scope_id;
                next.next_scope_id = id
                    .checked_add(1)
                    .ok_or_else(|| ManifestError::LimitReached("scope ids".into()))?;
                next.scopes.push(Scope {
                    name: name.clone(),
                    id,
                    collections: Vec::new(),
                });
                vec![PlannedEvent {
                    kind: SystemEventKind::ScopeCreated,
                    scope_id: id,
                    collection_id: 0,
                    max_ttl: None,
                    name: name.clone(),
                }]
            }
            ManifestChange::DropScope { name } => {
                if name == DEFAULT_NAME {
                    return Err(ManifestError::Invalid(
                        "the _default scope cannot be dropped".into(),
                    ));
                }
                let index = next
                    .scopes
                    .iter()
                    .position(|scope| &scope.name == name)
                    .ok_or_else(|| self.unknown_scope())?;
                let scope = next.scopes.remove(index);
                let mut events: Vec<PlannedEvent> = scope
                    .collections
                    .iter()
                    .map(|collection| PlannedEvent {
                        kind: SystemEventKind::CollectionDropped,
                        scope_id: scope.id,
                        collection_id: collection.id,
                        max_ttl: None,
                        name: String::new(),
                    })
                    .collect();
                events.push(PlannedEvent {
                    kind: SystemEventKind::ScopeDropped,
                    scope_id: scope.id,
                    collection_id: 0,
                    max_ttl: None,
                    name: String::new(),
                });
                events
            }
            ManifestChange::CreateCollection {
                scope,
                name,
                max_ttl,
            } => {
                check_new_name(name)?;
                check_max_ttl(*max_ttl)?;
                let count = self.collection_count();
                let id = next.next_collection_id;
                let held = next
                    .scopes
                    .iter_mut()
                    .find(|held| &held.name == scope)
                    .ok_or_else(|| self.unknown_scope())?;
                if held.collections.iter().any(|held| &held.name == name) {
                    return Err(ManifestError::CollectionExists(format!("{scope}.{name}")));
                }
                if count >= limits.collections_max {
                    return Err(ManifestError::LimitReached(format!(
                        "at most {} collections per bucket",
                        limits.collections_max
                    )));
                }
                held.collections.push(Collection {
                    name: name.clone(),
                    id,
                    max_ttl: *max_ttl,
                });
                let scope_id = held.id;
                next.next_collection_id = id
                    .checked_add(1)
                    .ok_or_else(|| ManifestError::LimitReached("collection ids".into()))?;
                vec![PlannedEvent {
                    kind: SystemEventKind::CollectionCreated,
                    scope_id,
                    collection_id: id,
                    max_ttl: *max_ttl,
                    name: name.clone(),
                }]
            }
            ManifestChange::DropCollection { scope, name } => {
                let (scope_id, collection) = next.take_collection(self, scope, name)?;
                vec![PlannedEvent {
                    kind: SystemEventKind::CollectionDropped,
                    scope_id,
                    collection_id: collection.id,
                    max_ttl: None,
                    name: String::new(),
                }]
            }
            ManifestChange::SetMaxTtl {
                scope,
                name,
                max_ttl,
            } => {
                check_max_ttl(*max_ttl)?;
                let held_scope = next
                    .scopes
                    .iter_mut()
                    .find(|held| &held.name == scope)
                    .ok_or_else(|| self.unknown_scope())?;
                let scope_id = held_scope.id;
                let held = held_scope
                    .collections
                    .iter_mut()
                    .find(|held| &held.name == name)
                    .ok_or_else(|| self.unknown_collection())?;
                if held.id == 0 {
                    return Err(ManifestError::Invalid(
                        "the _default collection takes the bucket's max_ttl".into(),
                    ));
                }
                held.max_ttl = *max_ttl;
                vec![PlannedEvent {
                    kind: SystemEventKind::CollectionModified,
                    scope_id,
                    collection_id: held.id,
                    max_ttl: *max_ttl,
                    name: held.name.clone(),
                }]
            }
        };
        Ok(PlannedChange {
            manifest: next,
            events,
        })
    }

    /// Removes collection `scope.name` from `self` (a copy of `current`), refusing the default
    /// collection; returns its scope's id and the collection.
    fn take_collection(
        &mut self,
        current: &Manifest,
        scope: &str,
        name: &str,
    ) -> Result<(u32, Collection), ManifestError> {
        if scope == DEFAULT_NAME && name == DEFAULT_NAME {
            return Err(ManifestError::Invalid(
                "the _default collection cannot be dropped".into(),
            ));
        }
        let held = self
            .scopes
            .iter_mut()
            .find(|held| held.name == scope)
            .ok_or_else(|| current.unknown_scope())?;
        let index = held
            .collections
            .iter()
            .position(|collection| collection.name == name)
            .ok_or_else(|| current.unknown_collection())?;
        Ok((held.id, held.collections.remove(index)))
    }
}

fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().all(|name| seen.insert(name))
}

fn ascending(ids: impl Iterator<Item = u32>) -> bool {
    let ids: Vec<u32> = ids.collect();
    ids.windows(2).all(|pair| pair[0] < pair[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ManifestLimits = ManifestLimits {
        scopes_max: 1000,
        collections_max: 1000,
    };

    fn create_scope(name: &str) -> ManifestChange {
        ManifestChange::CreateScope { name: name.into() }
    }

    fn create_collection(scope: &str, name: &str, max_ttl: Option<u32>) -> ManifestChange {
        ManifestChange::CreateCollection {
            scope: scope.into(),
            name: name.into(),
            max_ttl,
        }
    }

    fn drop_collection(scope: &str, name: &str) -> ManifestChange {
        ManifestChange::DropCollection {
            scope: scope.into(),
            name: name.into(),
        }
    }

    fn apply(manifest: &Manifest, change: ManifestChange) -> Manifest {
        manifest.plan(&change, LIMITS).expect("change").manifest
    }

    /// The example of collections.md: inventory (8) with airline (8, maxTTL 3600), route (9).
    fn inventory() -> Manifest {
        let manifest = apply(&Manifest::default(), create_scope("inventory"));
        let manifest = apply(
            &manifest,
            create_collection("inventory", "airline", Some(3600)),
        );
        apply(&manifest, create_collection("inventory", "route", None))
    }

    #[test]
    fn the_default_manifest_holds_default_default_only() {
        let manifest = Manifest::default();
        assert_eq!(manifest.uid(), 0);
        assert_eq!(manifest.collection_ids(), vec![0]);
        assert_eq!(manifest.collection_id("_default._default").ok(), Some(0));
        assert_eq!(
            manifest.to_kv_json(),
            r#"{"uid":"0","scopes":[{"name":"_default","uid":"0","collections":[{"name":"_default","uid":"0"}]}]}"#
        );
    }

    #[test]
    fn the_record_and_the_kv_json_are_as_specified() {
        let manifest = inventory();
        assert_eq!(manifest.uid(), 3);
        let record: serde_json::Value = serde_json::from_slice(&manifest.encode()).expect("record");
        assert_eq!(
            record,
            serde_json::json!({"uid": 3, "next_scope_id": 9, "next_collection_id": 10,
             "scopes": [
              {"name": "_default", "id": 0, "collections": [{"name": "_default", "id": 0}]},
              {"name": "inventory", "id": 8, "collections": [
                {"name": "airline", "id": 8, "max_ttl": 3600}, {"name": "route", "id": 9}]}]})
        );
        assert_eq!(
            Manifest::decode(&manifest.encode()).expect("decode"),
            manifest
        );
        assert_eq!(
            manifest.to_kv_json(),
            concat!(
                r#"{"uid":"3","scopes":[{"name":"_default","uid":"0","collections":"#,
                r#"[{"name":"_default","uid":"0"}]},{"name":"inventory","uid":"8","collections":"#,
                r#"[{"name":"airline","uid":"8","maxTTL":3600},{"name":"route","uid":"9"}]}]}"#
            )
        );
    }

    #[test]
    fn ids_show_in_lowercase_hex() {
        let mut manifest = Manifest::default();
        for index in 0..20 {
            manifest = apply(
                &manifest,
                create_collection("_default", &format!("c{index}"), None),
            );
        }
        let json: serde_json::Value = serde_json::from_str(&manifest.to_kv_json()).expect("json");
        assert_eq!(json["uid"], "14");
        assert_eq!(json["scopes"][0]["collections"][20]["uid"], "1b");
    }

    #[test]
    fn names_follow_couchbase_rules() {
        for good in ["a", "A-b_c%9", "x".repeat(251).as_str()] {
            assert!(check_new_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "_x",
            "%x",
            "_default",
            "a.b",
            "a b",
            "é",
            "x".repeat(252).as_str(),
        ] {
            assert!(
                matches!(check_new_name(bad), Err(ManifestError::InvalidName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn ids_start_at_8_and_are_never_reused() {
        let manifest = inventory();
        let dropped = apply(&manifest, drop_collection("inventory", "route"));
        assert_eq!(dropped.uid(), 4);
        assert!(!dropped.is_live(9));
        let again = apply(&dropped, create_collection("inventory", "route", None));
        assert_eq!(again.collection_id("inventory.route").ok(), Some(10));
        let scope_dropped = apply(
            &again,
            ManifestChange::DropScope {
                name: "inventory".into(),
            },
        );
        let scope_again = apply(&scope_dropped, create_scope("inventory"));
        assert_eq!(scope_again.scope_id("inventory").ok(), Some(9));
        assert_eq!(
            Manifest::decode(&scope_again.encode()).expect("decode"),
            scope_again
        );
    }

    #[test]
    fn dropping_a_scope_drops_its_collections_first() {
        let planned = inventory()
            .plan(
                &ManifestChange::DropScope {
                    name: "inventory".into(),
                },
                LIMITS,
            )
            .expect("drop");
        let kinds: Vec<(SystemEventKind, u32, u32)> = planned
            .events
            .iter()
            .map(|event| (event.kind, event.scope_id, event.collection_id))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (SystemEventKind::CollectionDropped, 8, 8),
                (SystemEventKind::CollectionDropped, 8, 9),
                (SystemEventKind::ScopeDropped, 8, 0),
            ]
        );
        assert_eq!(planned.manifest.collection_ids(), vec![0]);
    }

    #[test]
    fn refusals_are_typed() {
        let manifest = inventory();
        let refused = |change: ManifestChange| manifest.plan(&change, LIMITS).err();
        assert!(matches!(
            refused(create_scope("inventory")),
            Some(ManifestError::ScopeExists(_))
        ));
        assert!(matches!(
            refused(create_collection("inventory", "route", None)),
            Some(ManifestError::CollectionExists(_))
        ));
        assert!(matches!(
            refused(create_collection("nowhere", "c", None)),
            Some(ManifestError::UnknownScope { manifest_uid: 3 })
        ));
        assert!(matches!(
            refused(drop_collection("inventory", "nothing")),
            Some(ManifestError::UnknownCollection { manifest_uid: 3 })
        ));
        assert!(matches!(
            refused(drop_collection("_default", "_default")),
            Some(ManifestError::Invalid(_))
        ));
        assert!(matches!(
            refused(ManifestChange::DropScope {
                name: "_default".into()
            }),
            Some(ManifestError::Invalid(_))
        ));
        assert!(matches!(
            refused(create_collection("inventory", "c", Some(MAX_TTL_MAX + 1))),
            Some(ManifestError::Invalid(_))
        ));
        assert!(matches!(
            refused(create_collection("inventory", "_c", None)),
            Some(ManifestError::InvalidName(_))
        ));
    }

    #[test]
    fn limits_count_the_defaults() {
        let limits = ManifestLimits {
            scopes_max: 2,
            collections_max: 3,
        };
        let manifest = Manifest::default();
        let one = manifest
            .plan(&create_scope("a"), limits)
            .expect("a")
            .manifest;
        assert!(matches!(
            one.plan(&create_scope("b"), limits).err(),
            Some(ManifestError::LimitReached(_))
        ));
        let two = one
            .plan(&create_collection("a", "x", None), limits)
            .expect("x")
            .manifest;
        let three = two
            .plan(&create_collection("a", "y", None), limits)
            .expect("y")
            .manifest;
        assert!(matches!(
            three.plan(&create_collection("a", "z", None), limits).err(),
            Some(ManifestError::LimitReached(_))
        ));
        // A drop frees a place; the id still moves on.
        let freed = three
            .plan(&drop_collection("a", "x"), limits)
            .expect("drop")
            .manifest;
        let again = freed
            .plan(&create_collection("a", "z", None), limits)
            .expect("z")
            .manifest;
        assert_eq!(again.collection_id("a.z").ok(), Some(10));
    }

    #[test]
    fn lookups_follow_kv_engine() {
        let manifest = inventory();
        assert_eq!(manifest.collection_id(".").ok(), Some(0));
        assert_eq!(manifest.collection_id("_default.").ok(), Some(0));
        assert_eq!(manifest.collection_id("inventory.airline").ok(), Some(8));
        assert_eq!(
            manifest
                .collection_id("inventory.")
                .err()
                .map(|e| e.to_string()),
            Some(ManifestError::UnknownCollection { manifest_uid: 3 }.to_string())
        );
        assert!(matches!(
            manifest.collection_id(".airline"),
            Err(ManifestError::UnknownCollection { manifest_uid: 3 })
        ));
        assert!(matches!(
            manifest.collection_id("nowhere.airline"),
            Err(ManifestError::UnknownScope { manifest_uid: 3 })
        ));
        for bad in [
            "inventory",
            "a.b.c",
            "inv entory.airline",
            "inventory.air/line",
            "",
        ] {
            assert!(
                matches!(
                    manifest.collection_id(bad),
                    Err(ManifestError::InvalidName(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(manifest.scope_id("").ok(), Some(0));
        assert_eq!(manifest.scope_id("inventory").ok(), Some(8));
        assert_eq!(manifest.scope_id("inventory.whatever").ok(), Some(8));
        assert!(matches!(
            manifest.scope_id("_system"),
            Err(ManifestError::UnknownScope { manifest_uid: 3 })
        ));
        assert!(matches!(
            manifest.scope_id("a.b.c"),
            Err(ManifestError::InvalidName(_))
        ));
        let (scope, collection) = manifest.collection(8).expect("airline");
        assert_eq!(
            (scope.name.as_str(), collection.max_ttl),
            ("inventory", Some(3600))
        );
    }

    #[test]
    fn max_ttl_changes_raise_the_uid_and_spare_the_default() {
        let manifest = inventory();
        let planned = manifest
            .plan(
                &ManifestChange::SetMaxTtl {
                    scope: "inventory".into(),
                    name: "route".into(),
                    max_ttl: Some(0),
                },
                LIMITS,
            )
            .expect("modify");
        assert_eq!(planned.manifest.uid(), 4);
        assert_eq!(
            planned.manifest.collection(9).map(|(_, c)| c.max_ttl),
            Some(Some(0))
        );
        assert_eq!(planned.events[0].kind, SystemEventKind::CollectionModified);
        assert!(manifest
            .plan(
                &ManifestChange::SetMaxTtl {
                    scope: "_default".into(),
                    name: "_default".into(),
                    max_ttl: Some(5),
                },
                LIMITS,
            )
            .is_err());
    }

    #[test]
    fn damaged_records_are_corrupt() {
        let good = inventory().encode();
        let text = String::from_utf8(good).expect("utf8");
        for bad in [
            text.replace("\"id\":9", "\"id\":8"),
            text.replace("\"id\":8,\"collections\"", "\"id\":3,\"collections\""),
            text.replace("route", "_route"),
            text.replace("\"next_collection_id\":10", "\"next_collection_id\":9"),
            text.replace(
                "\"_default\",\"id\":0,\"collections\":[{\"name\":\"_default\",\"id\":0}]",
                "\"_default\",\"id\":0,\"collections\":[]",
            ),
            "{}".into(),
            "not json".into(),
        ] {
            assert!(
                matches!(
                    Manifest::decode(bad.as_bytes()),
                    Err(ManifestError::Corrupt(_))
                ),
                "{bad}"
            );
        }
    }
}
