"""Bootstrap: connect, open a bucket, reach its default collection, wait until ready, ping."""
from couchbase.diagnostics import PingState, ServiceType
from couchbase.options import PingOptions

from conftest import wait_until_ready


def test_connect_open_bucket_and_wait_until_ready(settee):
    cluster = settee.connect()
    try:
        wait_until_ready(cluster)
        bucket = cluster.bucket("default")
        assert bucket.name == "default"
        collection = bucket.default_collection()
        assert collection.name == "_default"
        collection.upsert("py::bootstrap", {"ready": True})
        assert collection.get("py::bootstrap").content_as[dict] == {"ready": True}
    finally:
        cluster.close()


def test_bucket_ping_reports_the_kv_endpoint_ok(bucket):
    report = bucket.ping(PingOptions(service_types=[ServiceType.KeyValue]))
    endpoints = report.endpoints[ServiceType.KeyValue]
    assert len(endpoints) >= 1
    assert all(endpoint.state == PingState.OK for endpoint in endpoints), endpoints


def test_bucket_with_8_vbuckets_serves_every_key(cluster):
    # 200 keys cover all 8 vbuckets of `small` many times over; a wrong vbucket map would
    # send some of them to a vbucket the server does not own.
    collection = cluster.bucket("small").default_collection()
    for number in range(200):
        collection.upsert(f"py::small::{number}", {"n": number})
    for number in range(200):
        assert collection.get(f"py::small::{number}").content_as[dict] == {"n": number}
