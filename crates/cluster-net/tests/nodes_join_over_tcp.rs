//! Three in-process nodes on 127.0.0.1 form a cluster over the real TCP transport: the first
//! bootstraps, the others join through it; a wrong secret and a taken node id are refused; a
//! peer sending garbage is answered with an Error frame and the node keeps serving.

use std::sync::Arc;
use std::time::Duration;

use settee_cluster::map::{Member, NodeId};
use settee_cluster::network::{Request, Response, Transport, TransportError};
use settee_cluster::node::{ClusterNode, NodeConfig};
use settee_cluster::orchestrator::NoReplicas;
use settee_cluster::storage::MemoryBackend;
use settee_cluster::wire;
use settee_cluster_net::{frame, Secret, TcpTransport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const SECRET: &[u8] = b"a cluster secret for tests";

struct Running {
    node: Arc<ClusterNode>,
    addr: String,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

async fn start(id: NodeId) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let member = Member::joining(id, addr.clone(), "127.0.0.1:1", "127.0.0.1:2");
    let transport = TcpTransport::new(id, Secret::new(SECRET));
    let node = ClusterNode::start(
        NodeConfig::new(member),
        Arc::new(MemoryBackend::default()),
        Arc::new(transport),
        Arc::new(NoReplicas),
    )
    .await
    .expect("node starts");
    let node = Arc::new(node);
    let (stop, mut stopped) = watch::channel(false);
    let server = tokio::spawn(settee_cluster_net::serve(
        listener,
        node.clone(),
        Secret::new(SECRET),
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        },
    ));
    Running {
        node,
        addr,
        stop,
        server,
    }
}

async fn join(
    secret: &[u8],
    id: NodeId,
    own_addr: &str,
    via: &str,
) -> Result<Response, TransportError> {
    let transport = TcpTransport::new(id, Secret::new(secret));
    let member = Member::joining(id, own_addr, "127.0.0.1:1", "127.0.0.1:2");
    let request = Request::Join {
        member,
        forwarded: false,
    };
    transport.send(id, 0, via, request).await
}

/// Waits until every node's map holds `members` and all name the same leader.
async fn until_agreed(nodes: &[&Running], members: usize) -> NodeId {
    for _ in 0..400 {
        let statuses: Vec<_> = nodes.iter().map(|running| running.node.status()).collect();
        let leader = statuses[0].leader;
        if statuses
            .iter()
            .all(|status| status.map.members.len() == members && status.leader == leader)
        {
            if let Some(leader) = leader {
                return leader;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let statuses: Vec<_> = nodes.iter().map(|running| running.node.status()).collect();
    panic!("the nodes never agreed: {statuses:#?}");
}

async fn stop(running: Running) {
    let _ = running.stop.send(true);
    let _ = running.server.await;
    running.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_join_and_strangers_are_refused() {
    let first = start(1).await;
    first.node.bootstrap().await.expect("bootstrap");
    let second = start(2).await;
    let third = start(3).await;
    for running in [&second, &third] {
        let id = running.node.id();
        match join(SECRET, id, &running.addr, &first.addr).await {
            Ok(Response::Joined { .. }) => {}
            other => panic!("node {id} did not join: {other:?}"),
        }
    }
    let leader = until_agreed(&[&first, &second, &third], 3).await;
    assert!([1, 2, 3].contains(&leader));

    // A wrong secret is refused in the handshake, with the reason.
    match join(b"not the cluster secret!!", 4, "127.0.0.1:9", &second.addr).await {
        Err(TransportError::Refused { reason, .. }) => {
            assert!(reason.contains("wrong cluster secret"), "{reason}")
        }
        other => panic!("a wrong secret was not refused: {other:?}"),
    }
    // A taken id at another address is refused by the leader, reached through a follower.
    match join(SECRET, 2, "127.0.0.1:9", &third.addr).await {
        Ok(Response::Refused(reason)) => {
            assert!(reason.contains("already a member"), "{reason}")
        }
        other => panic!("a taken node id was not refused: {other:?}"),
    }
    // The same node asking again is answered as the first time.
    assert!(matches!(
        join(SECRET, 3, &third.addr, &second.addr).await,
        Ok(Response::Joined { .. })
    ));

    // Garbage instead of a handshake: an Error frame (bad frame), then the connection closes.
    let mut socket = TcpStream::connect(&first.addr).await.expect("connect");
    socket
        .write_all(&[0, 0, 0, 12, 1, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9])
        .await
        .expect("write");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let (reply, _) = frame::decode(&answer)
        .expect("a valid frame")
        .expect("a whole frame");
    assert_eq!(reply.kind, wire::KIND_ERROR);
    let (code, _) = wire::decode_error(reply.body).expect("an error body");
    assert_eq!(code, wire::ErrorCode::BadFrame as u16);

    // A Hello announcing a 64 MiB frame is refused as soon as its length arrives: a caller
    // that proved nothing cannot make the node buffer it.
    let mut socket = TcpStream::connect(&first.addr).await.expect("connect");
    socket
        .write_all(&[4, 0, 0, 0, 1, 0x01])
        .await
        .expect("write");
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.expect("read");
    let (reply, _) = frame::decode(&answer)
        .expect("a valid frame")
        .expect("a whole frame");
    assert_eq!(reply.kind, wire::KIND_ERROR);

    // Everyone still serves: a fourth node joins after all that.
    let fourth = start(4).await;
    assert!(matches!(
        join(SECRET, 4, &fourth.addr, &third.addr).await,
        Ok(Response::Joined { .. })
    ));
    until_agreed(&[&first, &second, &third, &fourth], 4).await;
    for running in [first, second, third, fourth] {
        stop(running).await;
    }
}
