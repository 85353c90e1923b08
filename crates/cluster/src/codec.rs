//! Byte encodings of the map, the commands and openraft's log entries, votes and log ids, as
//! docs/format/cluster-map.md specifies them. Decoding never panics: bytes from disk or the
//! network that do not decode are a [`DecodeError`].

use std::collections::{BTreeMap, BTreeSet};

use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, StoredMembership, Vote,
};

use crate::command::{Command, VbucketChange};
use crate::map::{
    AutoFailover, Bucket, ClusterMap, Copies, Durability, Member, MemberState, NodeId, Role,
    TlsPorts, Vbucket,
};
use crate::types::TypeConfig;
use settee_manifest::{Manifest, ManifestChange, ManifestLimits};

/// The version byte of votes, entries, snapshots and the state machine's wrapper.
pub const VERSION: u8 = 1;
/// The version byte maps and commands are written with: 2 added a member's `mgmt_addr`, 3 its
/// TLS ports, 4 a bucket's whole collections manifest (3 had its uid), 5 a bucket's `copies`,
/// 6 the rebalance in the map and its commands.
/// Version 1 maps and commands are still read (docs/format/cluster-map.md, "Versions").
pub const MAP_VERSION: u8 = 6;
/// Encodes "no node" where a node id is optional.
const NO_NODE: u64 = u64::MAX;
/// Elements a decoded list may announce at most, so a corrupt length cannot allocate wildly.
const LIST_LEN_MAX: u32 = 1 << 20;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cluster record does not decode: {0}")]
pub struct DecodeError(pub String);

fn bad(what: &str) -> DecodeError {
    DecodeError(what.to_owned())
}

/// Appends big-endian values to a buffer.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    pub fn u16(&mut self, value: u16) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    pub fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    pub fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_be_bytes());
    }
    pub fn count(&mut self, len: usize) {
        // Lists are bounded far below u32::MAX (members, buckets, vbuckets, entries).
        self.u32(u32::try_from(len).unwrap_or(u32::MAX));
    }
    pub fn str(&mut self, value: &str) {
        let bytes = &value.as_bytes()[..value.len().min(usize::from(u16::MAX))];
        self.u16(bytes.len() as u16);
        self.0.extend_from_slice(bytes);
    }
    pub fn node(&mut self, node: Option<NodeId>) {
        self.u64(node.unwrap_or(NO_NODE));
    }
    /// Bytes with a u32 length before them (callers bound them far below 4 GiB).
    pub fn blob(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }
}

/// Reads what [`Writer`] wrote.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < count {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(head)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut bytes = [0; 4];
        bytes.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(bytes))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(bytes))
    }
    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let len = self.u32()?;
        if len > LIST_LEN_MAX {
            return Err(bad("list too long"));
        }
        Ok(len as usize)
    }
    pub fn str(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| bad("string is not UTF-8"))
    }
    /// What [`Writer::blob`] wrote: never more than the bytes that are there.
    pub fn blob(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()?;
        self.take(usize::try_from(len).map_err(|_| bad("blob too long"))?)
    }
    pub fn node(&mut self) -> Result<Option<NodeId>, DecodeError> {
        let node = self.u64()?;
        Ok((node != NO_NODE).then_some(node))
    }
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad("bad boolean")),
        }
    }
    pub fn version(&mut self) -> Result<(), DecodeError> {
        match self.u8()? {
            VERSION => Ok(()),
            other => Err(DecodeError(format!("unknown version {other}"))),
        }
    }
    /// The version byte of a map or a command: 1 to 6.
    pub fn map_version(&mut self) -> Result<u8, DecodeError> {
        match self.u8()? {
            version @ (1..=MAP_VERSION) => Ok(version),
            other => Err(DecodeError(format!("unknown version {other}"))),
        }
    }
    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Succeeds only if every byte was read.
    pub fn end(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(bad("trailing bytes"))
        }
    }
}

/// A member in the version 3 layout (its `mgmt_addr`, then its TLS ports, last).
pub fn write_member(w: &mut Writer, member: &Member) {
    w.u64(member.id);
    w.str(&member.cluster_addr);
    w.str(&member.http_addr);
    w.str(&member.kv_addr);
    w.u8(member.state as u8);
    w.u8(member.role as u8);
    w.str(&member.mgmt_addr);
    w.u16(member.tls.kv);
    w.u16(member.tls.https);
    w.u16(member.tls.mgmt);
}

