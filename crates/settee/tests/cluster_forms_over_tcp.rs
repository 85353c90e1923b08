//! Real `settee serve` processes form a cluster over TCP: three nodes start and join (one
//! through a follower, which forwards to the leader) and agree on members and leader; a join
//! with the wrong secret and one reusing a node id are refused, the process exiting non-zero
//! with the reason, while the cluster keeps serving; kill -9 of the Raft leader leaves two
//! survivors that elect a new leader and commit a map change (a fourth node joins); the killed
//! node restarts from its data directory, without `--join`, and catches up.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{binary, Client, Server};

const SECRET: &str = "the secret of the test cluster";

fn start(dir: &Path, cluster_addr: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--cluster-addr", cluster_addr, "--cluster-secret", SECRET];
    args.extend_from_slice(extra);
    Server::start_with(dir, &args)
}

/// The node's id and cluster address, from its start line.
fn cluster_line(server: &Server) -> (u64, String) {
    let line = server
        .banner
        .iter()
        .find(|line| line.starts_with("settee cluster node "))
        .expect("a cluster node line");
    let mut words = line.split_whitespace().skip(3);
    let id = words.next().expect("id").parse().expect("a numeric id");
    let addr = words.nth(1).expect("address").trim_end_matches(':');
    (id, addr.to_string())
}

fn get(server: &Server, path: &str) -> Value {
    let mut client = Client::connect(&server.addr).expect("connect");
    let response = client.request("GET", path, None).expect("request");
    assert_eq!(response.status, 200, "{path}: {}", response.json());
    response.json()
}

/// What a node reports of the group: (leader, map revision, member ids, voters).
fn view(server: &Server) -> (Option<u64>, u64, BTreeSet<u64>, BTreeSet<u64>) {
    let status = get(server, "/_node/_local/_cluster");
    let ids = |list: &Value| -> BTreeSet<u64> {
        list.as_array()
            .expect("a list")
            .iter()
            .map(|id| id.as_u64().expect("an id"))
            .collect()
    };
    let members = status["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|member| member["id"].as_u64().expect("id"))
        .collect();
    (
        status["leader"].as_u64(),
        status["revision"].as_u64().expect("revision"),
        members,
        ids(&status["voters"]),
    )
}

/// Waits (bounded, so a broken cluster fails the test instead of hanging it) until every node
/// reports the same leader, revision, members and voters, with `members` members and `voters`
/// voters; returns the leader.
fn until_agreed(servers: &[&Server], members: usize, voters: usize) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let views: Vec<_> = servers.iter().map(|server| view(server)).collect();
        let first = &views[0];
        if let Some(leader) = first.0 {
            if first.2.len() == members
                && first.3.len() == voters
                && views.iter().all(|view| view == first)
            {
                return leader;
            }
        }
        assert!(Instant::now() < deadline, "no agreement: {views:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs a node that must refuse to start; returns what it printed on stderr.
fn refused_start(dir: &Path, secret: &str, extra: &[&str]) -> String {
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--kv-addr",
            "127.0.0.1:0",
        ])
        .args(["--mgmt-addr", "127.0.0.1:0", "--admin", support::ADMIN])
        .args(["--cluster-addr", "127.0.0.1:0", "--cluster-secret", secret])
        .arg("--data-dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn settee");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a node that should be refused kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(!status.success(), "a refused node exited with success");
    stderr
}

fn membership(server: &Server) -> Value {
    get(server, "/_membership")
}

