"""exists: true with the document's CAS for a live document, false for missing and removed ones."""


def test_exists_true_for_a_document_with_its_cas(collection, key):
    cas = collection.upsert(key, {"v": 1}).cas
    result = collection.exists(key)
    assert result.exists is True
    assert result.cas == cas


def test_exists_false_for_a_missing_key(collection, key):
    assert collection.exists(key).exists is False


def test_exists_false_after_remove(collection, key):
    collection.upsert(key, {"v": 1})
    collection.remove(key)
    assert collection.exists(key).exists is False