/// A member as `version` wrote it: version 1 has no `mgmt_addr` (it reads as ""), versions 1
/// and 2 no TLS ports (0).
pub fn read_member(r: &mut Reader, version: u8) -> Result<Member, DecodeError> {
    let mut member = read_member_v1(r)?;
    if version >= 2 {
        member.mgmt_addr = r.str()?;
    }
    if version >= 3 {
        member.tls = read_tls(r)?;
    }
    Ok(member)
}

pub fn read_tls(r: &mut Reader) -> Result<TlsPorts, DecodeError> {
    Ok(TlsPorts {
        kv: r.u16()?,
        https: r.u16()?,
        mgmt: r.u16()?,
    })
}

fn read_member_v1(r: &mut Reader) -> Result<Member, DecodeError> {
    Ok(Member {
        id: r.u64()?,
        cluster_addr: r.str()?,
        http_addr: r.str()?,
        kv_addr: r.str()?,
        mgmt_addr: String::new(),
        tls: TlsPorts::default(),
        state: match r.u8()? {
            0 => MemberState::Active,
            1 => MemberState::Failed,
            2 => MemberState::Ejected,
            _ => return Err(bad("member state")),
        },
        role: match r.u8()? {
            0 => Role::Voter,
            1 => Role::Learner,
            _ => return Err(bad("member role")),
        },
    })
}

fn write_vbucket(w: &mut Writer, entry: &Vbucket) {
    w.node(entry.active);
    w.u8(entry.replicas.len().min(usize::from(u8::MAX)) as u8);
    for replica in &entry.replicas {
        w.u64(*replica);
    }
    w.u64(entry.epoch);
}

fn read_vbucket(r: &mut Reader) -> Result<Vbucket, DecodeError> {
    let active = r.node()?;
    let count = r.u8()?;
    let replicas = (0..count).map(|_| r.u64()).collect::<Result<_, _>>()?;
    Ok(Vbucket {
        active,
        replicas,
        epoch: r.u64()?,
    })
}

fn durability_from(byte: u8) -> Result<Durability, DecodeError> {
    Ok(match byte {
        0 => Durability::None,
        1 => Durability::Majority,
        2 => Durability::MajorityAndPersistActive,
        3 => Durability::PersistToMajority,
        _ => return Err(bad("durability level")),
    })
}

fn write_bucket(w: &mut Writer, bucket: &Bucket) {
    w.str(&bucket.name);
    w.u16(bucket.vbucket_count);
    w.u8(bucket.replicas);
    w.u8(bucket.durability_min as u8);
    w.blob(&bucket.manifest.encode());
    w.u64(bucket.design_rev);
    w.u8(match bucket.copies {
        Copies::Replicas => 0,
        Copies::EveryMember => 1,
    });
    for entry in bucket
        .vbuckets
        .iter()
        .take(usize::from(bucket.vbucket_count))
    {
        write_vbucket(w, entry);
    }
}

/// A bucket as `version` wrote it: before version 4 a manifest uid stood where the manifest
/// is, and no writer ever set it above 0, so it reads as the default manifest.
fn read_bucket(r: &mut Reader, version: u8) -> Result<Bucket, DecodeError> {
    let name = r.str()?;
    let vbucket_count = r.u16()?;
    let replicas = r.u8()?;
    let durability_min = durability_from(r.u8()?)?;
    let (manifest, design_rev) = if version >= 4 {
        let manifest =
            Manifest::decode(r.blob()?).map_err(|error| DecodeError(error.to_string()))?;
        (manifest, r.u64()?)
    } else {
        r.u64()?;
        (Manifest::default(), 0)
    };
    let copies = if version >= 5 {
        match r.u8()? {
            0 => Copies::Replicas,
            1 => Copies::EveryMember,
            _ => return Err(bad("copies")),
        }
    } else {
        Copies::Replicas
    };
    let vbuckets = (0..vbucket_count)
        .map(|_| read_vbucket(r))
        .collect::<Result<_, _>>()?;
    Ok(Bucket {
        name,
        vbucket_count,
        replicas,
        durability_min,
        manifest,
        design_rev,
        copies,
        vbuckets,
    })
}

