//! DCP on the memcached binary protocol (docs/format/dcp.md): the consumer's requests parsed
//! and checked as kv_engine checks them, the producer's messages encoded, and those messages
//! parsed back (a consumer's view: tests, and a replica later).
//!
//! A request that cannot run is a [`Refusal`]: the status to answer and kv_engine's reason.

use std::time::Duration;

use crate::frame::{encode, Frame, Magic};
use crate::{leb128, opcode, status};

/// The status to answer and why.
pub type Refusal = (u16, &'static str);

/// DCP_OPEN flags.
pub mod open_flags {
    pub const PRODUCER: u32 = 0x01;
    pub const NOTIFIER: u32 = 0x02;
    pub const INCLUDE_XATTRS: u32 = 0x04;
    pub const NO_VALUE: u32 = 0x08;
    pub const INCLUDE_DELETE_TIMES: u32 = 0x20;
    pub const NO_VALUE_WITH_UNDERLYING_DATATYPE: u32 = 0x40;
    pub const PITR: u32 = 0x80;
    pub const INCLUDE_DELETED_USER_XATTRS: u32 = 0x100;
    pub const SKIP_DELETES_IN_INITIAL_BACKFILL: u32 = 0x200;
}

/// STREAM_REQ flags.
pub mod stream_flags {
    pub const TAKEOVER: u32 = 0x01;
    pub const DISK_ONLY: u32 = 0x02;
    pub const TO_LATEST: u32 = 0x04;
    pub const NO_VALUE: u32 = 0x08;
    pub const ACTIVE_VB_ONLY: u32 = 0x10;
    pub const STRICT_VB_UUID: u32 = 0x20;
    pub const FROM_LATEST: u32 = 0x40;
    pub const IGNORE_PURGED_TOMBSTONES: u32 = 0x80;
    pub const CACHE_TRANSFER: u32 = 0x100;
}

/// SNAPSHOT_MARKER flags.
pub mod snapshot_flags {
    pub const MEMORY: u32 = 0x01;
    pub const DISK: u32 = 0x02;
    pub const CHECKPOINT: u32 = 0x04;
    pub const ACK: u32 = 0x08;
}

/// STREAM_END reasons.
pub mod end_reason {
    pub const OK: u32 = 0;
    pub const CLOSED: u32 = 1;
    pub const STATE_CHANGED: u32 = 2;
    pub const DISCONNECTED: u32 = 3;
    pub const TOO_SLOW: u32 = 4;
    pub const FILTER_EMPTY: u32 = 7;
    pub const LOST_PRIVILEGES: u32 = 8;
}

pub const CONNECTION_NAME_BYTES_MAX: usize = 200;
/// A stream request's JSON value, at most.
pub const STREAM_VALUE_BYTES_MAX: usize = 64 * 1024;
/// Collections one stream may filter on (the per-bucket maximum).
pub const STREAM_COLLECTIONS_MAX: usize = 1000;
pub const NOOP_INTERVAL_MAX: Duration = Duration::from_secs(10_800);
pub const NOOP_INTERVAL_MIN: Duration = Duration::from_secs(1);

const EINVAL: u16 = status::EINVAL;
const NOT_SUPPORTED: u16 = status::NOT_SUPPORTED;

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// DCP_OPEN, accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open<'a> {
    pub name: &'a [u8],
    pub flags: u32,
}

