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
