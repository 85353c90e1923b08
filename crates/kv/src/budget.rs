//! How many reply bytes a KV connection may hold before it stops reading requests (issue 18
//! point 3). A client that pipelines GETs of large documents and never reads would otherwise
//! make the server hold every reply: 500 GETs of a 4 MB document held 2 GB for one connection.
//!
//! As kv_engine does with `max_send_queue_size`, a connection stops taking new requests once
//! its unsent replies reach its budget, and resumes when the socket has drained; the requests
//! not yet taken stay in its read buffer, which is not refilled meanwhile. Three more bounds
//! make the budget hold for replies produced off the connection's task:
//! - a part of an unordered batch answered on the heavy pool stops at its share of the
//!   budget and hands its unanswered requests back (`connection.rs`);
//! - requests whose reply can carry a document and that are answered later (GAT,
//!   GET_LOCKED, sub-document lookups on the heavy pool) are at most
//!   [`DOCUMENT_REPLIES_IN_FLIGHT_MAX`] per connection, kv_engine's
//!   `max_concurrent_commands_per_connection`;
//! - all connections together: while the door's unsent bytes are over
//!   `KvLimits::node_output_bytes_max`, each connection's budget is [`OUTPUT_BYTES_MIN`], so
//!   the connections holding the most stop reading first.
//!
//! The hot path pays one relaxed atomic load per read and one add and one subtract per
//! `write` on a shared counter; nothing per request.

use std::sync::atomic::{AtomicUsize, Ordering};

use settee_kv_codec::{opcode, subdoc};

pub(crate) use crate::limits::OUTPUT_BYTES_MIN;

/// kv_engine's `max_concurrent_commands_per_connection`: requests in flight per connection
/// whose reply can carry a document.
pub(crate) const DOCUMENT_REPLIES_IN_FLIGHT_MAX: usize = 32;

/// Unsent reply bytes of every connection of the door.
pub(crate) struct NodeOutput {
    unsent: AtomicUsize,
    max: usize,
}

/// Bytes counted against the door while a connection writes them; uncounted when dropped
/// (also when the connection's task ends mid-write).
pub(crate) struct Held<'a> {
    node: &'a NodeOutput,
    bytes: usize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.node.unsent.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl NodeOutput {
    pub(crate) fn new(max: usize) -> NodeOutput {
        NodeOutput {
            unsent: AtomicUsize::new(0),
            max,
        }
    }

    /// The budget of a connection whose own limit is `per_connection`.
    pub(crate) fn budget(&self, per_connection: usize) -> usize {
        if self.unsent.load(Ordering::Relaxed) > self.max {
            per_connection.min(OUTPUT_BYTES_MIN)
        } else {
            per_connection
        }
    }

    pub(crate) fn hold(&self, bytes: usize) -> Held<'_> {
        self.unsent.fetch_add(bytes, Ordering::Relaxed);
        Held { node: self, bytes }
    }

    #[cfg(test)]
    fn unsent(&self) -> usize {
        self.unsent.load(Ordering::Relaxed)
    }
}

/// Whether a request's reply can carry a whole document while being answered later: the
/// get-and-touch and get-and-lock families and sub-document lookups. (GET answers inline,
/// into the budgeted output; mutations answer a few bytes.)
pub(crate) fn reply_may_carry_document(request_opcode: u8) -> bool {
    let (base, _) = opcode::unquiet(request_opcode);
    matches!(
        base,
        opcode::GAT
            | opcode::GET_LOCKED
            | subdoc::op::GET
            | subdoc::op::EXISTS
            | subdoc::op::GET_COUNT
            | subdoc::op::MULTI_LOOKUP
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_node_total_every_connection_is_held_to_the_minimum() {
        let node = NodeOutput::new(1000);
        assert_eq!(node.budget(1 << 20), 1 << 20);
        let writing = node.hold(600);
        let other = node.hold(600);
        assert_eq!(node.unsent(), 1200);
        assert_eq!(node.budget(1 << 20), OUTPUT_BYTES_MIN);
        // A connection configured below the minimum keeps its own, smaller budget.
        assert_eq!(node.budget(100), 100);
        drop(other);
        assert_eq!(node.budget(1 << 20), 1 << 20);
        drop(writing);
        assert_eq!(node.unsent(), 0);
    }

    #[test]
    fn document_replies_are_the_reads_answered_later() {
        assert!(reply_may_carry_document(opcode::GAT));
        assert!(reply_may_carry_document(opcode::GATQ));
        assert!(reply_may_carry_document(opcode::GET_LOCKED));
        assert!(reply_may_carry_document(subdoc::op::MULTI_LOOKUP));
        assert!(!reply_may_carry_document(opcode::SET));
        assert!(!reply_may_carry_document(opcode::GET));
        assert!(!reply_may_carry_document(subdoc::op::MULTI_MUTATION));
    }
}