pub fn write_map(w: &mut Writer, map: &ClusterMap) {
    w.u8(MAP_VERSION);
    w.u64(map.revision);
    w.u8(u8::from(map.auto_failover.enabled));
    w.u32(map.auto_failover.timeout_ms);
    w.count(map.members.len());
    map.members
        .values()
        .for_each(|member| write_member(w, member));
    w.count(map.buckets.len());
    map.buckets
        .values()
        .for_each(|bucket| write_bucket(w, bucket));
    moves::write_rebalance(w, map.rebalance.as_ref());
}

pub fn read_map(r: &mut Reader) -> Result<ClusterMap, DecodeError> {
    let version = r.map_version()?;
    let revision = r.u64()?;
    let auto_failover = AutoFailover {
        enabled: r.bool()?,
        timeout_ms: r.u32()?,
    };
    let mut members = BTreeMap::new();
    for _ in 0..r.count()? {
        let member = read_member(r, version)?;
        members.insert(member.id, member);
    }
    let mut buckets = BTreeMap::new();
    for _ in 0..r.count()? {
        let bucket = read_bucket(r, version)?;
        buckets.insert(bucket.name.clone(), bucket);
    }
    let rebalance = if version >= 6 {
        moves::read_rebalance(r)?
    } else {
        None
    };
    Ok(ClusterMap {
        revision,
        auto_failover,
        members,
        buckets,
        rebalance,
    })
}

pub fn encode_command(command: &Command) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(MAP_VERSION);
    match command {
        Command::AddMember(member) => {
            w.u8(1);
            write_member(&mut w, member);
        }
        Command::SetMemberState { node, state } => {
            w.u8(2);
            w.u64(*node);
            w.u8(*state as u8);
        }
        Command::CreateBucket(bucket) => {
            w.u8(3);
            write_bucket(&mut w, bucket);
        }
        Command::DropBucket { name } => {
            w.u8(4);
            w.str(name);
        }
        Command::ChangeManifest {
            name,
            change,
            limits,
        } => {
            w.u8(10);
            w.str(name);
            write_manifest_change(&mut w, change);
            w.u32(u32::try_from(limits.scopes_max).unwrap_or(u32::MAX));
            w.u32(u32::try_from(limits.collections_max).unwrap_or(u32::MAX));
        }
        Command::Failover { node, changes } => {
            w.u8(6);
            w.u64(*node);
            w.count(changes.len());
            for change in changes {
                w.str(&change.bucket);
                w.u16(change.vbucket);
                w.u64(change.expected_epoch);
                write_vbucket(&mut w, &change.entry);
            }
        }
        Command::SetAutoFailover(settings) => {
            w.u8(7);
            w.u8(u8::from(settings.enabled));
            w.u32(settings.timeout_ms);
        }
        Command::SetVoters { voters } => {
            w.u8(8);
            w.count(voters.len());
            voters.iter().for_each(|voter| w.u64(*voter));
        }
        Command::AddBack { node } => {
            w.u8(9);
            w.u64(*node);
        }
        Command::DesignsChanged { name } => {
            w.u8(11);
            w.str(name);
        }
        Command::StartRebalance {
            nodes,
            ejected,
            moves: planned,
        } => {
            w.u8(12);
            moves::write_nodes(&mut w, nodes);
            moves::write_nodes(&mut w, ejected);
            moves::write_planned(&mut w, planned);
        }
        Command::MoveState {
            move_id,
            attempt,
            state,
        } => {
            w.u8(13);
            w.u64(*move_id);
            w.u32(*attempt);
            w.u8(moves::state_byte(*state));
        }
        Command::TakeOver {
            move_id,
            expected_epoch,
        } => {
            w.u8(14);
            w.u64(*move_id);
            w.u64(*expected_epoch);
        }
        Command::StopRebalance => w.u8(15),
        Command::EndRebalance { aborted } => {
            w.u8(16);
            w.count(aborted.len());
            aborted.iter().for_each(|id| w.u64(*id));
        }
    }
    w.0
}

pub fn decode_command(bytes: &[u8]) -> Result<Command, DecodeError> {
    let mut r = Reader(bytes);
    let command = read_command(&mut r)?;
    r.end()?;
    Ok(command)
}

