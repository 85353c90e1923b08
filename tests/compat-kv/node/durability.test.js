// Durable writes on a single node with no replicas, as Couchbase Server accepts them.
// Observe-based durability (durabilityPersistTo: 1, the active node) polls OBSERVE until the
// mutation is persisted; synchronous durability (level Majority) is a flexible-framing extra on the
// mutation. With zero replicas a majority is the active node alone, so both succeed.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, couchbase } = require('./harness');

describe('durability', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  for (const [name, options] of [
    ['persist to the active node', { durabilityPersistTo: 1 }],
    ['durability level majority', { durabilityLevel: couchbase.DurabilityLevel.Majority }],
  ]) {
    it(`upsert and remove with ${name}`, async () => {
      const key = uniqueKey(name);
      const mutation = await collection.upsert(key, { v: name }, options);
      const result = await collection.get(key);
      assert.deepEqual(result.content, { v: name });
      assert.equal(casString(result.cas), casString(mutation.cas));
      await collection.remove(key, options);
      assert.equal((await collection.exists(key)).exists, false);
    });
  }
});
