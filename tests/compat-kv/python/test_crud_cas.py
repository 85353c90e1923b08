"""upsert / insert / replace / remove with and without CAS, and the errors real Couchbase gives."""
import pytest
from couchbase.exceptions import CasMismatchException, DocumentExistsException, DocumentNotFoundException
from couchbase.options import RemoveOptions, ReplaceOptions


def test_upsert_then_get_returns_content_and_the_same_cas(collection, key):
    document = {"name": "Ünïcode ✓", "n": 1, "nested": {"list": [1, 2.5, None, True]}}
    mutation = collection.upsert(key, document)
    assert mutation.cas != 0
    result = collection.get(key)
    assert result.content_as[dict] == document
    assert result.cas == mutation.cas


def test_upsert_overwrites_and_changes_cas(collection, key):
    first = collection.upsert(key, {"v": 1})
    second = collection.upsert(key, {"v": 2})
    assert second.cas not in (0, first.cas)
    result = collection.get(key)
    assert result.content_as[dict] == {"v": 2}
    assert result.cas == second.cas


def test_insert_creates_and_insert_of_an_existing_key_is_document_exists(collection, key):
    inserted = collection.insert(key, {"v": "first"})
    assert inserted.cas != 0
    with pytest.raises(DocumentExistsException):
        collection.insert(key, {"v": "second"})
    result = collection.get(key)
    assert result.content_as[dict] == {"v": "first"}
    assert result.cas == inserted.cas


def test_replace_with_the_current_cas_succeeds(collection, key):
    created = collection.upsert(key, {"v": 1})
    replaced = collection.replace(key, {"v": 2}, ReplaceOptions(cas=created.cas))
    assert replaced.cas not in (0, created.cas)
    assert collection.get(key).content_as[dict] == {"v": 2}


def test_replace_without_cas_succeeds(collection, key):
    created = collection.upsert(key, {"v": 1})
    replaced = collection.replace(key, {"v": 3})
    assert replaced.cas != created.cas
    assert collection.get(key).content_as[dict] == {"v": 3}


def test_replace_with_a_stale_cas_is_cas_mismatch(collection, key):
    stale = collection.upsert(key, {"v": 1}).cas
    current = collection.upsert(key, {"v": 2}).cas
    with pytest.raises(CasMismatchException):
        collection.replace(key, {"v": "lost"}, ReplaceOptions(cas=stale))
    result = collection.get(key)
    assert result.content_as[dict] == {"v": 2}
    assert result.cas == current


def test_remove_with_a_stale_cas_is_cas_mismatch_then_with_the_current_cas_removes(collection, key):
    stale = collection.upsert(key, {"v": 1}).cas
    current = collection.upsert(key, {"v": 2}).cas
    with pytest.raises(CasMismatchException):
        collection.remove(key, RemoveOptions(cas=stale))
    assert collection.get(key).content_as[dict] == {"v": 2}
    removed = collection.remove(key, RemoveOptions(cas=current))
    assert removed.cas not in (0, current)
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_remove_without_cas_removes(collection, key):
    collection.upsert(key, {"v": 1})
    collection.remove(key)
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)
    with pytest.raises(DocumentNotFoundException):
        collection.remove(key)


def test_insert_after_remove_succeeds(collection, key):
    collection.upsert(key, {"v": 1})
    collection.remove(key)
    collection.insert(key, {"v": "again"})
    assert collection.get(key).content_as[dict] == {"v": "again"}


def test_get_replace_remove_of_a_missing_key_are_document_not_found(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)
    with pytest.raises(DocumentNotFoundException):
        collection.replace(key, {"v": 1})
    with pytest.raises(DocumentNotFoundException):
        collection.remove(key)
    # A failed replace must not have created the document.
    with pytest.raises(DocumentNotFoundException):
        collection.get(key)


def test_replace_with_cas_of_a_missing_key_is_document_not_found(collection, key):
    cas = collection.upsert(key, {"v": 1}).cas
    collection.remove(key)
    with pytest.raises(DocumentNotFoundException):
        collection.replace(key, {"v": 2}, ReplaceOptions(cas=cas))


def test_a_250_byte_key_and_a_multibyte_key_round_trip(collection, key):
    # 250 bytes is Couchbase's key length limit (the collection prefix does not count).
    longest = ("py::long::" + "k" * 250)[:250]
    multibyte = key + "::ключ-鍵-🔑"
    for document_key in (longest, multibyte):
        cas = collection.upsert(document_key, {"key": document_key}).cas
        result = collection.get(document_key)
        assert result.content_as[dict] == {"key": document_key}
        assert result.cas == cas
