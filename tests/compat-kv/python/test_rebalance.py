"""The SDK through rebalances of a real settee cluster (docs/format/rebalance.md): connected to
node 1 of two nodes, a client keeps making MAJORITY-durable upserts and reads while a third node
is rebalanced in (2 -> 3), a fourth swapped for the second (add one, eject one), and the fourth
rebalanced out (3 -> 2), each through `POST /controller/rebalance` on a management port, as
`couchbase-cli rebalance` sends it. Every operation succeeds after the SDK's own retries (a
takeover's pause answers a temporary failure, a moved vbucket NOT_MY_VBUCKET with the new map),
and every acknowledged write reads back, with its value, from whichever node holds it at the end.
"""
import os
import shutil
import tempfile
import threading
import time
import urllib.parse

import pytest
from couchbase.durability import DurabilityLevel, ServerDurability
from couchbase.options import UpsertOptions

from conftest import expect, stop, wait_until_ready
from test_cluster_routing import members, start_node, wait_for

BUCKET = "moving"


class Client(threading.Thread):
    """Durable upserts of keys `rb-0`, `rb-1`, ... and a read of each, until stopped."""

    def __init__(self, collection):
        super().__init__(daemon=True)
        self.collection = collection
        self.stopping = threading.Event()
        self.acknowledged = {}
        self.failures = []

    def run(self):
        durable = UpsertOptions(durability=ServerDurability(DurabilityLevel.MAJORITY))
        i = 0
        while not self.stopping.is_set():
            key, value = f"rb-{i % 500}", {"i": i}
            try:
                self.collection.upsert(key, value, durable)
                self.acknowledged[key] = value
                got = self.collection.get(key).content_as[dict]
                if got != value:
                    self.failures.append(f"{key}: read {got}, wrote {value}")
            except Exception as error:  # every failure the SDK gives up on counts
                self.failures.append(f"{key}: {error!r}")
            i += 1


def rebalance(node, known, ejected=()):
    """Rebalances through `node`'s management port and waits until it is over."""
    form = urllib.parse.urlencode({"knownNodes": ",".join(known),
                                   "ejectedNodes": ",".join(ejected)}).encode()
    expect(node.mgmt("POST", "/controller/rebalance", form), 200)
    wait_for("the rebalance to end",
             lambda: node.mgmt("GET", "/pools/default/rebalanceProgress")[1] == {"status": "none"},
             seconds=120)


def serving(node):
    """The serving members' names."""
    return [m["name"] for m in members(node) if m["state"] == "active"]


@pytest.fixture(scope="module")
def root():
    path = tempfile.mkdtemp(prefix="settee-compat-kv-rebalance-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_durable_writes_and_reads_succeed_through_rebalances(root):
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    started = []
    try:
        first = start_node(binary, root, 1)
        started.append(first)
        started.append(start_node(binary, root, 2, join=first[2]))
        node1 = first[0]
        wait_for("two members", lambda: len(serving(node1)) == 2)
        expect(node1.http("PUT", f"/{BUCKET}?n=2"), 201)
        wait_for("the bucket on node 2", lambda: started[1][0].http("GET", f"/{BUCKET}")[0] == 200)
        sdk = node1.connect()
        wait_until_ready(sdk)
        client = Client(sdk.bucket(BUCKET).default_collection())
        client.start()
        try:
            time.sleep(1)
            # In: a third node.
            started.append(start_node(binary, root, 3, join=first[2]))
            wait_for("three members", lambda: len(serving(node1)) == 3)
            rebalance(node1, serving(node1))
            # Swap: a fourth in, the second out.
            started.append(start_node(binary, root, 4, join=first[2]))
            wait_for("four members", lambda: len(serving(node1)) == 4)
            names = serving(node1)
            second = next(m["name"] for m in members(node1)
                          if m["kv_addr"] == f"127.0.0.1:{started[1][0].kv_port}")
            rebalance(node1, names, [second])
            wait_for("the second node ejected", lambda: second not in serving(node1))
            # Out: the fourth leaves.
            fourth = next(m["name"] for m in members(node1)
                          if m["kv_addr"] == f"127.0.0.1:{started[3][0].kv_port}")
            rebalance(node1, serving(node1), [fourth])
            wait_for("two members serve", lambda: len(serving(node1)) == 2)
            time.sleep(1)
        finally:
            client.stopping.set()
            client.join(timeout=60)
        assert client.failures == [], client.failures[:10]
        assert len(client.acknowledged) > 50
        collection = sdk.bucket(BUCKET).default_collection()
        lost = {}
        for key, value in client.acknowledged.items():
            try:
                got = collection.get(key).content_as[dict]
            except Exception as error:
                got = repr(error)[:80]
            if got != value:
                # What every node's CouchDB door answers for it (each forwards to the active).
                over_http = [server.http("GET", f"/{BUCKET}/{key}")[0] for server, _, _ in started]
                lost[key] = (value, got, over_http)
        assert lost == {}, lost
        sdk.close()
    finally:
        for _, process, _ in started:
            stop(process)
