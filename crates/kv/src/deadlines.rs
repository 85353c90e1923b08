//! When a KV connection has been silent too long (`KvLimits`): it has not authenticated in
//! time, it left a frame unfinished, or it sat idle. The policy is a pure function of the
//! connection's state and the time; the connection loop asks it whenever its check timer
//! fires, so the hot path only notes when bytes last arrived.
//!
//! The other way round, a client that stops reading: [`write_unless_stuck`] gives up on a
//! connection whose socket takes none of its replies for `send_queue_stuck_timeout`, as
//! kv_engine's `shutdownIfSendQueueStuck` does after 360 s.

use std::io::{Error, ErrorKind};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

use crate::limits::KvLimits;

/// The finest and coarsest period of the check timer: timeouts fire within one period of
/// their deadline, and a connection wakes at most this often for them.
const CHECK_PERIOD_MIN: Duration = Duration::from_millis(10);
const CHECK_PERIOD_MAX: Duration = Duration::from_secs(1);

/// What the policy needs to know of a connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Silence {
    pub connected_at: Instant,
    /// When bytes last arrived (or the connection was accepted).
    pub last_read: Instant,
    pub authenticated: bool,
    /// Part of a frame is buffered and the connection is waiting for the rest.
    pub partial_frame: bool,
    /// Nothing buffered, nothing in flight, nothing to write.
    pub idle: bool,
}

/// Why a connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expired {
    Unauthenticated,
    PartialFrame,
    Idle,
}

impl Expired {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Expired::Unauthenticated => "did not authenticate in time",
            Expired::PartialFrame => "left a frame unfinished",
            Expired::Idle => "was idle",
        }
    }
}

/// The timeouts of one connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadlines {
    auth: Option<Duration>,
    partial_frame: Option<Duration>,
    idle: Option<Duration>,
}

impl Deadlines {
    pub(crate) fn new(limits: &KvLimits) -> Deadlines {
        let enabled = |timeout: Option<Duration>| timeout.filter(|timeout| !timeout.is_zero());
        Deadlines {
            auth: enabled(limits.auth_timeout),
            partial_frame: enabled(limits.partial_frame_timeout),
            idle: enabled(limits.idle_timeout),
        }
    }

    /// How often the connection checks, `None` when no timeout is set: a quarter of the
    /// shortest timeout, within [`CHECK_PERIOD_MIN`, `CHECK_PERIOD_MAX`].
    pub(crate) fn check_every(&self) -> Option<Duration> {
        [self.auth, self.partial_frame, self.idle]
            .into_iter()
            .flatten()
            .min()
            .map(|shortest| (shortest / 4).clamp(CHECK_PERIOD_MIN, CHECK_PERIOD_MAX))
    }

    /// The first timeout `silence` has run past at `now`, if any.
    pub(crate) fn expired(&self, silence: &Silence, now: Instant) -> Option<Expired> {
        let past = |since: Instant, timeout: Option<Duration>| {
            timeout.is_some_and(|timeout| now.saturating_duration_since(since) >= timeout)
        };
        if !silence.authenticated && past(silence.connected_at, self.auth) {
            return Some(Expired::Unauthenticated);
        }
        if silence.partial_frame && past(silence.last_read, self.partial_frame) {
            return Some(Expired::PartialFrame);
        }
        if silence.idle && past(silence.last_read, self.idle) {
            return Some(Expired::Idle);
        }
        None
    }
}

/// Writes all of `bytes`, unless the socket takes none of them for `stuck_after` (kv_engine's
/// "Send buffer stuck for too long"): then the connection is to be closed, with whatever it
/// holds. A socket with room takes the bytes at once, without a timer.
pub(crate) async fn write_unless_stuck(
    writer: &mut OwnedWriteHalf,
    bytes: &[u8],
    stuck_after: Option<Duration>,
) -> std::io::Result<()> {
    let mut written = match writer.try_write(bytes) {
        Ok(written) => written,
        Err(error) if error.kind() == ErrorKind::WouldBlock => 0,
        Err(error) => return Err(error),
    };
    let Some(stuck_after) = stuck_after.filter(|timeout| !timeout.is_zero()) else {
        return writer.write_all(&bytes[written..]).await;
    };
    while written < bytes.len() {
        match tokio::time::timeout(stuck_after, writer.write(&bytes[written..])).await {
            Ok(Ok(0)) => return Err(ErrorKind::WriteZero.into()),
            Ok(Ok(more)) => written += more,
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                tracing::warn!(
                    unsent_bytes = bytes.len() - written,
                    stuck_for_ms = stuck_after.as_millis() as u64,
                    "kv send queue stuck for too long: closing the connection"
                );
                return Err(Error::new(ErrorKind::TimedOut, "send queue stuck"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(auth: u64, partial: u64, idle: Option<u64>) -> KvLimits {
        KvLimits {
            auth_timeout: Some(Duration::from_secs(auth)),
            partial_frame_timeout: Some(Duration::from_secs(partial)),
            idle_timeout: idle.map(Duration::from_secs),
            ..KvLimits::default()
        }
    }

    #[test]
    fn each_kind_of_silence_expires_after_its_own_timeout() {
        let deadlines = Deadlines::new(&limits(300, 30, Some(60)));
        let start = Instant::now();
        let secs = |n: u64| start + Duration::from_secs(n);
        let quiet = Silence {
            connected_at: start,
            last_read: start,
            authenticated: false,
            partial_frame: false,
            idle: false,
        };
        // Unauthenticated: counted from the connection's start, whatever it sends.
        let chatty = Silence {
            last_read: secs(299),
            ..quiet
        };
        assert_eq!(deadlines.expired(&chatty, secs(299)), None);
        assert_eq!(
            deadlines.expired(&chatty, secs(300)),
            Some(Expired::Unauthenticated)
        );
        // A partial frame: counted from the last byte.
        let partial = Silence {
            authenticated: true,
            partial_frame: true,
            last_read: secs(100),
            ..quiet
        };
        assert_eq!(deadlines.expired(&partial, secs(129)), None);
        assert_eq!(
            deadlines.expired(&partial, secs(130)),
            Some(Expired::PartialFrame)
        );
        // Idle: only with nothing in flight.
        let idle = Silence {
            authenticated: true,
            idle: true,
            ..quiet
        };
        assert_eq!(deadlines.expired(&idle, secs(60)), Some(Expired::Idle));
        let busy = Silence {
            idle: false,
            ..idle
        };
        assert_eq!(deadlines.expired(&busy, secs(10_000)), None);
    }

    #[test]
    fn idle_connections_stay_by_default_and_zero_turns_a_timeout_off() {
        let defaults = Deadlines::new(&KvLimits::default());
        let start = Instant::now();
        let idle = Silence {
            connected_at: start,
            last_read: start,
            authenticated: true,
            partial_frame: false,
            idle: true,
        };
        assert_eq!(
            defaults.expired(&idle, start + Duration::from_secs(86_400)),
            None
        );
        assert_eq!(defaults.check_every(), Some(CHECK_PERIOD_MAX));
        let off = Deadlines::new(&KvLimits {
            auth_timeout: Some(Duration::ZERO),
            partial_frame_timeout: None,
            idle_timeout: None,
            ..KvLimits::default()
        });
        assert_eq!(off.check_every(), None);
        let unauthenticated = Silence {
            authenticated: false,
            ..idle
        };
        assert_eq!(
            off.expired(&unauthenticated, start + Duration::from_secs(86_400)),
            None
        );
        let short = Deadlines::new(&limits(1, 1, None));
        assert_eq!(short.check_every(), Some(Duration::from_millis(250)));
    }
}
