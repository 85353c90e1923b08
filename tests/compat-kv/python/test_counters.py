"""Binary counters: increment / decrement with initial and delta, read back with get."""
import pytest
from couchbase.exceptions import DeltaInvalidException, DocumentNotFoundException
from couchbase.options import DecrementOptions, DeltaValue, IncrementOptions, SignedInt64


def test_increment_creates_with_initial_then_adds_delta(collection, key):
    counters = collection.binary()
    created = counters.increment(key, IncrementOptions(delta=DeltaValue(5), initial=SignedInt64(10)))
    # A missing counter is created holding `initial`; delta is not added on creation.
    assert created.content == 10
    assert created.cas != 0
    incremented = counters.increment(key, IncrementOptions(delta=DeltaValue(5), initial=SignedInt64(10)))
    assert incremented.content == 15
    assert incremented.cas != created.cas
    decremented = counters.decrement(key, DecrementOptions(delta=DeltaValue(3)))
    assert decremented.content == 12
    assert decremented.cas != incremented.cas
    result = collection.get(key)
    assert result.content_as[int] == 12
    assert result.cas == decremented.cas


def test_decrement_creates_with_initial_and_stops_at_zero(collection, key):
    counters = collection.binary()
    assert counters.decrement(key, DecrementOptions(delta=DeltaValue(1), initial=SignedInt64(2))).content == 2
    assert counters.decrement(key, DecrementOptions(delta=DeltaValue(5))).content == 0
    assert counters.decrement(key, DecrementOptions(delta=DeltaValue(1))).content == 0
    assert collection.get(key).content_as[int] == 0


def test_default_delta_is_one(collection, key):
    counters = collection.binary()
    counters.increment(key, IncrementOptions(initial=SignedInt64(100)))
    assert counters.increment(key).content == 101
    assert counters.decrement(key).content == 100


def test_increment_of_an_existing_number_document(collection, key):
    collection.upsert(key, 41)
    assert collection.binary().increment(key, IncrementOptions(delta=DeltaValue(1))).content == 42
    assert collection.get(key).content_as[int] == 42


def test_increment_of_a_missing_key_without_initial_is_document_not_found(collection, key):
    # A negative initial value means "do not create" in the Python SDK.
    with pytest.raises(DocumentNotFoundException):
        collection.binary().increment(key, IncrementOptions(initial=SignedInt64(-1)))
    with pytest.raises(DocumentNotFoundException):
        collection.binary().decrement(key, DecrementOptions(initial=SignedInt64(-1)))
    assert collection.exists(key).exists is False


def test_increment_of_a_non_numeric_document_is_delta_invalid(collection, key):
    collection.upsert(key, {"not": "a number"})
    with pytest.raises(DeltaInvalidException):
        collection.binary().increment(key)
    assert collection.get(key).content_as[dict] == {"not": "a number"}
