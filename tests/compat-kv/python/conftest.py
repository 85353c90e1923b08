"""Starts one real `settee serve` for the whole Python suite and connects the official SDK to it.

The server gets a fresh data directory and free loopback ports, and TLS with a test CA made by
tests/tls/make-certs.sh (openssl) for the couchbases:// tests; the fixtures below prepare it
through the CouchDB HTTP API (buckets `default`, `private`, `small?q=8`, user alice who may use
`default` only) and stop it afterwards (the whole process group, then the data directory).

SETTEE_CLUSTER=N runs the same tests against an N-node cluster, as the Go suite does
(go/cluster_test.go): node 1 makes the cluster, the others join it one at a time, each with the
single node's TLS doors (one test CA for all), its own free ports, data directory and process
group. Once every node lists N active members, node 1 is prepared as a single node is; then
every node must log alice in (accounts are the cluster's: `_users` has a copy on every node) and
serve every database. The `settee` fixture is node 1 (its HTTP door), with connection strings that list
every node's KV (and KV TLS) door. Tests that do not use the `settee` fixture start their own
servers and would only repeat the single-node run: they are skipped in cluster mode.
"""
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.diagnostics import ServiceType
from couchbase.options import ClusterOptions, ClusterTimeoutOptions, WaitUntilReadyOptions

ADMIN = ("admin", "secret")
MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tls", "make-certs.sh")
ALICE = ("alice", "alicepw")
# Short enough that an expected timeout costs little, long enough for a loaded CI machine.
KV_TIMEOUT = timedelta(seconds=2.5)
CONNECT_TIMEOUT = timedelta(seconds=10)
READY_TIMEOUT = timedelta(seconds=15)
CLUSTER_READY_TIMEOUT_S = 60


def cluster_size():
    """SETTEE_CLUSTER's node count, or None when it is unset or empty (a single node)."""
    size = os.environ.get("SETTEE_CLUSTER", "")
    if not size:
        return None
    if not size.isdigit() or int(size) < 1:
        raise pytest.UsageError(f"SETTEE_CLUSTER={size!r} is not a node count")
    return int(size)


class Settee:
    """A running settee process: its ports and a small HTTP client for the CouchDB door."""

    def __init__(self, http_port, kv_port, mgmt_port, https_port=None, kv_tls_port=None, certs=None):
        self.http_port = http_port
        self.kv_port = kv_port
        self.mgmt_port = mgmt_port
        self.https_port = https_port
        self.kv_tls_port = kv_tls_port
        # The test CA (ca.crt) and a CA that signed nothing of the node's (other-ca.crt).
        self.certs = certs
        self.http_url = f"http://127.0.0.1:{http_port}"
        self.connection_string = f"couchbase://127.0.0.1:{kv_port}"
        self.tls_connection_string = f"couchbases://127.0.0.1:{kv_tls_port}"
        # The other nodes of a cluster (SETTEE_CLUSTER), each a Settee; empty for a single node.
        self.peers = []

    @property
    def nodes(self):
        """Every node: this one, then its peers."""
        return [self, *self.peers]

    def http(self, method, path, body=None, user=ADMIN):
        """One HTTP request; returns (status, parsed JSON or raw text)."""
        return self.request(self.http_url, method, path, body, user)

    def mgmt(self, method, path, body=None, user=ADMIN):
        """One request to the management (Couchbase REST) port, as `http`."""
        return self.request(f"http://127.0.0.1:{self.mgmt_port}", method, path, body, user)

    @staticmethod
    def request(base_url, method, path, body=None, user=ADMIN):
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if user is not None:
            token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
            headers["authorization"] = f"Basic {token}"
        request = urllib.request.Request(base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def connect(self, user=ADMIN, **timeouts):
        options = ClusterOptions(
            PasswordAuthenticator(*user),
            timeout_options=ClusterTimeoutOptions(
                kv_timeout=timeouts.get("kv_timeout", KV_TIMEOUT),
                connect_timeout=timeouts.get("connect_timeout", CONNECT_TIMEOUT),
                bootstrap_timeout=timeouts.get("connect_timeout", CONNECT_TIMEOUT),
            ),
        )
        return Cluster(self.connection_string, options)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(settee, process, deadline_s=30):
    deadline = time.monotonic() + deadline_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"settee exited early with status {process.returncode}")
        try:
            with urllib.request.urlopen(settee.http_url + "/_up", timeout=2) as response:
                if response.status == 200:
                    with socket.create_connection(("127.0.0.1", settee.kv_port), timeout=2):
                        return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("settee did not come up")
        time.sleep(0.1)


def expect(status_body, *statuses):
    status, body = status_body
    assert status in statuses, f"HTTP setup answered {status}: {body!r}"
    return body


