// Many operations in flight at once on one connection, every value checked.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString } = require('./harness');

const COUNT = 2000;

describe('concurrency', () => {
  let env;
  before(async () => { env = await setUp(); });
  after(async () => { await env?.tearDown(); });

  it('2,000 concurrent upserts then gets, then mixed writes and reads', async () => {
    const cluster = await env.settee.connect(undefined, { kvTimeout: 20000 });
    try {
      const collection = cluster.bucket('default').defaultCollection();
      const prefix = uniqueKey('concurrent');
      const keys = Array.from({ length: COUNT }, (_, number) => `${prefix}::${number}`);
      const mutations = await Promise.all(keys.map((key, n) => collection.upsert(key, { n, key })));
      const results = await Promise.all(keys.map((key) => collection.get(key)));
      keys.forEach((key, n) => {
        assert.deepEqual(results[n].content, { n, key });
        assert.equal(casString(results[n].cas), casString(mutations[n].cas));
      });
      // Mixed reads and writes of the same keys at once: every write lands exactly once.
      await Promise.all([
        ...keys.map((key, n) => collection.upsert(key, { n: n * 2, key })),
        ...keys.map((key) => collection.exists(key)),
      ]);
      const after = await Promise.all(keys.map((key) => collection.get(key)));
      assert.deepEqual(after.map((result) => result.content.n), keys.map((_, n) => n * 2));
    } finally {
      await cluster.close();
    }
  });
});
