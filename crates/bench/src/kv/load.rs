//! The request loop of one connection: keep `pipeline` requests in flight, write every new
//! request of a round with one `write`, decode every reply a `read` brought, match replies to
//! requests by opaque (so out-of-order replies, HELLO UnorderedExecution, are fine), count.
//!
//! One task per connection and nothing shared while it runs: no locks, no channels, no
//! allocation per request (the output and input buffers are reused), two clock reads per round
//! trip of a batch rather than per request.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::Rng;
use settee_kv_codec::{datatype, decode, encode_request, opcode, status, Decoded, Frame, Magic};
use tokio::io::Interest;

use super::client::{Client, READ_CHUNK_BYTES, REPLY_BODY_MAX};
use super::keys::Keys;
use crate::report::Tally;
use settee_engine::durability::Level;

/// With requests in flight, this long without the socket becoming readable or writable means
/// the server stalled: the connection is given up and its in-flight requests count as errors.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(10);
/// SET's common flags: 0x02000000 says "JSON" to the Couchbase SDKs; memcached stores it as is.
const JSON_COMMON_FLAGS: u32 = 0x0200_0000;

/// What the requests of every connection look like; shared read-only.
pub(crate) struct Plan {
    pub(crate) keys: Keys,
    /// The value every SET writes and every GET must return.
    pub(crate) value: Bytes,
    /// SET extras: common flags, then expiry 0 (never).
    set_extras: [u8; 8],
    /// SET framing extras: the durability requirement, or nothing.
    set_framing: Vec<u8>,
}

impl Plan {
    pub(crate) fn new(keys: Keys, value: Bytes) -> Plan {
        let mut set_extras = [0u8; 8];
        set_extras[..4].copy_from_slice(&JSON_COMMON_FLAGS.to_be_bytes());
        Plan {
            keys,
            value,
            set_extras,
            set_framing: Vec::new(),
        }
    }

    /// Every SET asks for `level` (no timeout: the server's default).
    pub(crate) fn with_durability(mut self, level: Level) -> Plan {
        self.set_framing.clear();
        if level.is_sync() {
            settee_kv_codec::FramingExtras::encode_durability(
                level.wire(),
                None,
                &mut self.set_framing,
            );
        }
        self
    }

