//! The open-files limit and the connections it allows (issue 18 point 4). Under `ulimit -n
//! 1024`, 1,100 silent TCP connections used to take every descriptor, locking every client of
//! both doors out (and leaving RocksDB none to open a table file with).
//!
//! At start the soft `RLIMIT_NOFILE` is raised to the hard limit, as Couchbase Server's and
//! CouchDB's start scripts do. Then the doors' connection maxima are clamped so that together
//! they leave room for everything else: RocksDB keeps every table file open, the replicator
//! opens outgoing connections, the listeners and the runtime hold a few.

/// Descriptors kept for everything but client connections: a quarter of the limit, at least
/// this many (a fresh node holds ~35; RocksDB opens a table file per SST; the HTTP door
/// answers up to 64 refused connections at once).
const RESERVED_MIN: u64 = 256;
const RESERVED_SHARE_DIVISOR: u64 = 4;

/// The soft open-files limit after raising it to the hard limit (unchanged if that fails).
pub fn raise() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit only read and write the struct passed by pointer,
        // which lives on this stack frame for both calls.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return u64::MAX;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max,
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit.rlim_cur = limit.rlim_max;
                } else {
                    tracing::warn!(
                        soft = limit.rlim_cur,
                        hard = limit.rlim_max,
                        "could not raise the open-files limit"
                    );
                }
            }
        }
        limit.rlim_cur
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// The HTTP and KV connection maxima that fit in `open_files` descriptors, from the configured
/// ones: unchanged when they fit; otherwise each door keeps what it asked for up to half of
/// the descriptors left for connections, and the other door's unused half.
pub fn clamp(open_files: u64, http_max: usize, kv_max: usize) -> (usize, usize) {
    let reserved = (open_files / RESERVED_SHARE_DIVISOR).max(RESERVED_MIN);
    let room = usize::try_from(open_files.saturating_sub(reserved)).unwrap_or(usize::MAX);
    if http_max.saturating_add(kv_max) <= room {
        return (http_max, kv_max);
    }
    let half = room / 2;
    let http = http_max.min(half.max(room.saturating_sub(kv_max)));
    let kv = kv_max.min(room - http);
    // A door configured with connections keeps at least one.
    (
        http.max(usize::from(http_max > 0)),
        kv.max(usize::from(kv_max > 0)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxima_that_fit_are_kept() {
        assert_eq!(clamp(1 << 20, 2048, 60_000), (2048, 60_000));
        assert_eq!(clamp(u64::MAX, 2048, 60_000), (2048, 60_000));
    }

    #[test]
    fn a_low_limit_is_shared_between_the_doors_leaving_a_reserve() {
        // ulimit -n 1024: 256 kept back, 768 for connections, half each.
        assert_eq!(clamp(1024, 2048, 60_000), (384, 384));
        // A door that asks for less leaves the rest to the other.
        assert_eq!(clamp(1024, 100, 60_000), (100, 668));
        assert_eq!(clamp(1024, 2048, 50), (718, 50));
        // Tiny limits still leave the reserve, and one connection per door.
        assert_eq!(clamp(64, 2048, 60_000), (1, 1));
        assert_eq!(clamp(512, 2048, 60_000), (128, 128));
        let (http, kv) = clamp(4096, 2048, 60_000);
        assert_eq!((http, kv), (1536, 1536));
        assert!(http + kv + 1024 <= 4096);
    }
}
