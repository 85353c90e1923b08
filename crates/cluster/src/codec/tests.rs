use proptest::prelude::*;

use super::*;
use crate::moves::{MoveEntry, MoveState, PlannedMove, Rebalance};

fn member() -> impl Strategy<Value = Member> {
    (
        0u64..1000,
        "[a-z0-9.:]{0,20}",
        0u8..3,
        any::<bool>(),
        any::<[u16; 3]>(),
    )
        .prop_map(|(id, addr, state, voter, tls)| Member {
            id,
            cluster_addr: format!("{addr}:4000"),
            http_addr: format!("{addr}:5984"),
            kv_addr: format!("{addr}:11210"),
            mgmt_addr: format!("{addr}:8091"),
            state: [
                MemberState::Active,
                MemberState::Failed,
                MemberState::Ejected,
            ][state as usize],
            role: if voter { Role::Voter } else { Role::Learner },
            tls: TlsPorts {
                kv: tls[0],
                https: tls[1],
                mgmt: tls[2],
            },
        })
}

fn vbucket() -> impl Strategy<Value = Vbucket> {
    (
        proptest::option::of(0u64..100),
        proptest::collection::vec(0u64..100, 0..4),
        any::<u64>(),
    )
        .prop_map(|(active, replicas, epoch)| Vbucket {
            active,
            replicas,
            epoch,
        })
}

/// A manifest some changes made: collections of `_default` by name (repeats refused).
fn manifest() -> impl Strategy<Value = Manifest> {
    proptest::collection::vec(("[a-z]{1,8}", proptest::option::of(any::<u32>())), 0..4).prop_map(
        |names| {
            let limits = ManifestLimits {
                scopes_max: 10,
                collections_max: 10,
            };
            let mut manifest = Manifest::default();
            for (name, max_ttl) in names {
                let change = ManifestChange::CreateCollection {
                    scope: "_default".into(),
                    name,
                    max_ttl: max_ttl.map(|ttl| ttl % 1000),
                };
                if let Ok(planned) = manifest.plan(&change, limits) {
                    manifest = planned.manifest;
                }
            }
            manifest
        },
    )
}

fn manifest_change() -> impl Strategy<Value = ManifestChange> {
    (
        0u8..5,
        "[a-z_%-]{0,12}",
        "[a-z]{0,12}",
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(op, scope, name, max_ttl)| match op {
            0 => ManifestChange::CreateScope { name: scope },
            1 => ManifestChange::DropScope { name: scope },
            2 => ManifestChange::CreateCollection {
                scope,
                name,
                max_ttl,
            },
            3 => ManifestChange::DropCollection { scope, name },
            _ => ManifestChange::SetMaxTtl {
                scope,
                name,
                max_ttl,
            },
        })
}

fn bucket() -> impl Strategy<Value = Bucket> {
    (
        "[a-z]{1,10}",
        proptest::collection::vec(vbucket(), 1..20),
        0u8..4,
        0u8..4,
        (manifest(), any::<u64>(), any::<bool>()),
    )
        .prop_map(
            |(name, vbuckets, replicas, durability, (manifest, design_rev, every))| Bucket {
                name,
                vbucket_count: vbuckets.len() as u16,
                replicas,
                durability_min: durability_from(durability).unwrap_or(Durability::None),
                manifest,
                design_rev,
                copies: if every {
                    Copies::EveryMember
                } else {
                    Copies::Replicas
                },
                vbuckets,
            },
        )
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        member().prop_map(Command::AddMember),
        (any::<u64>(), 0u8..3).prop_map(|(node, state)| Command::SetMemberState {
            node,
            state: [
                MemberState::Active,
                MemberState::Failed,
                MemberState::Ejected
            ][state as usize],
        }),
        bucket().prop_map(Command::CreateBucket),
        "[a-z]{1,10}".prop_map(|name| Command::DropBucket { name }),
        "[a-z]{1,10}".prop_map(|name| Command::DesignsChanged { name }),
        ("[a-z]{1,10}", manifest_change(), any::<u32>(), any::<u32>()).prop_map(
            |(name, change, scopes, collections)| Command::ChangeManifest {
                name,
                change,
                limits: ManifestLimits {
                    scopes_max: scopes as usize,
                    collections_max: collections as usize,
                },
            }
        ),
        (
            any::<u64>(),
            proptest::collection::vec(("[a-z]{1,5}", any::<u16>(), any::<u64>(), vbucket()), 0..5)
        )
            .prop_map(|(node, changes)| Command::Failover {
                node,
                changes: changes
                    .into_iter()
                    .map(|(bucket, vbucket, expected_epoch, entry)| VbucketChange {
                        bucket,
                        vbucket,
                        expected_epoch,
                        entry,
                    })
                    .collect(),
            }),
        (any::<bool>(), any::<u32>()).prop_map(|(enabled, timeout_ms)| {
            Command::SetAutoFailover(AutoFailover {
                enabled,
                timeout_ms,
            })
        }),
        proptest::collection::btree_set(any::<u64>(), 0..6)
            .prop_map(|voters| Command::SetVoters { voters }),
        any::<u64>().prop_map(|node| Command::AddBack { node }),
        (
            proptest::collection::btree_set(any::<u64>(), 0..4),
            proptest::collection::btree_set(any::<u64>(), 0..3),
            proptest::collection::vec(planned_move(), 0..4),
        )
            .prop_map(|(nodes, ejected, moves)| Command::StartRebalance {
                nodes,
                ejected,
                moves
            }),
        (any::<u64>(), any::<u32>(), move_state()).prop_map(|(move_id, attempt, state)| {
            Command::MoveState {
                move_id,
                attempt,
                state,
            }
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(move_id, expected_epoch)| Command::TakeOver {
            move_id,
            expected_epoch
        }),
        Just(Command::StopRebalance),
        proptest::collection::vec(any::<u64>(), 0..5)
            .prop_map(|aborted| Command::EndRebalance { aborted }),
    ]
}

