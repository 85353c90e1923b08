// append / prepend on raw string and raw binary documents.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

const { CasMismatchError, DocumentNotFoundError, RawBinaryTranscoder, RawStringTranscoder } = couchbase;

describe('append and prepend', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('appends and prepends to a string document', async () => {
    const key = uniqueKey('append-string');
    const transcoder = new RawStringTranscoder();
    const created = await collection.upsert(key, 'middle', { transcoder });
    const appended = await collection.binary().append(key, '-end');
    assert.notEqual(casString(appended.cas), casString(created.cas));
    const prepended = await collection.binary().prepend(key, 'start-');
    assert.notEqual(casString(prepended.cas), casString(appended.cas));
    // The flags stay those of a string document, so the string transcoder still accepts it.
    const result = await collection.get(key, { transcoder });
    assert.equal(result.content, 'start-middle-end');
    assert.equal(casString(result.cas), casString(prepended.cas));
  });

  it('appends and prepends to a binary document', async () => {
    const key = uniqueKey('append-binary');
    const transcoder = new RawBinaryTranscoder();
    await collection.upsert(key, Buffer.from([1, 2]), { transcoder });
    await collection.binary().append(key, Buffer.from([0, 255]));
    await collection.binary().prepend(key, Buffer.from([254]));
    const result = await collection.get(key, { transcoder });
    assert.deepEqual(result.content, Buffer.from([254, 1, 2, 0, 255]));
  });

  it('append / prepend of a missing key are DocumentNotFound', async () => {
    const key = uniqueKey('append-missing');
    await assert.rejects(collection.binary().append(key, 'x'), DocumentNotFoundError);
    await assert.rejects(collection.binary().prepend(key, 'x'), DocumentNotFoundError);
    assert.equal((await collection.exists(key)).exists, false);
  });

  it('append with a stale CAS is CasMismatch', async () => {
    const key = uniqueKey('append-stale');
    const transcoder = new RawStringTranscoder();
    const stale = (await collection.upsert(key, 'a', { transcoder })).cas;
    const current = (await collection.binary().append(key, 'b')).cas;
    await assert.rejects(collection.binary().append(key, 'c', { cas: stale }), CasMismatchError);
    await collection.binary().append(key, 'c', { cas: current });
    assert.equal((await collection.get(key, { transcoder })).content, 'abc');
  });
});
