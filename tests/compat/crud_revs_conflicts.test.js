'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
const { CLUSTER, start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let nano;
let db;
let pouch;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('crud');
  db = nano.use('crud');
  pouch = new PouchDB(`${server.url}/crud`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
});
test.after(async () => server.stop());

test('create, read with ETag, update, stale update conflicts', async () => {
  const put = await http('PUT', `${server.url}/crud/doc1`, { body: { hello: 'world' } });
  assert.equal(put.status, 201);
  assert.equal(put.json.ok, true);
  assert.match(put.json.rev, /^1-[0-9a-f]{32}$/);
  assert.equal(put.headers.get('etag'), `"${put.json.rev}"`);
  assert.match(put.headers.get('location'), /\/crud\/doc1$/);
  const got = await http('GET', `${server.url}/crud/doc1`);
  assert.equal(got.headers.get('etag'), `"${put.json.rev}"`);
  assert.deepEqual(got.json, { _id: 'doc1', _rev: put.json.rev, hello: 'world' });
  const notModified = await http('GET', `${server.url}/crud/doc1`, { headers: { 'if-none-match': `"${put.json.rev}"` } });
  assert.equal(notModified.status, 304);
  const updated = await db.insert({ _id: 'doc1', _rev: put.json.rev, hello: 'again' });
  assert.match(updated.rev, /^2-/);
  const stale = await http('PUT', `${server.url}/crud/doc1`, { body: { _rev: put.json.rev, hello: 'stale' } });
  assert.equal(stale.status, 409);
  assert.deepEqual(stale.json, { error: 'conflict', reason: 'Document update conflict.' });
  const noRev = await http('PUT', `${server.url}/crud/doc1`, { body: { hello: 'no rev' } });
  assert.equal(noRev.status, 409);
});

test('missing and deleted documents are 404 with CouchDB reasons', async () => {
  const missing = await http('GET', `${server.url}/crud/nope`);
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.json, { error: 'not_found', reason: 'missing' });
  const created = await db.insert({ a: 1 }, 'todelete');
  const deleted = await db.destroy('todelete', created.rev);
  assert.match(deleted.rev, /^2-/);
  const gone = await http('GET', `${server.url}/crud/todelete`);
  assert.deepEqual(gone.json, { error: 'not_found', reason: 'deleted' });
  const atRev = await http('GET', `${server.url}/crud/todelete?rev=${deleted.rev}`);
  assert.equal(atRev.status, 200);
  assert.equal(atRev.json._deleted, true);
  // Re-creating a deleted document continues its history.
  const again = await db.insert({ a: 2 }, 'todelete');
  assert.match(again.rev, /^3-/);
  const deleteNoRev = await http('DELETE', `${server.url}/crud/todelete`);
  assert.equal(deleteNoRev.status, 409);
});

test('PouchDB put/get/remove with revs, revs_info and POST ids', async () => {
  const first = await pouch.put({ _id: 'p1', n: 1 });
  const second = await pouch.put({ _id: 'p1', _rev: first.rev, n: 2 });
  const doc = await pouch.get('p1', { revs: true, revs_info: true });
  assert.equal(doc.n, 2);
  assert.equal(doc._revisions.start, 2);
  assert.deepEqual(doc._revisions.ids, [second.rev.split('-')[1], first.rev.split('-')[1]]);
  assert.equal(doc._revs_info[0].status, 'available');
  // As CouchDB: the first revision's body is kept until compaction (old_revisions.test.js).
  assert.equal(doc._revs_info[1].status, 'available');
  assert.equal((await pouch.get('p1', { rev: first.rev })).n, 1);
  const old = await pouch.get('p1', { rev: second.rev });
  assert.equal(old.n, 2);
  await pouch.remove('p1', second.rev);
  await assert.rejects(pouch.get('p1'), (error) => error.status === 404);
  const posted = await pouch.post({ generated: true });
  assert.match(posted.id, /^[0-9a-f]{32}$/);
});

