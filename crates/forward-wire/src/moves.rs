//! The bodies of a rebalance's vbucket moves on the cluster transport (kinds 0x40 ..= 0x47,
//! docs/format/rebalance.md, "The transfer protocol"): a source offers a move and pushes a
//! vbucket's sorted files to the target in checksummed chunks, commits them with the export's
//! manifest, or aborts. Pure: what a chunk's bytes or a manifest mean is the executor's; this
//! file keeps every field within its bound, and decoding never panics.

use crate::{DecodeError, Reader, Writer, BUCKET_BYTES_MAX};

pub const KIND_MOVE_OPEN: u8 = 0x40;
pub const KIND_MOVE_OPENED: u8 = 0x41;
pub const KIND_MOVE_CHUNK: u8 = 0x42;
pub const KIND_MOVE_CHUNK_ACK: u8 = 0x43;
pub const KIND_MOVE_COMMIT: u8 = 0x44;
pub const KIND_MOVE_INGESTED: u8 = 0x45;
pub const KIND_MOVE_ABORT: u8 = 0x46;
pub const KIND_MOVE_ABORTED: u8 = 0x47;

/// The files an export may hold, one per column family (rebalance.md, section 1).
pub const MOVE_FILES: [&str; 6] = [
    "doc.sst",
    "seq.sst",
    "local.sst",
    "att.sst",
    "exp.sst",
    "view.sst",
];
/// Bytes of one chunk at most.
pub const MOVE_CHUNK_BYTES_MAX: usize = 1 << 20;
/// Index groups one MoveOpen offers at most.
pub const MOVE_GROUPS_MAX: usize = 4_096;
/// Bytes of one group's meta JSON at most.
pub const GROUP_META_BYTES_MAX: usize = 65_536;
/// Bytes of an export's manifest at most.
pub const MANIFEST_BYTES_MAX: usize = 1 << 20;
/// A bucket's vbuckets at most (vbucket numbers are below it).
pub const MOVE_VBUCKETS_MAX: u16 = 1_024;

/// Which move and which attempt of it (attempts count from 1; a MoveAbort's 0 names them all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveId {
    pub id: u64,
    pub attempt: u32,
}

/// An index group of the bucket the source exports rows of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffer {
    pub signature: [u8; 16],
    /// The group's meta JSON as the source stores it (views.md, `view/group/`).
    pub meta: Vec<u8>,
    pub collection: u32,
}

/// One body of kinds 0x40 ..= 0x47.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveFrame {
    Open {
        id: MoveId,
        revision: u64,
        bucket: String,
        vbucket: u16,
        snapshot_seqno: u64,
        groups: Vec<GroupOffer>,
    },
    Opened {
        bucket_id: u32,
        /// The target's group id for each signature offered.
        groups: Vec<([u8; 16], u32)>,
        /// Bytes of each file of this attempt the target already holds.
        received: Vec<(String, u64)>,
    },
    Chunk {
        id: MoveId,
        file: String,
        offset: u64,
        crc32c: u32,
        bytes: Vec<u8>,
    },
    ChunkAck {
        id: MoveId,
        file: String,
        received: u64,
    },
    Commit {
        id: MoveId,
        manifest: Vec<u8>,
    },
    Ingested {
        id: MoveId,
        high_seqno: u64,
    },
    Abort {
        id: MoveId,
    },
    Aborted {
        id: u64,
    },
}

impl MoveFrame {
    pub fn kind(&self) -> u8 {
        match self {
            MoveFrame::Open { .. } => KIND_MOVE_OPEN,
            MoveFrame::Opened { .. } => KIND_MOVE_OPENED,
            MoveFrame::Chunk { .. } => KIND_MOVE_CHUNK,
            MoveFrame::ChunkAck { .. } => KIND_MOVE_CHUNK_ACK,
            MoveFrame::Commit { .. } => KIND_MOVE_COMMIT,
            MoveFrame::Ingested { .. } => KIND_MOVE_INGESTED,
            MoveFrame::Abort { .. } => KIND_MOVE_ABORT,
            MoveFrame::Aborted { .. } => KIND_MOVE_ABORTED,
        }
    }

