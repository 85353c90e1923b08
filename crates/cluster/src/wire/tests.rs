use std::collections::{BTreeMap, BTreeSet};

use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, StoredMembership, Vote,
};

use super::*;
use crate::command::Command;
use crate::map::Member;

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

fn requests() -> Vec<Request> {
    let member = Member::joining(7, "127.0.0.1:7001", "127.0.0.1:5984", "127.0.0.1:11210")
        .with_mgmt_addr("127.0.0.1:8091");
    let membership = Membership::new(
        vec![BTreeSet::from([1, 2])],
        BTreeMap::from([
            (1, BasicNode { addr: "a:1".into() }),
            (2, BasicNode { addr: "b:2".into() }),
        ]),
    );
    let entries = vec![
        Entry {
            log_id: log_id(3, 10),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: log_id(3, 11),
            payload: EntryPayload::Normal(Command::AddMember(member.clone())),
        },
        Entry {
            log_id: log_id(3, 12),
            payload: EntryPayload::Membership(membership.clone()),
        },
    ];
    vec![
        Request::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(log_id(2, 9)),
            leader_commit: None,
            entries,
        }),
        Request::Vote(VoteRequest::new(Vote::new(4, 2), Some(log_id(3, 12)))),
        Request::Snapshot {
            vote: Vote::new_committed(3, 1),
            meta: SnapshotMeta {
                last_log_id: Some(log_id(3, 12)),
                last_membership: StoredMembership::new(Some(log_id(3, 12)), membership),
                snapshot_id: "3-12-1".into(),
            },
            data: vec![1, 2, 3, 4],
        },
        Request::Heartbeat { from: 9 },
        Request::Join {
            member,
            forwarded: true,
        },
        Request::Propose {
            command: Command::DropBucket { name: "b".into() },
            forwarded: false,
        },
    ]
}

fn responses() -> Vec<Response> {
    vec![
        Response::AppendEntries(AppendEntriesResponse::Success),
        Response::AppendEntries(AppendEntriesResponse::PartialSuccess(Some(log_id(2, 5)))),
        Response::AppendEntries(AppendEntriesResponse::Conflict),
        Response::AppendEntries(AppendEntriesResponse::HigherVote(Vote::new(9, 3))),
        Response::Vote(VoteResponse::new(Vote::new(4, 2), None, true)),
        Response::Snapshot(SnapshotResponse::new(Vote::new_committed(3, 1))),
        Response::Heartbeat {
            revision: 12,
            quorum_age_ms: 80,
        },
        Response::Joined { revision: 42 },
        Response::Proposed(crate::command::Applied::Revision(43)),
        Response::Proposed(crate::command::Applied::Rejected("bucket b exists".into())),
        Response::Refused("node id 7 is already a member".into()),
    ]
}

#[test]
fn every_request_and_reply_comes_back_as_it_was_sent() {
    for request in requests() {
        let (kind, body) = encode_request(&request);
        let decoded = decode_request(kind, &body).expect("decodes");
        assert_eq!(format!("{decoded:?}"), format!("{request:?}"));
        assert!(reply_kind(kind).is_some());
    }
    for response in responses() {
        let (kind, body) = encode_response(&response);
        let decoded = decode_response(kind, &body)
            .expect("decodes")
            .expect("not an error frame");
        assert_eq!(format!("{decoded:?}"), format!("{response:?}"));
    }
}

#[test]
fn a_cut_or_lengthened_body_is_an_error_not_a_request() {
    for request in requests() {
        let (kind, body) = encode_request(&request);
        // A Join cut right before the member's management address is a version 1 sender's,
        // one cut right before its TLS ports a version 2 sender's.
        let old_joins = match &request {
            Request::Join { member, .. } => {
                let v2 = body.len() - 6;
                vec![v2 - 2 - member.mgmt_addr.len(), v2]
            }
            _ => Vec::new(),
        };
        for len in (0..body.len()).filter(|len| !old_joins.contains(len)) {
            assert!(
                decode_request(kind, &body[..len]).is_err(),
                "{kind} cut at {len}"
            );
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode_request(kind, &longer).is_err());
    }
    assert_eq!(
        decode_request(0x20, &[]).expect_err("reserved kind"),
        WireError::UnknownKind(0x20)
    );
}

#[test]
fn a_join_from_a_version_1_sender_decodes_without_a_management_address() {
    let member = Member::joining(7, "127.0.0.1:7001", "127.0.0.1:5984", "127.0.0.1:11210")
        .with_mgmt_addr("127.0.0.1:8091");
    let (kind, body) = encode_request(&Request::Join {
        member,
        forwarded: false,
    });
    let old = &body[..body.len() - 6 - 2 - "127.0.0.1:8091".len()];
    match decode_request(kind, old).expect("decodes") {
        Request::Join { member, .. } => {
            assert_eq!(member.kv_addr, "127.0.0.1:11210");
            assert_eq!(member.mgmt_addr, "");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_join_carries_the_tls_ports_and_a_version_2_one_has_none() {
    let tls = crate::map::TlsPorts {
        kv: 11207,
        https: 6984,
        mgmt: 18091,
    };
    let member = Member::joining(7, "127.0.0.1:7001", "127.0.0.1:5984", "127.0.0.1:11210")
        .with_mgmt_addr("127.0.0.1:8091")
        .with_tls(tls);
    let (kind, body) = encode_request(&Request::Join {
        member,
        forwarded: false,
    });
    for (bytes, expected) in [
        (&body[..], tls),
        (&body[..body.len() - 6], crate::map::TlsPorts::default()),
    ] {
        match decode_request(kind, bytes).expect("decodes") {
            Request::Join { member, .. } => {
                assert_eq!(member.mgmt_addr, "127.0.0.1:8091");
                assert_eq!(member.tls, expected);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn error_frames_other_than_refusals_reach_the_transport() {
    let body = encode_error(ErrorCode::WrongSecret, "wrong cluster secret");
    match decode_response(KIND_ERROR, &body).expect("decodes") {
        Err((code, message)) => {
            assert_eq!(code, ErrorCode::WrongSecret as u16);
            assert_eq!(message, "wrong cluster secret");
        }
        Ok(response) => panic!("an error frame decoded as {response:?}"),
    }
}
