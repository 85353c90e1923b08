"""validate_doc_update on the KV door (issue 22, point 1): a design document written through the
CouchDB door validates the SDK's writes to the same collection too, with the SDK user as
userCtx: upserts, inserts, replaces, removes, counters and sub-document mutations are refused
with EACCESS (the function's reason in the error context), and allowed writes go through.
"""
import uuid

import pytest
import couchbase.subdocument as SD
from couchbase.exceptions import CouchbaseException, DocumentNotFoundException

from conftest import wait_for_scope

ADMIN_NAME = "admin"  # conftest.ADMIN, the user the SDK connects as

VALIDATE = """function (newDoc, oldDoc, userCtx) {
  if (newDoc._deleted) {
    if (oldDoc && oldDoc.keep) { throw({forbidden: 'kept'}); }
    return;
  }
  if (newDoc.owner !== userCtx.name) { throw({forbidden: 'owner must be ' + userCtx.name}); }
  if (oldDoc && oldDoc.frozen) { throw({unauthorized: 'frozen'}); }
}"""


@pytest.fixture(scope="module")
def validated(bucket, settee):
    """A collection whose design document validates every write."""
    manager = bucket.collections()
    scope = f"vdu-{uuid.uuid4().hex[:8]}"
    manager.create_scope(scope)
    manager.create_collection(scope, "c")
    # In a cluster, the collection's database on node 1 (the HTTP door below) once it follows.
    wait_for_scope(settee, scope, {"c"})
    collection = bucket.scope(scope).collection("c")
    collection.exists("probe")
    status, body = settee.http("PUT", f"/default${scope}$c/_design/rules",
                               {"validate_doc_update": VALIDATE})
    assert status == 201, body
    return collection, scope


def refused(error, reason):
    """EACCESS (36), as Couchbase refuses a write the user may not make; the SDK shows the
    status, not the reason the function gave (the HTTP door's 403 body carries it)."""
    text = str(error.value)
    assert "'status_code': 36" in text, f"{reason}: {text}"


def test_sdk_writes_are_validated_with_the_sdk_user_as_user_ctx(validated, key, settee):
    validated, scope = validated
    with pytest.raises(CouchbaseException) as error:
        validated.upsert(key, {"owner": "someone else"})
    refused(error, f"forbidden: owner must be {ADMIN_NAME}")
    with pytest.raises(DocumentNotFoundException):
        validated.get(key)
    validated.upsert(key, {"owner": ADMIN_NAME, "keep": True})
    with pytest.raises(CouchbaseException) as error:
        validated.replace(key, {"owner": "nobody"})
    refused(error, "owner must be")
    with pytest.raises(CouchbaseException) as error:
        validated.mutate_in(key, [SD.upsert("owner", "nobody")])
    refused(error, "owner must be")
    validated.mutate_in(key, [SD.upsert("extra", 1)])
    # The old document is given: a kept one cannot be removed.
    with pytest.raises(CouchbaseException) as error:
        validated.remove(key)
    refused(error, "forbidden: kept")
    assert validated.get(key).content_as[dict] == {"owner": ADMIN_NAME, "keep": True,
                                                   "extra": 1}
    validated.upsert(key + "::frozen", {"owner": ADMIN_NAME, "frozen": True})
    with pytest.raises(CouchbaseException) as error:
        validated.upsert(key + "::frozen", {"owner": ADMIN_NAME})
    refused(error, "unauthorized: frozen")
    # A counter's value is not an object with an owner: refused too.
    with pytest.raises(CouchbaseException):
        validated.binary().increment(key + "::counter")
    # The HTTP door sees what the function allowed.
    status, body = settee.http("GET", f"/default${scope}$c/{key}")
    assert status == 200 and body["extra"] == 1, body
