"""Issue 18 (leftovers, point 4): the HTTP door shows a `_replicator` document without its
credentials to a member who is neither its owner nor a database admin (CouchDB's
`after_doc_read`). The KV door reads stored bodies as they are and cannot hide anything in them,
so over KV only database admins read replication documents: a member's get and lookup_in are
refused with EACCESS (status 36, which the SDK raises as AuthenticationException), even of her
own document. The admin reads them over KV whole; design documents stay readable."""
import time
from datetime import timedelta

import couchbase.subdocument as SD
import pytest
from couchbase.exceptions import AuthenticationException
from couchbase.options import GetOptions, LookupInOptions

from conftest import ALICE, wait_until_ready

QUICK = timedelta(seconds=3)
EACCESS = 0x24
SECRET = "s3cret"


def refused(error):
    """The SDK's report of an EACCESS answer (not a timeout, not a retry)."""
    return f"'status_code': {EACCESS}" in str(error)


@pytest.fixture
def replication(settee):
    """A replication document alice wrote over HTTP, naming a peer with her password.

    In a cluster (SETTEE_CLUSTER) each node has its own `_replicator` (ARCHITECTURE.md: not in
    the cluster map), and the SDK opens the bucket on any node: the security object and the
    documents are written on every node."""
    members = {"members": {"names": ["alice"], "roles": []}, "admins": {"names": [], "roles": []}}
    doc_id = f"alices-{time.time_ns()}"
    doc = {
        # Port 1 refuses connections: the replication never reaches anything.
        "source": f"http://alice:{SECRET}@127.0.0.1:1/source-db",
        "target": "http://127.0.0.1:1/target-db",
    }
    for node in settee.nodes:
        status, body = node.http("PUT", "/_replicator/_security", members)
        assert status == 200, body
        status, body = node.http("PUT", f"/_replicator/{doc_id}", doc, user=ALICE)
        assert status == 201, body
        status, body = node.http("PUT", "/_replicator/_design/kv-readable", {"views": {}})
        assert status in (201, 409), body
    return doc_id


def collection_of(settee, user):
    cluster = settee.connect(user=user)
    wait_until_ready(cluster)
    return cluster, cluster.bucket("_replicator").default_collection()


def test_a_member_reads_no_replication_document_over_kv(settee, replication):
    cluster, collection = collection_of(settee, ALICE)
    try:
        attempts = [
            lambda: collection.get(replication, GetOptions(timeout=QUICK)),
            lambda: collection.lookup_in(
                replication, [SD.get("source")], LookupInOptions(timeout=QUICK)),
        ]
        for attempt in attempts:
            with pytest.raises(AuthenticationException) as raised:
                attempt()
            assert refused(raised.value), raised.value
        # Design documents hold no credentials.
        assert collection.get("_design/kv-readable", GetOptions(timeout=QUICK)).content_as[dict]
    finally:
        cluster.close()
    # Over HTTP she reads her own document whole.
    status, body = settee.http("GET", f"/_replicator/{replication}", user=ALICE)
    assert status == 200, body
    assert SECRET in body["source"]


def test_the_admin_reads_replication_documents_over_kv(settee, replication):
    cluster, replicator = collection_of(settee, ("admin", "secret"))
    try:
        doc = replicator.get(replication).content_as[dict]
        assert SECRET in doc["source"]
        assert doc["owner"] == "alice"
    finally:
        cluster.close()
