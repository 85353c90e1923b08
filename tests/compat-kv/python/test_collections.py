"""Scopes and collections (issue 19) through the official SDK: its collection manager creates a
scope and two collections on the management port; each collection takes CRUD, CAS,
sub-document lookups and mutations and expiry; the same key in two collections is two
documents; a dropped collection's documents are gone and its name comes back empty; an unknown
collection, scope or duplicate name gets the SDK's own error.

Against a cluster (SETTEE_CLUSTER), the SDK sends each manager request to any node, and the
other nodes follow a change after the answer, as Couchbase Server's do (ns_server answers
`GET .../scopes` from the node's copy of the manifest, and each node's data service gets the
new manifest after the change is committed): before reading what a change made, from another
node through the manager or over KV, the tests wait until every node's management port shows it.
"""
import time
import uuid
from datetime import timedelta

import pytest
import couchbase.subdocument as SD
from couchbase.exceptions import (CasMismatchException, CollectionAlreadyExistsException,
                                  CollectionNotFoundException, DocumentExistsException,
                                  DocumentNotFoundException, ScopeAlreadyExistsException,
                                  ScopeNotFoundException, UnAmbiguousTimeoutException)
from couchbase.management.collections import CreateCollectionSettings
from couchbase.options import GetOptions, ReplaceOptions, UpsertOptions

from conftest import wait_for_scope

TWO_SECONDS = timedelta(seconds=2)
WAIT_S = 3.5


def wait_for_collection(bucket, scope, name):
    """The SDK learns a new collection's id on first use; this reads one key until it has."""
    collection = bucket.scope(scope).collection(name)
    collection.exists("probe")
    return collection


@pytest.fixture(scope="module")
def inventory(settee, bucket):
    """Scope `inv-<random>` with collections `airline` and `route`, made by the SDK."""
    manager = bucket.collections()
    scope = f"inv-{uuid.uuid4().hex[:8]}"
    manager.create_scope(scope)
    manager.create_collection(scope, "airline", CreateCollectionSettings(max_expiry=timedelta(hours=1)))
    manager.create_collection(scope, "route")
    wait_for_scope(settee, scope, {"airline", "route"})
    return scope


def test_the_manager_lists_what_it_created(bucket, inventory):
    manager = bucket.collections()
    scopes = {scope.name: scope for scope in manager.get_all_scopes()}
    assert "_default" in scopes
    names = {collection.name: collection for collection in scopes[inventory].collections}
    assert set(names) == {"airline", "route"}
    assert names["airline"].max_expiry == timedelta(hours=1)
    with pytest.raises(ScopeAlreadyExistsException):
        manager.create_scope(inventory)
    with pytest.raises(CollectionAlreadyExistsException):
        manager.create_collection(inventory, "route")
    with pytest.raises(ScopeNotFoundException):
        manager.create_collection("no-such-scope", "c")
    with pytest.raises(CollectionNotFoundException):
        manager.drop_collection(inventory, "no-such-collection")
    with pytest.raises(ScopeNotFoundException):
        manager.drop_scope("no-such-scope")


def test_crud_cas_subdoc_and_expiry_in_each_collection(bucket, inventory, key):
    collections = [wait_for_collection(bucket, inventory, name) for name in ("airline", "route")]
    for collection in collections:
        name = collection.name
        created = collection.insert(key, {"in": name, "n": 1})
        with pytest.raises(DocumentExistsException):
            collection.insert(key, {"again": True})
        got = collection.get(key)
        assert got.content_as[dict] == {"in": name, "n": 1}
        assert got.cas == created.cas
        replaced = collection.replace(key, {"in": name, "n": 2}, ReplaceOptions(cas=got.cas))
        with pytest.raises(CasMismatchException):
            collection.replace(key, {"stale": True}, ReplaceOptions(cas=got.cas))
        looked = collection.lookup_in(key, [SD.get("in"), SD.exists("n")])
        assert looked.content_as[str](0) == name
        assert looked.exists(1)
        mutated = collection.mutate_in(key, [SD.upsert("extra", name), SD.increment("n", 5)])
        assert mutated.cas not in (0, replaced.cas)
        assert collection.get(key).content_as[dict] == {"in": name, "n": 7, "extra": name}
        collection.upsert(key + "::expiring", {"in": name}, UpsertOptions(expiry=TWO_SECONDS))
        with_expiry = collection.get(key + "::expiring", GetOptions(with_expiry=True))
        assert with_expiry.expiry_time is not None
        collection.upsert(key + "::removed", {"in": name})
        collection.remove(key + "::removed")
        with pytest.raises(DocumentNotFoundException):
            collection.get(key + "::removed")

    # The same key in the default collection and the two others: three documents.
    default = bucket.default_collection()
    with pytest.raises(DocumentNotFoundException):
        default.get(key)
    default.upsert(key, {"in": "_default"})
    assert [c.get(key).content_as[dict]["in"] for c in collections] == ["airline", "route"]
    assert default.get(key).content_as[dict] == {"in": "_default"}

    time.sleep(WAIT_S)
    for collection in collections:
        with pytest.raises(DocumentNotFoundException):
            collection.get(key + "::expiring")
        assert collection.get(key).content_as[dict]["in"] == collection.name