impl<'a> Open<'a> {
    pub fn parse(frame: &Frame<'a>) -> Result<Open<'a>, Refusal> {
        use open_flags::*;
        let flags = match (frame.extras.len(), u32_at(frame.extras, 4)) {
            (8, Some(flags)) => flags,
            _ => return Err((EINVAL, "DCP_OPEN takes 8 bytes of extras")),
        };
        if frame.key.is_empty() || frame.key.len() > CONNECTION_NAME_BYTES_MAX {
            return Err((EINVAL, "DCP_OPEN needs a connection name of 1 to 200 bytes"));
        }
        if !frame.value.is_empty() {
            return Err((EINVAL, "DCP_OPEN of a producer takes no value"));
        }
        let known = PRODUCER
            | INCLUDE_XATTRS
            | NO_VALUE
            | INCLUDE_DELETE_TIMES
            | NO_VALUE_WITH_UNDERLYING_DATATYPE
            | PITR
            | INCLUDE_DELETED_USER_XATTRS
            | SKIP_DELETES_IN_INITIAL_BACKFILL;
        if flags & NOTIFIER != 0 || flags & !known != 0 {
            return Err((EINVAL, "DCP_OPEN flags are invalid"));
        }
        if flags & PRODUCER == 0 {
            return Err((NOT_SUPPORTED, "settee opens producer connections only"));
        }
        if flags & (PITR | SKIP_DELETES_IN_INITIAL_BACKFILL) != 0 {
            return Err((NOT_SUPPORTED, "DCP_OPEN flag not supported"));
        }
        Ok(Open {
            name: frame.key,
            flags,
        })
    }
}

/// A DCP_CONTROL setting settee acts on, or accepts without effect.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Control {
    /// Flow-control window in bytes; 0 = off.
    BufferSize(u32),
    EnableNoop(bool),
    NoopInterval(Duration),
    StreamEndOnClientClose(bool),
    ExpiryOpcode(bool),
    V7StatusCodes(bool),
    /// Valid only if the connection was opened with INCLUDE_DELETED_USER_XATTRS.
    IncludeDeletedUserXattrs,
    /// Node to node only: documents carry their stored record (replica.md).
    SetteeRecords(bool),
    /// Node to node only: the consumer's node id (decimal), who acknowledges (replica.md).
    ConsumerName(u64),
    /// Node to node only: SEQNO_ACKNOWLEDGED from this connection counts (replica.md).
    EnableSyncWrites(bool),
    /// Accepted, changes nothing here.
    NoEffect,
}

fn boolean(value: &[u8]) -> Result<bool, Refusal> {
    match value {
        b"true" => Ok(true),
        b"false" => Ok(false),
        _ => Err((EINVAL, "DCP_CONTROL value must be true or false")),
    }
}

impl Control {
    pub fn parse(frame: &Frame<'_>) -> Result<Control, Refusal> {
        if !frame.extras.is_empty() || frame.key.is_empty() || frame.value.is_empty() {
            return Err((EINVAL, "DCP_CONTROL takes a key and a value, no extras"));
        }
        let value = frame.value;
        Ok(match frame.key {
            b"connection_buffer_size" => Control::BufferSize(
                std::str::from_utf8(value)
                    .ok()
                    .and_then(|text| text.parse::<u32>().ok())
                    .ok_or((EINVAL, "connection_buffer_size must be a decimal u32"))?,
            ),
            b"enable_noop" => Control::EnableNoop(boolean(value)?),
            b"set_noop_interval" => {
                let seconds = std::str::from_utf8(value)
                    .ok()
                    .and_then(|text| text.parse::<f64>().ok())
                    .filter(|seconds| seconds.is_finite())
                    .ok_or((EINVAL, "set_noop_interval must be a number of seconds"))?;
                let range = NOOP_INTERVAL_MIN.as_secs_f64()..=NOOP_INTERVAL_MAX.as_secs_f64();
                if !range.contains(&seconds) {
                    return Err((EINVAL, "set_noop_interval must be 1 to 10800 seconds"));
                }
                Control::NoopInterval(Duration::from_secs_f64(seconds))
            }
            b"send_stream_end_on_client_close_stream" => {
                Control::StreamEndOnClientClose(boolean(value)?)
            }
            b"enable_expiry_opcode" => Control::ExpiryOpcode(boolean(value)?),
            b"v7_dcp_status_codes" => Control::V7StatusCodes(boolean(value)?),
            b"settee_records" => Control::SetteeRecords(boolean(value)?),
            b"include_deleted_user_xattrs" => match value {
                b"true" => Control::IncludeDeletedUserXattrs,
                _ => return Err((EINVAL, "include_deleted_user_xattrs must be true")),
            },
            b"set_priority" => match value {
                b"high" | b"medium" | b"low" => Control::NoEffect,
                _ => return Err((EINVAL, "set_priority must be high, medium or low")),
            },
            b"supports_cursor_dropping"
            | b"supports_cursor_dropping_vulcan"
            | b"supports_hifi_MFU" => {
                boolean(value)?;
                Control::NoEffect
            }
            b"backfill_order" => match value {
                b"round-robin" | b"sequential" => Control::NoEffect,
                _ => return Err((EINVAL, "backfill_order must be round-robin or sequential")),
            },
            b"consumer_name" => Control::ConsumerName(
                std::str::from_utf8(value)
                    .ok()
                    .filter(|text| text.bytes().all(|byte| byte.is_ascii_digit()))
                    .and_then(|text| text.parse::<u64>().ok())
                    .ok_or((EINVAL, "consumer_name must be a node id in decimal"))?,
            ),
            b"enable_sync_writes" => Control::EnableSyncWrites(boolean(value)?),
            b"enable_stream_id"
            | b"enable_out_of_order_snapshots"
            | b"force_value_compression"
            | b"flatbuffers_system_events"
            | b"change_streams"
            | b"max_marker_version"
            | b"stream_buffer_size"
            | b"cache_transfer" => return Err((NOT_SUPPORTED, "DCP_CONTROL key not supported")),
            _ => return Err((EINVAL, "unknown DCP_CONTROL key")),
        })
    }
}

