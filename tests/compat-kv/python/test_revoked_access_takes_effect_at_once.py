"""Issue 18 point 6: a change to `_security` or to `_users` counts from the next request on an
open KV connection, as an RBAC change does on Couchbase Server (EACCESS, status 36, which the
SDK raises as AuthenticationException). Removed from `_security`, the user's open connection
can neither read nor write; put back, it can again. Deleted, the account's connection is over
and its credentials open no new one; re-created, the user connects again."""
import time
from datetime import timedelta

import pytest
from couchbase.exceptions import AuthenticationException, CouchbaseException
from couchbase.options import GetOptions, UpsertOptions

from conftest import expect, logs_in, wait_for_every, wait_until_ready

QUICK = timedelta(seconds=3)
EACCESS = 0x24


def refused(error):
    return f"'status_code': {EACCESS}" in str(error)


# Accounts are the cluster's (`_users` has a copy on every node): in a cluster (SETTEE_CLUSTER)
# an account is made or deleted through node 1 and counts on another node once its copy has the
# change, so each helper returns when every node's HTTP door agrees.
def make_user(settee, name, password):
    expect(settee.http("PUT", f"/_users/org.couchdb.user:{name}",
                       {"name": name, "password": password, "roles": [], "type": "user"}), 201, 202)
    wait_for_every(settee.nodes, f"{name} to log in", lambda node: logs_in(node, name, password))


def delete_user(settee, name, password):
    status, body = settee.http("GET", f"/_users/org.couchdb.user:{name}")
    assert status == 200, body
    expect(settee.http("DELETE", f"/_users/org.couchdb.user:{name}?rev={body['_rev']}"), 200, 202)
    wait_for_every(settee.nodes, f"{name} to be gone", lambda node: not logs_in(node, name, password))


def set_members(settee, db, names):
    expect(settee.http("PUT", f"/{db}/_security",
                       {"admins": {"names": [], "roles": []},
                        "members": {"names": names, "roles": []}}), 200)


@pytest.fixture
def user_and_db(settee):
    suffix = time.time_ns()
    name, db = f"carol{suffix}", f"revocable{suffix}"
    make_user(settee, name, "carolpw")
    expect(settee.http("PUT", f"/{db}"), 201)
    # In a cluster, once every node serves it (as conftest waits for its databases).
    wait_for_every(settee.nodes, f"database {db}", lambda node: node.http("GET", f"/{db}")[0] == 200)
    set_members(settee, db, [name])
    yield name, db
    settee.http("DELETE", f"/{db}")


def connect(settee, name, password, db):
    cluster = settee.connect(user=(name, password), connect_timeout=QUICK)
    wait_until_ready(cluster)
    return cluster, cluster.bucket(db).default_collection()


def assert_refused(operation):
    with pytest.raises(AuthenticationException) as raised:
        operation()
    assert refused(raised.value), raised.value


def test_removal_from_security_stops_an_open_connection_at_once(settee, user_and_db):
    name, db = user_and_db
    cluster, collection = connect(settee, name, "carolpw", db)
    try:
        collection.upsert("k", {"n": 1})
        assert collection.get("k").content_as[dict] == {"n": 1}
        set_members(settee, db, ["someone-else"])
        assert_refused(lambda: collection.get("k", GetOptions(timeout=QUICK)))
        assert_refused(lambda: collection.upsert("k", {"n": 2}, UpsertOptions(timeout=QUICK)))
        status, body = settee.http("GET", f"/{db}/k")
        assert status == 200 and body["n"] == 1, body
        # Put back, the user works again (the connection derives its access anew).
        set_members(settee, db, [name])
        collection.upsert("k", {"n": 3}, UpsertOptions(timeout=QUICK))
        assert collection.get("k", GetOptions(timeout=QUICK)).content_as[dict] == {"n": 3}
    finally:
        cluster.close()


def test_a_deleted_user_loses_an_open_connection_and_cannot_reconnect(settee, user_and_db):
    name, db = user_and_db
    cluster, collection = connect(settee, name, "carolpw", db)
    try:
        collection.upsert("k", {"n": 1})
        delete_user(settee, name, "carolpw")
        assert_refused(lambda: collection.get("k", GetOptions(timeout=QUICK)))
        assert_refused(lambda: collection.upsert("k", {"n": 2}, UpsertOptions(timeout=QUICK)))
    finally:
        cluster.close()
    with pytest.raises(CouchbaseException):
        connect(settee, name, "carolpw", db)[0].close()
    status, body = settee.http("GET", f"/{db}/k")
    assert status == 200 and body["n"] == 1, body
    # Re-created (a new password), the user authenticates again and works.
    make_user(settee, name, "carolpw2")
    cluster, collection = connect(settee, name, "carolpw2", db)
    try:
        collection.upsert("k", {"n": 4})
        assert collection.get("k").content_as[dict] == {"n": 4}
    finally:
        cluster.close()
