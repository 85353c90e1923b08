// upsert / insert / replace / remove with and without CAS, and the errors real Couchbase gives.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

const { CasMismatchError, DocumentExistsError, DocumentNotFoundError } = couchbase;

describe('crud and cas', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('upsert then get returns the content and the same CAS', async () => {
    const key = uniqueKey('upsert-get');
    const document = { name: 'Ünïcode ✓', n: 1, nested: { list: [1, 2.5, null, true] } };
    const mutation = await collection.upsert(key, document);
    assert.notEqual(casString(mutation.cas), '0');
    const result = await collection.get(key);
    assert.deepEqual(result.content, document);
    assert.equal(casString(result.cas), casString(mutation.cas));
  });

  it('upsert overwrites and changes the CAS', async () => {
    const key = uniqueKey('upsert-overwrite');
    const first = await collection.upsert(key, { v: 1 });
    const second = await collection.upsert(key, { v: 2 });
    assert.notEqual(casString(second.cas), casString(first.cas));
    const result = await collection.get(key);
    assert.deepEqual(result.content, { v: 2 });
    assert.equal(casString(result.cas), casString(second.cas));
  });

  it('insert creates, and insert of an existing key is DocumentExists', async () => {
    const key = uniqueKey('insert');
    const inserted = await collection.insert(key, { v: 'first' });
    await assert.rejects(collection.insert(key, { v: 'second' }), DocumentExistsError);
    const result = await collection.get(key);
    assert.deepEqual(result.content, { v: 'first' });
    assert.equal(casString(result.cas), casString(inserted.cas));
  });

  it('replace with the current CAS succeeds', async () => {
    const key = uniqueKey('replace-cas');
    const created = await collection.upsert(key, { v: 1 });
    const replaced = await collection.replace(key, { v: 2 }, { cas: created.cas });
    assert.notEqual(casString(replaced.cas), casString(created.cas));
    assert.deepEqual((await collection.get(key)).content, { v: 2 });
  });

  it('replace without CAS succeeds', async () => {
    const key = uniqueKey('replace-no-cas');
    const created = await collection.upsert(key, { v: 1 });
    const replaced = await collection.replace(key, { v: 3 });
    assert.notEqual(casString(replaced.cas), casString(created.cas));
    assert.deepEqual((await collection.get(key)).content, { v: 3 });
  });

  it('replace with a stale CAS is CasMismatch', async () => {
    const key = uniqueKey('replace-stale');
    const stale = (await collection.upsert(key, { v: 1 })).cas;
    const current = (await collection.upsert(key, { v: 2 })).cas;
    await assert.rejects(collection.replace(key, { v: 'lost' }, { cas: stale }), CasMismatchError);
    const result = await collection.get(key);
    assert.deepEqual(result.content, { v: 2 });
    assert.equal(casString(result.cas), casString(current));
  });

  it('remove with a stale CAS is CasMismatch, then with the current CAS removes', async () => {
    const key = uniqueKey('remove-cas');
    const stale = (await collection.upsert(key, { v: 1 })).cas;
    const current = (await collection.upsert(key, { v: 2 })).cas;
    await assert.rejects(collection.remove(key, { cas: stale }), CasMismatchError);
    assert.deepEqual((await collection.get(key)).content, { v: 2 });
    const removed = await collection.remove(key, { cas: current });
    assert.notEqual(casString(removed.cas), casString(current));
    await assert.rejects(collection.get(key), DocumentNotFoundError);
  });

  it('remove without CAS removes', async () => {
    const key = uniqueKey('remove');
    await collection.upsert(key, { v: 1 });
    await collection.remove(key);
    await assert.rejects(collection.get(key), DocumentNotFoundError);
    await assert.rejects(collection.remove(key), DocumentNotFoundError);
  });

  it('insert after remove succeeds', async () => {
    const key = uniqueKey('insert-after-remove');
    await collection.upsert(key, { v: 1 });
    await collection.remove(key);
    await collection.insert(key, { v: 'again' });
    assert.deepEqual((await collection.get(key)).content, { v: 'again' });
  });

  it('get / replace / remove of a missing key are DocumentNotFound', async () => {
    const key = uniqueKey('missing');
    await assert.rejects(collection.get(key), DocumentNotFoundError);
    await assert.rejects(collection.replace(key, { v: 1 }), DocumentNotFoundError);
    await assert.rejects(collection.remove(key), DocumentNotFoundError);
    // A failed replace must not have created the document.
    await assert.rejects(collection.get(key), DocumentNotFoundError);
  });

  it('replace with the CAS of a removed key is DocumentNotFound', async () => {
    const key = uniqueKey('replace-removed');
    const { cas } = await collection.upsert(key, { v: 1 });
    await collection.remove(key);
    await assert.rejects(collection.replace(key, { v: 2 }, { cas }), DocumentNotFoundError);
  });

  it('round-trips a 250-byte key and a multibyte key', async () => {
    // 250 bytes is Couchbase's key length limit (the collection prefix does not count).
    const longest = `node::long::${'k'.repeat(250)}`.slice(0, 250);
    const multibyte = `${uniqueKey('multibyte')}::ключ-鍵-🔑`;
    for (const key of [longest, multibyte]) {
      const { cas } = await collection.upsert(key, { key });
      const result = await collection.get(key);
      assert.deepEqual(result.content, { key });
      assert.equal(casString(result.cas), casString(cas));
    }
  });

  it('exists is true with the CAS for a document, false for missing and removed keys', async () => {
    const key = uniqueKey('exists');
    const { cas } = await collection.upsert(key, { v: 1 });
    const present = await collection.exists(key);
    assert.equal(present.exists, true);
    assert.equal(casString(present.cas), casString(cas));
    assert.equal((await collection.exists(uniqueKey('exists-missing'))).exists, false);
    await collection.remove(key);
    assert.equal((await collection.exists(key)).exists, false);
  });
});
