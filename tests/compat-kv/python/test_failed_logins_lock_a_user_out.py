"""Issue 18 point 10: failed logins are limited on the KV door as CouchDB 3.4+ limits them over
HTTP ([chttpd_auth_lockout]: enforce, 5 failures). After 5 wrong passwords (SCRAM, as the SDK
authenticates), the user's logins from this address are refused (AUTH_ERROR) even with the right
password, on both doors (one table), until the lifetime of the first failure ends (shortened
here through SETTEE_AUTH_LOCKOUT_MAX_LIFETIME, which an older build ignores); another user is
not affected. This file runs its own settee, so the shared one's users are never locked."""
import os
import shutil
import subprocess
import tempfile
import time
from datetime import timedelta

import pytest
from couchbase.exceptions import AuthenticationException

from conftest import Settee, expect, free_port, stop, wait_until_ready, wait_until_up

LIFETIME_MS = 6000
QUICK = timedelta(seconds=3)
LOCKED = "Account is temporarily locked due to multiple authentication failures"


@pytest.fixture(scope="module")
def server():
    binary = os.environ.get("SETTEE_BIN") or os.path.expanduser("~/.cache/settee/target/release/settee")
    data_dir = tempfile.mkdtemp(prefix="settee-compat-kv-lockout-")
    node = Settee(free_port(), free_port(), free_port())
    env = dict(os.environ, SETTEE_AUTH_LOCKOUT_MAX_LIFETIME=str(LIFETIME_MS))
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", data_dir,
         "--http-addr", f"127.0.0.1:{node.http_port}",
         "--kv-addr", f"127.0.0.1:{node.kv_port}",
         "--mgmt-addr", f"127.0.0.1:{node.mgmt_port}",
         "--admin", "admin:secret", "--pbkdf2-iterations", "1000"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        wait_until_up(node, process)
        expect(node.http("PUT", "/locks"), 201)
        for name in ("lou", "max"):
            expect(node.http("PUT", f"/_users/org.couchdb.user:{name}",
                             {"name": name, "password": f"{name}-pw", "roles": [], "type": "user"}), 201)
        expect(node.http("PUT", "/locks/_security",
                         {"admins": {"names": [], "roles": []},
                          "members": {"names": ["lou", "max"], "roles": []}}), 200)
        yield node
    finally:
        stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


def use(node, name, password):
    cluster = node.connect(user=(name, password), connect_timeout=QUICK)
    try:
        wait_until_ready(cluster)
        cluster.bucket("locks").default_collection().upsert(f"by-{name}", {"by": name})
    finally:
        cluster.close()


def test_wrong_passwords_lock_the_user_out_of_both_doors_until_the_lifetime_ends(server):
    for _ in range(5):
        with pytest.raises(AuthenticationException):
            use(server, "lou", "guess")
    with pytest.raises(AuthenticationException):
        use(server, "lou", "lou-pw")
    status, body = server.http("GET", "/_session", user=("lou", "lou-pw"))
    assert status == 403, body
    assert body == {"error": "forbidden", "reason": LOCKED}
    # Another user from the same address is not affected.
    use(server, "max", "max-pw")
    # Once the first failure is older than the lifetime, the right password works again.
    deadline = time.monotonic() + LIFETIME_MS / 1000 + 20
    while True:
        try:
            use(server, "lou", "lou-pw")
            break
        except AuthenticationException:
            assert time.monotonic() < deadline, "still locked out long after the lifetime"
            time.sleep(0.25)
    status, body = server.http("GET", "/locks/by-lou", user=("lou", "lou-pw"))
    assert status == 200, body
