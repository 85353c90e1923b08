"""Many operations in flight at once through the asyncio API (acouchbase), every value checked."""
import asyncio
from datetime import timedelta

from acouchbase.cluster import Cluster as AsyncCluster
from couchbase.auth import PasswordAuthenticator
from couchbase.options import ClusterOptions, ClusterTimeoutOptions

from conftest import ADMIN, CONNECT_TIMEOUT

COUNT = 2000


async def upserts_then_gets(settee, prefix):
    options = ClusterOptions(PasswordAuthenticator(*ADMIN),
                             timeout_options=ClusterTimeoutOptions(kv_timeout=timedelta(seconds=20),
                                                                   connect_timeout=CONNECT_TIMEOUT))
    cluster = await AsyncCluster.connect(settee.connection_string, options)
    try:
        bucket = cluster.bucket("default")
        await bucket.on_connect()
        collection = bucket.default_collection()
        keys = [f"{prefix}::{number}" for number in range(COUNT)]
        mutations = await asyncio.gather(
            *(collection.upsert(key, {"n": number, "key": key}) for number, key in enumerate(keys)))
        assert all(mutation.cas != 0 for mutation in mutations)
        results = await asyncio.gather(*(collection.get(key) for key in keys))
        for number, (key, mutation, result) in enumerate(zip(keys, mutations, results)):
            assert result.content_as[dict] == {"n": number, "key": key}
            assert result.cas == mutation.cas
        # Mixed reads and writes of the same keys at once: every write lands exactly once.
        await asyncio.gather(
            *(collection.upsert(key, {"n": number * 2, "key": key}) for number, key in enumerate(keys)),
            *(collection.exists(key) for key in keys))
        results = await asyncio.gather(*(collection.get(key) for key in keys))
        assert [result.content_as[dict]["n"] for result in results] == [number * 2 for number in range(COUNT)]
    finally:
        await cluster.close()


def test_2000_concurrent_upserts_and_gets(settee, key):
    asyncio.run(upserts_then_gets(settee, key))
