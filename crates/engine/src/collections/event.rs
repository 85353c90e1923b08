//! System events: the `seq` entries (version 5) a manifest change writes into every vbucket's
//! stream, so a reader of the stream (DCP, later) learns of creates and drops in seqno order
//! with the documents (`docs/format/collections.md`, CF `seq`).
//!
//! ```text
//! 0  ver=5 | 1 event u8 | 2 cas u64 | 10 manifest uid u64 | 18 scope id u32
//! 22 collection id u32 | 26 flags u8 (bit 0: max_ttl present) | 27 max_ttl u32
//! 31 namelen u8 | 32 name
//! ```

use settee_manifest::{PlannedEvent, SystemEventKind};

pub(crate) const VERSION_EVENT: u8 = 5;
const FLAG_MAX_TTL: u8 = 1;
const NAME_AT: usize = 32;

/// One system event of a vbucket's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemEvent {
    pub vbucket: u16,
    pub seqno: u64,
    /// The change's HLC time, like a write's CAS.
    pub cas: u64,
    pub kind: SystemEventKind,
    /// The manifest uid the change produced.
    pub manifest_uid: u64,
    pub scope_id: u32,
    /// 0 for scope events.
    pub collection_id: u32,
    pub max_ttl: Option<u32>,
    /// The created (or modified) scope's or collection's name; empty for drops.
    pub name: String,
}

impl SystemEvent {
    pub(crate) fn of_plan(
        vbucket: u16,
        seqno: u64,
        cas: u64,
        manifest_uid: u64,
        planned: &PlannedEvent,
    ) -> SystemEvent {
        SystemEvent {
            vbucket,
            seqno,
            cas,
            kind: planned.kind,
            manifest_uid,
            scope_id: planned.scope_id,
            collection_id: planned.collection_id,
            max_ttl: planned.max_ttl,
            name: planned.name.clone(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let name = &self.name.as_bytes()[..self.name.len().min(u8::MAX as usize)];
        let mut out = Vec::with_capacity(NAME_AT + name.len());
        out.push(VERSION_EVENT);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(&self.manifest_uid.to_be_bytes());
        out.extend_from_slice(&self.scope_id.to_be_bytes());
        out.extend_from_slice(&self.collection_id.to_be_bytes());
        out.push(if self.max_ttl.is_some() {
            FLAG_MAX_TTL
        } else {
            0
        });
        out.extend_from_slice(&self.max_ttl.unwrap_or(0).to_be_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out
    }

    /// Decodes a version 5 entry; `None` for anything else or a damaged one.
    pub(crate) fn decode(vbucket: u16, seqno: u64, raw: &[u8]) -> Option<SystemEvent> {
        if *raw.first()? != VERSION_EVENT {
            return None;
        }
        let kind = SystemEventKind::from_u8(*raw.get(1)?)?;
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?))
        };
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(raw.get(at..at + 4)?.try_into().ok()?))
        };
        let flags = *raw.get(26)?;
        if flags & !FLAG_MAX_TTL != 0 {
            return None;
        }
        let name_len = *raw.get(31)? as usize;
        if raw.len() != NAME_AT + name_len {
            return None;
        }
        let name = std::str::from_utf8(raw.get(NAME_AT..)?).ok()?.to_string();
        Some(SystemEvent {
            vbucket,
            seqno,
            cas: u64_at(2)?,
            kind,
            manifest_uid: u64_at(10)?,
            scope_id: u32_at(18)?,
            collection_id: u32_at(22)?,
            max_ttl: (flags & FLAG_MAX_TTL != 0).then_some(u32_at(27)?),
            name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_with_the_specified_layout() {
        let event = SystemEvent {
            vbucket: 3,
            seqno: 77,
            cas: 0x0102_0304_0506_0708,
            kind: SystemEventKind::CollectionCreated,
            manifest_uid: 5,
            scope_id: 8,
            collection_id: 9,
            max_ttl: Some(3600),
            name: "route".into(),
        };
        let raw = event.encode();
        assert_eq!(raw[0], 5);
        assert_eq!(raw[1], 0);
        assert_eq!(&raw[2..10], &0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(&raw[10..18], &5u64.to_be_bytes());
        assert_eq!(&raw[18..22], &8u32.to_be_bytes());
        assert_eq!(&raw[22..26], &9u32.to_be_bytes());
        assert_eq!(raw[26], 1);
        assert_eq!(&raw[27..31], &3600u32.to_be_bytes());
        assert_eq!(raw[31], 5);
        assert_eq!(&raw[32..], b"route");
        assert_eq!(SystemEvent::decode(3, 77, &raw), Some(event.clone()));
        let dropped = SystemEvent {
            kind: SystemEventKind::ScopeDropped,
            collection_id: 0,
            max_ttl: None,
            name: String::new(),
            ..event
        };
        assert_eq!(SystemEvent::decode(3, 77, &dropped.encode()), Some(dropped));
    }

    #[test]
    fn damaged_events_do_not_decode() {
        let event = SystemEvent {
            vbucket: 0,
            seqno: 1,
            cas: 1,
            kind: SystemEventKind::ScopeCreated,
            manifest_uid: 1,
            scope_id: 8,
            collection_id: 0,
            max_ttl: None,
            name: "s".into(),
        };
        let raw = event.encode();
        for cut in 0..raw.len() {
            assert_eq!(SystemEvent::decode(0, 1, &raw[..cut]), None, "cut at {cut}");
        }
        let mut unknown_kind = raw.clone();
        unknown_kind[1] = 2;
        assert_eq!(SystemEvent::decode(0, 1, &unknown_kind), None);
        let mut long = raw.clone();
        long.push(0);
        assert_eq!(SystemEvent::decode(0, 1, &long), None);
        let mut flags = raw;
        flags[26] = 2;
        assert_eq!(SystemEvent::decode(0, 1, &flags), None);
    }
}