fn move_state() -> impl Strategy<Value = MoveState> {
    (0usize..5).prop_map(|at| {
        [
            MoveState::Planned,
            MoveState::Copying,
            MoveState::Ready,
            MoveState::Done,
            MoveState::Aborted,
        ][at]
    })
}

fn planned_move() -> impl Strategy<Value = PlannedMove> {
    ("[a-z]{1,5}", any::<u16>(), any::<u64>(), vbucket()).prop_map(
        |(bucket, vbucket, expected_epoch, after)| PlannedMove {
            bucket,
            vbucket,
            expected_epoch,
            after,
        },
    )
}

fn rebalance() -> impl Strategy<Value = Option<Rebalance>> {
    let step = (
        any::<u64>(),
        planned_move(),
        proptest::option::of(any::<u64>().prop_filter("not the none marker", |n| *n != u64::MAX)),
        proptest::collection::vec(any::<u64>(), 0..3),
        any::<u32>(),
        move_state(),
    )
        .prop_map(|(id, planned, source, copies, attempt, state)| MoveEntry {
            id,
            bucket: planned.bucket,
            vbucket: planned.vbucket,
            expected_epoch: planned.expected_epoch,
            after: planned.after,
            source,
            copies,
            attempt,
            state,
        });
    proptest::option::of(
        (
            any::<u64>(),
            any::<bool>(),
            proptest::collection::btree_set(any::<u64>(), 0..4),
            proptest::collection::btree_set(any::<u64>(), 0..3),
            proptest::collection::vec(step, 0..4),
        )
            .prop_map(|(id, stopping, nodes, ejected, moves)| Rebalance {
                id,
                stopping,
                nodes,
                ejected,
                moves,
            }),
    )
}

proptest! {
    #[test]
    fn commands_round_trip(command in command()) {
        let bytes = encode_command(&command);
        prop_assert_eq!(bytes[0], MAP_VERSION);
        prop_assert_eq!(decode_command(&bytes), Ok(command));
    }

    #[test]
    fn maps_round_trip(
        revision in any::<u64>(),
        members in proptest::collection::vec(member(), 0..10),
        buckets in proptest::collection::vec(bucket(), 0..4),
        rebalance in rebalance(),
    ) {
        let map = ClusterMap {
            revision,
            auto_failover: AutoFailover::default(),
            members: members.into_iter().map(|m| (m.id, m)).collect(),
            buckets: buckets.into_iter().map(|b| (b.name.clone(), b)).collect(),
            rebalance,
        };
        let mut w = Writer::default();
        write_map(&mut w, &map);
        let mut r = Reader(&w.0);
        prop_assert_eq!(read_map(&mut r), Ok(map));
        prop_assert_eq!(r.end(), Ok(()));
    }

    #[test]
    fn entries_round_trip(term in any::<u64>(), index in any::<u64>(), command in command(), kind in 0u8..3) {
        let log_id = LogId::new(CommittedLeaderId::new(term, 0), index);
        let payload = match kind {
            0 => EntryPayload::Blank,
            1 => EntryPayload::Normal(command),
            _ => EntryPayload::Membership(Membership::new(
                vec![BTreeSet::from([1, 2]), BTreeSet::from([2, 3])],
                BTreeMap::from([
                    (1, BasicNode { addr: "a:1".into() }),
                    (2, BasicNode { addr: "b:1".into() }),
                    (3, BasicNode { addr: "c:1".into() }),
                    (9, BasicNode { addr: "learner:1".into() }),
                ]),
            )),
        };
        let entry = Entry { log_id, payload };
        let decoded = decode_entry(&encode_entry(&entry));
        prop_assert!(decoded.is_ok());
        let decoded = decoded.unwrap_or_else(|_| unreachable!());
        prop_assert_eq!(decoded.log_id, entry.log_id);
        prop_assert_eq!(format!("{:?}", decoded.payload), format!("{:?}", entry.payload));
    }

    /// Bytes from disk or the wire never panic the decoder.
    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_command(&bytes);
        let _ = decode_entry(&bytes);
        let _ = decode_vote(&bytes);
        let _ = read_map(&mut Reader(&bytes));
    }
}