test('new_edits=false makes a conflict with a deterministic winner', async () => {
  const base = await db.insert({ v: 'base' }, 'c1');
  const baseHash = base.rev.split('-')[1];
  const result = await http('POST', `${server.url}/crud/_bulk_docs`, {
    body: {
      new_edits: false,
      docs: [
        { _id: 'c1', _rev: '2-aaaa', _revisions: { start: 2, ids: ['aaaa', baseHash] }, v: 'a' },
        { _id: 'c1', _rev: '2-bbbb', _revisions: { start: 2, ids: ['bbbb', baseHash] }, v: 'b' },
      ],
    },
  });
  assert.equal(result.status, 201);
  assert.deepEqual(result.json, []);
  const doc = await pouch.get('c1', { conflicts: true });
  // CouchDB: the higher revision hash wins between equal generations.
  assert.equal(doc._rev, '2-bbbb');
  assert.equal(doc.v, 'b');
  assert.deepEqual(doc._conflicts, ['2-aaaa']);
  // Resolve by deleting the loser.
  await pouch.remove('c1', '2-aaaa');
  const resolved = await http('GET', `${server.url}/crud/c1?conflicts=true&deleted_conflicts=true`);
  assert.equal(resolved.json._conflicts, undefined);
  assert.equal(resolved.json._deleted_conflicts.length, 1);
  assert.match(resolved.json._deleted_conflicts[0], /^3-/);
  // A deleted winner loses to a live branch even at a lower generation.
  const leaves = await http('GET', `${server.url}/crud/c1?open_revs=all`, { headers: { accept: 'application/json' } });
  assert.equal(leaves.status, 200);
  assert.equal(leaves.json.length, 2);
});

test('_revs_limit is readable and settable, and stems history', async () => {
  assert.equal((await http('GET', `${server.url}/crud/_revs_limit`)).json, 1000);
  const set = await http('PUT', `${server.url}/crud/_revs_limit`, { body: '3' });
  assert.deepEqual(set.json, { ok: true });
  let rev = (await db.insert({ i: 0 }, 'stem')).rev;
  for (let i = 1; i < 6; i++) rev = (await db.insert({ _id: 'stem', _rev: rev, i })).rev;
  const doc = await pouch.get('stem', { revs: true });
  assert.equal(doc._revisions.start, 6);
  assert.equal(doc._revisions.ids.length, 3);
});

test('COPY duplicates a document', async () => {
  await db.insert({ copied: true }, 'source');
  const copy = await http('COPY', `${server.url}/crud/source`, { headers: { destination: 'target' } });
  assert.equal(copy.status, 201);
  assert.equal(copy.json.id, 'target');
  assert.equal((await db.get('target')).copied, true);
});

test('design documents are stored and served', async () => {
  const ddoc = { views: { all: { map: 'function (doc) { emit(doc._id, null); }' } } };
  const saved = await db.insert(ddoc, '_design/app');
  assert.equal(saved.id, '_design/app');
  const got = await db.get('_design/app');
  assert.equal(got.views.all.map, ddoc.views.all.map);
  const listed = await http('GET', `${server.url}/crud/_design_docs`);
  assert.deepEqual(listed.json.rows.map((row) => row.id), ['_design/app']);
});

// Revision ids as CouchDB 3.5.0 computes them (issue 22 point 10): these were read from a real
// CouchDB 3.5.0 given the same edits, so nano and PouchDB replicas of both converge.
test('revision ids are the ones CouchDB 3.5.0 gives the same edits', async () => {
  const first = await db.insert({ a: 1 }, 'same-as-couchdb');
  assert.equal(first.rev, '1-23202479633c2b380f79507a776743d5');
  const second = await db.insert({ _id: 'same-as-couchdb', _rev: first.rev, a: 2 });
  assert.equal(second.rev, '2-71173597778497e0a6aa176963f222db');
  const deleted = await db.destroy('same-as-couchdb', second.rev);
  assert.equal(deleted.rev, '3-e1cb868b6bf2272171643d381ecea5e2');
  const nested = await pouch.put({ _id: 'nested', b: [1, 2, 3], c: { d: 'é', e: 1.5 } });
  assert.equal(nested.rev, '1-957491dd5616d1cab68a83dd6ee03206');
  const [bulk] = await db.bulk({ docs: [{ _id: 'b1', k: [[1, 2], { q: [] }] }] });
  assert.equal(bulk.rev, '1-bcf995c6ed19356f27f69ab2a7bda3e7');
});