/// Which collections a stream carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Every collection (collection-aware), or collection 0 only (not aware).
    All,
    Collections(Vec<u32>),
    Scope(u32),
}

/// STREAM_REQ, well formed. Whether it may run (vbucket, range, rollback) is the producer's call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRequest {
    pub flags: u32,
    pub start: u64,
    pub end: u64,
    pub vbucket_uuid: u64,
    pub snap_start: u64,
    pub snap_end: u64,
    pub filter: Filter,
}

fn hex_id(value: &serde_json::Value) -> Option<u32> {
    let text = value.as_str()?;
    if text.is_empty() || text.len() > 8 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// The JSON value of a collection-aware stream request.
fn parse_filter(value: &[u8]) -> Result<Filter, Refusal> {
    if value.is_empty() {
        return Ok(Filter::All);
    }
    if value.len() > STREAM_VALUE_BYTES_MAX {
        return Err((EINVAL, "stream request value too large"));
    }
    let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(value) else {
        return Err((EINVAL, "stream request value must be a JSON object"));
    };
    if object.contains_key("sid") {
        return Err((EINVAL, "stream ids are not enabled"));
    }
    match (object.get("collections"), object.get("scope")) {
        (Some(_), Some(_)) => Err((EINVAL, "collections and scope together")),
        (Some(serde_json::Value::Array(ids)), None) => {
            if ids.is_empty() || ids.len() > STREAM_COLLECTIONS_MAX {
                return Err((EINVAL, "collections must list 1 to 1000 ids"));
            }
            let mut parsed = ids
                .iter()
                .map(hex_id)
                .collect::<Option<Vec<u32>>>()
                .ok_or((EINVAL, "collection ids must be hex strings"))?;
            parsed.sort_unstable();
            parsed.dedup();
            Ok(Filter::Collections(parsed))
        }
        (Some(_), None) => Err((EINVAL, "collections must be an array")),
        (None, Some(scope)) => Ok(Filter::Scope(
            hex_id(scope).ok_or((EINVAL, "scope must be a hex string"))?,
        )),
        (None, None) => Ok(Filter::All),
    }
}

impl StreamRequest {
    /// `collections`: HELLO Collections was negotiated (only then may a value come).
    pub fn parse(frame: &Frame<'_>, collections: bool) -> Result<StreamRequest, Refusal> {
        use stream_flags::*;
        let extras = frame.extras;
        if extras.len() != 48 || !frame.key.is_empty() {
            return Err((EINVAL, "STREAM_REQ takes 48 bytes of extras and no key"));
        }
        let field = |at| u64_at(extras, at).unwrap_or(0);
        let flags = u32_at(extras, 0).unwrap_or(0);
        let known = DISK_ONLY
            | TO_LATEST
            | ACTIVE_VB_ONLY
            | STRICT_VB_UUID
            | FROM_LATEST
            | IGNORE_PURGED_TOMBSTONES;
        if flags & (TAKEOVER | CACHE_TRANSFER) != 0 {
            return Err((
                NOT_SUPPORTED,
                "takeover and cache-transfer streams not supported",
            ));
        }
        if flags & !known != 0 {
            return Err((EINVAL, "STREAM_REQ flags are invalid"));
        }
        if !collections && !frame.value.is_empty() {
            return Err((EINVAL, "a stream value needs HELLO Collections"));
        }
        Ok(StreamRequest {
            flags,
            start: field(8),
            end: field(16),
            vbucket_uuid: field(24),
            snap_start: field(32),
            snap_end: field(40),
            filter: parse_filter(frame.value)?,
        })
    }

    /// kv_engine's normalisation before the rollback decision: a start at either end of the
    /// snapshot collapses the snapshot onto it.
    pub fn normalised_snapshot(&self) -> (u64, u64) {
        if self.start == self.snap_end {
            (self.snap_end, self.snap_end)
        } else if self.start == self.snap_start {
            (self.snap_start, self.snap_start)
        } else {
            (self.snap_start, self.snap_end)
        }
    }

    /// ERANGE: start past end, or start outside the snapshot.
    pub fn range_error(&self) -> bool {
        self.start > self.end || self.snap_start > self.start || self.start > self.snap_end
    }
}

/// BUFFER_ACKNOWLEDGEMENT: the bytes the consumer processed.
pub fn parse_buffer_ack(frame: &Frame<'_>) -> Result<u32, Refusal> {
    match (frame.extras.len(), u32_at(frame.extras, 0)) {
        (4, Some(bytes)) if frame.key.is_empty() && frame.value.is_empty() => Ok(bytes),
        _ => Err((
            EINVAL,
            "BUFFER_ACKNOWLEDGEMENT takes 4 bytes of extras only",
        )),
    }
}

/// SEQNO_ACKNOWLEDGED's prepared seqno (the vbucket is the header's): 8 bytes of extras only.
pub fn parse_seqno_ack(frame: &Frame<'_>) -> Result<u64, Refusal> {
    match (frame.extras.len(), u64_at(frame.extras, 0)) {
        (8, Some(seqno)) if frame.key.is_empty() && frame.value.is_empty() => Ok(seqno),
        _ => Err((EINVAL, "SEQNO_ACKNOWLEDGED takes 8 bytes of extras only")),
    }
}

/// GET_ALL_VB_SEQNOS: (vbucket state, 0 = any; collection id).
pub fn parse_all_vb_seqnos(
    frame: &Frame<'_>,
    collections: bool,
) -> Result<(u32, Option<u32>), Refusal> {
    if !frame.key.is_empty() || !frame.value.is_empty() {
        return Err((EINVAL, "GET_ALL_VB_SEQNOS takes extras only"));
    }
    let extras = frame.extras;
    let state = u32_at(extras, 0).unwrap_or(0);
    match extras.len() {
        0 | 4 if state <= 4 => Ok((state, None)),
        8 if !collections => Err((EINVAL, "a collection id needs HELLO Collections")),
        8 if state <= 4 => Ok((state, u32_at(extras, 4))),
        _ => Err((EINVAL, "GET_ALL_VB_SEQNOS extras are invalid")),
    }
}

/// A request on a vbucket with no body (CLOSE_STREAM, GET_FAILOVER_LOG).
pub fn check_bodiless(frame: &Frame<'_>) -> Result<(), Refusal> {
    if frame.extras.is_empty() && frame.key.is_empty() && frame.value.is_empty() {
        Ok(())
    } else {
        Err((EINVAL, "request takes no extras, key or value"))
    }
}

/// What identifies a producer message's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub opaque: u32,
    pub vbucket: u16,
}

