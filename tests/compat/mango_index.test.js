// Mango indexes through pouchdb-find (createIndex / getIndexes / deleteIndex) and plain HTTP:
// JSON indexes live in "language": "query" design documents exactly as CouchDB stores them.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const PouchDB = require('pouchdb');
PouchDB.plugin(require('pouchdb-find'));
const { start, http, ADMIN_USER, ADMIN_PASSWORD } = require('./harness');

let server;
let db;
test.before(async () => {
  server = await start();
  await http('PUT', `${server.url}/indexes`);
  db = new PouchDB(`${server.url}/indexes`, { auth: { username: ADMIN_USER, password: ADMIN_PASSWORD } });
  await db.bulkDocs([{ _id: 'a', age: 1, name: 'x' }, { _id: 'b', age: 2 }]);
});
test.after(async () => server.stop());

test('createIndex creates once, then reports that the index exists', async () => {
  const created = await db.createIndex({ index: { fields: ['age', 'name'] }, ddoc: 'people', name: 'by-age' });
  assert.deepEqual(created, { result: 'created', id: '_design/people', name: 'by-age' });
  const again = await db.createIndex({ index: { fields: ['age', 'name'] }, ddoc: 'people', name: 'by-age' });
  assert.deepEqual(again, { result: 'exists', id: '_design/people', name: 'by-age' });
  // Without a name or ddoc, both are the same hash of the definition.
  const generated = await db.createIndex({ index: { fields: ['name'] } });
  assert.equal(generated.result, 'created');
  assert.match(generated.name, /^[0-9a-f]{40}$/);
  assert.equal(generated.id, `_design/${generated.name}`);
  assert.equal((await db.createIndex({ index: { fields: ['name'] } })).result, 'exists');
});

test('the design document is stored as CouchDB stores it and listed by _design_docs', async () => {
  await db.createIndex({
    index: { fields: [{ age: 'desc' }], partial_filter_selector: { name: { $exists: true } } },
    ddoc: '_design/stored', name: 'idx',
  });
  const ddoc = await db.get('_design/stored');
  assert.equal(ddoc.language, 'query');
  assert.deepEqual(ddoc.views.idx, {
    map: { fields: { age: 'desc' }, partial_filter_selector: { name: { $exists: true } } },
    reduce: '_count',
    options: { def: { fields: [{ age: 'desc' }], partial_filter_selector: { name: { $exists: true } } } },
  });
  const designs = await http('GET', `${server.url}/indexes/_design_docs`);
  assert.ok(designs.json.rows.some((row) => row.id === '_design/stored'));
});

test('getIndexes lists _all_docs first, then by design document and name', async () => {
  const { total_rows: total, indexes } = await db.getIndexes();
  assert.equal(total, indexes.length);
  assert.deepEqual(indexes[0], {
    ddoc: null, name: '_all_docs', type: 'special', def: { fields: [{ _id: 'asc' }] },
  });
  const people = indexes.find((index) => index.name === 'by-age');
  assert.deepEqual(people, {
    ddoc: '_design/people', name: 'by-age', type: 'json', partitioned: false,
    def: { fields: [{ age: 'asc' }, { name: 'asc' }] },
  });
  const partial = indexes.find((index) => index.ddoc === '_design/stored');
  assert.deepEqual(partial.def.partial_filter_selector, { name: { $exists: true } });
  const ids = indexes.slice(1).map((index) => `${index.ddoc}/${index.name}`);
  assert.deepEqual(ids, [...ids].sort());
  const paged = await http('GET', `${server.url}/indexes/_index?limit=1&skip=1`);
  assert.equal(paged.json.total_rows, total);
  assert.deepEqual(paged.json.indexes, [indexes[1]]);
  const bad = await http('GET', `${server.url}/indexes/_index?limit=0`);
  assert.equal(bad.status, 500);
  assert.equal(bad.json.error, 'invalid_list_index_params');
});

