"""Issue 18 point 2: the KV door obeys the same document limits as the HTTP door
(`--max-document-size`, 8,000,000 bytes; `--max-json-depth`, 100 levels). 30733d8 stored 9, 15
and 19.9 MB values and a 100,000-deep one over KV, and such a document then broke every view
of the bucket and every replication from it. Now the SDK gets the error, nothing is stored, and
views and replication go on."""
import time

import pytest
import couchbase.subdocument as SD
from couchbase.exceptions import CouchbaseException, InvalidArgumentException
from couchbase.options import UpsertOptions
from couchbase.transcoder import RawJSONTranscoder

DOC_BYTES_MAX = 8_000_000
JSON_DEPTH_MAX = 100


def padded(total_bytes):
    """A JSON object of exactly `total_bytes` bytes."""
    return '{"pad":"' + "a" * (total_bytes - len('{"pad":""}')) + '"}'


def nested(depth):
    return "[" * depth + "]" * depth


def assert_not_stored(settee, collection, key):
    assert not collection.exists(key).exists
    status, _ = settee.http("GET", f"/default/{key}")
    assert status == 404


# The SDK has no exception class of its own for E2BIG: a CouchbaseException whose error code is
# the core's errc::key_value::value_too_large, with the server's status in its context.
VALUE_TOO_LARGE = 104
E2BIG = 3


def value_too_large(error):
    return error.error_code == VALUE_TOO_LARGE and f"'status_code': {E2BIG}" in str(error.context)


@pytest.mark.parametrize("size", [9_000_000, 15_000_000, 19_900_000])
def test_a_value_past_the_document_limit_is_refused_and_nothing_stored(settee, collection, key, size):
    with pytest.raises(CouchbaseException) as refused:
        collection.upsert(key, padded(size), UpsertOptions(transcoder=RawJSONTranscoder()))
    assert value_too_large(refused.value), refused.value
    assert_not_stored(settee, collection, key)


def test_a_value_at_the_limits_is_stored(settee, collection, key):
    collection.upsert(key, padded(DOC_BYTES_MAX), UpsertOptions(transcoder=RawJSONTranscoder()))
    assert len(collection.get(key, transcoder=RawJSONTranscoder()).value) == DOC_BYTES_MAX
    collection.upsert(key, nested(JSON_DEPTH_MAX), UpsertOptions(transcoder=RawJSONTranscoder()))
    collection.remove(key)


@pytest.mark.parametrize("depth", [JSON_DEPTH_MAX + 1, 100_000])
def test_a_value_nested_past_the_depth_limit_is_refused(settee, collection, key, depth):
    with pytest.raises(InvalidArgumentException):
        collection.upsert(key, nested(depth), UpsertOptions(transcoder=RawJSONTranscoder()))
    assert_not_stored(settee, collection, key)


@pytest.mark.parametrize(
    "value",
    ['{"$serde_json::private::RawValue":2}', '{"a":{"\\u0024serde_json::private::RawValue":"x"}}'],
    ids=["plain", "escaped"],
)
def test_a_value_naming_serde_jsons_raw_value_marker_is_refused(settee, collection, key, value):
    """Found by the kv_values fuzz target: no reader of the stored document could parse it."""
    with pytest.raises(InvalidArgumentException):
        collection.upsert(key, value, UpsertOptions(transcoder=RawJSONTranscoder()))
    assert_not_stored(settee, collection, key)
    # The same words as a string value, or in a document id, are only a string: such a
    # document is stored, listed and written over both doors.
    marker_id = f"{key}::$serde_json::private::RawValue"
    collection.upsert(marker_id, {"a": "$serde_json::private::RawValue"})
    assert collection.get(marker_id).content_as[dict] == {"a": "$serde_json::private::RawValue"}
    status, body = settee.http("POST", "/default/_all_docs", {"keys": [marker_id]})
    assert status == 200, body
    assert [row["id"] for row in body["rows"]] == [marker_id]
    status, body = settee.http("POST", "/default/_bulk_docs", {"docs": [{"_id": marker_id + "2"}]})
    assert status == 201 and body[0].get("ok") is True, body
    collection.remove(marker_id)
    collection.remove(marker_id + "2")


def test_append_cannot_grow_a_value_past_the_limit(settee, collection, key):
    collection.upsert(key, padded(DOC_BYTES_MAX - 10), UpsertOptions(transcoder=RawJSONTranscoder()))
    binary = collection.binary()
    with pytest.raises(CouchbaseException) as refused:
        binary.append(key, b"0123456789abcdef")
    assert value_too_large(refused.value), refused.value
    assert len(collection.get(key, transcoder=RawJSONTranscoder()).value) == DOC_BYTES_MAX - 10
    collection.remove(key)


def test_a_sub_document_mutation_cannot_grow_a_document_past_the_limit(settee, collection, key):
    collection.upsert(key, {"pad": "a" * (DOC_BYTES_MAX - 100_000)})
    with pytest.raises(CouchbaseException) as refused:
        collection.mutate_in(key, [SD.upsert("more", "b" * 200_000)])
    assert value_too_large(refused.value), refused.value
    assert "more" not in collection.get(key).content_as[dict]
    collection.remove(key)


def test_views_and_replication_go_on_after_refused_values(settee, collection, key):
    # What 30733d8 accepted, and what then broke every view and replication of the bucket.
    for value in (padded(9_000_000), nested(100_000)):
        with pytest.raises(CouchbaseException):
            collection.upsert(key + "::bad", value, UpsertOptions(transcoder=RawJSONTranscoder()))
    for n in range(5):
        collection.upsert(f"{key}::{n}", {"kind": "limits-test", "n": n})
    status, body = settee.http("PUT", "/default/_design/limits", {"views": {
        "by_n": {"map": "function (doc) { if (doc.kind === 'limits-test') emit(doc.n, null); }"}}})
    assert status == 201, body
    status, body = settee.http("GET", "/default/_design/limits/_view/by_n")
    assert status == 200, body
    assert [row["key"] for row in body["rows"]] == list(range(5))

    target = f"limits-copy-{time.time_ns()}"
    url = f"http://admin:secret@127.0.0.1:{settee.http_port}"
    status, body = settee.http("POST", "/_replicate", {
        "source": f"{url}/default", "target": f"{url}/{target}", "create_target": True})
    assert status == 200, body
    assert body["ok"] is True
    for n in range(5):
        status, _ = settee.http("GET", f"/{target}/{key}::{n}")
        assert status == 200
    status, _ = settee.http("GET", f"/{target}/{key}::bad")
    assert status == 404
