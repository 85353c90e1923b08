//! One connection's life after the handshake: a STREAM_REQ per replica vbucket, then every
//! message the producer sends, applied in batches, acknowledged once durable, until the
//! connection ends (replica.md, "What the consumer does").

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use settee_engine::{Bucket, FailoverEntry};
use settee_kv_codec::dcp::Message;
use settee_kv_codec::{decode, encode_response, opcode, status, Decoded, Magic};

use crate::connection::{Connection, FRAME_BYTES_MAX, NOOP_INTERVAL_SECS};
use crate::stream::{doc_item, event_item, purge_item, stream_request_extras, VbStream};
use crate::{Control, ReplicaError};

/// A producer silent for this long (three NOOP intervals) is taken for gone.
const SILENCE_MAX: Duration = Duration::from_secs(3 * NOOP_INTERVAL_SECS);

/// How a connection's streaming ended without an error.
pub(crate) enum Ended {
    Stopped,
    VbucketsChanged,
}

pub(crate) struct Session<'a> {
    pub connection: Connection,
    pub bucket: Arc<Bucket>,
    pub control: &'a mut Control,
    /// Vbucket by the opaque of its STREAM_REQ.
    requests: BTreeMap<u32, u16>,
    streams: BTreeMap<u16, VbStream>,
    /// Bytes of frames applied and not acknowledged yet.
    unacked: usize,
    /// Whether anything was applied (a connection that streamed resets the backoff).
    pub streamed: bool,
    /// Whether this connection acknowledges persisted seqnos (SEQNO_ACKNOWLEDGED).
    acknowledges: bool,
}

fn decode_log(value: &[u8]) -> Option<Vec<FailoverEntry>> {
    if value.is_empty() || !value.len().is_multiple_of(16) {
        return None;
    }
    value
        .chunks_exact(16)
        .map(|chunk| {
            Some(FailoverEntry {
                uuid: u64::from_be_bytes(chunk.get(..8)?.try_into().ok()?),
                seqno: u64::from_be_bytes(chunk.get(8..)?.try_into().ok()?),
            })
        })
        .collect()
}

impl<'a> Session<'a> {
    pub fn new(
        connection: Connection,
        bucket: Arc<Bucket>,
        control: &'a mut Control,
        acknowledges: bool,
    ) -> Self {
        Session {
            connection,
            bucket,
            control,
            requests: BTreeMap::new(),
            streams: BTreeMap::new(),
            unacked: 0,
            streamed: false,
            acknowledges,
        }
    }

    /// Requests `vbucket`'s stream from its persisted seqno (and snapshot, if unfinished).
    async fn request(&mut self, vbucket: u16) -> Result<u64, ReplicaError> {
        let high = self.bucket.high_seqnos().get(vbucket);
        let snapshot = self.bucket.replica_snapshot(vbucket)?;
        let extras = stream_request_extras(high, snapshot, self.bucket.vbucket_uuid(vbucket));
        let mut out = Vec::new();
        let opaque =
            self.connection
                .encode(&mut out, opcode::DCP_STREAM_REQ, vbucket, &extras, &[], &[]);
        self.connection.write(&out).await?;
        self.requests.insert(opaque, vbucket);
        self.streams.insert(
            vbucket,
            VbStream {
                reached: high,
                ..VbStream::default()
            },
        );
        tracing::debug!(vbucket, from = high, "replica stream requested");
        Ok(high)
    }

    /// Streams until stopped, the vbuckets change, or the connection fails.
    pub async fn run(&mut self, vbuckets: &BTreeSet<u16>) -> Result<Ended, ReplicaError> {
        let mut starts = Vec::with_capacity(vbuckets.len());
        for &vbucket in vbuckets {
            starts.push((vbucket, self.request(vbucket).await?));
        }
        self.control.requested.send_replace(starts);
        loop {
            while let Some(frame) = self.connection.next_buffered()? {
                self.handle(frame).await?;
            }
            self.flush_all().await?;
            let read = tokio::select! {
                read = tokio::time::timeout(SILENCE_MAX, self.connection.fill()) => read,
                _ = self.control.stop.changed() => return Ok(Ended::Stopped),
                _ = self.control.vbuckets.changed() => return Ok(Ended::VbucketsChanged),
            };
            match read {
                Err(_) => return Err(ReplicaError::Protocol("the producer went silent".into())),
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return Err(ReplicaError::Closed),
                Ok(Err(error)) => return Err(error),
            }
        }
    }

    fn stream(&mut self, vbucket: u16) -> Result<&mut VbStream, ReplicaError> {
        self.streams
            .get_mut(&vbucket)
            .filter(|stream| stream.open)
            .ok_or_else(|| ReplicaError::Protocol(format!("a message for vbucket {vbucket}")))
    }

