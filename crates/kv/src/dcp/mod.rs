//! The DCP producer (docs/format/dcp.md): after DCP_OPEN a KV connection leaves the request
//! loop of `connection.rs` for [`serve`], which answers the consumer's requests and sends each
//! open stream's snapshots of its vbucket's `seq` range (`stream.rs`), then follows new writes
//! through the bucket's high-seqno watch until each stream's end.
//!
//! Start reading at [`serve`]; `requests.rs` answers STREAM_REQ (with the failover-log rules
//! of `rollback.rs`), CONTROL, CLOSE_STREAM and BUFFER_ACKNOWLEDGEMENT; `item.rs` frames a
//! document or a system event.
//!
//! Memory stays bounded whatever the consumer does: a stream holds one chunk of entries, the
//! output buffer is written out at [`OUT_BYTES_MAX`] before anything more is read from
//! storage, nothing is produced while the consumer's flow-control window is full, and a
//! consumer whose socket takes nothing for the door's stuck timeout is closed.

mod item;
mod names;
mod requests;
mod rollback;
mod stream;
mod sync;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures_util::future::BoxFuture;
use settee_auth::Operation;
use settee_engine::Bucket;
use settee_kv_codec::dcp::{encode_noop, encode_stream_end, end_reason, Open, Route};
use settee_kv_codec::{decode, opcode, status, Decoded, Frame, Magic};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::deadlines::write_unless_stuck;
use crate::session::{error_reply, is_data_request, reply, DataView, Handled, Session};
use crate::KvState;
use item::ValueOptions;
use stream::{Step, Stream};

pub(crate) use names::ProducerNames;
pub(crate) use requests::info_request;

/// Producer output gathered before one write to the socket.
pub(crate) const OUT_BYTES_MAX: usize = 256 * 1024;
/// The largest request a consumer sends (a STREAM_REQ value is at most 64 KiB).
const REQUEST_BYTES_MAX: usize = 1024 * 1024;
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// kv_engine's `dcp_noop_tx_interval` default, until the consumer sets one.
const NOOP_INTERVAL_DEFAULT: Duration = Duration::from_secs(120);
/// kv_engine's `StreamEndStatus::BackfillFail`: the stream's read from storage failed.
const END_READ_FAILED: u32 = 5;

/// Whether `code` is a DCP opcode (DCP_OPEN to DCP_CACHE_TRANSFER_END).
pub(crate) fn is_dcp_opcode(code: u8) -> bool {
    (opcode::DCP_OPEN..=opcode::DCP_CACHE_TRANSFER_END).contains(&code)
}

/// A DCP_OPEN that succeeded: the connection becomes a producer.
#[derive(Debug)]
pub(crate) struct Opened {
    name: String,
    flags: u32,
}

/// DCP_OPEN on an ordinary connection: the success reply and [`Handled::Dcp`], or a refusal.
pub(crate) fn open(view: DataView<'_>, frame: &Frame<'_>, out: &mut Vec<u8>) -> Handled {
    let opened = Open::parse(frame).and_then(|open| {
        // DCP reads every document raw: a database admin at least (docs/format/dcp.md).
        requests::authorised(&view, Operation::AdminDb)?;
        Ok(open)
    });
    match opened {
        Ok(open) => {
            reply(out, frame.opcode, frame.opaque, 0, 0, 0, &[], &[], &[]);
            Handled::Dcp(Opened {
                name: String::from_utf8_lossy(open.name).into_owned(),
                flags: open.flags,
            })
        }
        Err((code, reason)) => {
            error_reply(
                out,
                &view.features,
                frame.opcode,
                frame.opaque,
                code,
                reason,
            );
            Handled::Done
        }
    }
}

/// What the consumer set with DCP_CONTROL.
#[derive(Clone, Copy, Debug)]
struct Controls {
    /// Flow-control window; 0 = off.
    buffer_bytes: u64,
    noop: bool,
    noop_interval: Duration,
    stream_end_on_close: bool,
    v7_status_codes: bool,
}

