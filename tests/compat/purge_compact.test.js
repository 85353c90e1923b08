'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/maint`);
});
test.after(async () => server.stop());

test('_purge removes a conflicting leaf and counts in purge_seq', async () => {
  await http('POST', `${server.url}/maint/_bulk_docs`, {
    body: { new_edits: false, docs: [{ _id: 'p', _rev: '1-aaa', v: 1 }, { _id: 'p', _rev: '1-bbb', v: 2 }] },
  });
  const purged = await http('POST', `${server.url}/maint/_purge`, { body: { p: ['1-bbb', '9-nope'] } });
  assert.equal(purged.status, 201);
  assert.deepEqual(purged.json.purged, { p: ['1-bbb'] });
  const doc = await http('GET', `${server.url}/maint/p?conflicts=true`);
  assert.equal(doc.json._rev, '1-aaa');
  assert.equal(doc.json._conflicts, undefined);
  assert.equal((await http('GET', `${server.url}/maint`)).json.purge_seq, '1');
  const member = await http('POST', `${server.url}/maint/_purge`, { body: { p: ['1-aaa'] }, user: null });
  assert.equal(member.status, 401);
});

test('_compact is accepted (202) and the database stays whole', async () => {
  // The documents so far (the _purge test's, which a cluster run skips) and 20 more.
  const before = (await http('GET', `${server.url}/maint`)).json.doc_count;
  for (let i = 0; i < 20; i++) await http('PUT', `${server.url}/maint/d${i}`, { body: { i } });
  const wrongType = await http('POST', `${server.url}/maint/_compact`, { body: '{}', headers: { 'content-type': 'text/plain' } });
  assert.equal(wrongType.status, 415);
  const compact = await http('POST', `${server.url}/maint/_compact`, { body: '{}' });
  assert.equal(compact.status, 202);
  assert.deepEqual(compact.json, { ok: true });
  const deadline = Date.now() + 10000;
  let info;
  do {
    info = (await http('GET', `${server.url}/maint`)).json;
  } while (info.compact_running && Date.now() < deadline);
  assert.equal(info.doc_count, before + 20);
  assert.equal((await http('GET', `${server.url}/maint/d7`)).json.i, 7);
  const ensured = await http('POST', `${server.url}/maint/_ensure_full_commit`, { body: '{}' });
  assert.equal(ensured.status, 201);
  assert.equal(ensured.json.ok, true);
});
