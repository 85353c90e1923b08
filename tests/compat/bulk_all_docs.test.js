'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let pouch;
const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
test.before(async () => {
  server = await start();
  const nano = require('nano')(server.adminUrl);
  await nano.db.create('bulk');
  pouch = new PouchDB(`${server.url}/bulk`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
});
test.after(async () => server.stop());

test('bulkDocs saves many and reports per-document conflicts', async () => {
  const saved = await pouch.bulkDocs(ids.map((id, i) => ({ _id: id, i })));
  assert.equal(saved.length, ids.length);
  for (const row of saved) assert.equal(row.ok, true);
  const again = await http('POST', `${server.url}/bulk/_bulk_docs`, { body: { docs: [{ _id: 'a', i: 99 }, { _id: 'g', i: 6 }] } });
  assert.equal(again.status, 201);
  assert.equal(again.json[0].error, 'conflict');
  assert.equal(again.json[1].ok, true);
  const badBody = await http('POST', `${server.url}/bulk/_bulk_docs`, { body: { nodocs: true } });
  assert.equal(badBody.status, 400);
});

test('_all_docs: ranges, inclusive_end, descending, limit, skip, include_docs, keys', async () => {
  const all = await pouch.allDocs();
  assert.deepEqual(all.rows.map((row) => row.id), ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  assert.equal(all.total_rows, 7);
  const range = await pouch.allDocs({ startkey: 'b', endkey: 'd' });
  assert.deepEqual(range.rows.map((row) => row.id), ['b', 'c', 'd']);
  const exclusive = await pouch.allDocs({ startkey: 'b', endkey: 'd', inclusive_end: false });
  assert.deepEqual(exclusive.rows.map((row) => row.id), ['b', 'c']);
  const descending = await pouch.allDocs({ startkey: 'e', endkey: 'b', descending: true, limit: 2, skip: 1 });
  assert.deepEqual(descending.rows.map((row) => row.id), ['d', 'c']);
  const withDocs = await pouch.allDocs({ keys: ['c', 'zz', 'a'], include_docs: true });
  assert.equal(withDocs.rows[0].doc.i, 2);
  assert.equal(withDocs.rows[1].error, 'not_found');
  assert.equal(withDocs.rows[2].id, 'a');
  const posted = await http('POST', `${server.url}/bulk/_all_docs`, { body: { keys: ['f'] } });
  assert.equal(posted.json.rows[0].id, 'f');
  // Deleted documents: absent from ranges, flagged in keys requests.
  const doc = await pouch.get('f');
  await pouch.remove(doc);
  assert.ok(!(await pouch.allDocs()).rows.some((row) => row.id === 'f'));
  const deleted = await pouch.allDocs({ keys: ['f'] });
  assert.equal(deleted.rows[0].value.deleted, true);
});

test('_bulk_get returns docs, revisions and missing errors', async () => {
  const a = await pouch.get('a');
  const result = await http('POST', `${server.url}/bulk/_bulk_get?revs=true`, {
    body: { docs: [{ id: 'a', rev: a._rev }, { id: 'nope' }, { id: 'b' }] },
  });
  assert.equal(result.status, 200);
  assert.equal(result.json.results[0].docs[0].ok._id, 'a');
  assert.equal(result.json.results[0].docs[0].ok._revisions.start, 1);
  assert.equal(result.json.results[1].docs[0].error.error, 'not_found');
  assert.equal(result.json.results[2].docs[0].ok._id, 'b');
});

test('_revs_diff and _missing_revs', async () => {
  const a = await pouch.get('a');
  const diff = await pouch.revsDiff({ a: [a._rev, '2-abc'], newdoc: ['1-xyz'] });
  assert.deepEqual(diff.a.missing, ['2-abc']);
  assert.deepEqual(diff.a.possible_ancestors, [a._rev]);
  assert.deepEqual(diff.newdoc.missing, ['1-xyz']);
  const missing = await http('POST', `${server.url}/bulk/_missing_revs`, { body: { a: [a._rev, '2-abc'] } });
  assert.deepEqual(missing.json, { missing_revs: { a: ['2-abc'] } });
});
