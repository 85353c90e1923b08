// Pessimistic locking: getAndLock, mutations blocked without the lock CAS, unlock, lock timeout.
// Against Couchbase Server a mutation of a locked document answers LOCKED (TMPFAIL for old
// clients); the SDK retries it (reason key_value_locked / key_value_temporary_failure) until its
// timeout, so the application sees DocumentLocked / TemporaryFailure or a timeout naming that
// retry reason.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, sleep, couchbase } = require('./harness');

const {
  CasMismatchError, DocumentLockedError, DocumentNotFoundError, TemporaryFailureError, TimeoutError,
} = couchbase;
const LOCK_TIME = 15;
const SHORT_MS = 1000;
// How long an operation expected to be refused may keep retrying.
const REFUSE_MS = 500;
const LOCK_RETRY_REASONS = ['key_value_locked', 'kv_locked', 'key_value_temporary_failure', 'kv_temporary_failure'];

async function assertRefusedAsLocked(promise) {
  await assert.rejects(promise, (error) => {
    if (error instanceof DocumentLockedError || error instanceof TemporaryFailureError) return true;
    assert.ok(error instanceof TimeoutError, `unexpected ${error}`);
    const reasons = error.context?.retry_reasons ?? [];
    assert.ok(reasons.some((reason) => LOCK_RETRY_REASONS.includes(reason)), `${error} ${JSON.stringify(error.context)}`);
    return true;
  });
}

describe('locks', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('mutations without the lock CAS fail; unlock with it works', async () => {
    const key = uniqueKey('lock');
    const before = (await collection.upsert(key, { v: 'original' })).cas;
    const locked = await collection.getAndLock(key, LOCK_TIME);
    assert.deepEqual(locked.content, { v: 'original' });
    assert.notEqual(casString(locked.cas), casString(before));

    await assertRefusedAsLocked(collection.upsert(key, { v: 'upsert' }, { timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.replace(key, { v: 'replace' }, { timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.replace(key, { v: 'old cas' }, { cas: before, timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.remove(key, { timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.getAndLock(key, LOCK_TIME, { timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.touch(key, 60, { timeout: REFUSE_MS }));
    await assertRefusedAsLocked(collection.binary().increment(key, 1, { timeout: REFUSE_MS }));

    // A plain read still works while locked, and does not reveal the lock CAS.
    const during = await collection.get(key);
    assert.deepEqual(during.content, { v: 'original' });
    assert.notEqual(casString(during.cas), casString(locked.cas));

    await collection.unlock(key, locked.cas);
    await collection.upsert(key, { v: 'after unlock' }, { timeout: SHORT_MS });
    assert.deepEqual((await collection.get(key)).content, { v: 'after unlock' });
  });

  it('replace with the lock CAS succeeds and releases the lock', async () => {
    const key = uniqueKey('lock-replace');
    await collection.upsert(key, { v: 1 });
    const locked = await collection.getAndLock(key, LOCK_TIME);
    const replaced = await collection.replace(key, { v: 2 }, { cas: locked.cas });
    assert.notEqual(casString(replaced.cas), casString(locked.cas));
    await collection.upsert(key, { v: 3 }, { timeout: SHORT_MS });
    assert.deepEqual((await collection.get(key)).content, { v: 3 });
  });

  it('remove with the lock CAS succeeds', async () => {
    const key = uniqueKey('lock-remove');
    await collection.upsert(key, { v: 1 });
    const locked = await collection.getAndLock(key, LOCK_TIME);
    await collection.remove(key, { cas: locked.cas });
    await assert.rejects(collection.get(key), DocumentNotFoundError);
  });

  it('unlock with a wrong CAS is CasMismatch', async () => {
    const key = uniqueKey('lock-wrong-unlock');
    await collection.upsert(key, { v: 1 });
    const locked = await collection.getAndLock(key, LOCK_TIME);
    const wrong = (BigInt(casString(locked.cas)) + 1n).toString();
    await assert.rejects(collection.unlock(key, wrong), CasMismatchError);
    await assertRefusedAsLocked(collection.upsert(key, { v: 2 }, { timeout: REFUSE_MS }));
    await collection.unlock(key, locked.cas);
  });

  it('a lock times out', async () => {
    const key = uniqueKey('lock-timeout');
    await collection.upsert(key, { v: 1 });
    await collection.getAndLock(key, 2);
    await assertRefusedAsLocked(collection.upsert(key, { v: 'locked' }, { timeout: REFUSE_MS }));
    await sleep(3000);
    await collection.upsert(key, { v: 2 }, { timeout: SHORT_MS });
    assert.deepEqual((await collection.get(key)).content, { v: 2 });
    const relocked = await collection.getAndLock(key, 1, { timeout: SHORT_MS });
    assert.deepEqual(relocked.content, { v: 2 });
    await collection.unlock(key, relocked.cas);
  });

  it('getAndLock of a missing key is DocumentNotFound', async () => {
    await assert.rejects(collection.getAndLock(uniqueKey('lock-missing'), LOCK_TIME), DocumentNotFoundError);
  });
});
