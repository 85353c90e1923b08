// couchbases:// with the official SDK: bootstrap over KV TLS trusting the test CA (the harness
// makes it and starts settee with it), the same documents as the plain door, and an SDK that
// does not trust the certificate refused.
'use strict';
const path = require('node:path');
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { ADMIN, setUp, waitUntilReady, uniqueKey, couchbase } = require('./harness');

function connectTls(settee, caFile, connectTimeout = 10000) {
  return couchbase.connect(settee.tlsConnectionString, {
    username: ADMIN.username,
    password: ADMIN.password,
    security: { trustStorePath: path.join(settee.certs, caFile) },
    timeouts: { kvTimeout: 2500, connectTimeout, bootstrapTimeout: connectTimeout },
  });
}

describe('tls', () => {
  let env;
  before(async () => { env = await setUp(); });
  after(async () => { await env?.tearDown(); });

  it('reads and writes the same documents over couchbases://', async () => {
    const cluster = await connectTls(env.settee, 'ca.crt');
    try {
      await waitUntilReady(cluster);
      const secure = cluster.bucket('default').defaultCollection();
      const key = uniqueKey('tls');
      await secure.upsert(key, { over: 'tls' });
      assert.deepEqual((await env.collection.get(key)).content, { over: 'tls' });
      await env.collection.upsert(key, { over: 'plain' });
      assert.deepEqual((await secure.get(key)).content, { over: 'plain' });
    } finally {
      await cluster.close();
    }
  });

  it('refuses a certificate the SDK does not trust', async () => {
    await assert.rejects(async () => {
      const cluster = await connectTls(env.settee, 'other-ca.crt', 3000);
      try {
        await cluster.bucket('default').defaultCollection().get('anything', { timeout: 3000 });
      } finally {
        await cluster.close();
      }
    });
  });
});
