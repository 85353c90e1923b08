'use strict';
// Issue 18 point 2, the HTTP side: the HTTP door keeps its 413 / 400 for a document past the
// limits, and in a _bulk_docs (what a replication writes) one such document is that document's
// error, never the whole batch's: the others are stored.
const test = require('node:test');
const assert = require('node:assert/strict');
const nano = require('nano');
const { start, http } = require('./harness');

let server;
let db;
const DB = 'limits';

test.before(async () => {
  server = await start();
  const client = nano(server.adminUrl);
  await client.db.create(DB);
  db = client.use(DB);
});
test.after(async () => server.stop());

const deep = (depth) => '['.repeat(depth) + ']'.repeat(depth);

test('one document too deep or unparseable in _bulk_docs fails alone', async () => {
  const body = `{"docs":[
    {"_id":"deep","v":${deep(100)}},
    {"_id":"fine1","v":${deep(99)}},
    {"_id":"surrogate","v":"\\ud800"},
    {"_id":"fine2","n":1e308}]}`;
  const response = await http('POST', `${server.url}/${DB}/_bulk_docs`, { body });
  assert.equal(response.status, 201, JSON.stringify(response.json));
  assert.equal(response.json[0].error, 'bad_request');
  assert.equal(response.json[1].ok, true);
  assert.equal(response.json[2].error, 'bad_request');
  assert.equal(response.json[3].ok, true);
  const all = await db.list();
  assert.deepEqual(all.rows.map((row) => row.id), ['fine1', 'fine2']);
});

test('PUT keeps 413 for too large and 400 for too deep or unparseable', async () => {
  const big = await http('PUT', `${server.url}/${DB}/big`, { body: { blob: 'x'.repeat(1_100_000) } });
  assert.equal(big.status, 413);
  assert.equal(big.json.error, 'document_too_large');
  const tooDeep = await http('PUT', `${server.url}/${DB}/deep`, { body: `{"v":${deep(100)}}` });
  assert.equal(tooDeep.status, 400);
  const surrogate = await http('PUT', `${server.url}/${DB}/surrogate`, { body: '{"v":"\\udc00"}' });
  assert.equal(surrogate.status, 400);
  assert.equal(surrogate.json.error, 'bad_request');
  for (const id of ['big', 'deep', 'surrogate']) {
    assert.equal((await http('GET', `${server.url}/${DB}/${id}`)).status, 404);
  }
});