def make_accounts(settee):
    """The users `prepare` makes (once for a cluster: `_users` has a copy on every node)."""
    expect(settee.http("PUT", "/_users/org.couchdb.user:alice",
                       {"name": "alice", "password": "alicepw", "roles": [], "type": "user"}), 201, 202)


def logs_in(node, name, password):
    """Whether name:password logs in on `node`'s HTTP door."""
    status, body = node.http("GET", "/_session", user=(name, password))
    return status == 200 and isinstance(body, dict) and body.get("userCtx", {}).get("name") == name


def prepare(settee):
    expect(settee.http("PUT", "/default"), 201)
    expect(settee.http("PUT", "/private"), 201)
    expect(settee.http("PUT", "/small?q=8"), 201)
    make_accounts(settee)
    expect(settee.http("PUT", "/default/_security",
                       {"admins": {"names": [], "roles": []},
                        "members": {"names": ["alice"], "roles": []}}), 200)


class PortTaken(RuntimeError):
    """The process could not bind a port `free_port` chose: something took it meanwhile."""


def start_settee(binary, data, certs, extra_args, log, env=None):
    """A started settee on fresh free ports with its data in `data`, its stderr into the file
    `log` and the environment `env` (None: this process's): (server, process)."""
    server = Settee(free_port(), free_port(), free_port(), free_port(), free_port(), certs)
    mgmt_tls_port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", data,
         "--http-addr", f"127.0.0.1:{server.http_port}",
         "--kv-addr", f"127.0.0.1:{server.kv_port}",
         "--mgmt-addr", f"127.0.0.1:{server.mgmt_port}",
         "--tls-cert", os.path.join(certs, "node.crt"), "--tls-key", os.path.join(certs, "node.key"),
         "--https-addr", f"127.0.0.1:{server.https_port}",
         "--kv-tls-addr", f"127.0.0.1:{server.kv_tls_port}",
         "--mgmt-tls-addr", f"127.0.0.1:{mgmt_tls_port}",
         "--admin", "admin:secret", "--pbkdf2-iterations", "1000", *extra_args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env,
        start_new_session=True)
    try:
        wait_until_up(server, process)
    except RuntimeError:
        stop(process)
        log.seek(0)
        stderr = log.read().decode(errors="replace")
        if "Error: binding" in stderr:
            raise PortTaken(stderr.strip().splitlines()[0])
        sys.stderr.write(stderr)
        raise
    return server, process


def settee_binary():
    return os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")


@contextlib.contextmanager
def running_settee(*extra_args):
    """A prepared settee with `extra_args` on its command line, stopped on exit. A port that
    another process took between `free_port` and the bind is chosen again (three tries)."""
    binary = settee_binary()
    data_dir = tempfile.mkdtemp(prefix="settee-compat-kv-py-")
    certs = os.path.join(data_dir, "certs")
    subprocess.run([MAKE_CERTS, certs], check=True)
    process = None
    try:
        for attempt in range(3):
            try:
                log = tempfile.TemporaryFile(dir=data_dir)
                server, process = start_settee(binary, os.path.join(data_dir, "data"), certs,
                                               extra_args, log)
                break
            except PortTaken:
                if attempt == 2:
                    raise
        prepare(server)
        yield server
    finally:
        if process is not None:
            stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


# The node logs of the running cluster (SETTEE_CLUSTER): (node name, path), for failed tests.
cluster_logs = []


@contextlib.contextmanager
def running_cluster(size):
    """A prepared `size`-node cluster, stopped on exit: node 1, with the others as its peers and
    connection strings that list every node's KV (and KV TLS) door. Each node's stderr goes to
    nodeK.log in the cluster's directory; a port taken meanwhile is chosen again (three tries,
    each with a fresh data directory)."""
    binary = settee_binary()
    root = tempfile.mkdtemp(prefix="settee-compat-kv-py-cluster-")
    certs = os.path.join(root, "certs")
    subprocess.run([MAKE_CERTS, certs], check=True)
    env = dict(os.environ, SETTEE_CLUSTER_SECRET=base64.b64encode(os.urandom(24)).decode())
    processes = []
    logs = []
    try:
        try:
            servers = start_nodes(binary, root, certs, env, size, processes, logs)
            wait_for_every(servers, "the cluster map to list every member as active",
                           lambda server: active_members(server) == size)
            prepare(servers[0])
            wait_for_every(servers, "alice to log in", lambda server: logs_in(server, "alice", "alicepw"))
            for db in ("default", "private", "small"):
                wait_for_every(servers, f"database {db}",
                               lambda server: server.http("GET", f"/{db}")[0] == 200)
        except Exception:
            for name, path in logs:
                with open(path, "rb") as log:
                    sys.stderr.write(prefixed(name, log.read()))
            raise
        first = servers[0]
        first.peers = servers[1:]
        first.connection_string = "couchbase://" + ",".join(
            f"127.0.0.1:{server.kv_port}" for server in servers)
        first.tls_connection_string = "couchbases://" + ",".join(
            f"127.0.0.1:{server.kv_tls_port}" for server in servers)
        cluster_logs[:] = logs
        yield first
    finally:
        cluster_logs.clear()
        stop_all(processes)
        shutil.rmtree(root, ignore_errors=True)


