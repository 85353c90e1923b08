"""append / prepend on raw string and raw binary documents."""
import pytest
from couchbase.exceptions import CasMismatchException, DocumentNotFoundException
from couchbase.options import AppendOptions, GetOptions, UpsertOptions
from couchbase.transcoder import RawBinaryTranscoder, RawStringTranscoder


def test_append_and_prepend_on_a_string_document(collection, key):
    created = collection.upsert(key, "middle", UpsertOptions(transcoder=RawStringTranscoder()))
    appended = collection.binary().append(key, "-end")
    assert appended.cas not in (0, created.cas)
    prepended = collection.binary().prepend(key, "start-")
    assert prepended.cas not in (0, appended.cas)
    # The flags stay those of a string document, so the string transcoder still accepts it.
    result = collection.get(key, GetOptions(transcoder=RawStringTranscoder()))
    assert result.content_as[str] == "start-middle-end"
    assert result.cas == prepended.cas


def test_append_and_prepend_on_a_binary_document(collection, key):
    collection.upsert(key, b"\x01\x02", UpsertOptions(transcoder=RawBinaryTranscoder()))
    collection.binary().append(key, b"\x00\xff")
    collection.binary().prepend(key, b"\xfe")
    result = collection.get(key, GetOptions(transcoder=RawBinaryTranscoder()))
    assert result.value == b"\xfe\x01\x02\x00\xff"


def test_append_and_prepend_of_a_missing_key_are_document_not_found(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.binary().append(key, "x")
    with pytest.raises(DocumentNotFoundException):
        collection.binary().prepend(key, "x")
    assert collection.exists(key).exists is False


def test_append_with_a_stale_cas_is_cas_mismatch(collection, key):
    stale = collection.upsert(key, "a", UpsertOptions(transcoder=RawStringTranscoder())).cas
    current = collection.binary().append(key, "b").cas
    with pytest.raises(CasMismatchException):
        collection.binary().append(key, "c", AppendOptions(cas=stale))
    collection.binary().append(key, "c", AppendOptions(cas=current))
    assert collection.get(key, GetOptions(transcoder=RawStringTranscoder())).content_as[str] == "abc"