test('deleteIndex removes the index, and the design document with its last index', async () => {
  await db.createIndex({ index: { fields: ['x'] }, ddoc: 'two', name: 'x' });
  await db.createIndex({ index: { fields: ['y'] }, ddoc: 'two', name: 'y' });
  assert.deepEqual(await db.deleteIndex({ ddoc: '_design/two', name: 'x' }), { ok: true });
  const left = await db.get('_design/two');
  assert.deepEqual(Object.keys(left.views), ['y']);
  // The design document may be named without its prefix.
  const plain = await http('DELETE', `${server.url}/indexes/_index/two/json/y`);
  assert.deepEqual(plain.json, { ok: true });
  await assert.rejects(db.get('_design/two'), (error) => error.status === 404);
  const missing = await http('DELETE', `${server.url}/indexes/_index/two/json/y`);
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.json, { error: 'not_found', reason: 'missing' });
  // An index can be created again where a design document was deleted.
  assert.equal((await db.createIndex({ index: { fields: ['y'] }, ddoc: 'two', name: 'y' })).result, 'created');
});

test('bad index definitions are refused with CouchDB errors', async () => {
  const cases = [
    [{ index: { fields: 'bing' } }, 'invalid_sort_json'],
    [{ index: { fields: [''] } }, 'invalid_sort_field'],
    [{ index: { fields: [{ foo: 'asc', bar: 'desc' }] } }, 'invalid_sort_field'],
    [{ index: { fields: ['foo', { bar: 'desc' }] } }, 'unsupported_mixed_sort'],
    [{ index: { fields: ['foo'] }, type: 'geo' }, 'invalid_index'],
    [{ index: { fields: ['foo'] }, name: '' }, 'invalid_empty_string'],
    [{ index: { fields: ['foo'] }, ddoc: 1.5 }, 'invalid_string'],
    [{ index: { fields: ['foo'] }, ddoc: '_design/' }, 'illegal_docid'],
    [{ index: ['foo'] }, 'invalid_index'],
    [{ index: { fields: ['foo'] }, bogus: true }, 'invalid_key'],
  ];
  for (const [body, error] of cases) {
    const response = await http('POST', `${server.url}/indexes/_index`, { body });
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.json.error, error, JSON.stringify(body));
  }
  await assert.rejects(db.createIndex({ index: { fields: 'bing' } }), (error) => error.status === 400);
  // An index cannot be added to a JavaScript design document.
  await db.put({ _id: '_design/js', views: { v: { map: 'function (doc) { emit(doc._id); }' } } });
  const js = await http('POST', `${server.url}/indexes/_index`, { body: { index: { fields: ['a'] }, ddoc: 'js' } });
  assert.equal(js.status, 400);
  assert.equal(js.json.error, 'invalid_ddoc_lang');
});

test('methods, content type and access', async () => {
  assert.equal((await http('PUT', `${server.url}/indexes/_index`)).status, 405);
  assert.equal((await http('GET', `${server.url}/indexes/_index/people/json/by-age`)).status, 405);
  assert.equal((await http('GET', `${server.url}/indexes/_index/a`)).status, 404);
  assert.equal((await http('GET', `${server.url}/indexes/_index/_bulk_delete`)).status, 405);
  const text = await http('POST', `${server.url}/indexes/_index`, {
    body: JSON.stringify({ index: { fields: ['a'] } }), headers: { 'content-type': 'text/plain' },
  });
  assert.equal(text.status, 415);
  const anonymous = await http('POST', `${server.url}/indexes/_index`, { body: { index: { fields: ['a'] } }, user: null });
  assert.equal(anonymous.status, 401);
  assert.equal((await http('GET', `${server.url}/nope/_index`)).status, 404);
});

test('_bulk_delete removes the indexes of several design documents', async () => {
  await db.createIndex({ index: { fields: ['p'] }, ddoc: 'bulk1', name: 'p' });
  await db.createIndex({ index: { fields: ['q'] }, ddoc: 'bulk2', name: 'q' });
  const response = await http('POST', `${server.url}/indexes/_index/_bulk_delete`, {
    body: { docids: ['bulk1', '_design/bulk2', 'nothing'] },
  });
  assert.deepEqual(response.json, {
    success: [{ id: '_design/bulk1', ok: true }, { id: '_design/bulk2', ok: true }],
    fail: [{ id: '_design/nothing', error: 'not_found' }],
  });
  const names = (await db.getIndexes()).indexes.map((index) => index.name);
  assert.ok(!names.includes('p') && !names.includes('q'));
});