#[test]
fn three_nodes_join_survive_the_leader_and_take_it_back() {
    let dirs: Vec<_> = (0..6).map(|_| tempfile::tempdir().expect("dir")).collect();
    let a = start(dirs[0].path(), "127.0.0.1:0", &[]);
    let (a_id, a_cluster) = cluster_line(&a);
    let b = start(dirs[1].path(), "127.0.0.1:0", &["--join", &a_cluster]);
    let (b_id, b_cluster) = cluster_line(&b);
    // Through b, most likely a follower: it forwards the join to the leader.
    let c = start(dirs[2].path(), "127.0.0.1:0", &["--join", &b_cluster]);
    let (c_id, c_cluster) = cluster_line(&c);
    assert_eq!(
        BTreeSet::from([a_id, b_id, c_id]).len(),
        3,
        "three distinct ids"
    );
    let leader = until_agreed(&[&a, &b, &c], 3, 3);
    assert!([a_id, b_id, c_id].contains(&leader));
    let names = membership(&a);
    assert_eq!(names["cluster_nodes"].as_array().expect("names").len(), 3);
    assert_eq!(names, membership(&b));
    assert_eq!(names, membership(&c));
    assert!(names["cluster_nodes"]
        .as_array()
        .expect("names")
        .contains(&Value::from(format!("settee-{b_id}@127.0.0.1"))));
    // A node not given --node-name answers to its member name.
    let b_name = format!("settee-{b_id}@127.0.0.1");
    assert_eq!(get(&b, &format!("/_node/{b_name}"))["name"], b_name);

    let wrong = refused_start(
        dirs[3].path(),
        "not the secret of this cluster",
        &["--join", &a_cluster],
    );
    assert!(wrong.contains("wrong cluster secret"), "{wrong}");
    let taken = refused_start(
        dirs[3].path(),
        SECRET,
        &["--join", &b_cluster, "--node-id", &c_id.to_string()],
    );
    // The refused start above numbered dirs[3]: another id for that directory is refused too.
    assert!(taken.contains("belongs to node"), "{taken}");
    let taken = refused_start(
        dirs[4].path(),
        SECRET,
        &["--join", &b_cluster, "--node-id", &c_id.to_string()],
    );
    assert!(taken.contains("already a member"), "{taken}");
    let leader = until_agreed(&[&a, &b, &c], 3, 3);

    // kill -9 the leader: the survivors elect another and still commit a map change.
    let mut nodes = vec![
        (a, a_id, a_cluster),
        (b, b_id, b_cluster),
        (c, c_id, c_cluster),
    ];
    let at = nodes
        .iter()
        .position(|(_, id, _)| *id == leader)
        .expect("the leader is one of the three");
    let (killed, killed_id, killed_cluster) = nodes.remove(at);
    let killed_dir = killed.data_dir.clone();
    killed.kill9();
    let (x, y) = (&nodes[0].0, &nodes[1].0);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (vx, vy) = (view(x), view(y));
        match vx.0 {
            Some(leader) if leader != killed_id && vx.0 == vy.0 => break,
            _ => {}
        }
        assert!(Instant::now() < deadline, "no new leader: {vx:?} {vy:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = view(x).1;
    let d = start(dirs[5].path(), "127.0.0.1:0", &["--join", &nodes[0].2]);
    let (d_id, _) = cluster_line(&d);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(view(x).2.contains(&d_id) && view(y).2.contains(&d_id)) {
        assert!(Instant::now() < deadline, "the join was not committed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        view(y).1 > before,
        "the map moved on without the old leader"
    );

    // At another cluster address its peers would never reach it: refused, naming the address.
    let moved = refused_start(&killed_dir, SECRET, &[]);
    assert!(
        moved.contains(&format!("--cluster-addr {killed_cluster}")),
        "{moved}"
    );
    // The killed node comes back from its data directory, at its address, without --join.
    let back = start(&killed_dir, &killed_cluster, &[]);
    assert_eq!(cluster_line(&back).0, killed_id);
    until_agreed(&[&back, x, y, &d], 4, 3);
    assert_eq!(membership(&back), membership(&d));
    let (x, y) = (nodes.remove(0).0, nodes.remove(0).0);
    for server in [back, x, y, d] {
        server.stop();
    }
}

/// A node that has just started a cluster takes writes as soon as it answers: its first
/// serving lease comes a moment after its first map, and a request in that moment waits for
/// it rather than being refused 503 (a CI run saw that 503 on the first document).
#[test]
fn a_new_cluster_node_takes_writes_at_once() {
    for round in 0..8 {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = start(dir.path(), "127.0.0.1:0", &[]);
        let mut client = Client::connect(&server.addr).expect("connect");
        let created = client.request("PUT", "/db", None).expect("request");
        assert_eq!(created.status, 201, "round {round}: {}", created.json());
        for index in 0..5 {
            let path = format!("/db/doc-{index}");
            let body = format!("{{\"n\":{index}}}");
            let written = client
                .request("PUT", &path, Some(body.as_bytes()))
                .expect("request");
            assert_eq!(
                written.status,
                201,
                "round {round}, {path}: {}",
                written.json()
            );
        }
    }
}
