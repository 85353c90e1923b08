"""Expiry: documents written with a 2 s expiry are gone after ~3 s; touch and get_and_touch set it.

One scenario with a single sleep keeps the suite fast: every document is prepared first, then
the test waits once and checks each of them.
"""
import time
import urllib.parse
from datetime import timedelta

import pytest
from couchbase.exceptions import DocumentNotFoundException
from couchbase.options import InsertOptions, ReplaceOptions, UpsertOptions

TWO_SECONDS = timedelta(seconds=2)
WAIT_S = 3.5


def test_expiry_touch_and_get_and_touch(settee, collection, key):
    expiring = key + "::expiring"
    inserted = key + "::inserted"
    replaced = key + "::replaced"
    touched = key + "::touched"
    get_and_touched = key + "::get-and-touched"
    cleared = key + "::cleared"
    forever = key + "::forever"
    # 31 days: the SDK sends an absolute Unix time (anything over 30 days is absolute).
    month = key + "::month"

    collection.upsert(expiring, {"k": "expiring"}, UpsertOptions(expiry=TWO_SECONDS))
    collection.insert(inserted, {"k": "inserted"}, InsertOptions(expiry=TWO_SECONDS))
    collection.upsert(replaced, {"k": "replaced", "v": 1})
    collection.replace(replaced, {"k": "replaced", "v": 2}, ReplaceOptions(expiry=TWO_SECONDS))

    created = collection.upsert(touched, {"k": "touched"}, UpsertOptions(expiry=TWO_SECONDS))
    touch = collection.touch(touched, timedelta(seconds=60))
    assert touch.cas not in (0, created.cas)

    collection.upsert(get_and_touched, {"k": "get-and-touched"})
    result = collection.get_and_touch(get_and_touched, TWO_SECONDS)
    assert result.content_as[dict] == {"k": "get-and-touched"}
    assert result.cas != 0

    # A plain upsert without expiry resets the expiry to "never" (Couchbase semantics).
    collection.upsert(cleared, {"k": "cleared", "v": 1}, UpsertOptions(expiry=TWO_SECONDS))
    collection.upsert(cleared, {"k": "cleared", "v": 2})
    collection.upsert(forever, {"k": "forever"})
    collection.upsert(month, {"k": "month"}, UpsertOptions(expiry=timedelta(days=31)))

    # Still there right after being written.
    for live in (expiring, inserted, replaced, touched, get_and_touched, cleared, forever, month):
        assert collection.exists(live).exists, live

    time.sleep(WAIT_S)

    for gone in (expiring, inserted, replaced, get_and_touched):
        with pytest.raises(DocumentNotFoundException):
            collection.get(gone)
        assert collection.exists(gone).exists is False, gone
        # Expired through the KV door means gone through the HTTP door too.
        status, body = settee.http("GET", "/default/" + urllib.parse.quote(gone, safe=""))
        assert status == 404, (gone, body)
    assert collection.get(touched).content_as[dict] == {"k": "touched"}
    status, body = settee.http("GET", "/default/" + urllib.parse.quote(touched, safe=""))
    assert status == 200 and body["k"] == "touched", body
    assert collection.get(cleared).content_as[dict] == {"k": "cleared", "v": 2}
    assert collection.get(forever).content_as[dict] == {"k": "forever"}
    assert collection.get(month).content_as[dict] == {"k": "month"}


def test_an_expired_key_can_be_inserted_again(collection, key):
    collection.upsert(key, {"v": 1}, UpsertOptions(expiry=timedelta(seconds=1)))
    time.sleep(2.5)
    collection.insert(key, {"v": 2})
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_touch_and_get_and_touch_of_a_missing_key_are_document_not_found(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.touch(key, TWO_SECONDS)
    with pytest.raises(DocumentNotFoundException):
        collection.get_and_touch(key, TWO_SECONDS)
