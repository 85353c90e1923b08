//! Couchbase's durability levels: their wire numbers (the KV framing extra, the cluster map's
//! `durability_min`) and their names (the bucket REST API's `durabilityMinLevel`).

/// A durability level, ordered from weakest to strongest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Acknowledged after the active's WAL fsync (every settee write).
    #[default]
    None = 0,
    Majority = 1,
    MajorityAndPersistActive = 2,
    PersistToMajority = 3,
}

impl Level {
    pub const ALL: [Level; 4] = [
        Level::None,
        Level::Majority,
        Level::MajorityAndPersistActive,
        Level::PersistToMajority,
    ];

    /// The level of a wire number (0..=3); `None` for any other.
    pub fn from_wire(byte: u8) -> Option<Level> {
        Level::ALL.get(usize::from(byte)).copied()
    }

    pub fn wire(self) -> u8 {
        self as u8
    }

    /// The bucket REST API's name (`durabilityMinLevel`).
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Majority => "majority",
            Level::MajorityAndPersistActive => "majorityAndPersistActive",
            Level::PersistToMajority => "persistToMajority",
        }
    }

    pub fn from_name(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|level| level.name() == name)
    }

    /// Whether a write at this level waits for replicas.
    pub fn is_sync(self) -> bool {
        self != Level::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_wire_numbers_round_trip() {
        for level in Level::ALL {
            assert_eq!(Level::from_wire(level.wire()), Some(level));
            assert_eq!(Level::from_name(level.name()), Some(level));
        }
        assert_eq!(Level::from_wire(4), None);
        assert_eq!(Level::from_name("Majority"), None);
        assert!(Level::Majority < Level::PersistToMajority);
        assert!(!Level::None.is_sync());
    }
}
