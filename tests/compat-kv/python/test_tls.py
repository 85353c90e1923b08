"""couchbases:// with the official SDK: bootstrap over KV TLS trusting the test CA (the harness
makes it and starts settee with it), the same documents as the plain door, and an SDK that does
not trust the certificate refused."""
import os
from datetime import timedelta

import pytest
from couchbase.auth import PasswordAuthenticator
from couchbase.cluster import Cluster
from couchbase.diagnostics import ServiceType
from couchbase.exceptions import CouchbaseException
from couchbase.options import ClusterOptions, ClusterTimeoutOptions, WaitUntilReadyOptions

from conftest import ADMIN


def tls_cluster(settee, ca_file, connect_timeout=timedelta(seconds=10)):
    options = ClusterOptions(
        PasswordAuthenticator(*ADMIN, cert_path=os.path.join(settee.certs, ca_file)),
        timeout_options=ClusterTimeoutOptions(
            kv_timeout=timedelta(seconds=2.5),
            connect_timeout=connect_timeout,
            bootstrap_timeout=connect_timeout,
        ),
    )
    return Cluster(settee.tls_connection_string, options)


def test_couchbases_reads_and_writes_the_same_documents(settee, collection, key):
    cluster = tls_cluster(settee, "ca.crt")
    try:
        cluster.wait_until_ready(timedelta(seconds=15),
                                 WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
        secure = cluster.bucket("default").default_collection()
        secure.upsert(key, {"over": "tls"})
        assert collection.get(key).content_as[dict] == {"over": "tls"}
        collection.upsert(key, {"over": "plain"})
        assert secure.get(key).content_as[dict] == {"over": "plain"}
    finally:
        cluster.close()


def test_an_sdk_that_does_not_trust_the_certificate_is_refused(settee):
    with pytest.raises(CouchbaseException):
        cluster = tls_cluster(settee, "other-ca.crt", connect_timeout=timedelta(seconds=3))
        try:
            cluster.wait_until_ready(timedelta(seconds=3),
                                     WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
            cluster.bucket("default").default_collection().get("anything")
        finally:
            cluster.close()


def test_the_collection_manager_works_over_couchbases(settee):
    """The SDK's management requests go to the node's mgmtSSL port over HTTPS."""
    cluster = tls_cluster(settee, "ca.crt")
    try:
        cluster.wait_until_ready(timedelta(seconds=15),
                                 WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
        scopes = cluster.bucket("default").collections().get_all_scopes()
        assert "_default" in [scope.name for scope in scopes]
    finally:
        cluster.close()
