'use strict';
// Old revision bodies are kept until compaction, as CouchDB keeps them (issue 22): `?rev=OLD`,
// `open_revs`, `revs_info`, an old revision's attachment and a view's emitted `_rev`.
const test = require('node:test');
const assert = require('node:assert/strict');
const { start, http } = require('./harness');

let server;
let nano;
let db;
test.before(async () => {
  server = await start();
  nano = require('nano')(server.adminUrl);
  await nano.db.create('oldrevs');
  db = nano.use('oldrevs');
});
test.after(async () => server.stop());

async function compact() {
  const compacted = await http('POST', `${server.url}/oldrevs/_compact`, { body: '{}' });
  assert.equal(compacted.status, 202);
  let info;
  do {
    info = await nano.db.get('oldrevs');
  } while (info.compact_running);
}

test('an old revision, its attachment and a view over it are readable until compaction', async () => {
  const first = await db.insert({ _id: 'doc', v: 1 });
  const withAtt = await db.attachment.insert('doc', 'a.txt', Buffer.from('first body'), 'text/plain', { rev: first.rev });
  const second = await db.insert({ _id: 'doc', _rev: withAtt.rev, v: 2, prev: first.rev });
  // The attachment is gone from the current revision.
  const current = await db.get('doc');
  assert.equal(current._rev, second.rev);
  assert.equal(current._attachments, undefined);

  // GET ?rev=OLD answers the old body.
  const old = await db.get('doc', { rev: first.rev });
  assert.deepEqual(old, { _id: 'doc', _rev: first.rev, v: 1 });
  // The revision with the attachment keeps it, body and all.
  assert.equal((await db.attachment.get('doc', 'a.txt', { rev: withAtt.rev })).toString(), 'first body');
  // open_revs lists it as found, an unknown revision as missing.
  const open = await db.get('doc', { open_revs: JSON.stringify([first.rev, '9-unknown']) });
  assert.deepEqual(open, [{ ok: { _id: 'doc', _rev: first.rev, v: 1 } }, { missing: '9-unknown' }]);
  // _bulk_get (what replicators fetch with) finds it too.
  const bulk = await http('POST', `${server.url}/oldrevs/_bulk_get`, { body: { docs: [{ id: 'doc', rev: first.rev }] } });
  assert.deepEqual(bulk.json.results[0].docs, [{ ok: { _id: 'doc', _rev: first.rev, v: 1 } }]);
  // revs_info says the old revisions are available.
  const info = await db.get('doc', { revs_info: true });
  assert.deepEqual(info._revs_info.map((entry) => entry.status), ['available', 'available', 'available']);
  // COPY ?rev=OLD copies the old revision.
  const copied = await http('COPY', `${server.url}/oldrevs/doc?rev=${first.rev}`, { headers: { destination: 'copy' } });
  assert.equal(copied.status, 201);
  assert.equal((await db.get('copy')).v, 1);
  // A view emitting {_rev: prev} includes that revision.
  await db.insert({
    _id: '_design/t',
    views: { prev: { map: "function(doc){ if (doc.prev) emit(doc._id, {'_rev': doc.prev}); }" } },
  });
  const rows = (await db.view('t', 'prev', { include_docs: true })).rows;
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0].doc, { _id: 'doc', _rev: first.rev, v: 1 });

  await compact();
  await assert.rejects(db.get('doc', { rev: first.rev }), (error) => {
    assert.equal(error.statusCode, 404);
    assert.equal(error.error, 'not_found');
    assert.equal(error.reason, 'missing');
    return true;
  });
  await assert.rejects(db.attachment.get('doc', 'a.txt', { rev: withAtt.rev }), (error) => error.statusCode === 404);
  const openAfter = await db.get('doc', { open_revs: JSON.stringify([first.rev]) });
  assert.deepEqual(openAfter, [{ missing: first.rev }]);
  const infoAfter = await db.get('doc', { revs_info: true });
  assert.deepEqual(infoAfter._revs_info.map((entry) => entry.status), ['available', 'missing', 'missing']);
  const rowsAfter = (await db.view('t', 'prev', { include_docs: true })).rows;
  assert.equal(rowsAfter[0].doc, null);
  // The current revision is whole.
  assert.deepEqual(await db.get('doc'), { _id: 'doc', _rev: second.rev, v: 2, prev: first.rev });
});

test('a lowered _revs_limit cuts _revisions on read and drops stemmed revisions on the next write', async () => {
  let rev = (await db.insert({ _id: 'stem', n: 0 })).rev;
  const revs = [rev];
  for (let n = 1; n < 4; n++) {
    rev = (await db.insert({ _id: 'stem', _rev: rev, n })).rev;
    revs.push(rev);
  }
  assert.equal((await db.get('stem', { revs: true }))._revisions.ids.length, 4);
  assert.equal((await http('PUT', `${server.url}/oldrevs/_revs_limit`, { body: '2' })).status, 200);
  assert.equal((await db.get('stem', { revs: true }))._revisions.ids.length, 2);
  assert.equal((await db.get('stem', { rev: revs[0] })).n, 0);
  await db.insert({ _id: 'stem', _rev: rev, n: 4 });
  await assert.rejects(db.get('stem', { rev: revs[0] }), (error) => error.statusCode === 404);
  assert.equal((await db.get('stem', { rev: revs[3] })).n, 3);
  assert.equal((await http('PUT', `${server.url}/oldrevs/_revs_limit`, { body: '1000' })).status, 200);
});
