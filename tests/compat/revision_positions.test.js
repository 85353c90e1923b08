'use strict';
// Issue 18 point 1: a revision position past 2^32 (CouchDB's are unbounded integers) is stored
// and listed like any other; 30733d8 answered 201 and then hid every document of the database.
// Every revision field is range-checked at the door: a clear 400, never an emptied tree.
const test = require('node:test');
const assert = require('node:assert/strict');
const nano = require('nano');
const { start, http } = require('./harness');

let server;
let db;
const DB = 'revpos';
const U64_MAX = '18446744073709551615';

test.before(async () => {
  server = await start();
  const client = nano(server.adminUrl);
  await client.db.create(DB);
  db = client.use(DB);
  await db.bulk({ docs: [{ _id: 'a', n: 1 }, { _id: 'b', n: 2 }] });
  await db.insert({ views: { by_n: { map: 'function (doc) { if (doc.n) emit(doc.n, null); }' } } }, '_design/app');
});
test.after(async () => server.stop());

async function listed() {
  const all = await db.list();
  const changes = await db.changes();
  return {
    all: all.rows.map((row) => row.id).sort(),
    changes: changes.results.map((row) => row.id).sort(),
  };
}

test('a replicated revision at 2^32 is stored and every document stays listed', async () => {
  const written = await db.insert({ _id: 'x', _revisions: { start: 4294967296, ids: ['aa'] }, n: 3 },
    { new_edits: false });
  assert.equal(written.ok, true);
  const doc = await db.get('x', { revs: true });
  assert.equal(doc._rev, '4294967296-aa');
  assert.deepEqual(doc._revisions, { start: 4294967296, ids: ['aa'] });
  const { all, changes } = await listed();
  assert.deepEqual(all, ['_design/app', 'a', 'b', 'x']);
  assert.deepEqual(changes, ['_design/app', 'a', 'b', 'x']);
  const view = await db.view('app', 'by_n');
  assert.deepEqual(view.rows.map((row) => row.id), ['a', 'b', 'x']);
  // Editing it makes generation 2^32 + 1.
  const edited = await db.insert({ _id: 'x', _rev: doc._rev, n: 4 });
  assert.match(edited.rev, /^4294967297-/);
});

test('_bulk_docs with new_edits=false takes any u64 generation, up to the largest', async () => {
  const body = `{"new_edits":false,"docs":[
    {"_id":"y","_revisions":{"start":${U64_MAX},"ids":["b","a"]}},
    {"_id":"z","_rev":"9007199254740993-zz"}]}`;
  const response = await http('POST', `${server.url}/${DB}/_bulk_docs`, { body });
  assert.equal(response.status, 201, JSON.stringify(response.json));
  const y = await http('GET', `${server.url}/${DB}/y?revs_info=true`);
  assert.equal(y.json._rev, `${U64_MAX}-b`);
  assert.deepEqual(y.json._revs_info.map((info) => info.rev), [`${U64_MAX}-b`, '18446744073709551614-a']);
  assert.equal((await db.get('z'))._rev, '9007199254740993-zz');
  // No generation follows the largest: a clear 400, never a wrapped revision.
  const edit = await http('PUT', `${server.url}/${DB}/y`, { body: `{"_rev":"${U64_MAX}-b"}` });
  assert.equal(edit.status, 400);
  assert.equal(edit.json.error, 'bad_request');
  const diff = await http('POST', `${server.url}/${DB}/_revs_diff`, { body: `{"y":["${U64_MAX}-b","${U64_MAX}-c"]}` });
  assert.deepEqual(diff.json, { y: { missing: [`${U64_MAX}-c`] } });
  const { all } = await listed();
  assert.deepEqual(all, ['_design/app', 'a', 'b', 'x', 'y', 'z']);
});

test('revision fields out of range are 400 and nothing is stored', async () => {
  const revisions = [
    `{"start":18446744073709551616,"ids":["aa"]}`,
    '{"start":-1,"ids":["aa"]}',
    '{"start":1,"ids":["b","a"]}',
    '{"start":1,"ids":[]}',
    '{"start":1,"ids":[""]}',
    `{"start":1,"ids":["${'h'.repeat(256)}"]}`,
    '{"start":"1","ids":["aa"]}',
  ];
  for (const value of revisions) {
    const response = await http('PUT', `${server.url}/${DB}/bad?new_edits=false`, { body: `{"_revisions":${value}}` });
    assert.equal(response.status, 400, value);
    assert.equal(response.json.error, 'doc_validation', value);
    const bulk = await http('POST', `${server.url}/${DB}/_bulk_docs`,
      { body: `{"new_edits":false,"docs":[{"_id":"bad","_revisions":${value}}]}` });
    assert.ok(bulk.status === 400 || (bulk.status === 201 && bulk.json[0].error === 'doc_validation'),
      `${value}: ${bulk.status} ${JSON.stringify(bulk.json)}`);
  }
  for (const rev of ['18446744073709551616-a', '0-a', '1-', `1-${'h'.repeat(256)}`]) {
    const put = await http('PUT', `${server.url}/${DB}/bad?new_edits=false`, { body: `{"_rev":"${rev}"}` });
    assert.equal(put.status, 400, rev);
    const openRevs = await http('GET', `${server.url}/${DB}/a?open_revs=${encodeURIComponent(JSON.stringify([rev]))}`);
    assert.equal(openRevs.status, 400, rev);
    const diff = await http('POST', `${server.url}/${DB}/_revs_diff`, { body: { a: [rev] } });
    assert.equal(diff.status, 400, rev);
    const purge = await http('POST', `${server.url}/${DB}/_purge`, { body: { a: [rev] } });
    assert.equal(purge.status, 400, rev);
  }
  assert.equal((await http('GET', `${server.url}/${DB}/bad`)).status, 404);
  const { all, changes } = await listed();
  assert.deepEqual(all, ['_design/app', 'a', 'b', 'x', 'y', 'z']);
  assert.deepEqual(changes, ['_design/app', 'a', 'b', 'x', 'y', 'z']);
});
