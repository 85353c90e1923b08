//! Any node answers a single-document HTTP request: three real `settee serve` processes, a
//! bucket with one copy of each document (`n=1`, so a node that is not a document's active has
//! no copy of it and can only answer by forwarding to the active). Documents are written
//! through a node that is not their active (PUT, POST, an attachment, a design document) and
//! read back through all three with the same `_rev` and body; COPY works through every node
//! to a destination on every node; a conflict, a 404, a deletion and
//! an anonymous request answer through forwarding exactly as through the active, and so does
//! the request a `_rewrite` makes. Then the cluster port is driven directly with the cluster
//! secret: a forwarded request for a vbucket the receiver is not the active of, one made on a
//! stale map, and one whose document is not in the vbucket it names are refused with nothing
//! written; a wrong secret is refused.

mod support;

use serde_json::{json, Value};
use settee_cluster::wire::ErrorCode;
use settee_cluster_net::forward::{AuthMethod, ForwardHttp, Identity, Refusal};
use settee_cluster_net::{Secret, TcpTransport};
use support::kv::Kv;
use support::{call_json as call, cluster_addr, until, Client, Server};

const SECRET: &str = "the secret of the forwarding test";
const VBUCKETS: u16 = 16;
const DOCS: usize = 48;

fn vbucket(id: &str) -> u16 {
    settee_engine::vbucket::vbucket_of(id.as_bytes(), VBUCKETS)
}

/// A HEAD request's status line and headers (lower-cased), read up to the blank line.
fn head_lines(server: &Server, path: &str) -> Vec<String> {
    response_head(server, "HEAD", path, "")
}

/// The status line and headers (lower-cased) of `method path` with `extra` header lines.
fn response_head(server: &Server, method: &str, path: &str, extra: &str) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(&server.addr).expect("connect");
    let auth = support::base64_engine::encode(support::ADMIN.as_bytes());
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Basic {auth}\r\n{extra}\r\n"
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut lines = Vec::new();
    for line in BufReader::new(stream).lines() {
        let line = line.expect("a line");
        if line.is_empty() {
            break;
        }
        lines.push(line.to_ascii_lowercase());
    }
    lines
}

/// A forwarded request as another node would send it, as the server admin.
fn forwarded(method: &str, target: &str, vbucket: u16, epoch: u64, body: &[u8]) -> ForwardHttp {
    ForwardHttp {
        revision: epoch,
        epoch,
        bucket: "db".into(),
        vbucket,
        method: method.into(),
        target: target.into(),
        identity: Identity {
            name: Some("admin".into()),
            roles: vec!["_admin".into()],
            auth: AuthMethod::Basic,
        },
        headers: vec![("content-type".into(), b"application/json".to_vec())],
        body: body.to_vec(),
    }
}

