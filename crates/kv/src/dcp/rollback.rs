//! Whether a stream request may resume where the consumer says it is, or must roll back first:
//! kv_engine's rules against the vbucket's failover log (docs/format/dcp.md, "Rollback against
//! the failover log"). A pure function of the request and the vbucket's history.

use settee_engine::FailoverEntry;
use settee_kv_codec::dcp::{stream_flags, StreamRequest};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    Accept,
    /// ROLLBACK to this seqno.
    Rollback(u64),
}

/// `log`: newest first, never empty. `high_seqno`: the vbucket's readable high seqno.
/// `purge_seqno`: the highest seqno whose entry a purge removed (0: none).
pub(crate) fn decide(
    request: &StreamRequest,
    log: &[FailoverEntry],
    high_seqno: u64,
    purge_seqno: u64,
) -> Resume {
    let start = request.start;
    let (snap_start, snap_end) = request.normalised_snapshot();
    let strict = request.flags & stream_flags::STRICT_VB_UUID != 0;
    if start == 0 && request.vbucket_uuid == 0 && !strict {
        return Resume::Accept;
    }
    let ignore_purged = request.flags & stream_flags::IGNORE_PURGED_TOMBSTONES != 0;
    if start != 0 && snap_start < purge_seqno && !ignore_purged {
        return Resume::Rollback(0);
    }
    let Some(at) = log
        .iter()
        .position(|entry| entry.uuid == request.vbucket_uuid)
    else {
        return Resume::Rollback(0);
    };
    // The branch the consumer followed ends where the next newer one began, or is current.
    let upper = match at {
        0 => high_seqno,
        newer => log[newer - 1].seqno,
    };
    if snap_end <= upper {
        Resume::Accept
    } else if snap_start > upper {
        Resume::Rollback(upper)
    } else {
        Resume::Rollback(snap_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use settee_kv_codec::dcp::Filter;

    fn request(start: u64, uuid: u64, snap: (u64, u64)) -> StreamRequest {
        StreamRequest {
            flags: 0,
            start,
            end: u64::MAX,
            vbucket_uuid: uuid,
            snap_start: snap.0,
            snap_end: snap.1,
            filter: Filter::All,
        }
    }

    const LOG: [FailoverEntry; 2] = [
        FailoverEntry {
            uuid: 20,
            seqno: 50,
        },
        FailoverEntry { uuid: 10, seqno: 0 },
    ];

    #[test]
    fn from_zero_without_history_is_accepted_unless_strict() {
        assert_eq!(decide(&request(0, 0, (0, 0)), &LOG, 80, 0), Resume::Accept);
        let mut strict = request(0, 0, (0, 0));
        strict.flags = stream_flags::STRICT_VB_UUID;
        assert_eq!(decide(&strict, &LOG, 80, 0), Resume::Rollback(0));
    }

    #[test]
    fn an_unknown_uuid_rolls_back_to_zero() {
        assert_eq!(
            decide(&request(30, 99, (30, 30)), &LOG, 80, 0),
            Resume::Rollback(0)
        );
        assert_eq!(
            decide(&request(0, 99, (0, 0)), &LOG, 80, 0),
            Resume::Rollback(0)
        );
    }

    #[test]
    fn the_newest_branch_resumes_up_to_the_high_seqno() {
        assert_eq!(
            decide(&request(70, 20, (60, 80)), &LOG, 80, 0),
            Resume::Accept
        );
        // Ahead of the producer: back to the high seqno, or to the snapshot's start.
        assert_eq!(
            decide(&request(90, 20, (85, 95)), &LOG, 80, 0),
            Resume::Rollback(80)
        );
        assert_eq!(
            decide(&request(79, 20, (70, 90)), &LOG, 80, 0),
            Resume::Rollback(70)
        );
    }

    #[test]
    fn an_older_branch_resumes_only_below_where_it_ended() {
        assert_eq!(
            decide(&request(40, 10, (30, 45)), &LOG, 80, 0),
            Resume::Accept
        );
        assert_eq!(
            decide(&request(60, 10, (55, 65)), &LOG, 80, 0),
            Resume::Rollback(50)
        );
        assert_eq!(
            decide(&request(48, 10, (45, 60)), &LOG, 80, 0),
            Resume::Rollback(45)
        );
        // A start at the snapshot's end collapses the snapshot onto it.
        assert_eq!(
            decide(&request(50, 10, (45, 50)), &LOG, 80, 0),
            Resume::Accept
        );
    }

    #[test]
    fn a_snapshot_below_the_purge_seqno_rolls_back_to_zero() {
        assert_eq!(
            decide(&request(38, 20, (30, 40)), &LOG, 80, 35),
            Resume::Rollback(0)
        );
        let mut ignoring = request(38, 20, (30, 40));
        ignoring.flags = stream_flags::IGNORE_PURGED_TOMBSTONES;
        assert_eq!(decide(&ignoring, &LOG, 80, 35), Resume::Accept);
    }
}
