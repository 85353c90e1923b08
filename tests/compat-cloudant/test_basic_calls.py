"""The SDK's basic calls against settee, each with the SDK's default gzip request bodies."""
import pytest
from ibm_cloud_sdk_core import ApiException

# Documents are plain dicts: the SDK's Document model takes `_id`/`_rev` only as `id`/`rev`
# read back from the server, and sends keyword arguments as they are named.


def test_the_sdk_gzips_request_bodies_by_default(service):
    # What makes these tests about Content-Encoding: gzip: the SDK as shipped compresses.
    assert service.get_enable_gzip_compression() is True


def test_server_information(service):
    info = service.get_server_information().get_result()
    assert info["couchdb"] == "Welcome"
    assert info["version"].startswith("3.")


def test_put_and_get_a_document(service, db):
    saved = service.put_document(db=db, doc_id="doc1", document={"name": "one", "n": 1}).get_result()
    assert saved["ok"] is True and saved["id"] == "doc1" and saved["rev"].startswith("1-")
    doc = service.get_document(db=db, doc_id="doc1").get_result()
    assert doc["name"] == "one" and doc["n"] == 1 and doc["_rev"] == saved["rev"]
    # An update names the revision; a stale one conflicts.
    updated = service.put_document(
        db=db, doc_id="doc1", document={"_rev": saved["rev"], "name": "uno", "n": 2}).get_result()
    assert updated["rev"].startswith("2-")
    with pytest.raises(ApiException) as stale:
        service.put_document(db=db, doc_id="doc1", document={"_rev": saved["rev"], "n": 3})
    assert stale.value.status_code == 409


def test_post_document_and_head_and_delete(service, db):
    created = service.post_document(db=db, document={"_id": "posted", "kind": "post"}).get_result()
    assert created["id"] == "posted"
    head = service.head_document(db=db, doc_id="posted")
    assert head.get_status_code() == 200
    deleted = service.delete_document(db=db, doc_id="posted", rev=created["rev"]).get_result()
    assert deleted["ok"] is True
    with pytest.raises(ApiException) as gone:
        service.get_document(db=db, doc_id="posted")
    assert gone.value.status_code == 404


def test_bulk_docs_and_all_docs(service, db):
    docs = [{"_id": f"bulk-{i:02}", "n": i} for i in range(20)]
    results = service.post_bulk_docs(db=db, bulk_docs={"docs": docs}).get_result()
    assert len(results) == 20 and all(r.get("ok") for r in results)
    listed = service.post_all_docs(db=db).get_result()
    assert [row["id"] for row in listed["rows"]] == [f"bulk-{i:02}" for i in range(20)]
    keyed = service.post_all_docs(db=db, keys=["bulk-03", "nothing"]).get_result()
    assert keyed["rows"][0]["id"] == "bulk-03"
    assert keyed["rows"][1] == {"key": "nothing", "error": "not_found"}


def test_find_with_an_index(service, db):
    service.post_bulk_docs(db=db, bulk_docs={"docs": [
        {"_id": f"p{i}", "type": "person", "age": 20 + i} for i in range(10)]}).get_result()
    index = service.post_index(db=db, index={"fields": [{"age": "asc"}]}, name="by-age").get_result()
    assert index["result"] in ("created", "exists")
    found = service.post_find(
        db=db, selector={"type": "person", "age": {"$gte": 25}},
        fields=["_id", "age"], sort=[{"age": "asc"}], limit=3).get_result()
    assert [doc["age"] for doc in found["docs"]] == [25, 26, 27]


def test_database_information_and_listing(service, db):
    info = service.get_database_information(db=db).get_result()
    assert info["db_name"] == db and info["doc_count"] == 0
    assert db in service.get_all_dbs().get_result()
    assert service.put_database(db=db + "-x").get_result()["ok"] is True
    assert service.delete_database(db=db + "-x").get_result()["ok"] is True


def test_attachments(service, db):
    saved = service.put_attachment(
        db=db, doc_id="withfile", attachment_name="hello.txt",
        attachment=b"hello from the sdk", content_type="text/plain").get_result()
    assert saved["ok"] is True
    body = service.get_attachment(db=db, doc_id="withfile", attachment_name="hello.txt").get_result()
    assert body.content == b"hello from the sdk"


def test_design_document_and_view(service, db):
    service.post_bulk_docs(db=db, bulk_docs={"docs": [
        {"_id": f"v{i}", "colour": ["red", "blue"][i % 2]} for i in range(6)]}).get_result()
    service.put_design_document(db=db, ddoc="colours", design_document={
        "views": {"by_colour": {"map": "function (doc) { emit(doc.colour, 1); }", "reduce": "_count"}}
    }).get_result()
    rows = service.post_view(db=db, ddoc="colours", view="by_colour", group=True).get_result()["rows"]
    assert rows == [{"key": "blue", "value": 3}, {"key": "red", "value": 3}]


def test_changes_and_revs_diff(service, db):
    service.put_document(db=db, doc_id="c1", document={"a": 1}).get_result()
    changes = service.post_changes(db=db, include_docs=True).get_result()
    assert [row["id"] for row in changes["results"]] == ["c1"]
    assert changes["results"][0]["doc"]["a"] == 1
    diff = service.post_revs_diff(db=db, document_revisions={"c1": ["1-abc"]}).get_result()
    assert diff == {"c1": {"missing": ["1-abc"]}}


def test_security_and_session(service, db):
    security = {"admins": {"names": ["someone"], "roles": []}, "members": {"names": [], "roles": []}}
    assert service.put_security(db=db, admins=security["admins"], members=security["members"]).get_result()["ok"]
    assert service.get_security(db=db).get_result()["admins"]["names"] == ["someone"]
    session = service.get_session_information().get_result()
    assert session["userCtx"]["name"] == "admin"


def test_uuids_and_up(service):
    assert len(service.get_uuids(count=3).get_result()["uuids"]) == 3
    assert service.get_up_information().get_result()["status"] == "ok"
