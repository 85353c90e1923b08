//! The consumer's requests on a DCP connection, and the two DCP reads any connection may make
//! (GET_FAILOVER_LOG, GET_ALL_VB_SEQNOS): each parsed by `settee_kv_codec::dcp`, checked,
//! and answered with exactly one reply (none for BUFFER_ACKNOWLEDGEMENT, as kv_engine).

use std::collections::BTreeSet;
use std::sync::Arc;

use settee_auth::Operation;
use settee_engine::{encode_failover_log, Bucket, EngineError, VbRole};
use settee_kv_codec::dcp::{
    check_bodiless, encode_stream_end, end_reason, open_flags, parse_all_vb_seqnos,
    parse_buffer_ack, parse_seqno_ack, stream_flags, Control, Filter, Refusal, Route,
    StreamRequest,
};
use settee_kv_codec::{opcode, status, Frame};

use super::rollback::{self, Resume};
use super::stream::{Selection, Stream};
use super::Producer;
use crate::session::{error_reply, reply, unknown_reply, DataView};

/// The bucket of a connection allowed `operation` on it, or the refusal to answer.
pub(crate) fn authorised(
    view: &DataView<'_>,
    operation: Operation<'_>,
) -> Result<Arc<Bucket>, Refusal> {
    let (Some(bucket), Some(grant)) = (view.bucket, view.grant) else {
        return Err((status::NO_BUCKET, "No bucket selected"));
    };
    grant
        .check(view.state, operation)
        .map_err(|reason| (status::EACCESS, reason))?;
    Ok(bucket.clone())
}

fn refuse(view: &DataView<'_>, frame: &Frame<'_>, out: &mut Vec<u8>, refusal: Refusal) {
    error_reply(
        out,
        &view.features,
        frame.opcode,
        frame.opaque,
        refusal.0,
        refusal.1,
    );
}

fn internal(error: EngineError) -> Refusal {
    tracing::warn!(%error, "dcp request failed");
    (status::EINTERNAL, "Internal error")
}

/// GET_FAILOVER_LOG and GET_ALL_VB_SEQNOS, on any connection with a bucket.
pub(crate) fn info_request(view: DataView<'_>, frame: &Frame<'_>, out: &mut Vec<u8>) {
    let answered = authorised(&view, Operation::ReadDb).and_then(|bucket| {
        if frame.opcode == opcode::DCP_GET_FAILOVER_LOG {
            check_bodiless(frame)?;
            match bucket.failover_log(frame.vbucket()).map_err(internal)? {
                Some(log) => Ok(encode_failover_log(&log)),
                None => Err((status::NOT_MY_VBUCKET, "")),
            }
        } else {
            all_vb_seqnos(&view, &bucket, frame)
        }
    });
    match answered {
        Ok(value) => reply(out, frame.opcode, frame.opaque, 0, 0, 0, &[], &[], &value),
        Err((status::UNKNOWN_COLLECTION, _)) => {
            let uid = view.bucket.map_or(0, |bucket| bucket.manifest().uid());
            unknown_reply(
                out,
                &view.features,
                frame.opcode,
                frame.opaque,
                status::UNKNOWN_COLLECTION,
                uid,
            );
        }
        Err(refusal) => refuse(&view, frame, out, refusal),
    }
}

fn all_vb_seqnos(
    view: &DataView<'_>,
    bucket: &Bucket,
    frame: &Frame<'_>,
) -> Result<Vec<u8>, Refusal> {
    let (state, collection) = parse_all_vb_seqnos(frame, view.features.collections)?;
    let seqnos = match collection {
        None => bucket.high_seqnos(),
        Some(cid) => bucket.high_seqnos_in(cid).map_err(|error| match error {
            EngineError::UnknownCollection { .. } => (status::UNKNOWN_COLLECTION, ""),
            other => internal(other),
        })?,
    };
    let mut value = Vec::new();
    // On a cluster node the map says which vbuckets are active here and which are replicas
    // (state 0 lists both; none is pending or dead); otherwise the engine's roles do
    // (replica.md): state 0 lists every vbucket, 1-4 those in that role.
    let topology = view.route.and(view.state.routing.topology());
    let listed = |vbucket: u16| match view.route {
        Some(route) => {
            let active = route.is_active(vbucket);
            let replica = topology
                .as_ref()
                .is_some_and(|topology| topology.is_replica_here(bucket.name(), vbucket));
            match state {
                0 => active || replica,
                1 => active,
                2 => replica,
                _ => false,
            }
        }
        None => state == 0 || state == bucket.vbucket_role(vbucket) as u32 + 1,
    };
    for vbucket in (0..bucket.vbuckets()).filter(|vbucket| listed(*vbucket)) {
        value.extend_from_slice(&vbucket.to_be_bytes());
        value.extend_from_slice(&seqnos.get(vbucket).to_be_bytes());
    }
    Ok(value)
}

