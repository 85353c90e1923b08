//! Messages between the nodes of a cluster, behind the [`Transport`] trait.
//!
//! openraft speaks to peers through [`Network`] (its `RaftNetworkFactory`), which turns each RPC
//! into a [`Request`] and hands it to the transport; the receiving node answers it with
//! `ClusterNode::handle`. The real transport (TCP, authenticated with the cluster secret, its
//! frames specified in docs/format/ before they are coded) and the simulation's network both
//! implement [`Transport`]; nothing above this file knows which one runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, OptionalSend, Snapshot, SnapshotMeta, Vote};

use crate::command::{Applied, Command};
use crate::map::{Member, NodeId};
use crate::types::TypeConfig;

/// What one node asks another.
#[derive(Debug)]
pub enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    /// A whole snapshot: the state machine's bytes (docs/format/cluster-map.md).
    Snapshot {
        vote: Vote<NodeId>,
        meta: SnapshotMeta<NodeId, BasicNode>,
        data: Vec<u8>,
    },
    /// "I am alive", sent to the leader every heartbeat interval (the failure detector).
    Heartbeat {
        from: NodeId,
    },
    /// "Record me as a member": sent by a new node to any member, which forwards it to the
    /// Raft leader (`forwarded` set, so it travels one hop at most).
    Join {
        member: Member,
        forwarded: bool,
    },
    /// "Commit this map change": sent by a node that does not lead to the Raft leader it knows,
    /// which forwards it once more at most (`forwarded` set) if it no longer leads.
    Propose {
        command: Command,
        forwarded: bool,
    },
}

#[derive(Debug)]
pub enum Response {
    AppendEntries(AppendEntriesResponse<NodeId>),
    Vote(VoteResponse<NodeId>),
    Snapshot(SnapshotResponse<NodeId>),
    /// The leader heard the heartbeat: the map revision it has applied, and how long ago a
    /// quorum last acknowledged its leadership (the serving lease, cluster-map.md).
    Heartbeat {
        revision: u64,
        quorum_age_ms: u32,
    },
    /// The join is committed: the map at this revision holds the member.
    Joined {
        revision: u64,
    },
    /// What applying a proposed command did (a rejection is committed too, and changed nothing).
    Proposed(Applied),
    /// The receiver could not handle the request (shutting down, not initialised, ...).
    Refused(String),
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    #[error("node {0} is unreachable")]
    Unreachable(NodeId),
    #[error("request to node {0} timed out")]
    Timeout(NodeId),
    #[error("node {node} refused: {reason}")]
    Refused { node: NodeId, reason: String },
    #[error("node {0} answered with the wrong kind of response")]
    Mismatch(NodeId),
}

/// After a failed request, a peer is not asked again for this long. openraft retries a failed
/// replication at once, reading the entries again each time; against a node that is down, that
/// would be a busy loop (a refused TCP connection fails in microseconds).
pub const PEER_RETRY_INTERVAL_MS: u64 = 200;

pub type SendFuture = Pin<Box<dyn Future<Output = Result<Response, TransportError>> + Send>>;

/// Delivers a request to a node and brings back its response.
pub trait Transport: Send + Sync + 'static {
    /// `addr` is the target's cluster address as the Raft membership records it.
    fn send(&self, from: NodeId, target: NodeId, addr: &str, request: Request) -> SendFuture;
}

/// openraft's network factory: one [`Connection`] per peer, all over one transport.
#[derive(Clone)]
pub struct Network {
    pub from: NodeId,
    pub transport: Arc<dyn Transport>,
}

pub struct Connection {
    from: NodeId,
    target: NodeId,
    addr: String,
    transport: Arc<dyn Transport>,
    /// Set by a failure: no request leaves before then (tokio's clock, paused in simulations).
    retry_at: Option<tokio::time::Instant>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            from: self.from,
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
            retry_at: None,
        }
    }
}