def test_the_couchdb_door_shows_each_collection_as_a_database(settee, bucket, inventory, key):
    """docs/format/collections.md: `bucket$scope$collection` on the HTTP door holds exactly the
    documents the SDK wrote into that collection."""
    airline = wait_for_collection(bucket, inventory, "airline")
    route = wait_for_collection(bucket, inventory, "route")
    airline.upsert(key, {"door": "kv", "in": "airline"})
    route.upsert(key, {"door": "kv", "in": "route"})
    db = f"/default${inventory}$airline"
    status, body = settee.http("GET", f"{db}/{key}")
    assert status == 200, body
    assert (body["_id"], body["in"]) == (key, "airline")
    status, changes = settee.http("GET", f"{db}/_changes")
    assert status == 200, changes
    ids = {row["id"] for row in changes["results"]}
    assert key in ids
    status, default_changes = settee.http("GET", "/default/_changes")
    assert status == 200
    assert all(row["id"] != key for row in default_changes["results"])
    # An HTTP write into the collection is the SDK's document.
    status, put = settee.http("PUT", f"{db}/{key}::http", {"door": "http"})
    assert status == 201, put
    assert airline.get(key + "::http").content_as[dict] == {"door": "http"}
    status, dbs = settee.http("GET", "/_all_dbs")
    assert f"default${inventory}$airline" in dbs and f"default${inventory}$route" in dbs


def test_a_dropped_collection_comes_back_empty(settee, bucket, key):
    manager = bucket.collections()
    scope = f"drop-{uuid.uuid4().hex[:8]}"
    manager.create_scope(scope)
    manager.create_collection(scope, "temp")
    collection = wait_for_collection(bucket, scope, "temp")
    collection.upsert(key, {"v": "before"})
    assert collection.get(key).content_as[dict] == {"v": "before"}

    manager.drop_collection(scope, "temp")
    wait_for_scope(settee, scope, set())
    gone = bucket.scope(scope).collection("temp")
    with pytest.raises((CollectionNotFoundException, DocumentNotFoundException)) as raised:
        gone.get(key)
    assert raised.type is CollectionNotFoundException

    manager.create_collection(scope, "temp")
    again = wait_for_collection(bucket, scope, "temp")
    with pytest.raises(DocumentNotFoundException):
        again.get(key)
    again.upsert(key, {"v": "after"})
    assert again.get(key).content_as[dict] == {"v": "after"}


def test_unknown_scopes_and_collections_are_answered_as_unknown(bucket, key):
    """The door answers UNKNOWN_SCOPE / UNKNOWN_COLLECTION (GET_COLLECTION_ID and data requests
    alike). An unknown scope is this SDK's ScopeNotFoundException at once. For a collection
    name it never resolved, the SDK (its C++ core) treats the collection as not created yet and
    retries with the reason `key_value_collection_outdated` until its timeout, as against
    Couchbase Server; the reason shows the door said "unknown collection"."""
    with pytest.raises(ScopeNotFoundException):
        bucket.scope("no-such-scope").collection("c").get(key)
    with pytest.raises(ScopeNotFoundException):
        bucket.scope("no-such-scope").collection("c").upsert(key, {"v": 1})
    with pytest.raises((CollectionNotFoundException, UnAmbiguousTimeoutException)) as raised:
        bucket.scope("_default").collection("no-such-collection").get(key)
    if raised.type is UnAmbiguousTimeoutException:
        assert "key_value_collection_outdated" in str(raised.value)
