'use strict';
// JavaScript changes filters: filter=ddoc/name with req.query, filter=_view, filters that
// throw, bad names; and PouchDB replicating through a server-side filter with query_params.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const PouchDB = require('pouchdb');
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
test.before(async () => {
  server = await start();
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
});
test.after(async () => server.stop());

const ids = (answer) => answer.json.results.map((row) => row.id).sort();

test('filter=ddoc/name sees req.query, and rejects what throws', async () => {
  const keep = await http('GET', `${server.url}/filtered/_changes?filter=app/by_type&type=keep`);
  assert.equal(keep.status, 200);
  assert.deepEqual(ids(keep), ['k1', 'k2']);
  const other = await http('POST', `${server.url}/filtered/_changes?filter=app/by_type&type=other`, { body: {} });
  assert.deepEqual(ids(other), ['o1']);
  const throws = await http('GET', `${server.url}/filtered/_changes?filter=app/throws`);
  assert.deepEqual(ids(throws), ['_design/app', 'gone', 'k1', 'k2']);
  const deleted = await http('GET', `${server.url}/filtered/_changes?filter=app/deleted_too`);
  assert.deepEqual(ids(deleted), ['gone']);
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
