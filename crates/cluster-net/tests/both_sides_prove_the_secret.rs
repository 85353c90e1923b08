//! The handshake is mutual: a server that accepts the client's proof but cannot prove the
//! secret itself (an impostor at a member's address) is refused by the client before any
//! request is sent.

use settee_cluster::map::Member;
use settee_cluster::network::{Request, Transport, TransportError};
use settee_cluster_net::handshake::{KIND_CHALLENGE, KIND_HELLO, KIND_PROOF, KIND_WELCOME};
use settee_cluster_net::stream::FrameStream;
use settee_cluster_net::{Secret, TcpTransport};
use tokio::net::TcpListener;

#[tokio::test]
async fn a_server_that_cannot_prove_the_secret_gets_no_request() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let impostor = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("accept");
        let mut stream = FrameStream::new(socket);
        let hello = stream.read_frame().await.expect("hello");
        assert_eq!(hello.kind, KIND_HELLO);
        let mut challenge = vec![7; 32];
        challenge.extend_from_slice(&9u64.to_be_bytes());
        stream
            .write_frame(KIND_CHALLENGE, 0, &challenge)
            .await
            .expect("challenge");
        let proof = stream.read_frame().await.expect("proof");
        assert_eq!(proof.kind, KIND_PROOF);
        // Replaying the client's own proof is the best an impostor can do without the secret.
        stream
            .write_frame(KIND_WELCOME, 0, &proof.body)
            .await
            .expect("welcome");
        // The client must hang up without sending a request.
        stream.read_frame().await.map(|frame| frame.kind)
    });
    let transport = TcpTransport::new(5, Secret::new(&b"the real cluster secret"[..]));
    let member = Member::joining(5, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3");
    let request = Request::Join {
        member,
        forwarded: false,
    };
    match transport.send(5, 0, &addr, request).await {
        Err(TransportError::Refused { reason, .. }) => {
            assert!(
                reason.contains("does not know the cluster secret"),
                "{reason}"
            )
        }
        other => panic!("an impostor was trusted: {other:?}"),
    }
    let after = impostor.await.expect("the impostor ran");
    assert!(
        after.is_err(),
        "the client sent a frame after the bad welcome: {after:?}"
    );
}
