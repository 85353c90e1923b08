"""Authentication and bucket access: wrong passwords are refused; alice may use `default` only."""
from datetime import timedelta

import pytest
from couchbase.exceptions import AuthenticationException, BucketNotFoundException
from couchbase.options import GetOptions, UpsertOptions

from conftest import ALICE, wait_until_ready

QUICK = timedelta(seconds=3)


def test_a_wrong_password_is_refused_at_connect(settee):
    with pytest.raises(AuthenticationException):
        settee.connect(user=("admin", "not-the-password"), connect_timeout=QUICK)


def test_an_unknown_user_is_refused_at_connect(settee):
    with pytest.raises(AuthenticationException):
        settee.connect(user=("mallory", "secret"), connect_timeout=QUICK)


def test_alice_can_use_default(settee, key):
    cluster = settee.connect(user=ALICE)
    try:
        wait_until_ready(cluster)
        collection = cluster.bucket("default").default_collection()
        cas = collection.upsert(key, {"by": "alice"}).cas
        result = collection.get(key)
        assert result.content_as[dict] == {"by": "alice"}
        assert result.cas == cas
    finally:
        cluster.close()


def open_and_write(cluster, bucket_name, key):
    collection = cluster.bucket(bucket_name).default_collection()
    collection.upsert(key, {"by": "someone"}, UpsertOptions(timeout=QUICK))


def test_alice_cannot_use_private(settee, cluster, key):
    alice = settee.connect(user=ALICE)
    try:
        wait_until_ready(alice)
        # Couchbase answers a bucket the user may not access exactly like a missing bucket
        # (SELECT_BUCKET -> EACCESS), which the SDK reports as BucketNotFound.
        with pytest.raises(BucketNotFoundException):
            open_and_write(alice, "private", key)
        with pytest.raises(BucketNotFoundException):
            open_and_write(alice, "no-such-bucket", key)
    finally:
        alice.close()
    # Nothing was written to `private`; the admin can use it.
    private = cluster.bucket("private").default_collection()
    assert private.exists(key).exists is False
    private.upsert(key, {"by": "admin"})
    assert private.get(key).content_as[dict] == {"by": "admin"}


def test_alice_cannot_read_private_even_after_admin_writes(settee, cluster, key):
    cluster.bucket("private").default_collection().upsert(key, {"secret": True})
    alice = settee.connect(user=ALICE)
    try:
        with pytest.raises(BucketNotFoundException):
            alice.bucket("private").default_collection().get(key, GetOptions(timeout=QUICK))
    finally:
        alice.close()
