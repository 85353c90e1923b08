"""View queries from the SDK (`bucket.view_query`): the cluster map names the `capi` service, which
is settee's CouchDB HTTP door, and the same indexer answers as for `GET /db/_design/.../_view/...`."""
from couchbase.management.views import DesignDocumentNamespace
from couchbase.options import ViewOptions


def test_view_query_reads_the_index_built_from_sdk_writes(settee, collection, bucket):
    for n in range(10):
        collection.upsert(f"view::{n}", {"kind": "view-test", "n": n, "even": n % 2 == 0})
    status, body = settee.http("PUT", "/default/_design/sdk", {"views": {
        "by_n": {"map": "function (doc) { if (doc.kind === 'view-test') { emit(doc.n, doc.even); } }"},
        "count": {"map": "function (doc) { if (doc.kind === 'view-test') { emit(doc.even, 1); } }", "reduce": "_count"},
    }})
    assert status == 201, body

    result = bucket.view_query("sdk", "by_n", ViewOptions(namespace=DesignDocumentNamespace.PRODUCTION))
    rows = list(result.rows())
    assert [row.key for row in rows] == list(range(10))
    assert [row.id for row in rows] == [f"view::{n}" for n in range(10)]
    assert rows[3].value is False

    ranged = bucket.view_query("sdk", "by_n", ViewOptions(
        namespace=DesignDocumentNamespace.PRODUCTION, startkey=2, endkey=4, descending=False))
    assert [row.key for row in ranged.rows()] == [2, 3, 4]

    grouped = bucket.view_query("sdk", "count", ViewOptions(
        namespace=DesignDocumentNamespace.PRODUCTION, group=True))
    assert [(row.key, row.value) for row in grouped.rows()] == [(False, 5), (True, 5)]

    # The same index over the CouchDB door.
    status, body = settee.http("GET", "/default/_design/sdk/_view/by_n?limit=2")
    assert status == 200, body
    assert [row["id"] for row in body["rows"]] == ["view::0", "view::1"]
