//! The simulation's invariants, checked as the run goes; the first broken one is an error
//! naming what broke.

use std::collections::BTreeMap;
use std::sync::Arc;

use settee_cluster::map::{ClusterMap, NodeId};

use crate::sim::model::Model;

#[derive(Default)]
pub struct Checks {
    /// Every committed map seen, by revision (maps of one revision must be identical).
    maps: BTreeMap<u64, Arc<ClusterMap>>,
    /// (bucket, vbucket, epoch) -> active: at most one active per vbucket per epoch.
    actives: BTreeMap<(String, u16, u64), Option<NodeId>>,
    /// The map each node was last checked at: an unchanged `Arc` needs no second look.
    last_checked: BTreeMap<NodeId, Arc<ClusterMap>>,
    /// term -> leader seen leading in it.
    leaders: BTreeMap<u64, NodeId>,
    /// The highest revision whose promotions were checked against the model.
    promotions_checked_to: u64,
    pub promotions: u64,
    pub stranded: u64,
    pub failovers: u64,
}

impl Checks {
    pub fn leader(&mut self, term: u64, node: NodeId) -> Result<(), String> {
        match self.leaders.insert(term, node) {
            Some(other) if other != node => {
                Err(format!("two leaders in term {term}: {other} and {node}"))
            }
            _ => Ok(()),
        }
    }

    pub fn terms(&self) -> usize {
        self.leaders.len()
    }

    pub fn revisions(&self) -> usize {
        self.maps.len()
    }

    /// A map some node applied. New revisions are checked against everything seen, and their
    /// promotions against the model's acknowledged writes at this moment (the first moment
    /// any node applied them).
    pub fn map(
        &mut self,
        node: NodeId,
        map: &Arc<ClusterMap>,
        model: &Model,
    ) -> Result<(), String> {
        if self
            .last_checked
            .get(&node)
            .is_some_and(|last| Arc::ptr_eq(last, map))
        {
            return Ok(());
        }
        self.last_checked.insert(node, map.clone());
        if let Some(seen) = self.maps.get(&map.revision) {
            if **seen != **map {
                return Err(format!(
                    "node {node} applied a different map at revision {}",
                    map.revision
                ));
            }
            return Ok(());
        }
        map.check()
            .map_err(|broken| format!("revision {}: {broken}", map.revision))?;
        for (name, bucket) in &map.buckets {
            for (vb, entry) in bucket.vbuckets.iter().enumerate() {
                let key = (name.clone(), vb as u16, entry.epoch);
                match self.actives.get(&key) {
                    Some(active) if *active != entry.active => {
                        return Err(format!(
                            "{name} vb {vb} epoch {}: actives {active:?} and {:?}",
                            entry.epoch, entry.active
                        ));
                    }
                    Some(_) => {}
                    None => {
                        self.actives.insert(key, entry.active);
                    }
                }
            }
        }
        self.check_promotions(map, model)?;
        self.maps.insert(map.revision, map.clone());
        Ok(())
    }

    fn check_promotions(&mut self, map: &ClusterMap, model: &Model) -> Result<(), String> {
        if map.revision <= self.promotions_checked_to {
            return Ok(());
        }
        let previous = self
            .maps
            .range(..map.revision)
            .next_back()
            .map(|(_, m)| m.clone());
        self.promotions_checked_to = map.revision;
        let Some(previous) = previous else {
            return Ok(());
        };
        let failed_now = map
            .members
            .values()
            .filter(|m| !map.is_active_member(m.id) && previous.is_active_member(m.id))
            .count();
        self.failovers += failed_now as u64;
        for (name, bucket) in &map.buckets {
            let Some(before) = previous.buckets.get(name) else {
                continue;
            };
            for (vb, (entry, old)) in bucket.vbuckets.iter().zip(&before.vbuckets).enumerate() {
                if entry.active == old.active {
                    continue;
                }
                let key = (name.clone(), vb as u16);
                let acked = model.acked.get(&key).copied().unwrap_or(0);
                match entry.active {
                    Some(promoted) => {
                        self.promotions += 1;
                        let held = model
                            .copies
                            .get(&key)
                            .and_then(|copies| copies.get(&promoted))
                            .map_or(0, |copy| copy.persisted);
                        if held < acked {
                            return Err(format!(
                                "{name} vb {vb}: promoted node {promoted} holds seqno {held}, \
                                 below the majority-acknowledged {acked} (revision {})",
                                map.revision
                            ));
                        }
                    }
                    None => self.stranded += 1,
                }
            }
        }
        Ok(())
    }
}