def start_nodes(binary, root, certs, env, size, processes, logs):
    """Starts `size` nodes in `root`, node 1 making the cluster and each other joining it once
    up; appends each node's process to `processes` and (name, log path) to `logs`."""
    servers = []
    first_cluster_addr = None
    for k in range(1, size + 1):
        log_path = os.path.join(root, f"node{k}.log")
        for attempt in range(3):
            data = os.path.join(root, f"node{k}")
            shutil.rmtree(data, ignore_errors=True)
            cluster_addr = f"127.0.0.1:{free_port()}"
            extra = ["--cluster-addr", cluster_addr]
            if first_cluster_addr is not None:
                extra += ["--join", first_cluster_addr]
            with open(log_path, "w+b") as log:
                try:
                    server, process = start_settee(binary, data, certs, extra, log, env)
                    break
                except PortTaken:
                    if attempt == 2:
                        raise
        processes.append(process)
        logs.append((f"node{k}", log_path))
        servers.append(server)
        if first_cluster_addr is None:
            first_cluster_addr = cluster_addr
    return servers


def active_members(server):
    """How many members `server`'s cluster map lists, or 0 while any of them is not active."""
    try:
        status, view = server.http("GET", "/_node/_local/_cluster")
    except OSError:
        return 0
    if status != 200 or not isinstance(view, dict):
        return 0
    members = view.get("members", [])
    if any(member.get("state") != "active" for member in members):
        return 0
    return len(members)


def wait_for_every(servers, what, ready):
    """Polls until `ready(server)` holds on every server, CLUSTER_READY_TIMEOUT_S in all."""
    deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
    for k, server in enumerate(servers, 1):
        while not ready(server):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node{k}: timed out waiting for {what}")
            time.sleep(0.1)


def wait_for_scope(settee, scope, collections, bucket="default"):
    """Waits until every node's manifest of `bucket` has `scope` with exactly the collections
    `collections` (a set), or no scope `scope` when it is None: the nodes of a cluster follow a
    collection change after the node that made it has answered, as Couchbase Server's do
    (ns_server answers `GET .../scopes` from the node's copy of the manifest). At once against
    a single node."""
    deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
    for node in settee.nodes:
        while True:
            status, body = node.mgmt("GET", f"/pools/default/buckets/{bucket}/scopes")
            assert status == 200, body
            listed = {s["name"]: {c["name"] for c in s["collections"]} for s in body["scopes"]}
            if listed.get(scope) == collections:
                break
            assert time.monotonic() < deadline, \
                f"node {node.mgmt_port}: scope {scope} has {listed.get(scope)}, not {collections}"
            time.sleep(0.05)


def prefixed(name, raw):
    """A node's log bytes as text without colours, each line marked with the node."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw.decode(errors="replace"))
    return "".join(f"[{name}] {line}\n" for line in text.splitlines())


@pytest.fixture(scope="session")
def settee():
    size = cluster_size()
    with (running_cluster(size) if size is not None else running_settee()) as server:
        yield server


def pytest_collection_modifyitems(config, items):
    """In cluster mode, skips the tests that start their own servers (every test not using the
    `settee` fixture): they do not depend on SETTEE_CLUSTER and run in the single-node suite."""
    if cluster_size() is None:
        return
    skip = pytest.mark.skip(reason="starts its own server(s), not the SETTEE_CLUSTER cluster; "
                                   "runs in the single-node suite")
    for item in items:
        if "settee" not in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.cluster_log_offsets = {path: os.path.getsize(path) for _, path in cluster_logs}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test in cluster mode gets the node log lines written during it (from the start
    of the logs for the test that started the cluster)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    offsets = getattr(item, "cluster_log_offsets", {})
    for name, path in cluster_logs:
        try:
            with open(path, "rb") as log:
                log.seek(offsets.get(path, 0))
                text = prefixed(name, log.read())
        except OSError:
            continue
        if text:
            report.sections.append((f"{name} log ({report.when})", text))


def stop(process):
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def stop_all(processes):
    """Stops the processes' groups together: SIGTERM to each, then SIGKILL to any still running
    after 10 s."""
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


def wait_until_ready(cluster):
    cluster.wait_until_ready(READY_TIMEOUT, WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))


@pytest.fixture(scope="session")
def cluster(settee):
    cluster = settee.connect()
    wait_until_ready(cluster)
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def bucket(cluster):
    return cluster.bucket("default")


@pytest.fixture(scope="session")
def collection(bucket):
    return bucket.default_collection()


@pytest.fixture
def key(request):
    """A document id unique to the test."""
    return f"py::{request.node.name}::{time.time_ns()}"
