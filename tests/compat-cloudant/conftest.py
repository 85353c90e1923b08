"""Starts one real `settee serve` for the suite and connects IBM's `ibmcloudant` SDK to it, as a
user would: `CloudantV1` with basic authentication and the SDK's defaults (request bodies
gzipped). The server gets a fresh data directory and free loopback ports and is stopped (its
whole process group, then the data directory) at the end.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
from ibm_cloud_sdk_core.authenticators import BasicAuthenticator
from ibmcloudant.cloudant_v1 import CloudantV1

ADMIN = ("admin", "secret")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url, process, deadline_s=30):
    deadline = time.monotonic() + deadline_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"settee exited early with status {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/_up", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("settee did not come up")
        time.sleep(0.1)


def stop(process):
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def settee_url():
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    data_dir = tempfile.mkdtemp(prefix="settee-compat-cloudant-")
    http_port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", data_dir,
         "--http-addr", f"127.0.0.1:{http_port}",
         "--kv-addr", f"127.0.0.1:{free_port()}",
         "--mgmt-addr", f"127.0.0.1:{free_port()}",
         "--admin", f"{ADMIN[0]}:{ADMIN[1]}", "--pbkdf2-iterations", "1000"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{http_port}"
    try:
        wait_until_up(url, process)
        yield url
    finally:
        stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def service(settee_url):
    """The SDK as shipped: only the URL and the credentials are set."""
    service = CloudantV1(authenticator=BasicAuthenticator(*ADMIN))
    service.set_service_url(settee_url)
    return service


@pytest.fixture
def db(service, request):
    """A fresh database for the test, created through the SDK."""
    name = "cloudant-" + request.node.name.lower().replace("_", "-")[:100]
    result = service.put_database(db=name).get_result()
    assert result == {"ok": True}
    return name
