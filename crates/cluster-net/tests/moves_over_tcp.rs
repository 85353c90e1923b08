//! A rebalance's move requests over the real cluster port (docs/format/rebalance.md, section
//! 2): each reaches the target's `MoveHandler` with the sender's proven node id and comes back
//! as its answer; a refusal comes back as the Error frame's code and message and the connection
//! goes on; an answer of the wrong kind is refused, never sent; a node without a handler
//! refuses moves (Error 2); a source without the secret is not heard.

use std::sync::Arc;

use parking_lot::Mutex;
use settee_cluster::map::{Member, NodeId};
use settee_cluster::node::{ClusterNode, NodeConfig};
use settee_cluster::orchestrator::NoReplicas;
use settee_cluster::storage::MemoryBackend;
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::Refusal;
use settee_cluster_net::moves::{MoveFrame, MoveFuture, MoveHandler, MoveId};
use settee_cluster_net::{Handlers, NetError, Secret, TcpTransport};
use tokio::net::TcpListener;
use tokio::sync::watch;

const SECRET: &[u8] = b"the secret of the moves test";
const TARGET: NodeId = 2;
const SOURCE: NodeId = 1;

/// A target that records what it was asked and answers as the protocol says, refusing chunks
/// of `view.sst` and answering a MoveAbort of move 99 with the wrong kind.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(NodeId, MoveFrame)>>,
}

impl MoveHandler for Recorder {
    fn handle(&self, from: NodeId, request: MoveFrame) -> MoveFuture<'_> {
        self.seen.lock().push((from, request.clone()));
        Box::pin(async move {
            match request {
                MoveFrame::Open { .. } => Ok(MoveFrame::Opened {
                    bucket_id: 9,
                    groups: vec![([3; 16], 4)],
                    received: vec![("doc.sst".into(), 12)],
                }),
                MoveFrame::Chunk { file, .. } if file == "view.sst" => {
                    Err(Refusal::new(ErrorCode::Refused, "no view.sst today"))
                }
                MoveFrame::Chunk {
                    id,
                    file,
                    offset,
                    bytes,
                    ..
                } => Ok(MoveFrame::ChunkAck {
                    id,
                    file,
                    received: offset + bytes.len() as u64,
                }),
                MoveFrame::Commit { id, .. } => Ok(MoveFrame::Ingested { id, high_seqno: 40 }),
                MoveFrame::Abort { id } if id.id == 99 => {
                    Ok(MoveFrame::Ingested { id, high_seqno: 0 })
                }
                MoveFrame::Abort { id } => Ok(MoveFrame::Aborted { id: id.id }),
                other => Err(Refusal::new(ErrorCode::Refused, format!("{other:?}"))),
            }
        })
    }
}

struct Target {
    addr: String,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    node: Arc<ClusterNode>,
}

async fn target(moves: Option<Arc<dyn MoveHandler>>) -> Target {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let member = Member::joining(TARGET, addr.clone(), "127.0.0.1:1", "127.0.0.1:2");
    let node = ClusterNode::start(
        NodeConfig::new(member),
        Arc::new(MemoryBackend::default()),
        Arc::new(TcpTransport::new(TARGET, Secret::new(SECRET))),
        Arc::new(NoReplicas),
    )
    .await
    .expect("node");
    let node = Arc::new(node);
    let (stop, mut stopped) = watch::channel(false);
    let handlers = Handlers {
        forward: None,
        moves,
    };
    let server = tokio::spawn(settee_cluster_net::serve_with_handlers(
        listener,
        node.clone(),
        handlers,
        Secret::new(SECRET),
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        },
    ));
    Target {
        addr,
        stop,
        server,
        node,
    }
}

impl Target {
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
        self.node.shutdown().await;
    }
}

fn id(move_id: u64) -> MoveId {
    MoveId {
        id: move_id,
        attempt: 1,
    }
}

#[tokio::test]
async fn move_requests_reach_the_handler_and_its_answers_come_back() {
    let recorder = Arc::new(Recorder::default());
    let target = target(Some(recorder.clone())).await;
    let source = TcpTransport::new(SOURCE, Secret::new(SECRET));
    let send = |request: MoveFrame| {
        let (source, addr) = (&source, target.addr.clone());
        async move { source.move_frame(TARGET, &addr, &request).await }
    };

    let open = MoveFrame::Open {
        id: id(17),
        revision: 5,
        bucket: "db".into(),
        vbucket: 513,
        snapshot_seqno: 40,
        groups: Vec::new(),
    };
    match send(open.clone()).await.expect("sent") {
        Ok(MoveFrame::Opened {
            bucket_id,
            received,
            ..
        }) => {
            assert_eq!(bucket_id, 9);
            assert_eq!(received, vec![("doc.sst".to_owned(), 12)]);
        }
        other => panic!("{other:?}"),
    }
    let chunk = |file: &str| MoveFrame::Chunk {
        id: id(17),
        file: file.into(),
        offset: 12,
        crc32c: settee_forward_wire::moves::chunk_crc32c(b"more"),
        bytes: b"more".to_vec(),
    };
    assert_eq!(
        send(chunk("doc.sst")).await.expect("sent"),
        Ok(MoveFrame::ChunkAck {
            id: id(17),
            file: "doc.sst".into(),
            received: 16
        })
    );
    // A refusal is the handler's code and message; the connection serves the next request.
    assert_eq!(
        send(chunk("view.sst")).await.expect("sent"),
        Err(Refusal::new(ErrorCode::Refused, "no view.sst today"))
    );
    let commit = MoveFrame::Commit {
        id: id(17),
        manifest: b"{}".to_vec(),
    };
    assert_eq!(
        send(commit).await.expect("sent"),
        Ok(MoveFrame::Ingested {
            id: id(17),
            high_seqno: 40
        })
    );
    // An answer of another kind than the request's is not sent.
    match send(MoveFrame::Abort { id: id(99) }).await.expect("sent") {
        Err(refusal) => assert_eq!(refusal.code, ErrorCode::Refused, "{refusal:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        send(MoveFrame::Abort { id: id(17) }).await.expect("sent"),
        Ok(MoveFrame::Aborted { id: 17 })
    );
    // An answer kind is not a request; nothing is sent.
    let answer = MoveFrame::Aborted { id: 17 };
    assert!(matches!(
        source.move_frame(TARGET, &target.addr, &answer).await,
        Err(NetError::Handshake(_))
    ));
    let seen = recorder.seen.lock().clone();
    assert_eq!(seen.len(), 6);
    assert!(seen.iter().all(|(from, _)| *from == SOURCE));
    assert_eq!(seen[0].1, open);

    // A source without the secret is not heard.
    let stranger = TcpTransport::new(SOURCE, Secret::new(&b"not the secret"[..]));
    assert!(stranger
        .move_frame(TARGET, &target.addr, &MoveFrame::Abort { id: id(17) })
        .await
        .is_err());
    assert_eq!(recorder.seen.lock().len(), 6);
    target.stop().await;
}

#[tokio::test]
async fn a_node_without_a_move_handler_refuses_moves() {
    let target = target(None).await;
    let source = TcpTransport::new(SOURCE, Secret::new(SECRET));
    let refused = source
        .move_frame(TARGET, &target.addr, &MoveFrame::Abort { id: id(1) })
        .await
        .expect("sent");
    match refused {
        Err(refusal) => assert_eq!(refusal.code, ErrorCode::UnknownKind, "{refusal:?}"),
        other => panic!("{other:?}"),
    }
    target.stop().await;
}
