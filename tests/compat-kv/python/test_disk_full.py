"""A full disk through the official SDK: the KV door answers a temporary failure, which the SDK
retries until its timeout (never an internal error), and the same upserts succeed once space is
freed, without restarting the server.

The server gets its own data directory on a small tmpfs that the test mounts, which needs root
(CI runs as root); elsewhere the test is skipped with the reason.
"""
import os
import random
import shutil
import string
import subprocess
import tempfile
import time
from datetime import timedelta

import pytest
from couchbase.exceptions import (AmbiguousTimeoutException, CouchbaseException,
                                  TemporaryFailException, UnAmbiguousTimeoutException)
from couchbase.options import UpsertOptions

from conftest import Settee, expect, free_port, stop, wait_until_ready, wait_until_up

# Room for RocksDB's first write-ahead log and the 64 MB it wants free before it resumes writes.
TMPFS_SIZE = "192m"
HEADROOM_BYTES = 24 << 20
VALUE_BYTES = 1 << 20
UPSERTS_MAX = 200
# RocksDB polls the free space every 5 s; a bound against hanging, not a timing assertion.
RECOVERY_DEADLINE_S = 90
SHORT_TIMEOUT = timedelta(seconds=1)


@pytest.fixture
def full_disk_server():
    mount_point = tempfile.mkdtemp(prefix="settee-disk-full-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", mount_point],
                             capture_output=True)
    if mounted.returncode != 0:
        os.rmdir(mount_point)
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.decode().strip()}")
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    server = Settee(free_port(), free_port(), free_port())
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", os.path.join(mount_point, "data"),
         "--http-addr", f"127.0.0.1:{server.http_port}",
         "--kv-addr", f"127.0.0.1:{server.kv_port}",
         "--mgmt-addr", f"127.0.0.1:{server.mgmt_port}",
         "--admin", "admin:secret"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until_up(server, process)
        expect(server.http("PUT", "/default"), 201)
        yield server, mount_point
    finally:
        stop(process)
        if subprocess.run(["umount", mount_point]).returncode != 0:
            subprocess.run(["umount", "-l", mount_point])
        shutil.rmtree(mount_point, ignore_errors=True)


def fill(path, headroom):
    """Fills the file system with one file, then gives `headroom` bytes back."""
    written = 0
    chunk = b"\x5a" * (1 << 20)
    with open(path, "wb", buffering=0) as filler:
        try:
            while True:
                written += filler.write(chunk)
        except OSError:
            pass
        filler.truncate(max(written - headroom, 0))


def incompressible(length):
    return "".join(random.choices(string.ascii_letters, k=length))


def test_a_full_disk_is_a_temporary_failure_until_space_is_freed(full_disk_server):
    server, mount_point = full_disk_server
    cluster = server.connect(kv_timeout=SHORT_TIMEOUT)
    try:
        wait_until_ready(cluster)
        collection = cluster.bucket("default").default_collection()
        collection.upsert("before", {"v": 1})
        filler = os.path.join(mount_point, "filler")
        fill(filler, HEADROOM_BYTES)

        failure = None
        stored = 0
        for index in range(UPSERTS_MAX):
            try:
                collection.upsert(f"big-{index}", {"pad": incompressible(VALUE_BYTES)})
                stored += 1
            except CouchbaseException as error:
                failure = error
                break
        assert failure is not None, "the disk never filled"
        # ETMPFAIL: the SDK retries it until its timeout, then raises TemporaryFailException (or
        # a timeout naming that retry reason); an internal error (EINTERNAL, 30733d8) fails at
        # once with InternalServerFailureException.
        assert isinstance(failure, TemporaryFailException) or (
            isinstance(failure, (AmbiguousTimeoutException, UnAmbiguousTimeoutException))
            and "key_value_temporary_failure" in repr(failure)), repr(failure)
        assert collection.get("before").content_as[dict] == {"v": 1}

        os.remove(filler)
        deadline = time.monotonic() + RECOVERY_DEADLINE_S
        while True:
            try:
                collection.upsert("after", {"v": 2}, UpsertOptions(timeout=SHORT_TIMEOUT))
                break
            except CouchbaseException as error:
                assert time.monotonic() < deadline, f"writes never came back: {error!r}"
                time.sleep(0.25)
        assert collection.get("after").content_as[dict] == {"v": 2}
        for index in range(stored):
            assert collection.exists(f"big-{index}").exists
    finally:
        cluster.close()