impl Producer {
    /// Answers one DCP request from the consumer.
    pub(super) fn request(&mut self, frame: &Frame<'_>, out: &mut Vec<u8>) {
        let answered = match frame.opcode {
            opcode::DCP_CONTROL => self.control(frame).map(|()| (0, Vec::new())),
            opcode::DCP_STREAM_REQ => self.stream_request(frame),
            opcode::DCP_CLOSE_STREAM => self.close_stream(frame).map(|()| (0, Vec::new())),
            opcode::DCP_BUFFER_ACKNOWLEDGEMENT => match parse_buffer_ack(frame) {
                Ok(bytes) => {
                    self.unacked = self.unacked.saturating_sub(u64::from(bytes));
                    return;
                }
                Err(refusal) => Err(refusal),
            },
            opcode::DCP_SEQNO_ACKNOWLEDGED if self.sync.acknowledger().is_some() => {
                match parse_seqno_ack(frame) {
                    Ok(seqno) => {
                        // Never answered (replica.md, "Sync replication").
                        self.sync.ack(frame.vbucket(), seqno);
                        return;
                    }
                    Err(refusal) => Err(refusal),
                }
            }
            opcode::DCP_SEQNO_ACKNOWLEDGED => Err((status::EINVAL, "Sync writes are not enabled")),
            opcode::DCP_GET_FAILOVER_LOG => {
                info_request(self.session.view(), frame, out);
                return;
            }
            opcode::DCP_OPEN => Err((status::EINVAL, "Already a DCP connection")),
            _ => Err((status::NOT_SUPPORTED, "Not supported on a DCP producer")),
        };
        let view = self.session.view();
        match answered {
            Ok((code, value)) => reply(
                out,
                frame.opcode,
                frame.opaque,
                code,
                0,
                0,
                &[],
                &[],
                &value,
            ),
            Err((code @ (status::UNKNOWN_COLLECTION | status::UNKNOWN_SCOPE), _)) => {
                let uid = self.bucket.manifest().uid();
                unknown_reply(out, &view.features, frame.opcode, frame.opaque, code, uid);
            }
            Err(refusal) => refuse(&view, frame, out, refusal),
        }
    }

    fn control(&mut self, frame: &Frame<'_>) -> Result<(), Refusal> {
        match Control::parse(frame)? {
            Control::BufferSize(bytes) => self.controls.buffer_bytes = u64::from(bytes),
            Control::EnableNoop(on) => self.controls.noop = on,
            Control::NoopInterval(interval) => self.controls.noop_interval = interval,
            Control::StreamEndOnClientClose(on) => self.controls.stream_end_on_close = on,
            Control::V7StatusCodes(on) => self.controls.v7_status_codes = on,
            Control::SetteeRecords(on) => {
                if !self.session.is_node() {
                    return Err((status::EACCESS, "settee_records is for cluster nodes"));
                }
                if !self.value_options.collections || !self.streams.is_empty() {
                    return Err((
                        status::EINVAL,
                        "settee_records needs HELLO Collections, before any stream",
                    ));
                }
                self.value_options.records = on;
            }
            Control::ConsumerName(node) => {
                if !self.session.is_node() || !self.value_options.records {
                    return Err((status::EINVAL, "consumer_name is for settee_records nodes"));
                }
                if self.sync.enabled {
                    return Err((status::EINVAL, "consumer_name after enable_sync_writes"));
                }
                self.sync.node = Some(node);
            }
            Control::EnableSyncWrites(on) => {
                if on && self.sync.node.is_none() {
                    return Err((status::EINVAL, "enable_sync_writes needs consumer_name"));
                }
                if !self.streams.is_empty() {
                    return Err((status::EINVAL, "enable_sync_writes before any stream"));
                }
                self.sync.enabled = on;
            }
            Control::IncludeDeletedUserXattrs => {
                if self.open_flags & open_flags::INCLUDE_DELETED_USER_XATTRS == 0 {
                    return Err((
                        status::EINVAL,
                        "needs the DCP_OPEN flag IncludeDeletedUserXattrs",
                    ));
                }
            }
            // Expiries reach the stream as ordinary deletions (docs/format/dcp.md).
            Control::ExpiryOpcode(_) | Control::NoEffect => {}
        }
        Ok(())
    }

