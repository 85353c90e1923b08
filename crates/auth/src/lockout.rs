//! Failed logins lock an account out for a while, as CouchDB 3.4+ does
//! (`[chttpd_auth_lockout]`, `couch_auth_lockout`): every wrong password for an existing user
//! counts against the key (client address, user name, the user's salt); once a key has
//! `threshold` failures, logins with it — the right password included — are refused until
//! `max_lifetime` has passed since its first failure. Both doors share the table: HTTP Basic,
//! `POST /_session`, KV SASL PLAIN and SCRAM.
//!
//! As in CouchDB, only existing users are counted (a wrong name costs nothing to remember) and
//! a new password (a new salt) starts afresh. The table holds at most `max_objects` keys: when
//! it is full, expired keys go first, then the oldest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// CouchDB's answer to a locked-out login (HTTP 403 `forbidden`).
pub const LOCKED_OUT: &str =
    "Account is temporarily locked due to multiple authentication failures";

/// CouchDB's `[chttpd_auth_lockout] mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockoutMode {
    /// Nothing is counted.
    Off,
    /// Failures are counted and a key over the threshold is logged, but not refused.
    Warn,
    /// A key over the threshold is refused.
    Enforce,
}

impl std::str::FromStr for LockoutMode {
    type Err = String;

    fn from_str(text: &str) -> Result<LockoutMode, String> {
        match text {
            "off" => Ok(LockoutMode::Off),
            "warn" => Ok(LockoutMode::Warn),
            "enforce" => Ok(LockoutMode::Enforce),
            other => Err(format!(
                "lockout mode must be off, warn or enforce, not {other:?}"
            )),
        }
    }
}

/// CouchDB's `[chttpd_auth_lockout]` settings, with its defaults.
#[derive(Clone, Copy, Debug)]
pub struct LockoutConfig {
    pub mode: LockoutMode,
    /// Failures that lock a key (`threshold`, 5).
    pub threshold: u32,
    /// How long a key is remembered after its first failure (`max_lifetime`, 300,000 ms).
    pub max_lifetime: Duration,
    /// Most keys remembered (`max_objects`, 10,000).
    pub max_objects: usize,
}

impl Default for LockoutConfig {
    fn default() -> Self {
        LockoutConfig {
            mode: LockoutMode::Enforce,
            threshold: 5,
            max_lifetime: Duration::from_millis(300_000),
            max_objects: 10_000,
        }
    }
}

/// (client address, user name, the user's salt).
type Key = (IpAddr, String, String);

struct Failures {
    count: u32,
    first: Instant,
}

fn mode_byte(mode: LockoutMode) -> u8 {
    match mode {
        LockoutMode::Off => 0,
        LockoutMode::Warn => 1,
        LockoutMode::Enforce => 2,
    }
}

pub struct Lockout {
    /// `config.mode` is where the mode started; `mode` is the one in force.
    config: LockoutConfig,
    /// [`LockoutMode`] as [`mode_byte`] writes it: read on every failed or refused login.
    mode: AtomicU8,
    /// `table.len()`, readable without the mutex: with nothing remembered (the usual case) a
    /// login pays one atomic load for the lockout check.
    entries: AtomicUsize,
    /// Written on failures, read on every login that is not answered from a cache; a
    /// parking_lot mutex, never held across an await.
    table: Mutex<HashMap<Key, Failures>>,
}

impl Lockout {
    pub fn new(config: LockoutConfig) -> Lockout {
        Lockout {
            mode: AtomicU8::new(mode_byte(config.mode)),
            config,
            entries: AtomicUsize::new(0),
            table: Mutex::new(HashMap::new()),
        }
    }

    /// False when no login can be refused now (nothing is remembered), without a lock.
    pub fn may_refuse(&self) -> bool {
        self.mode() != LockoutMode::Off && self.entries.load(Ordering::Acquire) > 0
    }

    /// The mode now (`[chttpd_auth_lockout] mode` may change at runtime).
    fn mode(&self) -> LockoutMode {
        match self.mode.load(Ordering::Acquire) {
            0 => LockoutMode::Off,
            1 => LockoutMode::Warn,
            _ => LockoutMode::Enforce,
        }
    }

    /// Changes the mode from now on; what was counted is kept.
    pub fn set_mode(&self, mode: LockoutMode) {
        self.mode.store(mode_byte(mode), Ordering::Release);
    }

    /// Whether logins of `name` (whose salt is `salt`) from `peer` are refused now.
    pub fn is_locked_out(&self, peer: Option<IpAddr>, name: &str, salt: &str) -> bool {
        self.is_locked_out_at(Instant::now(), peer, name, salt)
    }

    /// Counts a wrong password of `name` from `peer`.
    pub fn record_failure(&self, peer: Option<IpAddr>, name: &str, salt: &str) {
        self.record_failure_at(Instant::now(), peer, name, salt)
    }

