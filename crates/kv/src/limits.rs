//! The KV door's limits on connections (issue 18): how many may be open, how long one may stay
//! silent before authenticating, in the middle of a frame or idle, how many reply bytes one
//! connection, and all of them together, may hold unsent, and how long its unsent replies may
//! wait for a client that does not read them. Each is a setting with Couchbase's
//! default where Couchbase has one.

use std::time::Duration;

/// Couchbase Server's `max_connections` (user connections per node).
pub const MAX_CONNECTIONS_DEFAULT: usize = 60_000;
/// kv_engine disconnects a connection that has not authenticated within 5 minutes
/// (`FrontEndThread::tryDisconnectUnauthenticatedConnections`).
pub const AUTH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// A frame begun and then left unfinished, no byte arriving for this long, closes the
/// connection (CouchDB's 30 s for incomplete HTTP headers; kv_engine has no such timer, but a
/// partial frame holds a buffer sized for the whole announced frame).
pub const PARTIAL_FRAME_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// kv_engine closes a connection whose send queue has not shrunk for 360 s
/// (`Connection::shutdownIfSendQueueStuck`, "Send buffer stuck for too long"): a client that
/// stops reading would otherwise keep its connection, and the replies it holds, forever.
pub const SEND_QUEUE_STUCK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(360);
/// kv_engine's `max_send_queue_size`: replies a connection may have queued before the server
/// stops executing its commands until the socket drains.
pub const OUTPUT_BYTES_MAX_DEFAULT: usize = 1 << 20;
/// Unsent reply bytes of all connections together before each is held to
/// [`OUTPUT_BYTES_MIN`].
pub const NODE_OUTPUT_BYTES_MAX_DEFAULT: usize = 256 << 20;
/// What a connection may hold unsent while the node is over its total: the connections
/// holding the most stop reading first, light ones still get their few replies.
pub const OUTPUT_BYTES_MIN: usize = 64 << 10;

#[derive(Clone, Copy, Debug)]
pub struct KvLimits {
    /// Most connections open at once; more are closed right after accept, as kv_engine does.
    pub max_connections: usize,
    /// A connection that has not authenticated by then is closed; `None`: never.
    pub auth_timeout: Option<Duration>,
    /// A partial frame with no byte arriving for this long closes the connection.
    pub partial_frame_timeout: Option<Duration>,
    /// A connection with nothing in flight and nothing arriving for this long is closed;
    /// `None` (the default): never, as kv_engine (SDKs keep idle connections for later).
    pub idle_timeout: Option<Duration>,
    /// A connection whose socket takes none of its unsent replies for this long is closed;
    /// `None`: never.
    pub send_queue_stuck_timeout: Option<Duration>,
    /// Reply bytes one connection may hold unsent before it stops reading requests.
    pub output_bytes_max: usize,
    /// Unsent reply bytes of the whole door before every connection is held to
    /// [`OUTPUT_BYTES_MIN`].
    pub node_output_bytes_max: usize,
}

impl Default for KvLimits {
    fn default() -> Self {
        KvLimits {
            max_connections: MAX_CONNECTIONS_DEFAULT,
            auth_timeout: Some(AUTH_TIMEOUT_DEFAULT),
            partial_frame_timeout: Some(PARTIAL_FRAME_TIMEOUT_DEFAULT),
            idle_timeout: None,
            send_queue_stuck_timeout: Some(SEND_QUEUE_STUCK_TIMEOUT_DEFAULT),
            output_bytes_max: OUTPUT_BYTES_MAX_DEFAULT,
            node_output_bytes_max: NODE_OUTPUT_BYTES_MAX_DEFAULT,
        }
    }
}
