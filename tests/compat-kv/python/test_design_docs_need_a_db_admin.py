"""Issue 18 point 5: both doors ask one authorisation decision. alice is a member of `default`
but not one of its admins: over HTTP she may not write design documents (403), and over the KV
door every way of writing one (upsert, remove, mutate_in, counters, touch) is refused with
EACCESS (status 36, which the SDK raises as AuthenticationException), and nothing is stored. She may still read
them; the admin may write them through either door."""
import time
import urllib.parse
from datetime import timedelta

import couchbase.subdocument as SD
import pytest
from couchbase.exceptions import AuthenticationException
from couchbase.options import GetOptions

from conftest import ALICE, wait_until_ready

QUICK = timedelta(seconds=3)


def ddoc_path(ddoc_id):
    return "/default/" + urllib.parse.quote(ddoc_id, safe="")


EACCESS = 0x24


def refused(error):
    """The SDK's report of an EACCESS answer (not a timeout, not a retry)."""
    return f"'status_code': {EACCESS}" in str(error)


@pytest.fixture
def alice_collection(settee):
    cluster = settee.connect(user=ALICE)
    try:
        wait_until_ready(cluster)
        yield cluster.bucket("default").default_collection()
    finally:
        cluster.close()


@pytest.fixture
def ddoc(settee):
    ddoc_id = f"_design/point5-{time.time_ns()}"
    status, body = settee.http("PUT", ddoc_path(ddoc_id), {"views": {}, "by": "admin"})
    assert status == 201, body
    return ddoc_id


def admin_view(settee, ddoc_id):
    return settee.http("GET", ddoc_path(ddoc_id))


def test_a_member_cannot_write_a_design_document_over_http(settee, ddoc):
    status, body = settee.http("PUT", ddoc_path(ddoc + "-new"), {"views": {}}, user=ALICE)
    assert status == 403, body
    assert body["error"] == "forbidden"


def test_a_member_cannot_upsert_a_new_design_document_over_kv(settee, alice_collection, ddoc):
    new_id = ddoc + "-new"
    with pytest.raises(AuthenticationException) as raised:
        alice_collection.upsert(new_id, {"views": {}, "by": "alice"}, timeout=QUICK)
    assert refused(raised.value), raised.value
    status, _ = admin_view(settee, new_id)
    assert status == 404


def test_a_member_cannot_overwrite_or_remove_a_design_document_over_kv(
        settee, alice_collection, ddoc):
    _, before = admin_view(settee, ddoc)
    attempts = [
        lambda: alice_collection.upsert(ddoc, {"views": {}, "by": "alice"}, timeout=QUICK),
        lambda: alice_collection.replace(ddoc, {"by": "alice"}, timeout=QUICK),
        lambda: alice_collection.remove(ddoc, timeout=QUICK),
        lambda: alice_collection.mutate_in(ddoc, [SD.upsert("by", "alice")], timeout=QUICK),
        lambda: alice_collection.touch(ddoc, timedelta(seconds=1), timeout=QUICK),
        lambda: alice_collection.get_and_lock(ddoc, timedelta(seconds=5), timeout=QUICK),
    ]
    for attempt in attempts:
        with pytest.raises(AuthenticationException) as raised:
            attempt()
        assert refused(raised.value), raised.value
    status, after = admin_view(settee, ddoc)
    assert status == 200, after
    assert after == before


def test_a_member_may_still_read_a_design_document_over_kv(alice_collection, ddoc):
    assert alice_collection.get(ddoc, GetOptions(timeout=QUICK)).content_as[dict]["by"] == "admin"


def test_the_admin_writes_design_documents_over_kv(settee, collection, ddoc):
    collection.upsert(ddoc, {"views": {}, "by": "admin over kv"})
    status, body = admin_view(settee, ddoc)
    assert status == 200, body
    assert body["by"] == "admin over kv"
    collection.mutate_in(ddoc, [SD.upsert("also", 1)])
    collection.remove(ddoc)
    status, _ = admin_view(settee, ddoc)
    assert status == 404