fn read_command(r: &mut Reader) -> Result<Command, DecodeError> {
    let version = r.map_version()?;
    Ok(match r.u8()? {
        1 => Command::AddMember(read_member(r, version)?),
        2 => {
            let node = r.u64()?;
            let state = match r.u8()? {
                0 => MemberState::Active,
                1 => MemberState::Failed,
                2 => MemberState::Ejected,
                _ => return Err(bad("member state")),
            };
            Command::SetMemberState { node, state }
        }
        3 => Command::CreateBucket(read_bucket(r, version)?),
        4 => Command::DropBucket { name: r.str()? },
        10 => Command::ChangeManifest {
            name: r.str()?,
            change: read_manifest_change(r)?,
            limits: ManifestLimits {
                scopes_max: r.u32()? as usize,
                collections_max: r.u32()? as usize,
            },
        },
        6 => {
            let node = r.u64()?;
            let count = r.count()?;
            let mut changes = Vec::with_capacity(count.min(4096));
            for _ in 0..count {
                changes.push(VbucketChange {
                    bucket: r.str()?,
                    vbucket: r.u16()?,
                    expected_epoch: r.u64()?,
                    entry: read_vbucket(r)?,
                });
            }
            Command::Failover { node, changes }
        }
        7 => Command::SetAutoFailover(AutoFailover {
            enabled: r.bool()?,
            timeout_ms: r.u32()?,
        }),
        8 => {
            let count = r.count()?;
            let voters = (0..count).map(|_| r.u64()).collect::<Result<_, _>>()?;
            Command::SetVoters { voters }
        }
        9 => Command::AddBack { node: r.u64()? },
        11 => Command::DesignsChanged { name: r.str()? },
        12 => Command::StartRebalance {
            nodes: moves::read_nodes(r)?,
            ejected: moves::read_nodes(r)?,
            moves: moves::read_planned(r)?,
        },
        13 => Command::MoveState {
            move_id: r.u64()?,
            attempt: r.u32()?,
            state: moves::state_from(r.u8()?)?,
        },
        14 => Command::TakeOver {
            move_id: r.u64()?,
            expected_epoch: r.u64()?,
        },
        15 => Command::StopRebalance,
        16 => {
            let count = r.count()?;
            let aborted = (0..count).map(|_| r.u64()).collect::<Result<_, _>>()?;
            Command::EndRebalance { aborted }
        }
        other => return Err(DecodeError(format!("unknown command kind {other}"))),
    })
}

/// `op u8 | str scope | str name | ttl u8 | max_ttl u32` (docs/format/cluster-map.md).
fn write_manifest_change(w: &mut Writer, change: &ManifestChange) {
    let (op, scope, name, max_ttl) = match change {
        ManifestChange::CreateScope { name } => (0, name.as_str(), "", None),
        ManifestChange::DropScope { name } => (1, name.as_str(), "", None),
        ManifestChange::CreateCollection {
            scope,
            name,
            max_ttl,
        } => (2, scope.as_str(), name.as_str(), *max_ttl),
        ManifestChange::DropCollection { scope, name } => (3, scope.as_str(), name.as_str(), None),
        ManifestChange::SetMaxTtl {
            scope,
            name,
            max_ttl,
        } => (4, scope.as_str(), name.as_str(), *max_ttl),
    };
    w.u8(op);
    w.str(scope);
    w.str(name);
    w.u8(u8::from(max_ttl.is_some()));
    w.u32(max_ttl.unwrap_or(0));
}

fn read_manifest_change(r: &mut Reader) -> Result<ManifestChange, DecodeError> {
    let op = r.u8()?;
    let (scope, name) = (r.str()?, r.str()?);
    let max_ttl = match (r.u8()?, r.u32()?) {
        (0, _) => None,
        (1, ttl) => Some(ttl),
        _ => return Err(bad("max_ttl flag")),
    };
    Ok(match op {
        0 => ManifestChange::CreateScope { name: scope },
        1 => ManifestChange::DropScope { name: scope },
        2 => ManifestChange::CreateCollection {
            scope,
            name,
            max_ttl,
        },
        3 => ManifestChange::DropCollection { scope, name },
        4 => ManifestChange::SetMaxTtl {
            scope,
            name,
            max_ttl,
        },
        _ => return Err(bad("manifest change")),
    })
}

pub fn write_log_id(w: &mut Writer, log_id: &LogId<NodeId>) {
    w.u64(log_id.leader_id.term);
    w.u64(log_id.index);
}

pub fn read_log_id(r: &mut Reader) -> Result<LogId<NodeId>, DecodeError> {
    let term = r.u64()?;
    let index = r.u64()?;
    Ok(LogId::new(CommittedLeaderId::new(term, 0), index))
}