#[allow(clippy::too_many_arguments)]
fn request(
    out: &mut Vec<u8>,
    opcode: u8,
    route: Route,
    cas: u64,
    datatype: u8,
    extras: &[u8],
    key: &[u8],
    value: &[&[u8]],
) {
    encode(
        out,
        Magic::Request,
        opcode,
        datatype,
        route.vbucket,
        route.opaque,
        cas,
        &[],
        extras,
        key,
        value,
    );
}

/// A document key as a stream sends it: LEB128 collection id first when collection-aware.
pub fn stream_key(collection: Option<u32>, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if let Some(collection) = collection {
        leb128::encode_u32(collection, out);
    }
    out.extend_from_slice(key);
}

pub fn encode_snapshot_marker(out: &mut Vec<u8>, route: Route, start: u64, end: u64, flags: u32) {
    let mut extras = [0u8; 20];
    extras[..8].copy_from_slice(&start.to_be_bytes());
    extras[8..16].copy_from_slice(&end.to_be_bytes());
    extras[16..].copy_from_slice(&flags.to_be_bytes());
    request(
        out,
        opcode::DCP_SNAPSHOT_MARKER,
        route,
        0,
        0,
        &extras,
        &[],
        &[],
    );
}

/// A document's metadata in MUTATION and DELETION.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemMeta {
    pub seqno: u64,
    pub rev_seqno: u64,
    pub cas: u64,
    pub flags: u32,
    pub expiry: u32,
}