/// One producer connection's state.
pub(crate) struct Producer {
    session: Session,
    bucket: Arc<Bucket>,
    open_flags: u32,
    value_options: ValueOptions,
    controls: Controls,
    /// Bytes sent and not acknowledged (counted while flow control is on).
    unacked: u64,
    /// Open streams by vbucket (one per vbucket).
    streams: BTreeMap<u16, Stream>,
    /// The vbucket whose stream sent last: the next round starts after it.
    turn: u16,
    /// STREAM_ENDs owed right after the reply being written.
    after_reply: Vec<Route>,
    /// A DCP_NOOP was sent and its response has not come.
    noop_outstanding: bool,
    /// Sync replication: which vbuckets count as streaming to the consumer node (sync.rs).
    sync: sync::SyncStreams,
}

impl Producer {
    fn window_full(&self) -> bool {
        self.controls.buffer_bytes > 0 && self.unacked >= self.controls.buffer_bytes
    }

    fn account(&mut self, bytes: usize) {
        if self.controls.buffer_bytes > 0 {
            self.unacked += bytes as u64;
        }
    }

    /// Whether [`Producer::produce`] would write something now.
    fn ready(&self) -> bool {
        if self.window_full() || self.streams.is_empty() {
            return false;
        }
        let high = self.bucket.high_seqnos();
        self.streams
            .values()
            .any(|stream| stream.may_progress(high.get(stream.route.vbucket)))
    }