    fn is_locked_out_at(&self, now: Instant, peer: Option<IpAddr>, name: &str, salt: &str) -> bool {
        let Some(peer) = peer else {
            return false;
        };
        if !self.may_refuse() {
            return false;
        }
        let key = (peer, name.to_string(), salt.to_string());
        let mut table = self.table.lock();
        let count = match table.get(&key) {
            Some(failures) if self.expired(failures, now) => {
                table.remove(&key);
                self.entries.store(table.len(), Ordering::Release);
                return false;
            }
            Some(failures) => failures.count,
            None => return false,
        };
        if count < self.config.threshold {
            return false;
        }
        match self.mode() {
            LockoutMode::Enforce => true,
            LockoutMode::Warn => {
                tracing::warn!(
                    user = name,
                    %peer,
                    "authentication failure threshold reached (lockout mode warn)"
                );
                false
            }
            LockoutMode::Off => false,
        }
    }

    fn record_failure_at(&self, now: Instant, peer: Option<IpAddr>, name: &str, salt: &str) {
        let Some(peer) = peer else {
            return;
        };
        if self.mode() == LockoutMode::Off || self.config.max_objects == 0 {
            return;
        }
        let key = (peer, name.to_string(), salt.to_string());
        let mut table = self.table.lock();
        if let Some(failures) = table.get_mut(&key) {
            if !self.expired(failures, now) {
                failures.count = failures.count.saturating_add(1);
                return;
            }
            table.remove(&key);
        }
        if table.len() >= self.config.max_objects {
            table.retain(|_, failures| !self.expired(failures, now));
        }
        if table.len() >= self.config.max_objects {
            let oldest = table
                .iter()
                .min_by_key(|(_, failures)| failures.first)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                table.remove(&oldest);
            }
        }
        table.insert(
            key,
            Failures {
                count: 1,
                first: now,
            },
        );
        self.entries.store(table.len(), Ordering::Release);
    }

    fn expired(&self, failures: &Failures, now: Instant) -> bool {
        now.saturating_duration_since(failures.first) >= self.config.max_lifetime
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    const AWAY: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9)));

    fn lockout(mode: LockoutMode) -> Lockout {
        Lockout::new(LockoutConfig {
            mode,
            threshold: 3,
            max_lifetime: Duration::from_secs(60),
            max_objects: 4,
        })
    }

    #[test]
    fn the_threshold_locks_one_user_from_one_address_until_the_lifetime_ends() {
        let lockout = lockout(LockoutMode::Enforce);
        let start = Instant::now();
        for _ in 0..2 {
            lockout.record_failure_at(start, HOME, "bob", "salt");
        }
        assert!(!lockout.is_locked_out_at(start, HOME, "bob", "salt"));
        lockout.record_failure_at(start, HOME, "bob", "salt");
        assert!(lockout.is_locked_out_at(start, HOME, "bob", "salt"));
        // Another user, another address, a new password: not locked.
        assert!(!lockout.is_locked_out_at(start, HOME, "eve", "salt"));
        assert!(!lockout.is_locked_out_at(start, AWAY, "bob", "salt"));
        assert!(!lockout.is_locked_out_at(start, HOME, "bob", "new salt"));
        let later = start + Duration::from_secs(59);
        assert!(lockout.is_locked_out_at(later, HOME, "bob", "salt"));
        let over = start + Duration::from_secs(60);
        assert!(!lockout.is_locked_out_at(over, HOME, "bob", "salt"));
        // Forgotten: the count starts again.
        lockout.record_failure_at(over, HOME, "bob", "salt");
        assert!(!lockout.is_locked_out_at(over, HOME, "bob", "salt"));
    }

    #[test]
    fn warn_and_off_never_refuse() {
        for mode in [LockoutMode::Warn, LockoutMode::Off] {
            let lockout = lockout(mode);
            let now = Instant::now();
            for _ in 0..10 {
                lockout.record_failure_at(now, HOME, "bob", "salt");
            }
            assert!(!lockout.is_locked_out_at(now, HOME, "bob", "salt"));
        }
        assert_eq!(lockout(LockoutMode::Off).len(), 0);
    }

    #[test]
    fn the_table_stays_bounded_and_evicts_the_oldest() {
        let lockout = lockout(LockoutMode::Enforce);
        let start = Instant::now();
        for _ in 0..3 {
            lockout.record_failure_at(start, HOME, "first", "salt");
        }
        for n in 0..1_000u32 {
            let at = start + Duration::from_millis(u64::from(n) + 1);
            lockout.record_failure_at(at, HOME, &format!("user{n}"), "salt");
            assert!(lockout.len() <= 4);
        }
        // The oldest key went; the newest stay and keep counting.
        assert!(!lockout.is_locked_out_at(start, HOME, "first", "salt"));
        let end = start + Duration::from_millis(1_000);
        for _ in 0..2 {
            lockout.record_failure_at(end, HOME, "user999", "salt");
        }
        assert!(lockout.is_locked_out_at(end, HOME, "user999", "salt"));
    }

    #[test]
    fn modes_parse_by_couchdb_names() {
        assert_eq!("enforce".parse(), Ok(LockoutMode::Enforce));
        assert_eq!("warn".parse(), Ok(LockoutMode::Warn));
        assert_eq!("off".parse(), Ok(LockoutMode::Off));
        assert!("on".parse::<LockoutMode>().is_err());
    }
}
