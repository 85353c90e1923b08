"""Pessimistic locking: get_and_lock, mutations blocked without the lock CAS, unlock, lock timeout.

Against Couchbase Server a mutation of a locked document answers LOCKED (or TMPFAIL for old
clients); the SDK retries it (reason kv_locked / kv_temporary_failure) until its timeout, so what
the application sees is a timeout naming that retry reason, or DocumentLocked / TemporaryFail.
"""
import time
from datetime import timedelta

import pytest
from couchbase.exceptions import (AmbiguousTimeoutException, CasMismatchException, DocumentLockedException,
                                  DocumentNotFoundException, TemporaryFailException,
                                  UnAmbiguousTimeoutException)
from couchbase.options import (GetAndLockOptions, IncrementOptions, RemoveOptions, ReplaceOptions, TouchOptions,
                               UpsertOptions)

LOCK_TIME = timedelta(seconds=15)
SHORT = timedelta(seconds=1)
# How long an operation expected to be refused may keep retrying.
REFUSE = timedelta(milliseconds=500)


def assert_refused_as_locked(operation):
    with pytest.raises((DocumentLockedException, TemporaryFailException,
                        AmbiguousTimeoutException, UnAmbiguousTimeoutException)) as caught:
        operation()
    if isinstance(caught.value, (AmbiguousTimeoutException, UnAmbiguousTimeoutException)):
        reasons = caught.value.error_context.retry_reasons or set()
        assert reasons & {"key_value_locked", "key_value_temporary_failure"}, repr(caught.value)


def test_mutations_without_the_lock_cas_fail_and_unlock_with_it_works(collection, key):
    before = collection.upsert(key, {"v": "original"}).cas
    locked = collection.get_and_lock(key, LOCK_TIME)
    assert locked.content_as[dict] == {"v": "original"}
    assert locked.cas not in (0, before)

    assert_refused_as_locked(lambda: collection.upsert(key, {"v": "upsert"}, UpsertOptions(timeout=REFUSE)))
    assert_refused_as_locked(lambda: collection.replace(key, {"v": "replace"}, ReplaceOptions(timeout=REFUSE)))
    assert_refused_as_locked(
        lambda: collection.replace(key, {"v": "old cas"}, ReplaceOptions(cas=before, timeout=REFUSE)))
    assert_refused_as_locked(lambda: collection.remove(key, RemoveOptions(timeout=REFUSE)))
    assert_refused_as_locked(lambda: collection.get_and_lock(key, LOCK_TIME, GetAndLockOptions(timeout=REFUSE)))
    assert_refused_as_locked(lambda: collection.touch(key, timedelta(seconds=60), TouchOptions(timeout=REFUSE)))
    assert_refused_as_locked(lambda: collection.binary().increment(key, IncrementOptions(timeout=REFUSE)))

    # A plain read still works while locked, and does not reveal the lock CAS.
    during = collection.get(key)
    assert during.content_as[dict] == {"v": "original"}
    assert during.cas != locked.cas

    collection.unlock(key, locked.cas)
    after = collection.upsert(key, {"v": "after unlock"}, UpsertOptions(timeout=SHORT))
    assert after.cas != 0
    assert collection.get(key).content_as[dict] == {"v": "after unlock"}


def test_replace_with_the_lock_cas_succeeds_and_releases_the_lock(collection, key):
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, LOCK_TIME)
    replaced = collection.replace(key, {"v": 2}, ReplaceOptions(cas=locked.cas))
    assert replaced.cas not in (0, locked.cas)
    collection.upsert(key, {"v": 3}, UpsertOptions(timeout=SHORT))
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_remove_with_the_lock_cas_succeeds(collection, key):
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, LOCK_TIME)
    collection.remove(key, RemoveOptions(cas=locked.cas))
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_unlock_with_a_wrong_cas_is_cas_mismatch(collection, key):
    collection.upsert(key, {"v": 1})
    locked = collection.get_and_lock(key, LOCK_TIME)
    with pytest.raises(CasMismatchException):
        collection.unlock(key, locked.cas + 1)
    # Still locked.
    assert_refused_as_locked(lambda: collection.upsert(key, {"v": 2}, UpsertOptions(timeout=REFUSE)))
    collection.unlock(key, locked.cas)


def test_a_lock_times_out(collection, key):
    collection.upsert(key, {"v": 1})
    collection.get_and_lock(key, timedelta(seconds=2))
    assert_refused_as_locked(lambda: collection.upsert(key, {"v": "locked"}, UpsertOptions(timeout=REFUSE)))
    time.sleep(3)
    collection.upsert(key, {"v": 2}, UpsertOptions(timeout=SHORT))
    assert collection.get(key).content_as[dict] == {"v": 2}
    # And the document can be locked again.
    relocked = collection.get_and_lock(key, timedelta(seconds=1), GetAndLockOptions(timeout=SHORT))
    assert relocked.content_as[dict] == {"v": 2}
    collection.unlock(key, relocked.cas)


def test_get_and_lock_of_a_missing_key_is_document_not_found(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.get_and_lock(key, LOCK_TIME)