    /// Steps the streams in turn, one message each per round, until the output is full, the
    /// window is, or no stream has anything to send.
    fn produce(&mut self, out: &mut Vec<u8>) {
        if requests::authorised(&self.session.view(), Operation::AdminDb).is_err() {
            for stream in std::mem::take(&mut self.streams).into_values() {
                let start = out.len();
                encode_stream_end(out, stream.route, end_reason::LOST_PRIVILEGES);
                self.account(out.len() - start);
            }
            return;
        }
        loop {
            let order: Vec<u16> = self
                .streams
                .range(self.turn.saturating_add(1)..)
                .chain(self.streams.range(..=self.turn))
                .map(|(&vbucket, _)| vbucket)
                .collect();
            let mut progressed = false;
            for vbucket in order {
                if out.len() >= OUT_BYTES_MAX || self.window_full() {
                    return;
                }
                let Some(stream) = self.streams.get_mut(&vbucket) else {
                    continue;
                };
                let start = out.len();
                let step = stream
                    .step(&self.bucket, self.value_options, out)
                    .unwrap_or_else(|error| {
                        tracing::warn!(%error, vbucket, "dcp stream read failed");
                        out.truncate(start);
                        encode_stream_end(out, stream.route, END_READ_FAILED);
                        Step::Ended
                    });
                self.account(out.len() - start);
                self.turn = vbucket;
                match step {
                    Step::Progress => progressed = true,
                    Step::Waiting => {}
                    Step::Ended => {
                        self.streams.remove(&vbucket);
                        progressed = true;
                    }
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Answers one frame from the consumer. `Err` closes the connection; a future is a reply
    /// to wait for (a request the ordinary session answers later).
    fn handle(
        &mut self,
        frame: &Frame<'_>,
        bytes: &bytes::Bytes,
        out: &mut Vec<u8>,
    ) -> Result<Option<BoxFuture<'static, Vec<u8>>>, ()> {
        if !frame.magic.is_request() || frame.magic == Magic::ServerRequest {
            // Responses are never answered; a DCP_NOOP's proves the consumer alive.
            if frame.opcode == opcode::DCP_NOOP {
                self.noop_outstanding = false;
            }
            return Ok(None);
        }
        if is_dcp_opcode(frame.opcode) {
            self.request(frame, out);
            self.after_reply(out);
            return Ok(None);
        }
        if is_data_request(frame) {
            let features = self.session.features;
            let context = "Document requests are not served on a DCP connection";
            error_reply(
                out,
                &features,
                frame.opcode,
                frame.opaque,
                status::NOT_SUPPORTED,
                context,
            );
            return Ok(None);
        }
        match self.session.handle(frame, bytes, out) {
            Handled::Done | Handled::Dcp(_) => Ok(None),
            Handled::Later(future) => Ok(Some(future)),
            Handled::Close => Err(()),
        }
    }
}

/// Serves a connection that DCP_OPEN made a producer, until the consumer goes away, sends a
/// malformed frame, stops answering NOOPs, or stops reading.
pub(crate) async fn serve(
    mut reader: OwnedReadHalf,
    mut writer: OwnedWriteHalf,
    session: Session,
    mut input: BytesMut,
    opened: Opened,
    state: Arc<KvState>,
) {
    let Some(bucket) = session.view().bucket.cloned() else {
        return;
    };
    tracing::debug!(name = %opened.name, flags = opened.flags, "dcp producer connection");
    let mut producer = Producer {
        value_options: ValueOptions::new(opened.flags, session.features.collections),
        session,
        bucket: bucket.clone(),
        open_flags: opened.flags,
        controls: Controls {
            buffer_bytes: 0,
            noop: false,
            noop_interval: NOOP_INTERVAL_DEFAULT,
            stream_end_on_close: false,
            v7_status_codes: false,
        },
        unacked: 0,
        streams: BTreeMap::new(),
        turn: 0,
        after_reply: Vec::new(),
        noop_outstanding: false,
        sync: sync::SyncStreams::new(bucket.durability().clone()),
    };
    let registration = state.dcp_names.register(bucket.id(), &opened.name);
    let stuck_after = state.config.limits.send_queue_stuck_timeout;
    let mut changes = bucket.subscribe();
    let mut watching = true;
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUFFER_BYTES);
    let mut last_sent = Instant::now();
    let mut noop_opaque: u32 = 0;
    loop {
        // The consumer's requests, each answered in order.
        loop {
            let used = match decode(&input, REQUEST_BYTES_MAX) {
                Ok(Decoded::Frame(_, used)) => used,
                Ok(Decoded::Incomplete(_)) => break,
                Err(error) => {
                    tracing::debug!(%error, "malformed frame on a dcp connection, closing");
                    let _ = write_unless_stuck(&mut writer, &out, stuck_after).await;
                    return;
                }
            };
            let bytes = input.split_to(used).freeze();
            let Ok(Decoded::Frame(frame, _)) = decode(&bytes, REQUEST_BYTES_MAX) else {
                return;
            };
            match producer.handle(&frame, &bytes, &mut out) {
                Ok(None) => {}
                Ok(Some(later)) => out.extend_from_slice(&later.await),
                Err(()) => {
                    let _ = write_unless_stuck(&mut writer, &out, stuck_after).await;
                    return;
                }
            }
            producer.sync.follow(producer.streams.keys().copied());
        }
        producer.produce(&mut out);
        producer.sync.follow(producer.streams.keys().copied());
        if !out.is_empty() {
            let _held = state.output.hold(out.len());
            if write_unless_stuck(&mut writer, &out, stuck_after)
                .await
                .is_err()
            {
                return;
            }
            out.clear();
            last_sent = Instant::now();
        }
        if input.capacity() - input.len() < READ_BUFFER_BYTES {
            input.reserve(READ_BUFFER_BYTES);
        }
        let ready = producer.ready();
        let noop_at = producer
            .controls
            .noop
            .then(|| last_sent + producer.controls.noop_interval);
        tokio::select! {
            biased;
            read = tokio::io::AsyncReadExt::read_buf(&mut reader, &mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            () = registration.replaced.notified() => {
                tracing::debug!(name = %opened.name, "a newer dcp connection took the name, closing");
                return;
            }
            () = std::future::ready(()), if ready => {}
            changed = changes.changed(), if watching => {
                // A dropped bucket stops the watch; its streams end with their reads.
                watching = changed.is_ok();
            }
            () = tokio::time::sleep_until(noop_at.unwrap_or(last_sent).into()), if noop_at.is_some() => {
                if producer.noop_outstanding {
                    tracing::debug!(name = %opened.name, "dcp consumer did not answer a noop, closing");
                    return;
                }
                noop_opaque = noop_opaque.wrapping_add(1);
                encode_noop(&mut out, noop_opaque);
                producer.noop_outstanding = true;
            }
        }
        if input.is_empty() && input.capacity() > 4 * REQUEST_BYTES_MAX {
            input = BytesMut::with_capacity(READ_BUFFER_BYTES);
        }
    }
}
