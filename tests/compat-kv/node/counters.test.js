// Binary counters: increment / decrement with initial and delta, read back with get.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

const { DeltaInvalidError, DocumentNotFoundError } = couchbase;

describe('counters', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('increment creates with initial, then adds delta; decrement subtracts', async () => {
    const key = uniqueKey('counter');
    const counters = collection.binary();
    // A missing counter is created holding `initial`; delta is not added on creation.
    const created = await counters.increment(key, 5, { initial: 10 });
    assert.equal(created.value, 10);
    const incremented = await counters.increment(key, 5, { initial: 10 });
    assert.equal(incremented.value, 15);
    assert.notEqual(casString(incremented.cas), casString(created.cas));
    const decremented = await counters.decrement(key, 3);
    assert.equal(decremented.value, 12);
    assert.notEqual(casString(decremented.cas), casString(incremented.cas));
    const result = await collection.get(key);
    assert.equal(result.content, 12);
    assert.equal(casString(result.cas), casString(decremented.cas));
  });

  it('decrement creates with initial and stops at zero', async () => {
    const key = uniqueKey('counter-zero');
    const counters = collection.binary();
    assert.equal((await counters.decrement(key, 1, { initial: 2 })).value, 2);
    assert.equal((await counters.decrement(key, 5)).value, 0);
    assert.equal((await counters.decrement(key, 1)).value, 0);
    assert.equal((await collection.get(key)).content, 0);
  });

  it('increments an existing number document', async () => {
    const key = uniqueKey('counter-existing');
    await collection.upsert(key, 41);
    assert.equal((await collection.binary().increment(key, 1)).value, 42);
    assert.equal((await collection.get(key)).content, 42);
  });

  it('increment / decrement of a missing key without initial are DocumentNotFound', async () => {
    const key = uniqueKey('counter-missing');
    await assert.rejects(collection.binary().increment(key, 1), DocumentNotFoundError);
    await assert.rejects(collection.binary().decrement(key, 1), DocumentNotFoundError);
    assert.equal((await collection.exists(key)).exists, false);
  });

  it('increment of a non-numeric document is DeltaInvalid', async () => {
    const key = uniqueKey('counter-not-number');
    await collection.upsert(key, { not: 'a number' });
    await assert.rejects(collection.binary().increment(key, 1), DeltaInvalidError);
    assert.deepEqual((await collection.get(key)).content, { not: 'a number' });
  });
});