pub fn write_optional_log_id(w: &mut Writer, log_id: &Option<LogId<NodeId>>) {
    match log_id {
        Some(log_id) => {
            w.u8(1);
            write_log_id(w, log_id);
        }
        None => w.u8(0),
    }
}

pub fn read_optional_log_id(r: &mut Reader) -> Result<Option<LogId<NodeId>>, DecodeError> {
    Ok(if r.bool()? {
        Some(read_log_id(r)?)
    } else {
        None
    })
}

pub fn encode_vote(vote: &Vote<NodeId>) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(VERSION);
    write_vote(&mut w, vote);
    w.0
}

/// A vote without its version byte (inside a versioned record or frame).
pub fn write_vote(w: &mut Writer, vote: &Vote<NodeId>) {
    w.u64(vote.leader_id.term);
    w.node(vote.leader_id.voted_for());
    w.u8(u8::from(vote.committed));
}

pub fn decode_vote(bytes: &[u8]) -> Result<Vote<NodeId>, DecodeError> {
    let mut r = Reader(bytes);
    r.version()?;
    let vote = read_vote(&mut r)?;
    r.end()?;
    Ok(vote)
}

pub fn read_vote(r: &mut Reader) -> Result<Vote<NodeId>, DecodeError> {
    let term = r.u64()?;
    let voted_for = r.node()?;
    let committed = r.bool()?;
    let mut vote = match voted_for {
        Some(node) => Vote::new(term, node),
        None => Vote::default(),
    };
    vote.leader_id.term = term;
    vote.committed = committed;
    Ok(vote)
}

pub fn write_membership(w: &mut Writer, membership: &Membership<NodeId, BasicNode>) {
    let configs = membership.get_joint_config();
    w.count(configs.len());
    for config in configs {
        w.count(config.len());
        config.iter().for_each(|node| w.u64(*node));
    }
    let nodes: Vec<_> = membership.nodes().collect();
    w.count(nodes.len());
    for (id, node) in nodes {
        w.u64(*id);
        w.str(&node.addr);
    }
}

pub fn read_membership(r: &mut Reader) -> Result<Membership<NodeId, BasicNode>, DecodeError> {
    let mut configs = Vec::new();
    for _ in 0..r.count()? {
        let count = r.count()?;
        let config: BTreeSet<NodeId> = (0..count).map(|_| r.u64()).collect::<Result<_, _>>()?;
        configs.push(config);
    }
    let mut nodes = BTreeMap::new();
    for _ in 0..r.count()? {
        let id = r.u64()?;
        nodes.insert(id, BasicNode { addr: r.str()? });
    }
    let voters: BTreeSet<NodeId> = configs.iter().flatten().copied().collect();
    if voters.iter().any(|voter| !nodes.contains_key(voter)) {
        return Err(bad("a voter without its node"));
    }
    Ok(Membership::new(configs, nodes))
}

pub fn write_stored_membership(w: &mut Writer, stored: &StoredMembership<NodeId, BasicNode>) {
    write_optional_log_id(w, stored.log_id());
    write_membership(w, stored.membership());
}

pub fn read_stored_membership(
    r: &mut Reader,
) -> Result<StoredMembership<NodeId, BasicNode>, DecodeError> {
    let log_id = read_optional_log_id(r)?;
    Ok(StoredMembership::new(log_id, read_membership(r)?))
}

pub fn encode_entry(entry: &Entry<TypeConfig>) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(VERSION);
    write_log_id(&mut w, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => w.u8(0),
        EntryPayload::Normal(command) => {
            w.u8(1);
            w.0.extend_from_slice(&encode_command(command));
        }
        EntryPayload::Membership(membership) => {
            w.u8(2);
            write_membership(&mut w, membership);
        }
    }
    w.0
}

pub fn decode_entry(bytes: &[u8]) -> Result<Entry<TypeConfig>, DecodeError> {
    let mut r = Reader(bytes);
    r.version()?;
    let log_id = read_log_id(&mut r)?;
    let payload = match r.u8()? {
        0 => EntryPayload::Blank,
        1 => EntryPayload::Normal(read_command(&mut r)?),
        2 => EntryPayload::Membership(read_membership(&mut r)?),
        other => return Err(DecodeError(format!("unknown entry payload {other}"))),
    };
    r.end()?;
    Ok(Entry { log_id, payload })
}

mod moves;

#[cfg(test)]
mod tests;
