"""Silent sockets cannot lock the SDK out (issue 18 point 4): with a low connection maximum
and a short authentication timeout, an SDK client keeps working while hundreds of silent
sockets are open against the KV port, and a new SDK client gets in once the server has
closed the ones that never authenticated."""
import socket
import time

from conftest import running_settee, wait_until_ready

SILENT_SOCKETS = 300


def upsert_and_get(cluster, prefix, count):
    collection = cluster.bucket("default").default_collection()
    for index in range(count):
        key = f"{prefix}-{index}"
        collection.upsert(key, {"n": index})
        assert collection.get(key).content_as[dict] == {"n": index}


def test_an_sdk_client_keeps_working_while_silent_sockets_are_open():
    with running_settee("--kv-max-connections", "32", "--kv-auth-timeout-ms", "2000") as server:
        established = server.connect()
        wait_until_ready(established)
        upsert_and_get(established, "before", 5)
        silent = [socket.create_connection(("127.0.0.1", server.kv_port)) for _ in range(SILENT_SOCKETS)]
        try:
            # The door is full: the established client goes on.
            upsert_and_get(established, "during", 50)
            # The silent sockets that got in are closed once they have not authenticated in
            # time; then a new client gets in while the others are still open client-side.
            deadline = time.monotonic() + 30
            while True:
                fresh = server.connect()
                try:
                    wait_until_ready(fresh)
                    upsert_and_get(fresh, "fresh", 5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                finally:
                    fresh.close()
                time.sleep(0.5)
            upsert_and_get(established, "after", 5)
        finally:
            for sock in silent:
                sock.close()
            established.close()
