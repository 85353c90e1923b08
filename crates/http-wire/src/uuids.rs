//! `/_uuids` algorithms, as CouchDB implements them: `sequential` (default: a random 26-hex
//! prefix kept for many calls plus a 6-hex suffix that grows by small random steps), `random`
//! (32 random hex), `utc_random` (14-hex microsecond time + 18 random hex) and `utc_id` (the
//! time + `[uuids] utc_id_suffix`). The time of the two `utc_` ones never repeats nor goes
//! back within the node, as CouchDB's: ids made in the same microsecond take the next one,
//! so `utc_id` ids (whose suffix is fixed) stay unique and increasing.

use parking_lot::Mutex;
use rand::Rng;

pub struct UuidGenerator {
    /// (prefix, counter); locked for a few instructions per id.
    sequential: Mutex<(String, u64)>,
    /// The last microsecond a `utc_` id used.
    utc_last_micros: std::sync::atomic::AtomicU64,
}

const SUFFIX_MAX: u64 = 0xfff000;

impl Default for UuidGenerator {
    fn default() -> Self {
        UuidGenerator::new()
    }
}

impl UuidGenerator {
    pub fn new() -> UuidGenerator {
        UuidGenerator {
            sequential: Mutex::new((random_hex(13), rand::rng().random_range(1..0xfff))),
            utc_last_micros: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn next(&self, algorithm: &str) -> Option<String> {
        match algorithm {
            "sequential" => Some(self.sequential()),
            "random" => Some(random_hex(16)),
            "utc_random" => Some(format!("{:014x}{}", self.utc_micros(), random_hex(9))),
            _ => None,
        }
    }

    /// An id made by the node's `[uuids] algorithm` (`utc_id` takes `[uuids] utc_id_suffix`).
    pub fn configured(&self, settings: &settee_node_config::Settings) -> String {
        use settee_node_config::UuidAlgorithm;
        match settings.uuid_algorithm {
            UuidAlgorithm::Sequential => self.sequential(),
            UuidAlgorithm::Random => random_hex(16),
            UuidAlgorithm::UtcRandom => format!("{:014x}{}", self.utc_micros(), random_hex(9)),
            UuidAlgorithm::UtcId => format!("{:014x}{}", self.utc_micros(), settings.utc_id_suffix),
        }
    }

    /// Now in microseconds, or one past the last time used if that is not earlier.
    fn utc_micros(&self) -> u64 {
        use std::sync::atomic::Ordering;
        let now = now_micros();
        let previous = self
            .utc_last_micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(now.max(last + 1))
            })
            .unwrap_or(now);
        now.max(previous + 1)
    }

    fn sequential(&self) -> String {
        let mut state = self.sequential.lock();
        state.1 += rand::rng().random_range(1..0xffe);
        if state.1 >= SUFFIX_MAX {
            *state = (random_hex(13), rand::rng().random_range(1..0xfff));
        }
        format!("{}{:06x}", state.0, state.1)
    }
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() as u64)
        .unwrap_or(0)
}

fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::rng().fill(buffer.as_mut_slice());
    buffer.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_share_a_prefix_and_increase() {
        let generator = UuidGenerator::new();
        let a = generator.next("sequential").expect("a");
        let b = generator.next("sequential").expect("b");
        assert_eq!(a.len(), 32);
        assert_eq!(a[..26], b[..26]);
        assert!(b > a);
        assert_eq!(generator.next("utc_random").map(|id| id.len()), Some(32));
        assert_eq!(generator.next("random").map(|id| id.len()), Some(32));
        assert!(generator.next("nope").is_none());
    }

    #[test]
    fn utc_ids_increase_within_one_microsecond() {
        let generator = UuidGenerator::new();
        let settings = settee_node_config::Settings {
            uuid_algorithm: settee_node_config::UuidAlgorithm::UtcId,
            utc_id_suffix: "x".into(),
            ..Default::default()
        };
        let ids: Vec<String> = (0..1000).map(|_| generator.configured(&settings)).collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