    async fn handle(&mut self, frame: Bytes) -> Result<(), ReplicaError> {
        let Ok(Decoded::Frame(parsed, used)) = decode(&frame, FRAME_BYTES_MAX) else {
            return Err(ReplicaError::Protocol("undecodable frame".into()));
        };
        if parsed.magic == Magic::Response {
            return self
                .reply(parsed.opcode, parsed.opaque, parsed.status(), parsed.value)
                .await;
        }
        let vbucket = parsed.vbucket();
        let message = Message::parse(&parsed)
            .ok_or_else(|| ReplicaError::Protocol(format!("opcode {:#04x}", parsed.opcode)))?;
        let item = match message {
            Message::Noop => {
                let mut out = Vec::new();
                encode_response(
                    &mut out,
                    opcode::DCP_NOOP,
                    0,
                    parsed.opaque,
                    0,
                    0,
                    &[],
                    &[],
                    &[],
                );
                return self.connection.write(&out).await;
            }
            Message::SnapshotMarker { start, end, .. } => {
                if self.stream(vbucket)?.ends_snapshot() {
                    // The previous snapshot waits for flush_all: apply it first.
                    self.flush(vbucket).await?;
                }
                let stream = self.stream(vbucket)?;
                if !stream.items.is_empty() || start > end {
                    return Err(ReplicaError::Protocol(
                        "a snapshot inside a snapshot".into(),
                    ));
                }
                stream.snapshot = (start, end);
                self.unacked += used;
                return Ok(());
            }
            Message::SeqnoAdvanced { seqno } => {
                let stream = self.stream(vbucket)?;
                stream.reached = stream.reached.max(seqno.min(stream.snapshot.1));
                self.unacked += used;
                return self.flush(vbucket).await;
            }
            Message::StreamEnd { reason } => {
                return Err(ReplicaError::Protocol(format!(
                    "stream of vbucket {vbucket} ended ({reason})"
                )))
            }
            Message::Mutation { meta, key, value } => doc_item(&frame, meta, false, key, value)?,
            Message::Deletion {
                meta, key, value, ..
            } => doc_item(&frame, meta, true, key, value)?,
            Message::SystemEvent {
                seqno,
                event,
                version,
                key,
                value,
            } => event_item(vbucket, (seqno, parsed.cas), (event, version), key, value)?,
            Message::Purge { seqno, cas, key } => purge_item(vbucket, seqno, cas, key)?,
            Message::Expiration { .. } => {
                return Err(ReplicaError::Protocol(
                    "EXPIRATION on a replica stream".into(),
                ))
            }
        };
        let stream = self.stream(vbucket)?;
        stream.push(item, used)?;
        let full = stream.full();
        self.unacked += used;
        if full {
            self.flush(vbucket).await?;
        }
        Ok(())
    }

    /// A response: STREAM_REQ's (accepted: the active's failover log; ROLLBACK: empty the
    /// vbucket and ask again from 0), or an error to a control.
    async fn reply(
        &mut self,
        code: u8,
        opaque: u32,
        reply_status: u16,
        value: &[u8],
    ) -> Result<(), ReplicaError> {
        let vbucket = match (code, self.requests.remove(&opaque)) {
            (opcode::DCP_STREAM_REQ, Some(vbucket)) => vbucket,
            _ if reply_status == status::SUCCESS => return Ok(()),
            _ => {
                return Err(ReplicaError::Refused {
                    what: "a DCP request",
                    status: reply_status,
                })
            }
        };
        match reply_status {
            status::SUCCESS => {
                let log = decode_log(value)
                    .ok_or_else(|| ReplicaError::Protocol("failover log".into()))?;
                self.bucket.set_failover_log(vbucket, &log).await?;
                if let Some(stream) = self.streams.get_mut(&vbucket) {
                    stream.open = true;
                }
                Ok(())
            }
            status::ROLLBACK => {
                tracing::info!(vbucket, "replica rolls back to 0 (replica.md)");
                self.bucket.reset_replica(vbucket).await?;
                self.request(vbucket).await.map(|_| ())
            }
            code => Err(ReplicaError::Refused {
                what: "STREAM_REQ",
                status: code,
            }),
        }
    }

    async fn flush(&mut self, vbucket: u16) -> Result<(), ReplicaError> {
        if let Some(stream) = self.streams.get_mut(&vbucket) {
            if stream.flush(&self.bucket, vbucket).await? > 0 {
                self.streamed = true;
            }
        }
        Ok(())
    }

    /// Applies every vbucket's pending items — all at once, so their writes share the group
    /// commit's fsyncs — then acknowledges the bytes behind them and, with sync replication,
    /// each open stream's persisted seqno that rose (replica.md).
    async fn flush_all(&mut self) -> Result<(), ReplicaError> {
        let bucket = &self.bucket;
        let applied = futures_util::future::join_all(
            self.streams
                .iter_mut()
                .map(|(&vbucket, stream)| stream.flush(bucket, vbucket)),
        )
        .await;
        for items in applied {
            if items? > 0 {
                self.streamed = true;
            }
        }
        let mut out = Vec::new();
        if self.acknowledges {
            let high = self.bucket.high_seqnos();
            for (&vbucket, stream) in self.streams.iter_mut() {
                let persisted = high.get(vbucket);
                if !stream.open || stream.acknowledged == Some(persisted) {
                    continue;
                }
                stream.acknowledged = Some(persisted);
                self.connection.encode(
                    &mut out,
                    opcode::DCP_SEQNO_ACKNOWLEDGED,
                    vbucket,
                    &persisted.to_be_bytes(),
                    &[],
                    &[],
                );
            }
        }
        if self.unacked > 0 {
            let bytes = u32::try_from(self.unacked).unwrap_or(u32::MAX);
            self.connection.encode(
                &mut out,
                opcode::DCP_BUFFER_ACKNOWLEDGEMENT,
                0,
                &bytes.to_be_bytes(),
                &[],
                &[],
            );
            self.unacked = 0;
        }
        if !out.is_empty() {
            self.connection.write(&out).await?;
        }
        Ok(())
    }
}
