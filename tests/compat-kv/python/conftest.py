"""Starts one real `settee serve` for the whole Python suite and connects the official SDK to it.

The server gets a fresh data directory and free loopback ports, and TLS with a test CA made by
tests/tls/make-certs.sh (openssl) for the couchbases:// tests; the fixtures below prepare it
through the CouchDB HTTP API (buckets `default`, `private`, `small?q=8`, user alice who may use
`default` only) and stop it afterwards (the whole process group, then the data directory).
"""
import base64
import contextlib
import json
import os
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

    def http(self, method, path, body=None, user=ADMIN):
        """One HTTP request; returns (status, parsed JSON or raw text)."""
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if user is not None:
            token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
            headers["authorization"] = f"Basic {token}"
        request = urllib.request.Request(self.http_url + path, data=data, method=method, headers=headers)
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


def prepare(settee):
    expect(settee.http("PUT", "/default"), 201)
    expect(settee.http("PUT", "/private"), 201)
    expect(settee.http("PUT", "/small?q=8"), 201)
    expect(settee.http("PUT", "/_users/org.couchdb.user:alice",
                       {"name": "alice", "password": "alicepw", "roles": [], "type": "user"}), 201, 202)
    expect(settee.http("PUT", "/default/_security",
                       {"admins": {"names": [], "roles": []},
                        "members": {"names": ["alice"], "roles": []}}), 200)


class PortTaken(RuntimeError):
    """The process could not bind a port `free_port` chose: something took it meanwhile."""


def start_settee(binary, data_dir, certs, extra_args, log):
    """A started settee on fresh free ports, its stderr into the file `log`: (server, process)."""
    server = Settee(free_port(), free_port(), free_port(), free_port(), free_port(), certs)
    mgmt_tls_port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", os.path.join(data_dir, "data"),
         "--http-addr", f"127.0.0.1:{server.http_port}",
         "--kv-addr", f"127.0.0.1:{server.kv_port}",
         "--mgmt-addr", f"127.0.0.1:{server.mgmt_port}",
         "--tls-cert", os.path.join(certs, "node.crt"), "--tls-key", os.path.join(certs, "node.key"),
         "--https-addr", f"127.0.0.1:{server.https_port}",
         "--kv-tls-addr", f"127.0.0.1:{server.kv_tls_port}",
         "--mgmt-tls-addr", f"127.0.0.1:{mgmt_tls_port}",
         "--admin", "admin:secret", "--pbkdf2-iterations", "1000", *extra_args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
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


@contextlib.contextmanager
def running_settee(*extra_args):
    """A prepared settee with `extra_args` on its command line, stopped on exit. A port that
    another process took between `free_port` and the bind is chosen again (three tries)."""
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    data_dir = tempfile.mkdtemp(prefix="settee-compat-kv-py-")
    certs = os.path.join(data_dir, "certs")
    subprocess.run([MAKE_CERTS, certs], check=True)
    process = None
    try:
        for attempt in range(3):
            try:
                log = tempfile.TemporaryFile(dir=data_dir)
                server, process = start_settee(binary, data_dir, certs, extra_args, log)
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


@pytest.fixture(scope="session")
def settee():
    with running_settee() as server:
        yield server


def stop(process):
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


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