    /// STREAM_REQ: success with the failover log as the reply's value (the stream added), or
    /// ROLLBACK with the seqno to roll back to.
    fn stream_request(&mut self, frame: &Frame<'_>) -> Result<(u16, Vec<u8>), Refusal> {
        let view = self.session.view();
        let bucket = authorised(&view, Operation::AdminDb)?;
        let mut request = StreamRequest::parse(frame, self.value_options.collections)?;
        let vbucket = frame.vbucket();
        if view.route.is_some_and(|route| !route.is_active(vbucket)) {
            // Another node is this vbucket's active in the cluster map.
            return Err((status::NOT_MY_VBUCKET, ""));
        }
        // A dead vbucket holds nothing to stream (a copy a rebalance moved away is emptied:
        // answering from it would roll a replica back to 0), nor does a pending one yet.
        if matches!(bucket.vbucket_role(vbucket), VbRole::Dead | VbRole::Pending) {
            return Err((status::NOT_MY_VBUCKET, ""));
        }
        let Some(log) = bucket.failover_log(vbucket).map_err(internal)? else {
            return Err((status::NOT_MY_VBUCKET, ""));
        };
        if self.streams.contains_key(&vbucket) {
            return Err((status::KEY_EEXISTS, "Stream already exists"));
        }
        let active_only = request.flags & stream_flags::ACTIVE_VB_ONLY != 0;
        if active_only && bucket.vbucket_role(vbucket) != VbRole::Active {
            return Err((status::NOT_MY_VBUCKET, ""));
        }
        if self.value_options.records && request.filter != Filter::All {
            return Err((status::EINVAL, "a replica stream takes every collection"));
        }
        let high = bucket.high_seqnos().get(vbucket);
        if request.flags & stream_flags::FROM_LATEST != 0 {
            (request.start, request.snap_start, request.snap_end) = (high, high, high);
        }
        if request.flags & (stream_flags::TO_LATEST | stream_flags::DISK_ONLY) != 0 {
            request.end = request.end.min(high);
        }
        if request.range_error() {
            return Err((status::ERANGE, "Invalid seqno range"));
        }
        let selection = self.selection(&bucket, &request.filter)?;
        // Rule 2 of docs/format/dcp.md: the highest purge marker compaction deleted.
        let purge_seqno = bucket.purge_seqno(vbucket);
        if let Resume::Rollback(seqno) = rollback::decide(&request, &log, high, purge_seqno) {
            return Ok((status::ROLLBACK, seqno.to_be_bytes().to_vec()));
        }
        let route = Route {
            opaque: frame.opaque,
            vbucket,
        };
        self.streams.insert(
            vbucket,
            Stream::new(route, request.start, request.end, selection),
        );
        Ok((0, encode_failover_log(&log)))
    }

    /// The stream's selection; every id must be live in the current manifest.
    fn selection(&self, bucket: &Bucket, filter: &Filter) -> Result<Selection, Refusal> {
        if !self.value_options.collections {
            return Ok(Selection::DefaultCollection);
        }
        let manifest = bucket.manifest();
        match filter {
            Filter::All => Ok(Selection::Everything),
            Filter::Collections(ids) => {
                if !ids.iter().all(|&cid| manifest.is_live(cid)) {
                    return Err((status::UNKNOWN_COLLECTION, ""));
                }
                Ok(Selection::Collections {
                    ids: ids.iter().copied().collect(),
                    scope: None,
                })
            }
            Filter::Scope(scope_id) => {
                let scope = manifest
                    .scopes()
                    .iter()
                    .find(|scope| scope.id == *scope_id)
                    .ok_or((status::UNKNOWN_SCOPE, ""))?;
                Ok(Selection::Collections {
                    ids: scope
                        .collections
                        .iter()
                        .map(|c| c.id)
                        .collect::<BTreeSet<u32>>(),
                    scope: Some(*scope_id),
                })
            }
        }
    }

    fn close_stream(&mut self, frame: &Frame<'_>) -> Result<(), Refusal> {
        check_bodiless(frame)?;
        let Some(stream) = self.streams.remove(&frame.vbucket()) else {
            let code = if self.controls.v7_status_codes {
                status::DCP_STREAM_NOT_FOUND
            } else {
                status::KEY_ENOENT
            };
            return Err((code, "No stream on this vbucket"));
        };
        if self.controls.stream_end_on_close {
            // After the reply (written by the caller first), as kv_engine orders them.
            self.after_reply.push(stream.route);
        }
        Ok(())
    }

    /// Writes what must follow the reply just written (STREAM_END Closed).
    pub(super) fn after_reply(&mut self, out: &mut Vec<u8>) {
        for route in std::mem::take(&mut self.after_reply) {
            let start = out.len();
            encode_stream_end(out, route, end_reason::CLOSED);
            self.unacked += (out.len() - start) as u64;
        }
    }
}