    /// Appends request `opaque` for key `index`. The datatype is raw even though the value is
    /// JSON: memcached allows nothing else, and settee decides JSON-ness itself (as gocb
    /// expects).
    fn encode(&self, out: &mut Vec<u8>, operation: Operation, index: usize, opaque: u32) {
        let (key, vbucket) = self.keys.get(index);
        match operation {
            Operation::Get => encode_request(
                out,
                opcode::GET,
                vbucket,
                opaque,
                0,
                datatype::RAW,
                &[],
                &[],
                key,
                &[],
            ),
            Operation::Set => encode_request(
                out,
                opcode::SET,
                vbucket,
                opaque,
                0,
                datatype::RAW,
                &self.set_framing,
                &self.set_extras,
                key,
                &self.value,
            ),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Get,
    Set,
}

impl Operation {
    fn opcode(self) -> u8 {
        match self {
            Operation::Get => opcode::GET,
            Operation::Set => opcode::SET,
        }
    }
}

/// Where a connection's next request comes from.
pub(crate) enum Work {
    /// SET keys `next`, `next + step`, ... below the key count, then stop.
    Load { next: usize, step: usize },
    /// Uniformly random keys, GET with probability `get_ratio`, SET otherwise, until `deadline`.
    Mix {
        get_ratio: f64,
        rng: SmallRng,
        deadline: Instant,
    },
}

impl Work {
    fn next(&mut self, keys: usize, now: Instant) -> Option<(Operation, usize)> {
        match self {
            Work::Load { next, step } => {
                let index = *next;
                if index >= keys {
                    return None;
                }
                *next += *step;
                Some((Operation::Set, index))
            }
            Work::Mix {
                get_ratio,
                rng,
                deadline,
            } => {
                if now >= *deadline {
                    return None;
                }
                let operation = if *get_ratio >= 1.0 || rng.random::<f64>() < *get_ratio {
                    Operation::Get
                } else {
                    Operation::Set
                };
                Some((operation, rng.random_range(0..keys)))
            }
        }
    }
}

/// What one connection counted in one phase; merged across connections.
pub(crate) struct Counts {
    pub(crate) get: Tally,
    pub(crate) set: Tally,
    /// Failed replies by (opcode, status); a GET of the wrong length is counted as status 0.
    pub(crate) failures: BTreeMap<(u8, u16), u64>,
}

impl Counts {
    pub(crate) fn new() -> Counts {
        Counts {
            get: Tally::new(),
            set: Tally::new(),
            failures: BTreeMap::new(),
        }
    }

    pub(crate) fn merge(&mut self, other: &Counts) {
        self.get.merge(&other.get);
        self.set.merge(&other.set);
        for (key, count) in &other.failures {
            *self.failures.entry(*key).or_default() += count;
        }
    }

    fn tally(&mut self, operation: Operation) -> &mut Tally {
        match operation {
            Operation::Get => &mut self.get,
            Operation::Set => &mut self.set,
        }
    }
}

#[derive(Clone, Copy)]
struct Slot {
    sent: Instant,
    operation: Operation,
    busy: bool,
}

/// Runs `work` on `client` with up to `pipeline` requests in flight until the work runs out and
/// every reply is in. Replies that arrive before `counting_from` are not counted (warm-up).
///
/// `Err` means the connection is unusable (closed, broken, stalled, or a reply that matches no
/// request); every request still in flight has then been counted as an error.
pub(crate) async fn drive(
    client: &mut Client,
    plan: &Plan,
    work: &mut Work,
    pipeline: usize,
    counting_from: Instant,
    counts: &mut Counts,
) -> anyhow::Result<()> {
    let mut slots = vec![
        Slot {
            sent: Instant::now(),
            operation: Operation::Get,
            busy: false,
        };
        pipeline
    ];
    let result = run_loop(client, plan, work, &mut slots, counting_from, counts).await;
    if result.is_err() {
        for slot in slots.iter().filter(|slot| slot.busy) {
            counts.tally(slot.operation).errors += 1;
        }
    }
    result
}

async fn run_loop(
    client: &mut Client,
    plan: &Plan,
    work: &mut Work,
    slots: &mut [Slot],
    counting_from: Instant,
    counts: &mut Counts,
) -> anyhow::Result<()> {
    let keys = plan.keys.len();
    let value_len = plan.value.len();
    // Free slot numbers; a slot's number is the opaque of the request that occupies it.
    let mut free: Vec<u32> = (0..slots.len() as u32).rev().collect();
    let mut in_flight = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(slots.len() * (64 + value_len));
    let mut written = 0usize;
    let mut exhausted = false;
    loop {
        if !exhausted && !free.is_empty() {
            let now = Instant::now();
            while let Some(&slot) = free.last() {
                let Some((operation, index)) = work.next(keys, now) else {
                    exhausted = true;
                    break;
                };
                free.pop();
                plan.encode(&mut out, operation, index, slot);
                slots[slot as usize] = Slot {
                    sent: now,
                    operation,
                    busy: true,
                };
                in_flight += 1;
            }
            if written < out.len() {
                written += try_io(client.stream.try_write(&out[written..]))?;
            }
        }
        if written == out.len() {
            out.clear();
            written = 0;
            if in_flight == 0 {
                return Ok(());
            }
        }

        let interest = if out.is_empty() {
            Interest::READABLE
        } else {
            Interest::READABLE | Interest::WRITABLE
        };
        let ready = tokio::time::timeout(STALL_LIMIT, client.stream.ready(interest))
            .await
            .map_err(|_| {
                anyhow::anyhow!("no reply to {in_flight} requests for {STALL_LIMIT:?}")
            })??;
        if ready.is_writable() && written < out.len() {
            written += try_io(client.stream.try_write(&out[written..]))?;
        }
        if !ready.is_readable() {
            continue;
        }
        if client.input.capacity() - client.input.len() < READ_CHUNK_BYTES / 2 {
            client.input.reserve(READ_CHUNK_BYTES);
        }
        match client.stream.try_read_buf(&mut client.input) {
            Ok(0) => anyhow::bail!("the server closed the connection"),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error.into()),
        }
        let received = Instant::now();
        let counting = received >= counting_from;
        let mut consumed = 0;
        while let Decoded::Frame(frame, used) = decode(&client.input[consumed..], REPLY_BODY_MAX)? {
            consumed += used;
            let slot = take_slot(slots, &frame)?;
            free.push(frame.opaque);
            in_flight -= 1;
            if !counting {
                continue;
            }
            let tally = counts.tally(slot.operation);
            tally.record_latency(received.duration_since(slot.sent).as_micros() as u64);
            let status = frame.status();
            let whole = slot.operation != Operation::Get || frame.value.len() == value_len;
            if status == status::SUCCESS && whole {
                tally.ops += 1;
            } else {
                tally.errors += 1;
                *counts
                    .failures
                    .entry((slot.operation.opcode(), status))
                    .or_default() += 1;
            }
        }
        client.input.drain(..consumed);
    }
}

/// The slot a reply answers, freed. A reply that answers no request in flight means the stream
/// is out of step and nothing after it can be trusted.
fn take_slot(slots: &mut [Slot], frame: &Frame<'_>) -> anyhow::Result<Slot> {
    let slot = slots.get_mut(frame.opaque as usize);
    match slot {
        Some(slot)
            if slot.busy
                && matches!(frame.magic, Magic::Response | Magic::AltResponse)
                && frame.opcode == slot.operation.opcode() =>
        {
            slot.busy = false;
            Ok(*slot)
        }
        _ => anyhow::bail!(
            "a reply that answers no request in flight: magic {:?} opcode 0x{:02x} opaque 0x{:08x} status 0x{:04x}",
            frame.magic,
            frame.opcode,
            frame.opaque,
            frame.status()
        ),
    }
}

/// Bytes moved by a non-blocking call; 0 when the socket is not ready.
fn try_io(result: std::io::Result<usize>) -> anyhow::Result<usize> {
    match result {
        Ok(moved) => Ok(moved),
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn plan() -> Plan {
        Plan::new(Keys::new(10, 64, &[]), crate::docs::doc_body(200))
    }

    #[test]
    fn requests_are_codec_frames_with_key_vbucket_and_set_extras() {
        let plan = plan();
        let mut out = Vec::new();
        plan.encode(&mut out, Operation::Get, 3, 7);
        plan.encode(&mut out, Operation::Set, 4, 8);
        let Ok(Decoded::Frame(get, used)) = decode(&out, REPLY_BODY_MAX) else {
            panic!("GET does not decode");
        };
        assert_eq!(
            (get.magic, get.opcode, get.opaque, get.key),
            (Magic::Request, opcode::GET, 7, &b"doc-00000003"[..])
        );
        assert_eq!(get.vbucket(), plan.keys.get(3).1);
        assert!(get.extras.is_empty() && get.value.is_empty());
        let Ok(Decoded::Frame(set, _)) = decode(&out[used..], REPLY_BODY_MAX) else {
            panic!("SET does not decode");
        };
        assert_eq!((set.opcode, set.opaque, set.datatype), (opcode::SET, 8, 0));
        assert_eq!(set.extras, &[0x02, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(set.value, &plan.value[..]);
    }

    #[test]
    fn load_work_covers_each_key_once_across_connections() {
        let now = Instant::now();
        let mut seen = Vec::new();
        for first in 0..3 {
            let mut work = Work::Load {
                next: first,
                step: 3,
            };
            while let Some((operation, index)) = work.next(10, now) {
                assert_eq!(operation, Operation::Set);
                seen.push(index);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn mix_work_follows_the_ratio_and_stops_at_the_deadline() {
        let now = Instant::now();
        let mut work = Work::Mix {
            get_ratio: 0.75,
            rng: SmallRng::seed_from_u64(1),
            deadline: now + Duration::from_secs(60),
        };
        let gets = (0..10_000)
            .filter(|_| matches!(work.next(100, now), Some((Operation::Get, index)) if index < 100))
            .count();
        assert!((7_000..8_000).contains(&gets), "{gets} GETs of 10000");
        assert!(work.next(100, now + Duration::from_secs(61)).is_none());
    }

    #[test]
    fn a_reply_must_answer_a_request_in_flight() {
        let mut slots = vec![
            Slot {
                sent: Instant::now(),
                operation: Operation::Get,
                busy: false,
            };
            2
        ];
        slots[1].busy = true;
        let mut bytes = Vec::new();
        settee_kv_codec::encode_response(&mut bytes, opcode::GET, 0, 1, 0, 0, &[0; 4], b"", &[]);
        let Ok(Decoded::Frame(reply, _)) = decode(&bytes, REPLY_BODY_MAX) else {
            panic!("reply does not decode");
        };
        assert!(take_slot(&mut slots, &reply).is_ok());
        // The same opaque again: that slot is free now.
        assert!(take_slot(&mut slots, &reply).is_err());
        slots[1].busy = true;
        slots[1].operation = Operation::Set;
        assert!(take_slot(&mut slots, &reply).is_err(), "opcode mismatch");
    }
}
