"""Sub-document operations through the official SDK: lookup_in / mutate_in across every spec
kind, their error cases, extended attributes, virtual xattrs and mutation macros."""
import json
from datetime import timedelta

import pytest
import couchbase.subdocument as SD
from couchbase.exceptions import (CasMismatchException, DocumentExistsException,
                                  DocumentNotFoundException, InvalidArgumentException,
                                  PathExistsException, PathInvalidException, PathMismatchException,
                                  PathNotFoundException)
from couchbase.options import GetOptions, MutateInOptions
from couchbase.subdocument import StoreSemantics


DOC = {"name": "settee", "tags": ["db", "json"], "nested": {"a": {"b": 7}},
       "count": 1, "list": [1, 2, 3], "dotted.key": "yes"}


def test_lookup_in_get_exists_count_and_whole_document(collection, key):
    cas = collection.upsert(key, DOC).cas
    result = collection.lookup_in(key, [
        SD.get("name"), SD.get("nested.a.b"), SD.exists("tags"), SD.exists("missing"),
        SD.count("list"), SD.get("list[-1]"), SD.get("`dotted.key`"), SD.get("tags[0]"),
    ])
    assert result.cas == cas
    assert result.content_as[str](0) == "settee"
    assert result.content_as[int](1) == 7
    assert result.exists(2) is True
    assert result.exists(3) is False
    assert result.content_as[int](4) == 3
    assert result.content_as[int](5) == 3
    assert result.content_as[str](6) == "yes"
    assert result.content_as[str](7) == "db"
    missing = collection.lookup_in(key, [SD.get("missing"), SD.get("name")])
    with pytest.raises(PathNotFoundException):
        missing.content_as[str](0)
    assert missing.content_as[str](1) == "settee"
    whole = collection.lookup_in(key, [SD.get_full()])
    assert whole.content_as[dict](0) == DOC


def test_lookup_in_path_errors_are_per_spec(collection, key):
    collection.upsert(key, DOC)
    result = collection.lookup_in(key, [SD.get("name"), SD.get("name.first"), SD.get("list.x"),
                                        SD.get("nested[0]"), SD.get("absent.deeper")])
    assert result.content_as[str](0) == "settee"
    for index in (1, 2, 3):
        with pytest.raises(PathMismatchException):
            result.content_as[str](index)
    with pytest.raises(PathNotFoundException):
        result.content_as[str](4)


def test_lookup_in_of_a_missing_document(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.lookup_in(key, [SD.get("a")])


def test_mutate_in_every_body_spec(collection, key):
    collection.upsert(key, DOC)
    result = collection.mutate_in(key, [
        SD.upsert("name", "couch"),
        SD.insert("new", {"x": 1}),
        SD.upsert("deep.er.path", True, create_parents=True),
        SD.replace("count", 10),
        SD.remove("`dotted.key`"),
        SD.array_append("list", 4),
        SD.array_append("list", 5, 6),
        SD.array_prepend("list", 0),
        SD.array_insert("list[1]", 9),
        SD.array_addunique("tags", "new"),
        SD.increment("count", 5),
        SD.decrement("nested.a.b", 2),
    ])
    assert result.content_as[int](10) == 15
    assert result.content_as[int](11) == 5
    doc = collection.get(key).content_as[dict]
    assert doc == {"name": "couch", "tags": ["db", "json", "new"], "nested": {"a": {"b": 5}},
                   "count": 15, "list": [0, 9, 1, 2, 3, 4, 5, 6], "new": {"x": 1},
                   "deep": {"er": {"path": True}}}
    assert collection.get(key).cas == result.cas


def test_mutate_in_errors_leave_the_document_unchanged(collection, key):
    cas = collection.upsert(key, DOC).cas
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.upsert("name", "x"), SD.insert("count", 2)])
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.replace("absent", 1)])
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.remove("absent")])
    with pytest.raises(PathMismatchException):
        collection.mutate_in(key, [SD.array_append("name", 1)])
    with pytest.raises(PathExistsException):
        collection.mutate_in(key, [SD.array_addunique("tags", "db")])
    with pytest.raises(PathNotFoundException):
        collection.mutate_in(key, [SD.upsert("no.such.parent", 1)])
    with pytest.raises(CasMismatchException):
        collection.mutate_in(key, [SD.upsert("name", "x")], MutateInOptions(cas=cas + 1))
    after = collection.get(key)
    assert after.content_as[dict] == DOC
    assert after.cas == cas


def test_store_semantics_insert_upsert_replace(collection, key):
    with pytest.raises(DocumentNotFoundException):
        collection.mutate_in(key, [SD.upsert("a", 1)])
    collection.mutate_in(key, [SD.upsert("a", 1)], MutateInOptions(store_semantics=StoreSemantics.UPSERT))
    assert collection.get(key).content_as[dict] == {"a": 1}
    with pytest.raises(DocumentExistsException):
        collection.mutate_in(key, [SD.upsert("b", 2)], MutateInOptions(store_semantics=StoreSemantics.INSERT))
    collection.mutate_in(key, [SD.upsert("b", 2)], MutateInOptions(store_semantics=StoreSemantics.REPLACE))
    assert collection.get(key).content_as[dict] == {"a": 1, "b": 2}


