// Authentication and bucket access: wrong passwords are refused; alice may use `default` only.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, waitUntilReady, ALICE, couchbase } = require('./harness');

const { AuthenticationFailureError, BucketNotFoundError, TimeoutError } = couchbase;

// Couchbase answers a bucket the user may not access exactly like a missing bucket
// (SELECT_BUCKET -> EACCESS). The C++ core reports bucket_not_found when opening it; the Node SDK
// only logs that and its operations on the bucket then time out (or, in some versions, fail with
// BucketNotFound).
const refusedBucket = (error) => error instanceof TimeoutError || error instanceof BucketNotFoundError;

// Runs `body` while capturing the SDK's "failed to open bucket" messages (console.error).
async function capturingBucketOpenErrors(body) {
  const captured = [];
  const original = console.error;
  console.error = (...args) => { captured.push(args); };
  try {
    await body();
  } finally {
    console.error = original;
  }
  return captured
    .filter(([message]) => typeof message === 'string' && message.startsWith('failed to open bucket: '))
    .map(([message, error]) => `${message.slice('failed to open bucket: '.length)}:${error?.code}`);
}
const QUICK_MS = 3000;

describe('auth', () => {
  let env;
  before(async () => { env = await setUp(); });
  after(async () => { await env?.tearDown(); });

  it('refuses a wrong password at connect', async () => {
    await assert.rejects(
      env.settee.connect({ username: 'admin', password: 'not-the-password' }, { connectTimeout: QUICK_MS }),
      AuthenticationFailureError,
    );
  });

  it('refuses an unknown user at connect', async () => {
    await assert.rejects(
      env.settee.connect({ username: 'mallory', password: 'secret' }, { connectTimeout: QUICK_MS }),
      AuthenticationFailureError,
    );
  });

  it('lets alice use default', async () => {
    const cluster = await env.settee.connect(ALICE);
    try {
      await waitUntilReady(cluster);
      const collection = cluster.bucket('default').defaultCollection();
      const key = uniqueKey('alice');
      const { cas } = await collection.upsert(key, { by: 'alice' });
      const result = await collection.get(key);
      assert.deepEqual(result.content, { by: 'alice' });
      assert.equal(casString(result.cas), casString(cas));
    } finally {
      await cluster.close();
    }
  });

  it('does not let alice use private', async () => {
    const key = uniqueKey('alice-private');
    const alice = await env.settee.connect(ALICE);
    try {
      const openErrors = await capturingBucketOpenErrors(async () => {
        for (const bucketName of ['private', 'no-such-bucket']) {
          const collection = alice.bucket(bucketName).defaultCollection();
          await assert.rejects(collection.upsert(key, { by: 'alice' }, { timeout: QUICK_MS }), refusedBucket, bucketName);
        }
      });
      // 10 = bucket_not_found in the C++ core's common error category.
      assert.deepEqual(openErrors.sort(), ['no-such-bucket:10', 'private:10']);
    } finally {
      await alice.close();
    }
    const privateCollection = env.cluster.bucket('private').defaultCollection();
    assert.equal((await privateCollection.exists(key)).exists, false);
    await privateCollection.upsert(key, { by: 'admin' });
    assert.deepEqual((await privateCollection.get(key)).content, { by: 'admin' });
  });

  it('does not let alice read a document the admin wrote to private', async () => {
    const key = uniqueKey('alice-private-read');
    await env.cluster.bucket('private').defaultCollection().upsert(key, { secret: true });
    const alice = await env.settee.connect(ALICE);
    try {
      const openErrors = await capturingBucketOpenErrors(async () => {
        await assert.rejects(alice.bucket('private').defaultCollection().get(key, { timeout: QUICK_MS }), refusedBucket);
      });
      assert.deepEqual(openErrors, ['private:10']);
    } finally {
      await alice.close();
    }
  });
});
