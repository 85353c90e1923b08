'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let pouch;
test.before(async () => {
  server = await start();
  const nano = require('nano')(server.adminUrl);
  await nano.db.create('locals');
  pouch = new PouchDB(`${server.url}/locals`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
});
test.after(async () => server.stop());

test('_local documents: 0-N revisions, conflicts, delete, invisible to _all_docs and _changes', async () => {
  const first = await pouch.put({ _id: '_local/checkpoint', seq: 1 });
  assert.equal(first.rev, '0-1');
  const doc = await pouch.get('_local/checkpoint');
  assert.equal(doc.seq, 1);
  const second = await pouch.put({ ...doc, seq: 2 });
  assert.equal(second.rev, '0-2');
  const stale = await http('PUT', `${server.url}/locals/_local/checkpoint`, { body: { _rev: '0-1', seq: 3 } });
  assert.equal(stale.status, 409);
  await pouch.put({ _id: 'normal' });
  assert.deepEqual((await pouch.allDocs()).rows.map((row) => row.id), ['normal']);
  assert.deepEqual((await pouch.changes()).results.map((row) => row.id), ['normal']);
  const removed = await http('DELETE', `${server.url}/locals/_local/checkpoint?rev=0-2`);
  assert.equal(removed.status, 200);
  assert.equal((await http('GET', `${server.url}/locals/_local/checkpoint`)).status, 404);
});

test('_local documents carry no history: _revisions.start 0 is accepted in _bulk_docs and PUT', async () => {
  const bulk = await http('POST', `${server.url}/locals/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: '_local/replicated', _revisions: { start: 0, ids: ['1'] }, seq: 7 }] },
  });
  assert.equal(bulk.status, 201, bulk.text);
  assert.deepEqual(bulk.json, []);
  assert.equal((await pouch.get('_local/replicated')).seq, 7);
  const put = await http('PUT', `${server.url}/locals/_local/put`, { body: { _revisions: { start: 0, ids: ['1'] }, seq: 8 } });
  assert.equal(put.status, 201, put.text);
  // Still a document validation error on a document, and on either when mistyped.
  const plain = await http('POST', `${server.url}/locals/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 'plain', _revisions: { start: 0, ids: ['1'] } }] },
  });
  assert.ok(plain.status === 400 ? plain.json.error === 'doc_validation' : plain.json[0].error === 'doc_validation', plain.text);
  assert.equal((await http('GET', `${server.url}/locals/plain`)).status, 404);
  const mistyped = await http('PUT', `${server.url}/locals/_local/put2`, { body: { _revisions: { start: '0', ids: ['1'] } } });
  assert.equal(mistyped.status, 400, mistyped.text);
});
