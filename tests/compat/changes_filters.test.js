'use strict';
// JavaScript changes filters: filter=ddoc/name with req.query, filter=_view, filters that
// throw (the request fails, as on CouchDB), filters that loop or are slow (one time budget
// per request, shortened here to FILTER_BUDGET_MS), bad names; and PouchDB replicating
// through a server-side filter with query_params.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

// The server's time budget for one request's filter calls (SETTEE_CHANGES_FILTER_TIMEOUT_MS);
// each call alone may still run 5 s (js_timeout_ms), more than the whole budget.
const FILTER_BUDGET_MS = 1000;
// Enough documents that a limit per call (instead of per request) would add up to minutes.
const SLOW_DOCS = 25;

let server;
test.before(async () => {
  server = await start({ env: { SETTEE_CHANGES_FILTER_TIMEOUT_MS: String(FILTER_BUDGET_MS) } });
  await http('PUT', `${server.url}/filtered`);
  await http('PUT', `${server.url}/filtered/_design/app`, {
    body: {
      filters: {
        by_type: 'function(doc, req) { return doc.type === req.query.type; }',
        throws: 'function(doc, req) { if (doc.type === "other") throw new Error("no"); return true; }',
        deleted_too: 'function(doc) { return !!doc._deleted; }',
      },
      views: { keepers: { map: 'function(doc) { if (doc.type === "keep") emit(doc._id, null); }' } },
    },
  });
  await http('POST', `${server.url}/filtered/_bulk_docs`, {
    body: { docs: [{ _id: 'k1', type: 'keep' }, { _id: 'k2', type: 'keep' }, { _id: 'o1', type: 'other' }, { _id: 'gone', type: 'x' }] },
  });
  const gone = await http('GET', `${server.url}/filtered/gone`);
  await http('DELETE', `${server.url}/filtered/gone?rev=${gone.json._rev}`);
  await http('PUT', `${server.url}/slow`);
  await http('PUT', `${server.url}/slow/_design/app`, {
    body: {
      filters: {
        loops: 'function(doc) { while (true) {} }',
        // Each call well under the 5 s per call; together far over the request's budget.
        sleepy: 'function(doc) { var end = Date.now() + 100; while (Date.now() < end) {} return true; }',
      },
      views: { loops: { map: 'function(doc) { while (true) {} }' } },
    },
  });
  const docs = Array.from({ length: SLOW_DOCS }, (_, index) => ({ _id: `d${index}` }));
  await http('POST', `${server.url}/slow/_bulk_docs`, { body: { docs } });
});
test.after(async () => server.stop());

const ids = (answer) => answer.json.results.map((row) => row.id).sort();

test('filter=ddoc/name sees req.query', async () => {
  const keep = await http('GET', `${server.url}/filtered/_changes?filter=app/by_type&type=keep`);
  assert.equal(keep.status, 200);
  assert.deepEqual(ids(keep), ['k1', 'k2']);
  const other = await http('POST', `${server.url}/filtered/_changes?filter=app/by_type&type=other`, { body: {} });
  assert.deepEqual(ids(other), ['o1']);
  const deleted = await http('GET', `${server.url}/filtered/_changes?filter=app/deleted_too`);
  assert.deepEqual(ids(deleted), ['gone']);
});

test('a filter that throws fails the request with the error, as CouchDB answers', async () => {
  for (const feed of ['normal', 'longpoll', 'continuous']) {
    const throws = await http('GET', `${server.url}/filtered/_changes?feed=${feed}&filter=app/throws`);
    assert.equal(throws.status, 500, `${feed}: ${throws.text}`);
    assert.equal(throws.json.error, 'Error', feed);
    assert.equal(throws.json.reason, 'no', feed);
  }
});

test('a filter that loops forever fails the request within its budget', async () => {
  const loops = await http('GET', `${server.url}/slow/_changes?filter=app/loops`);
  assert.equal(loops.status, 500, loops.text);
  assert.equal(loops.json.error, 'os_process_error');
  const view = await http('GET', `${server.url}/slow/_changes?filter=_view&view=app/loops`);
  assert.equal(view.status, 500, view.text);
  assert.equal(view.json.error, 'os_process_error');
  // The pool was freed: a cheap filter answers at once.
  const fine = await http('GET', `${server.url}/filtered/_changes?filter=app/by_type&type=keep`);
  assert.deepEqual(ids(fine), ['k1', 'k2']);
});

test('slow filter calls share one budget per request', async () => {
  const sleepy = await http('GET', `${server.url}/slow/_changes?filter=app/sleepy`);
  assert.equal(sleepy.status, 500, sleepy.text);
  assert.equal(sleepy.json.error, 'os_process_error');
  // Under the budget, the same filter answers: the first few documents only.
  const few = await http('GET', `${server.url}/slow/_changes?filter=app/sleepy&limit=3`);
  assert.equal(few.status, 200, few.text);
  assert.equal(few.json.results.length, 3);
});

test('filter=_view keeps documents the map function emits for', async () => {
  const kept = await http('GET', `${server.url}/filtered/_changes?filter=_view&view=app/keepers`);
  assert.equal(kept.status, 200);
  assert.deepEqual(ids(kept), ['k1', 'k2']);
  assert.equal((await http('GET', `${server.url}/filtered/_changes?filter=_view`)).status, 400);
  assert.equal((await http('GET', `${server.url}/filtered/_changes?filter=_view&view=app/none`)).status, 404);
});

test('bad filters get CouchDB-style errors', async () => {
  assert.equal((await http('GET', `${server.url}/filtered/_changes?filter=nope/by_type`)).status, 404);
  assert.equal((await http('GET', `${server.url}/filtered/_changes?filter=app/none`)).status, 404);
  assert.equal((await http('GET', `${server.url}/filtered/_changes?filter=noslash`)).status, 400);
  await http('PUT', `${server.url}/filtered/_design/broken`, { body: { filters: { f: 'function(doc { return true' } } });
  const broken = await http('GET', `${server.url}/filtered/_changes?filter=broken/f`);
  assert.equal(broken.status, 400);
  assert.equal(broken.json.error, 'bad_request');
});

test('PouchDB replicates through a server-side filter with query_params', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'settee-filter-'));
  const remote = new PouchDB(`${server.url}/filtered`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  const local = new PouchDB(path.join(dir, 'db'));
  await PouchDB.replicate(remote, local, { filter: 'app/by_type', query_params: { type: 'keep' } });
  assert.deepEqual((await local.allDocs()).rows.map((row) => row.id), ['k1', 'k2']);
  await local.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
});
