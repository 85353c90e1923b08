// Expiry: documents written with a 2 s expiry are gone after ~3 s; touch and getAndTouch set it.
// One scenario with a single sleep keeps the suite fast: every document is prepared first, then
// the test waits once and checks each of them.
'use strict';
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { setUp, uniqueKey, casString, sleep, couchbase } = require('./harness');

const { DocumentNotFoundError } = couchbase;
const TWO_SECONDS = 2;
const WAIT_MS = 3500;

describe('expiry and touch', () => {
  let env;
  let collection;
  before(async () => { env = await setUp(); collection = env.collection; });
  after(async () => { await env?.tearDown(); });

  it('expires documents; touch extends, getAndTouch sets, a plain upsert clears the expiry', async () => {
    const key = uniqueKey('expiry');
    const expiring = `${key}::expiring`;
    const inserted = `${key}::inserted`;
    const replaced = `${key}::replaced`;
    const touched = `${key}::touched`;
    const getAndTouched = `${key}::get-and-touched`;
    const cleared = `${key}::cleared`;
    const forever = `${key}::forever`;
    // A Date is an absolute expiry, sent as a Unix time; so are durations over 30 days.
    const absolute = `${key}::absolute`;
    const month = `${key}::month`;

    await collection.upsert(expiring, { k: 'expiring' }, { expiry: TWO_SECONDS });
    await collection.insert(inserted, { k: 'inserted' }, { expiry: TWO_SECONDS });
    await collection.upsert(replaced, { k: 'replaced', v: 1 });
    await collection.replace(replaced, { k: 'replaced', v: 2 }, { expiry: TWO_SECONDS });

    const created = await collection.upsert(touched, { k: 'touched' }, { expiry: TWO_SECONDS });
    const touch = await collection.touch(touched, 60);
    assert.notEqual(casString(touch.cas), casString(created.cas));

    await collection.upsert(getAndTouched, { k: 'get-and-touched' });
    const result = await collection.getAndTouch(getAndTouched, TWO_SECONDS);
    assert.deepEqual(result.content, { k: 'get-and-touched' });

    // A plain upsert without expiry resets the expiry to "never" (Couchbase semantics).
    await collection.upsert(cleared, { k: 'cleared', v: 1 }, { expiry: TWO_SECONDS });
    await collection.upsert(cleared, { k: 'cleared', v: 2 });
    await collection.upsert(forever, { k: 'forever' });
    await collection.upsert(absolute, { k: 'absolute' }, { expiry: new Date(Date.now() + 2000) });
    await collection.upsert(month, { k: 'month' }, { expiry: 31 * 24 * 3600 });

    for (const live of [expiring, inserted, replaced, touched, getAndTouched, cleared, forever, absolute, month]) {
      assert.equal((await collection.exists(live)).exists, true, live);
    }

    await sleep(WAIT_MS);

    for (const gone of [expiring, inserted, replaced, getAndTouched, absolute]) {
      await assert.rejects(collection.get(gone), DocumentNotFoundError, gone);
      assert.equal((await collection.exists(gone)).exists, false, gone);
      // Expired through the KV door means gone through the HTTP door too.
      const { status, text } = await env.settee.http('GET', `/default/${encodeURIComponent(gone)}`);
      assert.equal(status, 404, `${gone}: ${text}`);
    }
    assert.deepEqual((await collection.get(touched)).content, { k: 'touched' });
    const touchedOverHttp = await env.settee.http('GET', `/default/${encodeURIComponent(touched)}`);
    assert.equal(touchedOverHttp.status, 200, touchedOverHttp.text);
    assert.equal(touchedOverHttp.json.k, 'touched');
    assert.deepEqual((await collection.get(cleared)).content, { k: 'cleared', v: 2 });
    assert.deepEqual((await collection.get(forever)).content, { k: 'forever' });
    assert.deepEqual((await collection.get(month)).content, { k: 'month' });
  });

  it('an expired key can be inserted again', async () => {
    const key = uniqueKey('expired-insert');
    await collection.upsert(key, { v: 1 }, { expiry: 1 });
    await sleep(2500);
    await collection.insert(key, { v: 2 });
    assert.deepEqual((await collection.get(key)).content, { v: 2 });
  });

  it('touch / getAndTouch of a missing key are DocumentNotFound', async () => {
    const key = uniqueKey('touch-missing');
    await assert.rejects(collection.touch(key, TWO_SECONDS), DocumentNotFoundError);
    await assert.rejects(collection.getAndTouch(key, TWO_SECONDS), DocumentNotFoundError);
  });
});
