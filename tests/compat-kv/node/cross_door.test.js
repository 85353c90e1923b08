// The same documents through both doors: KV (the SDK) and the CouchDB HTTP API.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

const { CasMismatchError, DocumentNotFoundError } = couchbase;
const REV = /^(\d+)-[0-9a-f]+$/;

const docPath = (key) => `/default/${encodeURIComponent(key)}`;
const generation = (rev) => Number(REV.exec(rev)[1]);

function withoutMeta(body) {
  const { _id, _rev, ...rest } = body;
  return rest;
}

describe('cross door', () => {
  let env;
  let settee;
  let collection;
  before(async () => { env = await setUp(); settee = env.settee; collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  async function httpGet(key) {
    const { status, json, text } = await settee.http('GET', docPath(key));
    assert.equal(status, 200, text);
    assert.equal(json._id, key);
    assert.match(json._rev, REV);
    return json;
  }

  async function changes() {
    const { status, json, text } = await settee.http('GET', '/default/_changes');
    assert.equal(status, 200, text);
    return new Map(json.results.map((row) => [row.id, row]));
  }

  it('an SDK upsert is readable over HTTP and shows in _changes', async () => {
    const key = uniqueKey('sdk-to-http');
    const document = { name: 'from the SDK', n: 7, nested: { list: [1, 'two', null] }, ok: true };
    await collection.upsert(key, document);
    const body = await httpGet(key);
    assert.deepEqual(withoutMeta(body), document);
    const row = (await changes()).get(key);
    assert.ok(row, 'the document is missing from _changes');
    assert.deepEqual(row.changes, [{ rev: body._rev }]);
    assert.ok(!row.deleted);
  });

  it('an HTTP PUT is readable by the SDK with a CAS', async () => {
    const key = uniqueKey('http-to-sdk');
    const document = { name: 'from HTTP', n: 8, list: [1, 2, 3] };
    const { status, text } = await settee.http('PUT', docPath(key), document);
    assert.equal(status, 201, text);
    const result = await collection.get(key);
    assert.notEqual(casString(result.cas), '0');
    assert.deepEqual(result.content, document);
  });

  it('every mutation through either door changes both the CAS and the _rev', async () => {
    const key = uniqueKey('both-doors');
    const seenCas = new Set();
    const seenRevs = new Set();
    const sdkState = async () => {
      const result = await collection.get(key);
      assert.ok(!seenCas.has(casString(result.cas)), 'CAS did not change');
      seenCas.add(casString(result.cas));
      return result;
    };
    const httpState = async () => {
      const body = await httpGet(key);
      assert.ok(!seenRevs.has(body._rev), '_rev did not change');
      seenRevs.add(body._rev);
      return body;
    };

    // 1. SDK insert.
    await collection.insert(key, { step: 1 });
    const cas1 = (await sdkState()).cas;
    const rev1 = (await httpState())._rev;
    assert.equal(generation(rev1), 1);

    // 2. HTTP update.
    const put2 = await settee.http('PUT', docPath(key), { _rev: rev1, step: 2 });
    assert.equal(put2.status, 201, put2.text);
    const result2 = await sdkState();
    assert.deepEqual(result2.content, { step: 2 });
    assert.equal((await httpState())._rev, put2.json.rev);
    assert.equal(generation(put2.json.rev), 2);
    // The HTTP write made the SDK's old CAS stale.
    await assert.rejects(collection.replace(key, { step: 'lost' }, { cas: cas1 }), CasMismatchError);

    // 3. SDK replace with the current CAS.
    await collection.replace(key, { step: 3 }, { cas: result2.cas });
    await sdkState();
    const body3 = await httpState();
    assert.deepEqual(withoutMeta(body3), { step: 3 });
    assert.equal(generation(body3._rev), 3);
    // The SDK write made the HTTP client's old revision stale.
    const conflict = await settee.http('PUT', docPath(key), { _rev: put2.json.rev, step: 'lost' });
    assert.equal(conflict.status, 409, conflict.text);

    // 4. SDK upsert.
    await collection.upsert(key, { step: 4 });
    await sdkState();
    const body4 = await httpState();
    assert.deepEqual(withoutMeta(body4), { step: 4 });
    assert.equal(generation(body4._rev), 4);

    // 5. HTTP update again.
    const put5 = await settee.http('PUT', docPath(key), { _rev: body4._rev, step: 5 });
    assert.equal(put5.status, 201, put5.text);
    assert.deepEqual((await sdkState()).content, { step: 5 });
    assert.equal(generation((await httpState())._rev), 5);
  });

  it('an SDK remove is a deletion over HTTP', async () => {
    const key = uniqueKey('sdk-remove');
    await collection.upsert(key, { v: 1 });
    const { _rev: rev } = await httpGet(key);
    await collection.remove(key);
    const { status, json, text } = await settee.http('GET', docPath(key));
    assert.equal(status, 404, text);
    assert.equal(json.error, 'not_found');
    const row = (await changes()).get(key);
    assert.equal(row.deleted, true);
    assert.notEqual(row.changes[0].rev, rev);
    assert.equal(generation(row.changes[0].rev), 2);
  });

  it('an HTTP DELETE is DocumentNotFound for the SDK', async () => {
    const key = uniqueKey('http-delete');
    const created = await settee.http('PUT', docPath(key), { v: 1 });
    assert.equal(created.status, 201, created.text);
    const { cas } = await collection.get(key);
    const deleted = await settee.http('DELETE', `${docPath(key)}?rev=${created.json.rev}`);
    assert.equal(deleted.status, 200, deleted.text);
    await assert.rejects(collection.get(key), DocumentNotFoundError);
    assert.equal((await collection.exists(key)).exists, false);
    await assert.rejects(collection.replace(key, { v: 2 }, { cas }), DocumentNotFoundError);
  });
});
