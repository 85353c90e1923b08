"""The same documents through both doors: KV (the SDK) and the CouchDB HTTP API."""
import re
import urllib.parse

import pytest
from couchbase.exceptions import CasMismatchException, DocumentNotFoundException
from couchbase.options import ReplaceOptions

REV = re.compile(r"^(\d+)-[0-9a-f]+$")


def path(key):
    return "/default/" + urllib.parse.quote(key, safe="")


def http_get(settee, key):
    status, body = settee.http("GET", path(key))
    assert status == 200, body
    assert body["_id"] == key
    assert REV.match(body["_rev"]), body
    return body


def generation(rev):
    return int(REV.match(rev).group(1))


def body_without_meta(body):
    return {name: value for name, value in body.items() if name not in ("_id", "_rev")}


def changes(settee):
    status, body = settee.http("GET", "/default/_changes")
    assert status == 200, body
    return {row["id"]: row for row in body["results"]}


def test_an_sdk_upsert_is_readable_over_http_and_in_changes(settee, collection, key):
    document = {"name": "from the SDK", "n": 7, "nested": {"list": [1, "two", None]}, "ok": True}
    collection.upsert(key, document)
    body = http_get(settee, key)
    assert body_without_meta(body) == document
    row = changes(settee)[key]
    assert row["changes"] == [{"rev": body["_rev"]}]
    assert not row.get("deleted", False)


def test_an_http_put_is_readable_by_the_sdk_with_a_cas(settee, collection, key):
    document = {"name": "from HTTP", "n": 8, "list": [1, 2, 3]}
    status, created = settee.http("PUT", path(key), document)
    assert status == 201, created
    result = collection.get(key)
    assert result.cas != 0
    assert result.content_as[dict] == document


def test_every_mutation_through_either_door_changes_cas_and_rev(settee, collection, key):
    seen_cas = set()
    seen_revs = set()

    def sdk_state():
        result = collection.get(key)
        assert result.cas not in seen_cas, "CAS did not change"
        seen_cas.add(result.cas)
        return result

    def http_state():
        body = http_get(settee, key)
        assert body["_rev"] not in seen_revs, "_rev did not change"
        seen_revs.add(body["_rev"])
        return body

    # 1. SDK insert.
    collection.insert(key, {"step": 1})
    cas1 = sdk_state().cas
    rev1 = http_state()["_rev"]
    assert generation(rev1) == 1

    # 2. HTTP update.
    status, reply = settee.http("PUT", path(key), {"_rev": rev1, "step": 2})
    assert status == 201, reply
    result = sdk_state()
    assert result.content_as[dict] == {"step": 2}
    assert http_state()["_rev"] == reply["rev"]
    assert generation(reply["rev"]) == 2
    # The HTTP write made the SDK's old CAS stale.
    with pytest.raises(CasMismatchException):
        collection.replace(key, {"step": "lost"}, ReplaceOptions(cas=cas1))

    # 3. SDK replace with the current CAS.
    collection.replace(key, {"step": 3}, ReplaceOptions(cas=result.cas))
    sdk_state()
    body = http_state()
    assert body_without_meta(body) == {"step": 3}
    assert generation(body["_rev"]) == 3
    # The SDK write made the HTTP client's old revision stale.
    status, conflict = settee.http("PUT", path(key), {"_rev": reply["rev"], "step": "lost"})
    assert status == 409, conflict

    # 4. SDK upsert.
    collection.upsert(key, {"step": 4})
    sdk_state()
    body = http_state()
    assert body_without_meta(body) == {"step": 4}
    assert generation(body["_rev"]) == 4

    # 5. HTTP update again.
    status, reply = settee.http("PUT", path(key), {"_rev": body["_rev"], "step": 5})
    assert status == 201, reply
    assert sdk_state().content_as[dict] == {"step": 5}
    assert generation(http_state()["_rev"]) == 5


def test_an_sdk_remove_is_a_deletion_over_http(settee, collection, key):
    collection.upsert(key, {"v": 1})
    rev = http_get(settee, key)["_rev"]
    collection.remove(key)
    status, body = settee.http("GET", path(key))
    assert status == 404, body
    assert body["error"] == "not_found"
    row = changes(settee)[key]
    assert row.get("deleted") is True
    assert row["changes"][0]["rev"] != rev
    assert generation(row["changes"][0]["rev"]) == 2


def test_an_http_delete_is_document_not_found_for_the_sdk(settee, collection, key):
    status, created = settee.http("PUT", path(key), {"v": 1})
    assert status == 201, created
    cas = collection.get(key).cas
    status, deleted = settee.http("DELETE", path(key) + "?rev=" + created["rev"])
    assert status == 200, deleted
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)
    assert collection.exists(key).exists is False
    with pytest.raises(DocumentNotFoundException):
        collection.replace(key, {"v": 2}, ReplaceOptions(cas=cas))
