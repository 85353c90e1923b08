//! The bodies of the cluster transport's frames (docs/format/cluster-transport.md): each
//! [`Request`] and [`Response`] as a frame kind and its bytes. They carry openraft's types, so
//! they are encoded here, in the only crate that links openraft; `settee-cluster-net` frames
//! them, runs the handshake and owns the sockets. Decoding never panics.

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::SnapshotMeta;

use crate::codec::{
    decode_command, decode_entry, encode_command, encode_entry, read_member, read_optional_log_id,
    read_stored_membership, read_tls, read_vote, write_member, write_optional_log_id,
    write_stored_membership, write_vote, DecodeError, Reader, Writer,
};
use crate::command::Applied;
use crate::network::{Request, Response};

pub const KIND_APPEND_ENTRIES: u8 = 0x10;
pub const KIND_APPEND_ENTRIES_REPLY: u8 = 0x11;
pub const KIND_VOTE: u8 = 0x12;
pub const KIND_VOTE_REPLY: u8 = 0x13;
pub const KIND_INSTALL_SNAPSHOT: u8 = 0x14;
pub const KIND_INSTALL_SNAPSHOT_REPLY: u8 = 0x15;
pub const KIND_HEARTBEAT: u8 = 0x16;
pub const KIND_HEARTBEAT_REPLY: u8 = 0x17;
pub const KIND_JOIN: u8 = 0x18;
pub const KIND_JOIN_REPLY: u8 = 0x19;
pub const KIND_PROPOSE: u8 = 0x1a;
pub const KIND_PROPOSE_REPLY: u8 = 0x1b;
/// A reply in place of the expected one: `code u16 | message str`.
pub const KIND_ERROR: u8 = 0x7f;

/// Error codes of a [`KIND_ERROR`] frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    BadFrame = 1,
    UnknownKind = 2,
    WrongSecret = 3,
    Refused = 4,
    /// A fenced request (a forwarded HTTP request) made on an older map than the receiver's.
    StaleEpoch = 5,
    UnsupportedVersion = 6,
    /// A forwarded request for a vbucket the receiver is not the active of.
    NotMyVbucket = 7,
}