pub fn encode_mutation(
    out: &mut Vec<u8>,
    route: Route,
    meta: ItemMeta,
    datatype: u8,
    key: &[u8],
    value: &[&[u8]],
) {
    let mut extras = [0u8; 31];
    extras[..8].copy_from_slice(&meta.seqno.to_be_bytes());
    extras[8..16].copy_from_slice(&meta.rev_seqno.to_be_bytes());
    extras[16..20].copy_from_slice(&meta.flags.to_be_bytes());
    extras[20..24].copy_from_slice(&meta.expiry.to_be_bytes());
    // lock time, nmeta and nru stay 0.
    request(
        out,
        opcode::DCP_MUTATION,
        route,
        meta.cas,
        datatype,
        &extras,
        key,
        value,
    );
}

/// DELETION v1, or v2 when `delete_time` is given (IncludeDeleteTimes).
pub fn encode_deletion(
    out: &mut Vec<u8>,
    route: Route,
    meta: ItemMeta,
    delete_time: Option<u32>,
    datatype: u8,
    key: &[u8],
    value: &[&[u8]],
) {
    let mut extras = [0u8; 21];
    extras[..8].copy_from_slice(&meta.seqno.to_be_bytes());
    extras[8..16].copy_from_slice(&meta.rev_seqno.to_be_bytes());
    let len = match delete_time {
        Some(time) => {
            extras[16..20].copy_from_slice(&time.to_be_bytes());
            21
        }
        None => 18,
    };
    request(
        out,
        opcode::DCP_DELETION,
        route,
        meta.cas,
        datatype,
        &extras[..len],
        key,
        value,
    );
}

pub fn encode_system_event(
    out: &mut Vec<u8>,
    route: Route,
    seqno: u64,
    event: u32,
    version: u8,
    key: &[u8],
    value: &[u8],
) {
    let mut extras = [0u8; 13];
    extras[..8].copy_from_slice(&seqno.to_be_bytes());
    extras[8..12].copy_from_slice(&event.to_be_bytes());
    extras[12] = version;
    request(
        out,
        opcode::DCP_SYSTEM_EVENT,
        route,
        0,
        0,
        &extras,
        key,
        &[value],
    );
}

/// DCP_PURGE (settee's, `settee_records` streams only, replica.md): the purge marker at
/// `seqno`, its CAS in the header, `key` collection-prefixed, no value.
pub fn encode_purge(out: &mut Vec<u8>, route: Route, seqno: u64, cas: u64, key: &[u8]) {
    request(
        out,
        opcode::DCP_PURGE,
        route,
        cas,
        0,
        &seqno.to_be_bytes(),
        key,
        &[],
    );
}

pub fn encode_seqno_advanced(out: &mut Vec<u8>, route: Route, seqno: u64) {
    request(
        out,
        opcode::DCP_SEQNO_ADVANCED,
        route,
        0,
        0,
        &seqno.to_be_bytes(),
        &[],
        &[],
    );
}

pub fn encode_stream_end(out: &mut Vec<u8>, route: Route, reason: u32) {
    request(
        out,
        opcode::DCP_STREAM_END,
        route,
        0,
        0,
        &reason.to_be_bytes(),
        &[],
        &[],
    );
}