def test_mutate_in_with_expiry(collection, key):
    collection.mutate_in(key, [SD.upsert("a", 1)],
                         MutateInOptions(store_semantics=StoreSemantics.UPSERT, expiry=timedelta(seconds=60)))
    result = collection.get(key, GetOptions(with_expiry=True))
    assert result.content_as[dict] == {"a": 1}
    assert result.expiry_time is not None


def test_xattrs_are_hidden_from_the_body_and_survive_full_replace(collection, key, settee):
    collection.upsert(key, {"v": 1})
    collection.mutate_in(key, [SD.upsert("app.owner", "alice", xattr=True, create_parents=True),
                               SD.upsert("v", 2)])
    assert collection.get(key).content_as[dict] == {"v": 2}
    found = collection.lookup_in(key, [SD.get("app", xattr=True), SD.get("v")])
    assert found.content_as[dict](0) == {"owner": "alice"}
    assert found.content_as[int](1) == 2
    # A full-document replace keeps the document's xattrs, as Couchbase does.
    collection.replace(key, {"v": 3})
    assert collection.lookup_in(key, [SD.get("app.owner", xattr=True)]).content_as[str](0) == "alice"
    # The CouchDB door does not show them.
    status, body = settee.http("GET", f"/default/{key}")
    assert status == 200
    assert "app" not in body and body["v"] == 3


def test_virtual_document_xattr_and_macros(collection, key):
    cas = collection.upsert(key, {"v": 1}).cas
    found = collection.lookup_in(key, [SD.get(SD.LookupInMacro.document(), xattr=True),
                                       SD.get(SD.LookupInMacro.cas(), xattr=True)])
    document = found.content_as[dict](0)
    assert int(document["CAS"], 16) == cas
    assert document["deleted"] is False
    # The SDK's JSON transcoder writes `{"v": 1}`.
    assert document["value_bytes"] == len(json.dumps({"v": 1}))
    assert int(found.content_as[str](1), 16) == cas
    mutated = collection.mutate_in(key, [
        SD.upsert("meta.cas", SD.MutationMacro.cas(), xattr=True, create_parents=True),
        SD.upsert("meta.seqno", SD.MutationMacro.seq_no(), xattr=True, create_parents=True),
        SD.upsert("meta.crc", SD.MutationMacro.value_crc32c(), xattr=True, create_parents=True),
    ])
    meta = collection.lookup_in(key, [SD.get("meta", xattr=True)]).content_as[dict](0)
    assert SD.convert_macro_cas_to_cas(meta["cas"]) == mutated.cas
    assert meta["seqno"].startswith("0x") and meta["crc"].startswith("0x")


def test_system_xattrs_outlive_deletion(collection, key):
    collection.upsert(key, {"v": 1})
    collection.mutate_in(key, [SD.upsert("_sys", {"keep": True}, xattr=True),
                               SD.upsert("user", 1, xattr=True)])
    collection.remove(key)
    with pytest.raises(DocumentNotFoundException):
        collection.lookup_in(key, [SD.get("_sys", xattr=True)])


def test_a_malformed_path_fails_only_its_spec(collection, key):
    collection.upsert(key, DOC)
    result = collection.lookup_in(key, [SD.get("list[x"), SD.get("name")])
    with pytest.raises((InvalidArgumentException, PathInvalidException)):
        result.content_as[str](0)
    assert result.content_as[str](1) == "settee"


def test_large_document_lookups_and_edits_use_the_structural_index(collection, key):
    # Seed 000's document: 10,000 sub-keys, ~310 KB; settee indexes it at write time.
    data = {f"subkey-{i:06}": f"value-{i:06}" for i in range(10_000)}
    collection.upsert(key, {"key": "test-subdoc", "data": data})
    paths = [f"data.subkey-{i:06}" for i in (0, 5000, 9999)] + ["data.subkey-999999"]
    result = collection.lookup_in(key, [SD.get(path) for path in paths] + [SD.count("data")])
    assert [result.content_as[str](i) for i in range(3)] == ["value-000000", "value-005000", "value-009999"]
    assert result.exists(3) is False
    assert result.content_as[int](4) == 10_000
    # An edit rebuilds the index; lookups see the new bytes at the right places.
    collection.mutate_in(key, [SD.upsert("data.subkey-009999", "changed"),
                               SD.remove("data.subkey-000000"),
                               SD.insert("data.zzz", [1, 2])])
    after = collection.lookup_in(key, [SD.get("data.subkey-009999"), SD.exists("data.subkey-000000"),
                                       SD.get("data.zzz[-1]"), SD.get("data.subkey-000001")])
    assert after.content_as[str](0) == "changed"
    assert after.exists(1) is False
    assert after.content_as[int](2) == 2
    assert after.content_as[str](3) == "value-000001"