impl ErrorCode {
    pub fn from_u16(code: u16) -> Option<ErrorCode> {
        Some(match code {
            1 => ErrorCode::BadFrame,
            2 => ErrorCode::UnknownKind,
            3 => ErrorCode::WrongSecret,
            4 => ErrorCode::Refused,
            5 => ErrorCode::StaleEpoch,
            6 => ErrorCode::UnsupportedVersion,
            7 => ErrorCode::NotMyVbucket,
            _ => return None,
        })
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// The kind a reply to a request of `kind` has (an Error frame may come instead).
pub fn reply_kind(kind: u8) -> Option<u8> {
    match kind {
        KIND_APPEND_ENTRIES
        | KIND_VOTE
        | KIND_INSTALL_SNAPSHOT
        | KIND_HEARTBEAT
        | KIND_JOIN
        | KIND_PROPOSE => Some(kind + 1),
        _ => None,
    }
}

pub fn encode_request(request: &Request) -> (u8, Vec<u8>) {
    let mut w = Writer::default();
    let kind = match request {
        Request::AppendEntries(rpc) => {
            write_vote(&mut w, &rpc.vote);
            write_optional_log_id(&mut w, &rpc.prev_log_id);
            write_optional_log_id(&mut w, &rpc.leader_commit);
            w.count(rpc.entries.len());
            for entry in &rpc.entries {
                w.blob(&encode_entry(entry));
            }
            KIND_APPEND_ENTRIES
        }
        Request::Vote(rpc) => {
            write_vote(&mut w, &rpc.vote);
            write_optional_log_id(&mut w, &rpc.last_log_id);
            KIND_VOTE
        }
        Request::Snapshot { vote, meta, data } => {
            write_vote(&mut w, vote);
            write_optional_log_id(&mut w, &meta.last_log_id);
            write_stored_membership(&mut w, &meta.last_membership);
            w.str(&meta.snapshot_id);
            w.blob(data);
            KIND_INSTALL_SNAPSHOT
        }
        Request::Heartbeat { from } => {
            w.u64(*from);
            KIND_HEARTBEAT
        }
        Request::Join { member, forwarded } => {
            w.u8(u8::from(*forwarded));
            write_member(&mut w, member);
            KIND_JOIN
        }
        Request::Propose { command, forwarded } => {
            w.u8(u8::from(*forwarded));
            w.0.extend_from_slice(&encode_command(command));
            KIND_PROPOSE
        }
    };
    (kind, w.0)
}

pub fn decode_request(kind: u8, body: &[u8]) -> Result<Request, WireError> {
    let mut r = Reader(body);
    let request = match kind {
        KIND_APPEND_ENTRIES => {
            let vote = read_vote(&mut r)?;
            let prev_log_id = read_optional_log_id(&mut r)?;
            let leader_commit = read_optional_log_id(&mut r)?;
            let count = r.count()?;
            let mut entries = Vec::with_capacity(count.min(1024));
            for _ in 0..count {
                entries.push(decode_entry(r.blob()?)?);
            }
            Request::AppendEntries(AppendEntriesRequest {
                vote,
                prev_log_id,
                leader_commit,
                entries,
            })
        }
        KIND_VOTE => {
            let vote = read_vote(&mut r)?;
            let last_log_id = read_optional_log_id(&mut r)?;
            Request::Vote(VoteRequest::new(vote, last_log_id))
        }
        KIND_INSTALL_SNAPSHOT => {
            let vote = read_vote(&mut r)?;
            let last_log_id = read_optional_log_id(&mut r)?;
            let last_membership = read_stored_membership(&mut r)?;
            let snapshot_id = r.str()?;
            let data = r.blob()?.to_vec();
            Request::Snapshot {
                vote,
                meta: SnapshotMeta {
                    last_log_id,
                    last_membership,
                    snapshot_id,
                },
                data,
            }
        }
        KIND_HEARTBEAT => Request::Heartbeat { from: r.u64()? },
        KIND_JOIN => {
            let forwarded = r.bool()?;
            // A version 1 sender's member ends before its management address, a version 2
            // one before its TLS ports.
            let mut member = read_member(&mut r, 1)?;
            if !r.is_empty() {
                member.mgmt_addr = r.str()?;
            }
            if !r.is_empty() {
                member.tls = read_tls(&mut r)?;
            }
            Request::Join { member, forwarded }
        }
        KIND_PROPOSE => {
            let forwarded = r.bool()?;
            let command = decode_command(r.0)?;
            r.0 = &[];
            Request::Propose { command, forwarded }
        }
        other => return Err(WireError::UnknownKind(other)),
    };
    r.end()?;
    Ok(request)
}

pub fn encode_response(response: &Response) -> (u8, Vec<u8>) {
    let mut w = Writer::default();
    let kind = match response {
        Response::AppendEntries(reply) => {
            match reply {
                AppendEntriesResponse::Success => w.u8(0),
                AppendEntriesResponse::PartialSuccess(log_id) => {
                    w.u8(1);
                    write_optional_log_id(&mut w, log_id);
                }
                AppendEntriesResponse::Conflict => w.u8(2),
                AppendEntriesResponse::HigherVote(vote) => {
                    w.u8(3);
                    write_vote(&mut w, vote);
                }
            }
            KIND_APPEND_ENTRIES_REPLY
        }
        Response::Vote(reply) => {
            write_vote(&mut w, &reply.vote);
            w.u8(u8::from(reply.vote_granted));
            write_optional_log_id(&mut w, &reply.last_log_id);
            KIND_VOTE_REPLY
        }
        Response::Snapshot(reply) => {
            write_vote(&mut w, &reply.vote);
            KIND_INSTALL_SNAPSHOT_REPLY
        }
        Response::Heartbeat {
            revision,
            quorum_age_ms,
        } => {
            w.u64(*revision);
            w.u32(*quorum_age_ms);
            KIND_HEARTBEAT_REPLY
        }
        Response::Joined { revision } => {
            w.u64(*revision);
            KIND_JOIN_REPLY
        }
        Response::Proposed(applied) => {
            match applied {
                Applied::Revision(revision) => {
                    w.u8(0);
                    w.u64(*revision);
                }
                Applied::Rejected(reason) => {
                    w.u8(1);
                    w.str(reason);
                }
            }
            KIND_PROPOSE_REPLY
        }
        Response::Refused(reason) => return (KIND_ERROR, encode_error(ErrorCode::Refused, reason)),
    };
    (kind, w.0)
}

/// Decodes a reply; an Error frame with code 4 is [`Response::Refused`], any other code is
/// returned as `Err((code, message))` for the transport to act on (close, report).
pub fn decode_response(
    kind: u8,
    body: &[u8],
) -> Result<Result<Response, (u16, String)>, WireError> {
    let mut r = Reader(body);
    let response = match kind {
        KIND_APPEND_ENTRIES_REPLY => Response::AppendEntries(match r.u8()? {
            0 => AppendEntriesResponse::Success,
            1 => AppendEntriesResponse::PartialSuccess(read_optional_log_id(&mut r)?),
            2 => AppendEntriesResponse::Conflict,
            3 => AppendEntriesResponse::HigherVote(read_vote(&mut r)?),
            other => {
                return Err(DecodeError(format!("unknown append-entries reply {other}")).into())
            }
        }),
        KIND_VOTE_REPLY => {
            let vote = read_vote(&mut r)?;
            let granted = r.bool()?;
            let last_log_id = read_optional_log_id(&mut r)?;
            Response::Vote(VoteResponse::new(vote, last_log_id, granted))
        }
        KIND_INSTALL_SNAPSHOT_REPLY => {
            Response::Snapshot(SnapshotResponse::new(read_vote(&mut r)?))
        }
        KIND_HEARTBEAT_REPLY => Response::Heartbeat {
            revision: r.u64()?,
            quorum_age_ms: r.u32()?,
        },
        KIND_JOIN_REPLY => Response::Joined { revision: r.u64()? },
        KIND_PROPOSE_REPLY => Response::Proposed(match r.u8()? {
            0 => Applied::Revision(r.u64()?),
            1 => Applied::Rejected(r.str()?),
            other => return Err(DecodeError(format!("unknown propose reply {other}")).into()),
        }),
        KIND_ERROR => {
            let (code, message) = decode_error(body)?;
            return Ok(if code == ErrorCode::Refused as u16 {
                Ok(Response::Refused(message))
            } else {
                Err((code, message))
            });
        }
        other => return Err(WireError::UnknownKind(other)),
    };
    r.end()?;
    Ok(Ok(response))
}

pub fn encode_error(code: ErrorCode, message: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.u16(code as u16);
    w.str(message);
    w.0
}

pub fn decode_error(body: &[u8]) -> Result<(u16, String), DecodeError> {
    let mut r = Reader(body);
    let code = r.u16()?;
    let message = r.str()?;
    r.end()?;
    Ok((code, message))
}

#[cfg(test)]
mod tests;
