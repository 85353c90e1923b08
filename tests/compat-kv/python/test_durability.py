"""Durable writes on a single node with no replicas, as Couchbase Server accepts them.

Observe-based durability (persist_to ACTIVE) polls OBSERVE until the mutation is persisted on the
active node; synchronous durability (level MAJORITY) is a flexible-framing extra on the mutation.
With zero replicas a majority is the active node alone, so both succeed.
"""
from couchbase.durability import ClientDurability, DurabilityLevel, PersistToExtended, ServerDurability
from couchbase.options import RemoveOptions, UpsertOptions


def test_upsert_and_remove_with_persist_to_active(collection, key):
    durable = ClientDurability(persist_to=PersistToExtended.ACTIVE)
    mutation = collection.upsert(key, {"v": "persisted"}, UpsertOptions(durability=durable))
    result = collection.get(key)
    assert result.content_as[dict] == {"v": "persisted"}
    assert result.cas == mutation.cas
    collection.remove(key, RemoveOptions(durability=durable))
    assert collection.exists(key).exists is False


def test_upsert_and_remove_with_durability_level_majority(collection, key):
    durable = ServerDurability(DurabilityLevel.MAJORITY)
    mutation = collection.upsert(key, {"v": "majority"}, UpsertOptions(durability=durable))
    result = collection.get(key)
    assert result.content_as[dict] == {"v": "majority"}
    assert result.cas == mutation.cas
    collection.remove(key, RemoveOptions(durability=durable))
    assert collection.exists(key).exists is False
