"""The SDK against a three-node settee cluster, connected to node 1 only: it reads the cluster's
map, routes every key to its active node (the keys land in all three nodes' local counts, each
on its active and its replica), makes durable writes (MAJORITY and PERSIST_TO_MAJORITY: with one
replica a majority is the active and its replica, so each key is on both when the SDK returns),
and,
after node 3 is killed and failed over by the orchestrator, keeps working on the vbuckets the
other nodes serve, following the new map it is pushed.

Replication is not checked here (crates/settee/tests/cluster_replicas_fail_over.rs does): the
test uses only keys whose vbuckets have an active after the failover, which with replicas
promoted is all of them.
"""
import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import zlib

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import RemoveOptions, ReplaceOptions, UpsertOptions

from conftest import ADMIN, Settee, expect, free_port, stop, wait_until_ready, wait_until_up

SECRET = "the secret of the python cluster test"
BUCKET = "spread"
KEYS = 200


def start_node(binary, root, k, join=None):
    server = Settee(free_port(), free_port(), free_port())
    cluster_addr = f"127.0.0.1:{free_port()}"
    args = [binary, "serve", "--data-dir", os.path.join(root, f"node{k}"),
            "--http-addr", f"127.0.0.1:{server.http_port}",
            "--kv-addr", f"127.0.0.1:{server.kv_port}",
            "--mgmt-addr", f"127.0.0.1:{server.mgmt_port}",
            "--admin", "admin:secret", "--pbkdf2-iterations", "1000",
            "--cluster-addr", cluster_addr]
    if join:
        args += ["--join", join]
    process = subprocess.Popen(args, env=dict(os.environ, SETTEE_CLUSTER_SECRET=SECRET),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               start_new_session=True)
    wait_until_up(server, process)
    return server, process, cluster_addr


def wait_for(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def members(node):
    status, body = node.http("GET", "/_node/_local/_cluster")
    return body.get("members", []) if status == 200 else []


@pytest.fixture(scope="module")
def nodes():
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    root = tempfile.mkdtemp(prefix="settee-compat-kv-cluster-")
    started = []
    try:
        first = start_node(binary, root, 1)
        started.append(first)
        for k in (2, 3):
            started.append(start_node(binary, root, k, join=first[2]))
        servers = [server for server, _, _ in started]
        for server in servers:
            wait_for("three members", lambda: len(members(server)) == 3)
        expect(servers[0].http("PUT", f"/{BUCKET}?n=2"), 201)
        for server in servers:
            wait_for("the bucket on every node", lambda: server.http("GET", f"/{BUCKET}")[0] == 200)
        yield started
    finally:
        for _, process, _ in started:
            stop(process)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def sdk(nodes):
    cluster = nodes[0][0].connect()
    wait_until_ready(cluster)
    yield cluster
    cluster.close()


def local_counts(servers):
    """The documents each node stores of BUCKET, its actives and its replicas: the management
    port's node-local `kv_curr_items` (`GET /db` answers for the whole cluster)."""
    return [local_count(server) for server in servers]


def local_count(server):
    token = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.mgmt_port}/metrics",
                                     headers={"authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    sample = f'kv_curr_items{{bucket="{BUCKET}"}} '
    for line in text.splitlines():
        if line.startswith(sample):
            return int(float(line[len(sample):]))
    return 0


def test_crud_with_cas_reaches_every_node(nodes, sdk):
    servers = [server for server, _, _ in nodes]
    collection = sdk.bucket(BUCKET).default_collection()
    for i in range(KEYS):
        key = f"routed-{i}"
        collection.upsert(key, {"i": i})
        got = collection.get(key)
        assert got.content_as[dict] == {"i": i}
        replaced = collection.replace(key, {"i": i, "replaced": True}, ReplaceOptions(cas=got.cas))
        assert replaced.cas not in (0, got.cas)
        assert collection.get(key).content_as[dict] == {"i": i, "replaced": True}
    # Each key is on its active and, streamed there, on its replica (1 replica).
    wait_for("every key on its active and its replica",
             lambda: sum(local_counts(servers)) == 2 * KEYS)
    counts = local_counts(servers)
    assert all(count > 0 for count in counts), counts
    for i in range(KEYS):
        collection.remove(f"routed-{i}")
    wait_for("the removals on every copy", lambda: local_counts(servers) == [0, 0, 0])


@pytest.mark.parametrize("level", [DurabilityLevel.MAJORITY, DurabilityLevel.PERSIST_TO_MAJORITY])
def test_durable_upserts_are_on_the_replica_when_they_return(nodes, sdk, level):
    servers = [server for server, _, _ in nodes]
    collection = sdk.bucket(BUCKET).default_collection()
    durable = ServerDurability(level)
    keys = [f"durable-{level.name}-{i}" for i in range(KEYS // 4)]
    for key in keys:
        collection.upsert(key, {"key": key}, UpsertOptions(durability=durable))
    # No waiting: a majority (the active and its replica) holds every key already.
    assert sum(local_counts(servers)) == 2 * len(keys)
    for key in keys:
        assert collection.get(key).content_as[dict] == {"key": key}
        collection.remove(key, RemoveOptions(durability=durable))
    assert local_counts(servers) == [0, 0, 0]


def active_of(config, key):
    """The vbucket map's active index for `key` (CRC-32 as the SDKs hash keys)."""
    vbuckets = config["vBucketServerMap"]["vBucketMap"]
    vbucket = ((zlib.crc32(key.encode()) >> 16) & 0x7FFF) % len(vbuckets)
    return vbuckets[vbucket][0]


def test_a_connected_client_keeps_working_after_a_failover(nodes, sdk):
    servers = [server for server, _, _ in nodes]
    collection = sdk.bucket(BUCKET).default_collection()
    collection.upsert("before-the-failover", {"ok": True})
    third = servers[2]
    os.killpg(nodes[2][1].pid, signal.SIGKILL)
    nodes[2][1].wait()
    kv_addr = f"127.0.0.1:{third.kv_port}"

    def failed_over():
        return any(m["kv_addr"] == kv_addr and m["state"] == "failed" for m in members(servers[0]))
    wait_for("the orchestrator to fail node 3 over", failed_over)
    mgmt = Settee(servers[0].http_port, servers[0].kv_port, servers[0].mgmt_port)
    mgmt.http_url = f"http://127.0.0.1:{servers[0].mgmt_port}"

    def bucket_config_without_node_3():
        # The bucket's config follows the committed map a moment after the member list does
        # (the node applies the map, then publishes its vbucket routing).
        status, config = mgmt.http("GET", f"/pools/default/b/{BUCKET}")
        assert status == 200
        return config if len(config["vBucketServerMap"]["serverList"]) == 2 else None
    wait_for("the bucket config without node 3", bucket_config_without_node_3)
    config = bucket_config_without_node_3()
    assert kv_addr not in config["vBucketServerMap"]["serverList"]
    keys = [key for key in (f"after-{i}" for i in range(KEYS)) if active_of(config, key) >= 0]
    assert len(keys) > KEYS // 2
    for key in keys:
        collection.upsert(key, {"key": key})
        assert collection.get(key).content_as[dict] == {"key": key}
    counts = local_counts(servers[:2])
    assert sum(counts) >= len(keys) and all(count > 0 for count in counts), counts