pub fn encode_noop(out: &mut Vec<u8>, opaque: u32) {
    let route = Route { opaque, vbucket: 0 };
    request(out, opcode::DCP_NOOP, route, 0, 0, &[], &[], &[]);
}

/// A producer message, parsed back (what a consumer reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    SnapshotMarker {
        start: u64,
        end: u64,
        flags: u32,
    },
    Mutation {
        meta: ItemMeta,
        key: &'a [u8],
        value: &'a [u8],
    },
    Deletion {
        meta: ItemMeta,
        delete_time: Option<u32>,
        key: &'a [u8],
        value: &'a [u8],
    },
    Expiration {
        meta: ItemMeta,
        delete_time: u32,
        key: &'a [u8],
    },
    SystemEvent {
        seqno: u64,
        event: u32,
        version: u8,
        key: &'a [u8],
        value: &'a [u8],
    },
    SeqnoAdvanced {
        seqno: u64,
    },
    /// settee's DCP_PURGE: the document `key` was purged at `seqno`.
    Purge {
        seqno: u64,
        cas: u64,
        key: &'a [u8],
    },
    StreamEnd {
        reason: u32,
    },
    Noop,
}

impl<'a> Message<'a> {
    /// `None`: not a producer message, or its extras do not have the message's shape.
    pub fn parse(frame: &Frame<'a>) -> Option<Message<'a>> {
        if frame.magic != Magic::Request {
            return None;
        }
        let extras = frame.extras;
        let meta = |flags_and_expiry: bool| -> Option<ItemMeta> {
            Some(ItemMeta {
                seqno: u64_at(extras, 0)?,
                rev_seqno: u64_at(extras, 8)?,
                cas: frame.cas,
                flags: if flags_and_expiry {
                    u32_at(extras, 16)?
                } else {
                    0
                },
                expiry: if flags_and_expiry {
                    u32_at(extras, 20)?
                } else {
                    0
                },
            })
        };
        Some(match (frame.opcode, extras.len()) {
            (opcode::DCP_SNAPSHOT_MARKER, 20) => Message::SnapshotMarker {
                start: u64_at(extras, 0)?,
                end: u64_at(extras, 8)?,
                flags: u32_at(extras, 16)?,
            },
            (opcode::DCP_MUTATION, 31) => Message::Mutation {
                meta: meta(true)?,
                key: frame.key,
                value: frame.value,
            },
            (opcode::DCP_DELETION, 18 | 21) => Message::Deletion {
                meta: meta(false)?,
                delete_time: if extras.len() == 21 {
                    u32_at(extras, 16)
                } else {
                    None
                },
                key: frame.key,
                value: frame.value,
            },
            (opcode::DCP_EXPIRATION, 20) => Message::Expiration {
                meta: meta(false)?,
                delete_time: u32_at(extras, 16)?,
                key: frame.key,
            },
            (opcode::DCP_SYSTEM_EVENT, 13) => Message::SystemEvent {
                seqno: u64_at(extras, 0)?,
                event: u32_at(extras, 8)?,
                version: extras[12],
                key: frame.key,
                value: frame.value,
            },
            (opcode::DCP_SEQNO_ADVANCED, 8) => Message::SeqnoAdvanced {
                seqno: u64_at(extras, 0)?,
            },
            (opcode::DCP_PURGE, 8) if frame.value.is_empty() => Message::Purge {
                seqno: u64_at(extras, 0)?,
                cas: frame.cas,
                key: frame.key,
            },
            (opcode::DCP_STREAM_END, 4) => Message::StreamEnd {
                reason: u32_at(extras, 0)?,
            },
            (opcode::DCP_NOOP, 0) => Message::Noop,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode_request, Decoded};

    fn frame_of(bytes: &[u8]) -> Frame<'_> {
        match decode(bytes, 1 << 20) {
            Ok(Decoded::Frame(frame, used)) if used == bytes.len() => frame,
            other => panic!("not one frame: {other:?}"),
        }
    }

    fn request_bytes(op: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(&mut out, op, 3, 9, 0, 0, &[], extras, key, value);
        out
    }

    fn open_extras(flags: u32) -> [u8; 8] {
        let mut extras = [0u8; 8];
        extras[4..].copy_from_slice(&flags.to_be_bytes());
        extras
    }

    #[test]
    fn open_accepts_producers_and_refuses_the_rest() {
        let ok = request_bytes(opcode::DCP_OPEN, &open_extras(0x25), b"java:1", b"");
        let open = Open::parse(&frame_of(&ok)).expect("accepted");
        assert_eq!((open.name, open.flags), (&b"java:1"[..], 0x25));
        for (flags, key, value, code) in [
            (0x03, &b"n"[..], &b""[..], EINVAL),
            (0x1001, b"n", b"", EINVAL),
            (0x00, b"n", b"", NOT_SUPPORTED),
            (0x81, b"n", b"", NOT_SUPPORTED),
            (0x01, b"", b"", EINVAL),
            (0x01, b"n", b"{}", EINVAL),
        ] {
            let bytes = request_bytes(opcode::DCP_OPEN, &open_extras(flags), key, value);
            assert_eq!(
                Open::parse(&frame_of(&bytes)).map_err(|e| e.0),
                Err(code),
                "{flags:#x}"
            );
        }
        let long = vec![b'a'; 201];
        let bytes = request_bytes(opcode::DCP_OPEN, &open_extras(1), &long, b"");
        assert!(Open::parse(&frame_of(&bytes)).is_err());
    }

    #[test]
    fn controls_parse_and_unknown_keys_are_einval() {
        let parse = |key: &[u8], value: &[u8]| {
            Control::parse(&frame_of(&request_bytes(
                opcode::DCP_CONTROL,
                &[],
                key,
                value,
            )))
        };
        assert_eq!(
            parse(b"connection_buffer_size", b"1048576"),
            Ok(Control::BufferSize(1 << 20))
        );
        assert_eq!(
            parse(b"enable_noop", b"true"),
            Ok(Control::EnableNoop(true))
        );
        assert_eq!(
            parse(b"set_noop_interval", b"0.5").map_err(|e| e.0),
            Err(EINVAL)
        );
        assert_eq!(
            parse(b"set_noop_interval", b"120"),
            Ok(Control::NoopInterval(Duration::from_secs(120)))
        );
        assert_eq!(parse(b"no_such_key", b"true").map_err(|e| e.0), Err(EINVAL));
        assert_eq!(parse(b"enable_noop", b"yes").map_err(|e| e.0), Err(EINVAL));
        assert_eq!(
            parse(b"enable_sync_writes", b"true"),
            Ok(Control::EnableSyncWrites(true))
        );
        assert_eq!(
            parse(b"consumer_name", b"17"),
            Ok(Control::ConsumerName(17))
        );
        for name in [&b"+17"[..], b"node-1", b"18446744073709551616"] {
            assert_eq!(parse(b"consumer_name", name).map_err(|e| e.0), Err(EINVAL));
        }
        assert_eq!(
            parse(b"enable_stream_id", b"true").map_err(|e| e.0),
            Err(NOT_SUPPORTED)
        );
        assert_eq!(
            parse(b"connection_buffer_size", b"-1").map_err(|e| e.0),
            Err(EINVAL)
        );
    }

    #[test]
    fn seqno_acknowledgements_take_eight_bytes_of_extras_only() {
        let ack = request_bytes(
            opcode::DCP_SEQNO_ACKNOWLEDGED,
            &4u64.to_be_bytes(),
            b"",
            b"",
        );
        assert_eq!(parse_seqno_ack(&frame_of(&ack)), Ok(4));
        for (extras, key) in [(&[0u8; 4][..], &b""[..]), (&[0; 8], b"k"), (&[], b"")] {
            let bytes = request_bytes(opcode::DCP_SEQNO_ACKNOWLEDGED, extras, key, b"");
            assert_eq!(
                parse_seqno_ack(&frame_of(&bytes)).map_err(|e| e.0),
                Err(EINVAL)
            );
        }
    }

    fn stream_extras(flags: u32, fields: [u64; 5]) -> Vec<u8> {
        let mut extras = flags.to_be_bytes().to_vec();
        extras.extend_from_slice(&[0; 4]);
        for field in fields {
            extras.extend_from_slice(&field.to_be_bytes());
        }
        extras
    }

    #[test]
    fn stream_requests_parse_with_filters_and_ranges() {
        let extras = stream_extras(0, [5, u64::MAX, 77, 5, 9]);
        let value = br#"{"uid":"0","collections":["8","a","8"]}"#;
        let bytes = request_bytes(opcode::DCP_STREAM_REQ, &extras, b"", value);
        let request = StreamRequest::parse(&frame_of(&bytes), true).expect("parsed");
        assert_eq!(request.filter, Filter::Collections(vec![8, 10]));
        assert_eq!((request.start, request.vbucket_uuid), (5, 77));
        assert_eq!(request.normalised_snapshot(), (5, 5));
        assert!(!request.range_error());
        assert_eq!(
            StreamRequest::parse(&frame_of(&bytes), false).map_err(|e| e.0),
            Err(EINVAL)
        );
        for value in [
            &br#"{"collections":["8"],"scope":"0"}"#[..],
            br#"{"collections":[]}"#,
            br#"{"collections":["xyz"]}"#,
            br#"{"scope":8}"#,
            br#"{"sid":1}"#,
            b"[1]",
        ] {
            let bytes = request_bytes(opcode::DCP_STREAM_REQ, &extras, b"", value);
            assert!(StreamRequest::parse(&frame_of(&bytes), true).is_err());
        }
        let backwards = stream_extras(0, [10, 5, 0, 10, 10]);
        let bytes = request_bytes(opcode::DCP_STREAM_REQ, &backwards, b"", b"");
        assert!(StreamRequest::parse(&frame_of(&bytes), false)
            .expect("parsed")
            .range_error());
        let takeover = stream_extras(1, [0, 5, 0, 0, 0]);
        let bytes = request_bytes(opcode::DCP_STREAM_REQ, &takeover, b"", b"");
        assert_eq!(
            StreamRequest::parse(&frame_of(&bytes), false).map_err(|e| e.0),
            Err(NOT_SUPPORTED)
        );
    }

    #[test]
    fn messages_round_trip() {
        let route = Route {
            opaque: 4,
            vbucket: 7,
        };
        let meta = ItemMeta {
            seqno: 3,
            rev_seqno: 2,
            cas: 99,
            flags: 5,
            expiry: 6,
        };
        let mut out = Vec::new();
        encode_snapshot_marker(&mut out, route, 0, 3, snapshot_flags::DISK);
        encode_mutation(&mut out, route, meta, 1, b"\x00k", &[b"{", b"}"]);
        encode_deletion(&mut out, route, meta, Some(12), 0, b"k", &[]);
        encode_deletion(&mut out, route, meta, None, 0, b"k", &[]);
        encode_system_event(&mut out, route, 4, 0, 0, b"c", &[0; 16]);
        encode_seqno_advanced(&mut out, route, 9);
        encode_stream_end(&mut out, route, end_reason::OK);
        encode_noop(&mut out, 1);
        let mut messages = Vec::new();
        let mut rest = &out[..];
        while let Ok(Decoded::Frame(frame, used)) = decode(rest, 1 << 20) {
            if frame.opcode != opcode::DCP_NOOP {
                assert_eq!((frame.opaque, frame.vbucket()), (4, 7));
            }
            messages.push(Message::parse(&frame).expect("a message"));
            rest = &rest[used..];
        }
        assert!(rest.is_empty());
        assert_eq!(messages.len(), 8);
        assert_eq!(
            messages[1],
            Message::Mutation {
                meta,
                key: b"\x00k",
                value: b"{}"
            }
        );
        let deleted = ItemMeta {
            flags: 0,
            expiry: 0,
            ..meta
        };
        assert_eq!(
            messages[2],
            Message::Deletion {
                meta: deleted,
                delete_time: Some(12),
                key: b"k",
                value: b""
            }
        );
        assert_eq!(
            messages[3],
            Message::Deletion {
                meta: deleted,
                delete_time: None,
                key: b"k",
                value: b""
            }
        );
        assert_eq!(messages[5], Message::SeqnoAdvanced { seqno: 9 });
        assert_eq!(messages[7], Message::Noop);
    }
}