    /// Whether this body can be sent as it is (the decoder's bounds).
    pub fn check(&self) -> Result<(), DecodeError> {
        let invalid = |what| Err(DecodeError::Invalid(what));
        match self {
            MoveFrame::Open {
                id,
                bucket,
                vbucket,
                groups,
                ..
            } => {
                check_attempt(id)?;
                if bucket.is_empty() || bucket.len() > BUCKET_BYTES_MAX {
                    return invalid("a bucket name is 1 to 100 bytes");
                }
                if *vbucket >= MOVE_VBUCKETS_MAX {
                    return invalid("a vbucket is below 1,024");
                }
                if groups.len() > MOVE_GROUPS_MAX {
                    return invalid("too many index groups");
                }
                if groups
                    .iter()
                    .any(|group| group.meta.len() > GROUP_META_BYTES_MAX)
                {
                    return invalid("a group's meta is longer than its limit");
                }
                distinct(groups.iter().map(|group| group.signature), "a group twice")
            }
            MoveFrame::Opened {
                groups, received, ..
            } => {
                if groups.len() > MOVE_GROUPS_MAX {
                    return invalid("too many index groups");
                }
                distinct(
                    groups.iter().map(|(signature, _)| *signature),
                    "a group twice",
                )?;
                for (file, _) in received {
                    check_file(file)?;
                }
                distinct(
                    received.iter().map(|(file, _)| file.as_str()),
                    "a file twice",
                )
            }
            MoveFrame::Chunk {
                id,
                file,
                offset,
                bytes,
                ..
            } => {
                check_attempt(id)?;
                check_file(file)?;
                if bytes.is_empty() || bytes.len() > MOVE_CHUNK_BYTES_MAX {
                    return invalid("a chunk is 1 byte to 1 MiB");
                }
                if offset.checked_add(bytes.len() as u64).is_none() {
                    return invalid("a chunk ends past the largest offset");
                }
                Ok(())
            }
            MoveFrame::ChunkAck { id, file, .. } => {
                check_attempt(id)?;
                check_file(file)
            }
            MoveFrame::Commit { id, manifest } => {
                check_attempt(id)?;
                if manifest.is_empty() || manifest.len() > MANIFEST_BYTES_MAX {
                    return invalid("a manifest is 1 byte to 1 MiB");
                }
                Ok(())
            }
            MoveFrame::Ingested { id, .. } => check_attempt(id),
            MoveFrame::Abort { .. } | MoveFrame::Aborted { .. } => Ok(()),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            MoveFrame::Open {
                id,
                revision,
                bucket,
                vbucket,
                snapshot_seqno,
                groups,
            } => {
                move_id(&mut w, id);
                w.0.extend_from_slice(&revision.to_be_bytes());
                w.str(bucket);
                w.0.extend_from_slice(&vbucket.to_be_bytes());
                w.0.extend_from_slice(&snapshot_seqno.to_be_bytes());
                count(&mut w, groups.len());
                for group in groups {
                    w.0.extend_from_slice(&group.signature);
                    w.long(&group.meta);
                    w.0.extend_from_slice(&group.collection.to_be_bytes());
                }
            }
            MoveFrame::Opened {
                bucket_id,
                groups,
                received,
            } => {
                w.0.extend_from_slice(&bucket_id.to_be_bytes());
                count(&mut w, groups.len());
                for (signature, group) in groups {
                    w.0.extend_from_slice(signature);
                    w.0.extend_from_slice(&group.to_be_bytes());
                }
                count(&mut w, received.len());
                for (file, bytes) in received {
                    w.str(file);
                    w.0.extend_from_slice(&bytes.to_be_bytes());
                }
            }
            MoveFrame::Chunk {
                id,
                file,
                offset,
                crc32c,
                bytes,
            } => {
                move_id(&mut w, id);
                w.str(file);
                w.0.extend_from_slice(&offset.to_be_bytes());
                w.0.extend_from_slice(&crc32c.to_be_bytes());
                w.long(bytes);
            }
            MoveFrame::ChunkAck { id, file, received } => {
                move_id(&mut w, id);
                w.str(file);
                w.0.extend_from_slice(&received.to_be_bytes());
            }
            MoveFrame::Commit { id, manifest } => {
                move_id(&mut w, id);
                w.long(manifest);
            }
            MoveFrame::Ingested { id, high_seqno } => {
                move_id(&mut w, id);
                w.0.extend_from_slice(&high_seqno.to_be_bytes());
            }
            MoveFrame::Abort { id } => move_id(&mut w, id),
            MoveFrame::Aborted { id } => w.0.extend_from_slice(&id.to_be_bytes()),
        }
        w.0
    }