#[test]
fn votes_round_trip_and_unknown_versions_are_refused() {
    for vote in [Vote::new(7, 3), Vote::new_committed(9, 1), Vote::default()] {
        assert_eq!(decode_vote(&encode_vote(&vote)), Ok(vote));
    }
    let mut bytes = encode_command(&Command::DropBucket { name: "b".into() });
    bytes[0] = MAP_VERSION + 1;
    assert_eq!(
        decode_command(&bytes),
        Err(DecodeError("unknown version 7".into()))
    );
    bytes[0] = MAP_VERSION;
    bytes.push(0);
    assert_eq!(
        decode_command(&bytes),
        Err(DecodeError("trailing bytes".into()))
    );
}

/// A member as version 1 wrote it: no management address.
fn member_v1(w: &mut Writer, id: u64) {
    w.u64(id);
    w.str("10.0.0.1:4000");
    w.str("10.0.0.1:5984");
    w.str("10.0.0.1:11210");
    w.u8(0);
    w.u8(1);
}

#[test]
fn version_1_maps_and_commands_still_decode() {
    let mut w = Writer::default();
    w.u8(1);
    w.u8(1);
    member_v1(&mut w, 7);
    match decode_command(&w.0) {
        Ok(Command::AddMember(member)) => {
            assert_eq!((member.id, member.mgmt_addr.as_str()), (7, ""));
            assert_eq!(member.kv_addr, "10.0.0.1:11210");
        }
        other => panic!("{other:?}"),
    }
    let mut w = Writer::default();
    w.u8(1);
    w.u64(5);
    w.u8(1);
    w.u32(5_000);
    w.count(2);
    member_v1(&mut w, 1);
    member_v1(&mut w, 2);
    w.count(0);
    let mut r = Reader(&w.0);
    let map = read_map(&mut r).expect("a version 1 map");
    assert_eq!(r.end(), Ok(()));
    assert_eq!(map.revision, 5);
    assert_eq!(map.members.len(), 2);
    assert!(map
        .members
        .values()
        .all(|member| member.mgmt_addr.is_empty()));
}

#[test]
fn version_2_members_have_no_tls_ports() {
    let mut w = Writer::default();
    w.u8(2);
    w.u8(1);
    member_v1(&mut w, 7);
    w.str("10.0.0.1:8091");
    match decode_command(&w.0) {
        Ok(Command::AddMember(member)) => {
            assert_eq!(member.mgmt_addr, "10.0.0.1:8091");
            assert_eq!(member.tls, TlsPorts::default());
        }
        other => panic!("{other:?}"),
    }
}

/// A version 3 CreateBucket: a manifest uid where version 4 has the manifest; it reads as the
/// default manifest. The retired SetManifestUid (kind 5) is refused.
#[test]
fn version_3_buckets_read_with_the_default_manifest() {
    let mut w = Writer::default();
    w.u8(3);
    w.u8(3);
    w.str("beer-sample");
    w.u16(1);
    w.u8(1);
    w.u8(0);
    w.u64(0);
    write_vbucket(
        &mut w,
        &Vbucket {
            active: Some(1),
            replicas: vec![2],
            epoch: 4,
        },
    );
    match decode_command(&w.0) {
        Ok(Command::CreateBucket(bucket)) => {
            assert_eq!(bucket.name, "beer-sample");
            assert_eq!(
                (&bucket.manifest, bucket.design_rev),
                (&Manifest::default(), 0)
            );
            assert_eq!(bucket.vbuckets[0].replicas, vec![2]);
            assert_eq!(bucket.copies, Copies::Replicas);
        }
        other => panic!("{other:?}"),
    }
    let mut w = Writer::default();
    w.u8(3);
    w.u8(5);
    w.str("beer-sample");
    w.u64(6);
    assert_eq!(
        decode_command(&w.0),
        Err(DecodeError("unknown command kind 5".into()))
    );
}

/// Version 4 buckets have no `copies` byte (they read as `Replicas`); version 5 refuses a
/// `copies` it does not know.
#[test]
fn version_4_buckets_keep_their_replicas_and_unknown_copies_are_refused() {
    let bucket = |version: u8, copies: Option<u8>| {
        let mut w = Writer::default();
        w.u8(version);
        w.u8(3);
        w.str("_users");
        w.u16(1);
        w.u8(0);
        w.u8(0);
        w.blob(&Manifest::default().encode());
        w.u64(2);
        if let Some(copies) = copies {
            w.u8(copies);
        }
        write_vbucket(
            &mut w,
            &Vbucket {
                active: Some(1),
                replicas: vec![],
                epoch: 4,
            },
        );
        decode_command(&w.0)
    };
    for (version, copies, expected) in [
        (4, None, Copies::Replicas),
        (5, Some(0), Copies::Replicas),
        (5, Some(1), Copies::EveryMember),
    ] {
        match bucket(version, copies) {
            Ok(Command::CreateBucket(read)) => {
                assert_eq!((read.copies, read.design_rev), (expected, 2));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(bucket(5, Some(2)), Err(DecodeError("copies".into())));
    assert!(bucket(7, Some(0)).is_err());
}
