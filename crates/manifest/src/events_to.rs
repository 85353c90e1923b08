//! The system events that take one manifest to a later one of the same bucket
//! ([`Manifest::events_to`]): how a cluster node makes its bucket's manifest the cluster map's
//! when it may have missed some of the changes in between (docs/format/cluster-map.md, "What
//! every node does with the committed map").

use crate::manifest::{Collection, Manifest, PlannedEvent, Scope, SystemEventKind};

impl Manifest {
    /// The events a change from `self` to `target` writes, in stream order: collections
    /// dropped (a dropped scope's collections, then the scope), then scopes created, then
    /// collections created or given another max TTL. Ids say what is the same scope or
    /// collection: a name dropped and created again is a drop and a create. `target` is
    /// assumed to be a later manifest of the same bucket (ids are never reused).
    pub fn events_to(&self, target: &Manifest) -> Vec<PlannedEvent> {
        let mut events = Vec::new();
        for scope in self.scopes() {
            let kept = target.scopes().iter().find(|held| held.id == scope.id);
            for collection in &scope.collections {
                let stays = kept.is_some_and(|kept| holds(kept, collection.id).is_some());
                if !stays {
                    events.push(event(SystemEventKind::CollectionDropped, scope, collection));
                }
            }
            if kept.is_none() {
                events.push(scope_event(SystemEventKind::ScopeDropped, scope));
            }
        }
        for scope in target.scopes() {
            let had = self.scopes().iter().find(|held| held.id == scope.id);
            if had.is_none() {
                events.push(scope_event(SystemEventKind::ScopeCreated, scope));
            }
            for collection in &scope.collections {
                match had.and_then(|had| holds(had, collection.id)) {
                    None => {
                        events.push(event(SystemEventKind::CollectionCreated, scope, collection))
                    }
                    Some(old) if old.max_ttl != collection.max_ttl => {
                        events.push(event(
                            SystemEventKind::CollectionModified,
                            scope,
                            collection,
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        events
    }
}

fn holds(scope: &Scope, id: u32) -> Option<&Collection> {
    scope.collections.iter().find(|held| held.id == id)
}

/// An event on `collection` of `scope`, as `Manifest::plan` writes it (drops carry no name).
fn event(kind: SystemEventKind, scope: &Scope, collection: &Collection) -> PlannedEvent {
    let dropped = kind == SystemEventKind::CollectionDropped;
    PlannedEvent {
        kind,
        scope_id: scope.id,
        collection_id: collection.id,
        max_ttl: if dropped { None } else { collection.max_ttl },
        name: if dropped {
            String::new()
        } else {
            collection.name.clone()
        },
    }
}

fn scope_event(kind: SystemEventKind, scope: &Scope) -> PlannedEvent {
    PlannedEvent {
        kind,
        scope_id: scope.id,
        collection_id: 0,
        max_ttl: None,
        name: if kind == SystemEventKind::ScopeDropped {
            String::new()
        } else {
            scope.name.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::{ManifestChange, ManifestLimits};
    use crate::Manifest;

    const LIMITS: ManifestLimits = ManifestLimits {
        scopes_max: 100,
        collections_max: 100,
    };

    fn change(manifest: &Manifest, change: ManifestChange) -> (Manifest, Vec<super::PlannedEvent>) {
        let planned = manifest.plan(&change, LIMITS).expect("plan");
        (planned.manifest, planned.events)
    }

    fn collection(scope: &str, name: &str, max_ttl: Option<u32>) -> ManifestChange {
        ManifestChange::CreateCollection {
            scope: scope.into(),
            name: name.into(),
            max_ttl,
        }
    }

    /// One step at a time, the events are exactly the ones the change planned.
    #[test]
    fn each_step_gives_the_planned_events() {
        let mut manifest = Manifest::default();
        let steps = [
            ManifestChange::CreateScope { name: "s".into() },
            collection("s", "a", None),
            collection("_default", "b", Some(60)),
            ManifestChange::SetMaxTtl {
                scope: "s".into(),
                name: "a".into(),
                max_ttl: Some(10),
            },
            ManifestChange::DropCollection {
                scope: "_default".into(),
                name: "b".into(),
            },
            ManifestChange::DropScope { name: "s".into() },
        ];
        for step in steps {
            let (next, planned) = change(&manifest, step.clone());
            assert_eq!(manifest.events_to(&next), planned, "{step:?}");
            manifest = next;
        }
    }

    /// Several steps missed at once: drops first, then creates; a name dropped and created
    /// again is the old id dropped and the new one created; what came and went is not seen.
    #[test]
    fn missed_steps_become_one_difference() {
        let (first, _) = change(
            &Manifest::default(),
            ManifestChange::CreateScope { name: "s".into() },
        );
        let (first, _) = change(&first, collection("s", "a", None));
        let old_a = first.find("s", "a").expect("a").id;
        let mut later = first.clone();
        for step in [
            ManifestChange::DropCollection {
                scope: "s".into(),
                name: "a".into(),
            },
            collection("s", "a", Some(5)),
            collection("s", "gone", None),
            ManifestChange::DropCollection {
                scope: "s".into(),
                name: "gone".into(),
            },
            ManifestChange::CreateScope { name: "t".into() },
            collection("t", "c", None),
        ] {
            later = change(&later, step).0;
        }
        let events = first.events_to(&later);
        let summary: Vec<(u8, u32, u32, &str)> = events
            .iter()
            .map(|event| {
                (
                    event.kind as u8,
                    event.scope_id,
                    event.collection_id,
                    event.name.as_str(),
                )
            })
            .collect();
        let new_a = later.find("s", "a").expect("a").id;
        let t = later.scope("t").expect("t").id;
        let c = later.find("t", "c").expect("c").id;
        let s = later.scope("s").expect("s").id;
        assert_eq!(
            summary,
            vec![
                (1, s, old_a, ""),
                (0, s, new_a, "a"),
                (3, t, 0, "t"),
                (0, t, c, "c")
            ]
        );
        assert_eq!(events[1].max_ttl, Some(5));
        assert!(later.events_to(&later).is_empty());
    }
}