    /// The body of a frame of `kind`; `Err` for a kind that is not a move's, a body that
    /// does not decode or breaks a bound ([`MoveFrame::check`]).
    pub fn decode(kind: u8, body: &[u8]) -> Result<MoveFrame, DecodeError> {
        let mut r = Reader(body);
        let frame = match kind {
            KIND_MOVE_OPEN => {
                let id = read_id(&mut r)?;
                let revision = r.u64()?;
                let bucket = r.str()?;
                let vbucket = r.u16()?;
                let snapshot_seqno = r.u64()?;
                let n = bounded(&mut r, MOVE_GROUPS_MAX)?;
                let mut groups = Vec::with_capacity(n);
                for _ in 0..n {
                    groups.push(GroupOffer {
                        signature: signature(&mut r)?,
                        meta: r.long(GROUP_META_BYTES_MAX)?.to_vec(),
                        collection: r.u32()?,
                    });
                }
                MoveFrame::Open {
                    id,
                    revision,
                    bucket,
                    vbucket,
                    snapshot_seqno,
                    groups,
                }
            }
            KIND_MOVE_OPENED => {
                let bucket_id = r.u32()?;
                let n = bounded(&mut r, MOVE_GROUPS_MAX)?;
                let mut groups = Vec::with_capacity(n);
                for _ in 0..n {
                    groups.push((signature(&mut r)?, r.u32()?));
                }
                let m = bounded(&mut r, MOVE_FILES.len())?;
                let mut received = Vec::with_capacity(m);
                for _ in 0..m {
                    received.push((r.str()?, r.u64()?));
                }
                MoveFrame::Opened {
                    bucket_id,
                    groups,
                    received,
                }
            }
            KIND_MOVE_CHUNK => MoveFrame::Chunk {
                id: read_id(&mut r)?,
                file: r.str()?,
                offset: r.u64()?,
                crc32c: r.u32()?,
                bytes: r.long(MOVE_CHUNK_BYTES_MAX)?.to_vec(),
            },
            KIND_MOVE_CHUNK_ACK => MoveFrame::ChunkAck {
                id: read_id(&mut r)?,
                file: r.str()?,
                received: r.u64()?,
            },
            KIND_MOVE_COMMIT => MoveFrame::Commit {
                id: read_id(&mut r)?,
                manifest: r.long(MANIFEST_BYTES_MAX)?.to_vec(),
            },
            KIND_MOVE_INGESTED => MoveFrame::Ingested {
                id: read_id(&mut r)?,
                high_seqno: r.u64()?,
            },
            KIND_MOVE_ABORT => MoveFrame::Abort {
                id: read_id(&mut r)?,
            },
            KIND_MOVE_ABORTED => MoveFrame::Aborted { id: r.u64()? },
            _ => return Err(DecodeError::Invalid("not a move's kind")),
        };
        r.end()?;
        frame.check()?;
        Ok(frame)
    }
}

/// The crc32c a chunk's bytes must carry (the receiver refuses a chunk that does not).
pub fn chunk_crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

fn check_attempt(id: &MoveId) -> Result<(), DecodeError> {
    if id.attempt == 0 {
        return Err(DecodeError::Invalid("attempts count from 1"));
    }
    Ok(())
}

fn check_file(file: &str) -> Result<(), DecodeError> {
    if !MOVE_FILES.contains(&file) {
        return Err(DecodeError::Invalid("not a file of a vbucket's export"));
    }
    Ok(())
}

fn distinct<T: Ord>(items: impl Iterator<Item = T>, what: &'static str) -> Result<(), DecodeError> {
    let mut seen = std::collections::BTreeSet::new();
    for item in items {
        if !seen.insert(item) {
            return Err(DecodeError::Invalid(what));
        }
    }
    Ok(())
}

fn move_id(w: &mut Writer, id: &MoveId) {
    w.0.extend_from_slice(&id.id.to_be_bytes());
    w.0.extend_from_slice(&id.attempt.to_be_bytes());
}

/// A list's `u16` count, cut at the most a u16 says ([`MoveFrame::check`] refuses longer).
fn count(w: &mut Writer, len: usize) {
    w.0.extend_from_slice(&(len.min(usize::from(u16::MAX)) as u16).to_be_bytes());
}

fn read_id(r: &mut Reader<'_>) -> Result<MoveId, DecodeError> {
    Ok(MoveId {
        id: r.u64()?,
        attempt: r.u32()?,
    })
}

fn bounded(r: &mut Reader<'_>, max: usize) -> Result<usize, DecodeError> {
    let n = usize::from(r.u16()?);
    if n > max {
        return Err(DecodeError::Invalid("a list is longer than its limit"));
    }
    Ok(n)
}