#[test]
fn any_node_answers_a_document_request_through_its_active() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes = support::start_three_nodes([0, 1, 2].map(|i| dirs[i].path()), SECRET);
    let path = format!("/db?q={VBUCKETS}&n=1");
    let (created, body) = call(&nodes[0], "PUT", &path, None);
    assert_eq!(created, 201, "{body}");
    for node in &nodes {
        until("the bucket everywhere", || {
            (call(node, "GET", "/db", None).0 == 200).then_some(())
        });
    }
    // Which node is each vbucket's active, from the KV door's cluster config.
    let (servers, rows) =
        support::kv::vbucket_map(&mut Kv::open(&nodes[0].kv_addr, "admin", "secret", "db"));
    let node_of_server: Vec<usize> = servers
        .iter()
        .map(|addr| {
            nodes
                .iter()
                .position(|node| node.kv_addr == *addr)
                .expect("one of ours")
        })
        .collect();
    let active = |id: &str| {
        let row = &rows[usize::from(vbucket(id))];
        node_of_server[usize::try_from(row[0]).expect("an active")]
    };
    let elsewhere = |id: &str, turn: usize| (active(id) + 1 + turn % 2) % 3;
    assert!(
        (0..3).all(|n| (0..DOCS).any(|i| active(&format!("doc-{i}")) == n)),
        "every node is the active of some documents"
    );

    // Written through a node that is not the document's active, read through every node.
    let mut revs = Vec::new();
    for index in 0..DOCS {
        let id = format!("doc-{index}");
        let writer = &nodes[elsewhere(&id, index)];
        let (status, body) = call(
            writer,
            "PUT",
            &format!("/db/{id}"),
            Some(json!({"n": index})),
        );
        assert_eq!(status, 201, "PUT {id} through a non-active: {body}");
        revs.push(body["rev"].as_str().expect("a rev").to_owned());
    }
    for (index, rev) in revs.iter().enumerate() {
        let id = format!("doc-{index}");
        for node in &nodes {
            let (status, body) = call(node, "GET", &format!("/db/{id}"), None);
            assert_eq!(status, 200, "GET {id}: {body}");
            assert_eq!(body, json!({"_id": id, "_rev": rev, "n": index}));
        }
    }
    // POST /db: the id is made by the front node, the document lands on its active.
    for node in &nodes {
        let (status, body) = call(node, "POST", "/db", Some(json!({"posted": true})));
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_str().expect("an id").to_owned();
        for reader in &nodes {
            let (status, read) = call(reader, "GET", &format!("/db/{id}"), None);
            assert_eq!(status, 200, "{read}");
            assert_eq!(read["_rev"], body["rev"]);
            assert_eq!(read["posted"], json!(true));
        }
    }

    // A conflict and a 404 answer as the active answers them.
    let id = "doc-0";
    let (_, direct_conflict) = call(&nodes[active(id)], "PUT", "/db/doc-0", Some(json!({})));
    let (status, conflict) = call(
        &nodes[elsewhere(id, 0)],
        "PUT",
        "/db/doc-0",
        Some(json!({})),
    );
    assert_eq!(status, 409);
    assert_eq!(conflict, direct_conflict);
    let missing: Vec<_> = nodes
        .iter()
        .map(|node| call(node, "GET", "/db/no-such-document", None))
        .collect();
    assert!(missing
        .iter()
        .all(|answer| *answer == (404, json!({"error": "not_found", "reason": "missing"}))));

    // An attachment written through a non-active, read through every node with its type.
    let id = "doc-1";
    let mut client = Client::connect(&nodes[elsewhere(id, 1)].addr).expect("connect");
    let put = client
        .request_with(
            "PUT",
            &format!("/db/doc-1/note.txt?rev={}", revs[1]),
            &[("Content-Type", "text/plain")],
            Some(b"hello through the cluster"),
        )
        .expect("PUT attachment");
    assert_eq!(put.status, 201);
    let attached_rev = put.json()["rev"].as_str().expect("a rev").to_owned();
    for node in &nodes {
        let mut client = Client::connect(&node.addr).expect("connect");
        let got = client
            .request("GET", "/db/doc-1/note.txt", None)
            .expect("GET attachment");
        assert_eq!(got.status, 200);
        assert_eq!(got.body, b"hello through the cluster");
        assert_eq!(got.header("content-type"), Some("text/plain"));
        let get = client.request("GET", "/db/doc-1", None).expect("GET");
        let head = head_lines(node, "/db/doc-1");
        assert!(head[0].starts_with("http/1.1 200"), "{head:?}");
        let etag = format!("etag: \"{attached_rev}\"");
        let length = format!("content-length: {}", get.body.len());
        assert!(head.contains(&etag), "{head:?}");
        assert!(
            head.contains(&length),
            "HEAD says the GET's length: {head:?}"
        );
        // A 304 says `Content-Length: 0` through every node, as CouchDB sends it.
        let matching = format!("If-None-Match: \"{attached_rev}\"\r\n");
        let not_modified = response_head(node, "GET", "/db/doc-1", &matching);
        assert!(
            not_modified[0].starts_with("http/1.1 304"),
            "{not_modified:?}"
        );
        assert!(
            not_modified.contains(&"content-length: 0".to_string()),
            "{not_modified:?}"
        );
    }

    // COPY through every node, to destinations on every node: the copy holds the source's
    // body and attachment wherever the two documents live.
    let (_, source) = call(&nodes[0], "GET", "/db/doc-1", None);
    let plain = |mut doc: Value| {
        let object = doc.as_object_mut().expect("a document");
        object.remove("_id");
        object.remove("_rev");
        object.remove("_attachments");
        doc
    };
    let destinations: Vec<String> = (0..3)
        .flat_map(|node| {
            (0..)
                .map(|index| format!("copy-{index}"))
                .filter(move |id| active(id) == node)
                .take(1)
        })
        .collect();
    for (through, destination) in nodes.iter().zip(&destinations) {
        let mut client = Client::connect(&through.addr).expect("connect");
        let copied = client
            .request_with("COPY", "/db/doc-1", &[("Destination", destination)], None)
            .expect("COPY");
        assert_eq!(
            copied.status,
            201,
            "COPY to {destination}: {}",
            copied.json()
        );
        assert_eq!(copied.json()["id"], json!(destination));
        for node in &nodes {
            let (status, copy) = call(node, "GET", &format!("/db/{destination}"), None);
            assert_eq!(status, 200, "{copy}");
            assert_eq!(plain(copy.clone()), plain(source.clone()), "{copy}");
            let got = Client::connect(&node.addr)
                .expect("connect")
                .request("GET", &format!("/db/{destination}/note.txt"), None)
                .expect("GET attachment");
            assert_eq!(
                (got.status, got.body.as_slice()),
                (200, &b"hello through the cluster"[..])
            );
        }
    }
    // Onto an existing document: 409 without its revision, 201 with it.
    let taken = &destinations[1];
    let (_, current) = call(&nodes[0], "GET", &format!("/db/{taken}"), None);
    let copy_onto = |destination: &str| {
        Client::connect(&nodes[2].addr)
            .expect("connect")
            .request_with("COPY", "/db/doc-1", &[("Destination", destination)], None)
            .expect("COPY")
            .status
    };
    assert_eq!(copy_onto(taken), 409);
    let rev = current["_rev"].as_str().expect("rev");
    assert_eq!(copy_onto(&format!("{taken}?rev={rev}")), 201);

    // A deletion through a non-active, seen everywhere.
    let id = "doc-2";
    let path = format!("/db/doc-2?rev={}", revs[2]);
    let (status, body) = call(&nodes[elsewhere(id, 2)], "DELETE", &path, None);
    assert_eq!(status, 200, "{body}");
    for node in &nodes {
        let answer = call(node, "GET", "/db/doc-2", None);
        assert_eq!(
            answer,
            (404, json!({"error": "not_found", "reason": "deleted"}))
        );
    }

    // A design document is routed like any document.
    let ddoc = json!({"views": {"all": {"map": "function (doc) { emit(doc._id, 1); }"}}});
    let writer = &nodes[elsewhere("_design/x", 0)];
    let (status, body) = call(writer, "PUT", "/db/_design/x", Some(ddoc));
    assert_eq!(status, 201, "{body}");
    for node in &nodes {
        let (status, read) = call(node, "GET", "/db/_design/x", None);
        assert_eq!((status, &read["_rev"]), (200, &body["rev"]));
    }

    // `_rewrite` is answered by the node it reaches, from its copy of the design document;
    // the request it rewrites to is routed like any other: to its document's active.
    let rewrites = json!({"rewrites": [{"from": "doc/:id", "to": "../../:id"}]});
    let (status, body) = call(&nodes[0], "PUT", "/db/_design/r", Some(rewrites));
    assert_eq!(status, 201, "{body}");
    let front = &nodes[active("_design/r")];
    let target = (3..DOCS)
        .find(|index| active(&format!("doc-{index}")) != active("_design/r"))
        .expect("a document another node is the active of");
    let (status, read) = call(
        front,
        "GET",
        &format!("/db/_design/r/_rewrite/doc/doc-{target}"),
        None,
    );
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["n"], json!(target));

    // An anonymous reader is answered as the active answers it.
    let anonymous = |node: &Server| {
        let mut client = Client::connect(&node.addr).expect("connect");
        let answer = client
            .request_with("GET", "/db/doc-3", &[("Authorization", "")], None)
            .expect("GET");
        (answer.status, answer.json())
    };
    let direct = anonymous(&nodes[active("doc-3")]);
    for node in &nodes {
        assert_eq!(anonymous(node), direct);
    }

    // A body the door accepts (64 MiB, its default limit) that cannot fit in one frame of the
    // cluster transport with the rest of the request: 413, nothing sent.
    let body = vec![b' '; 64 << 20];
    let big = &nodes[elsewhere("big", 0)];
    let mut client = Client::connect(&big.addr).expect("connect");
    let answer = client.request("PUT", "/db/big", Some(&body)).expect("PUT");
    assert_eq!(answer.status, 413);
    assert_eq!(call(&nodes[active("big")], "GET", "/db/big", None).0, 404);

    transport_refusals(&nodes, &active);
}