impl Connection {
    /// Sends `request` unless the peer failed less than the retry interval ago: then it waits
    /// out the interval within the call's time budget `ttl`, and fails without sending if the
    /// budget ends first (openraft calls again; a budget-long wait per call is no busy loop).
    async fn call(&mut self, request: Request, ttl: Duration) -> Result<Response, TransportError> {
        if let Some(retry_at) = self.retry_at {
            let now = tokio::time::Instant::now();
            if now < retry_at {
                tokio::time::sleep_until(retry_at.min(now + ttl)).await;
                if tokio::time::Instant::now() < retry_at {
                    return Err(TransportError::Unreachable(self.target));
                }
            }
        }
        let result = match self
            .transport
            .send(self.from, self.target, &self.addr, request)
            .await
        {
            Ok(Response::Refused(reason)) => Err(TransportError::Refused {
                node: self.target,
                reason,
            }),
            other => other,
        };
        self.retry_at = match result {
            Ok(_) => None,
            Err(_) => {
                Some(tokio::time::Instant::now() + Duration::from_millis(PEER_RETRY_INTERVAL_MS))
            }
        };
        result
    }
}

// Every failure is reported as a network error, never as `Unreachable`: openraft then retries
// at its own pace instead of entering its back-off path, which races two futures in an
// unbiased `select!` and would make a simulated run depend on tokio's internal randomness.
fn network_error(error: TransportError) -> NetworkError {
    NetworkError::new(&error)
}

type RpcResult<T> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId>>>;

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self
            .call(Request::AppendEntries(rpc), option.hard_ttl())
            .await
        {
            Ok(Response::AppendEntries(response)) => Ok(response),
            Ok(_) => Err(RPCError::Network(network_error(TransportError::Mismatch(
                self.target,
            )))),
            Err(error) => Err(RPCError::Network(network_error(error))),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.call(Request::Vote(rpc), option.hard_ttl()).await {
            Ok(Response::Vote(response)) => Ok(response),
            Ok(_) => Err(RPCError::Network(network_error(TransportError::Mismatch(
                self.target,
            )))),
            Err(error) => Err(RPCError::Network(network_error(error))),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, openraft::error::Fatal<NodeId>>>
    {
        let request = Request::Snapshot {
            vote,
            meta: snapshot.meta,
            data: *snapshot.snapshot,
        };
        match self.call(request, option.hard_ttl()).await {
            Ok(Response::Snapshot(response)) => Ok(response),
            Ok(_) => Err(StreamingError::Network(network_error(
                TransportError::Mismatch(self.target),
            ))),
            Err(error) => Err(StreamingError::Network(network_error(error))),
        }
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;
    use tokio::time::Instant;

    use super::*;

    /// Fails every request and remembers when each one left.
    #[derive(Default)]
    struct Down {
        sent_at: Mutex<Vec<Instant>>,
    }

    impl Transport for Down {
        fn send(
            &self,
            _from: NodeId,
            target: NodeId,
            _addr: &str,
            _request: Request,
        ) -> SendFuture {
            self.sent_at.lock().push(Instant::now());
            Box::pin(async move { Err(TransportError::Unreachable(target)) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_failed_is_not_asked_again_before_the_retry_interval() {
        let down = Arc::new(Down::default());
        let mut network = Network {
            from: 1,
            transport: down.clone(),
        };
        let mut connection = network
            .new_client(
                2,
                &BasicNode {
                    addr: "node2:7000".into(),
                },
            )
            .await;
        for _ in 0..3 {
            let vote = VoteRequest::new(Vote::new(1, 1), None);
            let option = RPCOption::new(std::time::Duration::from_secs(1));
            assert!(connection.vote(vote, option).await.is_err());
        }
        let sent_at = down.sent_at.lock().clone();
        assert_eq!(sent_at.len(), 3);
        for pair in sent_at.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                gap >= std::time::Duration::from_millis(PEER_RETRY_INTERVAL_MS),
                "{gap:?}"
            );
        }
    }
}