fn signature(r: &mut Reader<'_>) -> Result<[u8; 16], DecodeError> {
    let mut signature = [0; 16];
    signature.copy_from_slice(r.take(16)?);
    Ok(signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> MoveId {
        MoveId { id: 17, attempt: 2 }
    }

    fn frames() -> Vec<MoveFrame> {
        vec![
            MoveFrame::Open {
                id: id(),
                revision: 301,
                bucket: "db".into(),
                vbucket: 513,
                snapshot_seqno: 40_321,
                groups: vec![
                    GroupOffer {
                        signature: [7; 16],
                        meta: br#"{"name":"_design/app","views":["by_n"]}"#.to_vec(),
                        collection: 0,
                    },
                    GroupOffer {
                        signature: [9; 16],
                        meta: b"{}".to_vec(),
                        collection: 8,
                    },
                ],
            },
            MoveFrame::Opened {
                bucket_id: 9,
                groups: vec![([7; 16], 4), ([9; 16], 5)],
                received: vec![("doc.sst".into(), 1 << 20), ("seq.sst".into(), 0)],
            },
            MoveFrame::Chunk {
                id: id(),
                file: "view.sst".into(),
                offset: 4 << 20,
                crc32c: chunk_crc32c(b"rows"),
                bytes: b"rows".to_vec(),
            },
            MoveFrame::ChunkAck {
                id: id(),
                file: "view.sst".into(),
                received: (4 << 20) + 4,
            },
            MoveFrame::Commit {
                id: id(),
                manifest: br#"{"format":1}"#.to_vec(),
            },
            MoveFrame::Ingested {
                id: id(),
                high_seqno: 40_400,
            },
            MoveFrame::Abort {
                id: MoveId { id: 17, attempt: 0 },
            },
            MoveFrame::Aborted { id: 17 },
        ]
    }

    #[test]
    fn every_body_round_trips_and_every_cut_is_refused() {
        for frame in frames() {
            frame.check().expect("within bounds");
            let bytes = frame.encode();
            assert_eq!(MoveFrame::decode(frame.kind(), &bytes), Ok(frame.clone()));
            for cut in 0..bytes.len() {
                assert!(
                    MoveFrame::decode(frame.kind(), &bytes[..cut]).is_err(),
                    "{frame:?} cut at {cut}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(
                MoveFrame::decode(frame.kind(), &longer),
                Err(DecodeError::Trailing(1))
            );
        }
        assert!(MoveFrame::decode(0x48, &[]).is_err(), "not a move's kind");
    }

    #[test]
    fn bounds_are_refused_on_both_sides() {
        let bad = [
            MoveFrame::Chunk {
                id: id(),
                file: "../etc/passwd".into(),
                offset: 0,
                crc32c: 0,
                bytes: b"x".to_vec(),
            },
            MoveFrame::Chunk {
                id: id(),
                file: "doc.sst".into(),
                offset: u64::MAX,
                crc32c: 0,
                bytes: b"x".to_vec(),
            },
            MoveFrame::Chunk {
                id: id(),
                file: "doc.sst".into(),
                offset: 0,
                crc32c: 0,
                bytes: vec![0; MOVE_CHUNK_BYTES_MAX + 1],
            },
            MoveFrame::Chunk {
                id: MoveId { id: 1, attempt: 0 },
                file: "doc.sst".into(),
                offset: 0,
                crc32c: 0,
                bytes: b"x".to_vec(),
            },
            MoveFrame::Opened {
                bucket_id: 1,
                groups: vec![([1; 16], 1), ([1; 16], 2)],
                received: vec![],
            },
            MoveFrame::Opened {
                bucket_id: 1,
                groups: vec![],
                received: vec![("doc.sst".into(), 1), ("doc.sst".into(), 2)],
            },
            MoveFrame::Open {
                id: id(),
                revision: 1,
                bucket: String::new(),
                vbucket: 0,
                snapshot_seqno: 0,
                groups: vec![],
            },
            MoveFrame::Open {
                id: id(),
                revision: 1,
                bucket: "db".into(),
                vbucket: MOVE_VBUCKETS_MAX,
                snapshot_seqno: 0,
                groups: vec![],
            },
            MoveFrame::Commit {
                id: id(),
                manifest: vec![],
            },
        ];
        for frame in bad {
            assert!(frame.check().is_err(), "{frame:?}");
            assert!(
                MoveFrame::decode(frame.kind(), &frame.encode()).is_err(),
                "{frame:?}"
            );
        }
    }

    /// What the fuzz target `forward_frames` checks for move bodies, on stable: every byte of
    /// each valid body flipped; whatever still decodes is within bounds and re-encodes to
    /// itself.
    #[test]
    fn flipped_bytes_never_panic_and_what_decodes_re_encodes() {
        for frame in frames() {
            let valid = frame.encode();
            for index in 0..valid.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bytes = valid.clone();
                    bytes[index] ^= flip;
                    if let Ok(decoded) = MoveFrame::decode(frame.kind(), &bytes) {
                        assert_eq!(decoded.check(), Ok(()));
                        assert_eq!(decoded.encode(), bytes);
                    }
                }
            }
        }
    }
}