/// The cluster port, driven as a peer that knows the secret: what the active refuses runs
/// nothing.
fn transport_refusals(nodes: &[Server; 3], active: &dyn Fn(&str) -> usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let peer = TcpTransport::new(0, Secret::new(SECRET));
    let send = |node: usize, request: ForwardHttp| {
        runtime
            .block_on(peer.forward(0, &cluster_addr(&nodes[node]), &request))
            .expect("the node answers")
    };
    let refused = |answer: Result<_, Refusal>| match answer {
        Ok(reply) => panic!("answered {reply:?}"),
        Err(refusal) => refusal.code,
    };
    let id = "fenced";
    let vb = vbucket(id);
    let put = |epoch| forwarded("PUT", "/db/fenced", vb, epoch, br#"{"a":1}"#);
    // Sent to a node that is not the active of its vbucket: "not my vbucket".
    let other = (active(id) + 1) % 3;
    assert_eq!(refused(send(other, put(0))), ErrorCode::NotMyVbucket);
    // Sent to the active on a map older than the vbucket's entry: "stale epoch".
    assert_eq!(refused(send(active(id), put(0))), ErrorCode::StaleEpoch);
    // Naming a vbucket the document is not in: refused.
    let wrong = forwarded("PUT", "/db/fenced", (vb + 1) % VBUCKETS, 0, br#"{"a":1}"#);
    assert_eq!(refused(send(active(id), wrong)), ErrorCode::Refused);
    for node in nodes {
        let (status, _) = call(node, "GET", "/db/fenced", None);
        assert_eq!(status, 404, "a refused request wrote nothing");
    }
    // A peer without the secret gets no answer at all.
    let stranger = TcpTransport::new(0, Secret::new("not the secret of this cluster"));
    let answer = runtime.block_on(stranger.forward(0, &cluster_addr(&nodes[0]), &put(0)));
    assert!(answer.is_err(), "a wrong secret is refused: {answer:?}");
}
